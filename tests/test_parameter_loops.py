"""Parameter sequences (analysis/parameters.py) and TPL204 beyond its own examples: the messages,
the torch version gate, and the fixed EMA computing what the loop computed."""

from __future__ import annotations

import textwrap
from typing import Any, Callable

import libcst as cst
import pytest
import torch

from torchperf_lint.api import fix_source, lint_source
from torchperf_lint.config import Settings
from torchperf_lint.engine.context import Context
from torchperf_lint.syntax.walker import walk

from .helpers import finding_lines, write_project


def _context(source: str) -> Context:
    source = textwrap.dedent(source).lstrip("\n")
    facts = walk(cst.parse_module(source), frozenset({cst.For}))
    return Context("example.py", source, facts, Settings())


def _loops(source: str) -> list[tuple[str, dict[str, str]]]:
    """(what each `for` iterates, the names it binds to a module's tensors) for the parameter loops."""
    ctx = _context(source)
    loops = [loop for loop in ctx.nodes(cst.For) if isinstance(loop, cst.For)]
    return [
        (ctx.code(loop.iter), ctx.parameter_targets(loop))
        for loop in loops
        if ctx.parameter_sequence(loop.iter)
    ]


# -- which loops walk a module's tensors, and which targets are tensors ---------------------
def test_named_and_zipped_sequences_bind_only_their_tensors() -> None:
    assert _loops(
        """
        for name, p in model.named_parameters():
            pass
        for i, (e, p) in enumerate(zip(ema.parameters(), model.parameters())):
            pass
        for (n1, a), (n2, b) in zip(x.named_buffers(), y.named_buffers()):
            pass
        for k, v in model.state_dict().items():
            pass
        """
    ) == [
        ("model.named_parameters()", {"p": "parameters"}),
        ("enumerate(zip(ema.parameters(), model.parameters()))", {"e": "parameters", "p": "parameters"}),
        ("zip(x.named_buffers(), y.named_buffers())", {"a": "buffers", "b": "buffers"}),
        ("model.state_dict().items()", {"v": "state_dict"}),
    ]


def test_lists_dicts_and_comprehensions_built_from_one_are_followed() -> None:
    assert _loops(
        """
        def step(model, ema):
            params = [p for p in model.parameters() if p.requires_grad]
            shadow = dict(ema.named_parameters())
            grads = list(filter(None, (p.grad for p in model.parameters())))
            for p in params:
                pass
            for key in shadow:
                pass
            for name, s in shadow.items():
                pass
            for g in grads:
                pass
        """
    ) == [
        ("params", {"p": "parameters"}),
        ("shadow", {}),
        ("shadow.items()", {"s": "parameters"}),
        ("grads", {"g": "parameters"}),
    ]


def test_modules_children_and_rebound_names_are_not_parameter_sequences() -> None:
    assert _loops(
        """
            def step(model, flag):
                params = model.parameters()
                if flag:
                    params = [1, 2, 3]
                for p in params:
                    pass
                for name, m in model.named_children():
                    pass
                for layer in model.layers:
                    pass
                for key in model.state_dict():
                    pass
            """
    ) == [("model.state_dict()", {})]


def test_indexing_a_mapping_of_parameters_gives_a_tensor() -> None:
    ctx = _context(
        """
        def step(model, ema):
            shadow = dict(ema.named_parameters())
            for name, p in model.named_parameters():
                shadow[name].sub_(p)
        """
    )
    subscripts = [n for n in ctx.facts.parents if isinstance(n, cst.Subscript)]
    assert [ctx.is_tensor(s) for s in subscripts] == [True]


# -- TPL204 messages and gates ---------------------------------------------------------------
def _messages(code: str, path: str = "m.py") -> list[str]:
    source = textwrap.dedent(code).lstrip("\n")
    return [f.message for f in lint_source(source, path=path, select=["TPL204"])]


def test_clipping_loop_names_the_sync_and_the_multi_tensor_clip() -> None:
    (message,) = _messages(
        """
        def train(model, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                for p in model.parameters():
                    norm = p.grad.norm(2)
                    if norm > 1.0:
                        p.grad.mul_(1.0 / norm)
                optimizer.step()
        """
    )
    assert message == (
        "loop over model.parameters() in the step loop clips each gradient by its own norm one tensor at a "
        "time, with one host sync per parameter (if norm > 1.0); keep the per-tensor clip with "
        "norms = torch._foreach_norm(grads), scales max_norm / (norm + eps) clamped to 1 and one "
        "torch._foreach_mul_(grads, scales), not clip_grad_norm_ (a global norm trains differently)"
    )


def test_a_global_norm_summed_by_hand_is_pointed_at_the_global_norm_helpers() -> None:
    (message,) = _messages(
        """
        def grad_norm(model):
            total = 0.0
            for p in model.parameters():
                total += p.grad.norm().item() ** 2
            return total ** 0.5

        def train(model, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                print(grad_norm(model))
                optimizer.step()
        """
    )
    assert "computes gradient norms one tensor at a time" in message
    assert message.endswith(
        "use torch.nn.utils.clip_grad_norm_(..., foreach=True) or torch.nn.utils.get_total_norm"
    )


@pytest.mark.parametrize(
    "step", ["p.data.add_(p.grad, alpha=-lr)", "p.data -= lr * p.grad", "p.sub_(lr * p.grad)"]
)
def test_a_manual_sgd_step_is_pointed_at_foreach_add(step: str) -> None:
    (message,) = _messages(
        f"""
        import torch

        def train(model, loader, lr):
            for x in loader:
                model(x).sum().backward()
                with torch.no_grad():
                    for p in model.parameters():
                        {step}
        """
    )
    assert message.endswith(
        "takes a gradient step one tensor at a time; use one torch._foreach_add_(params, grads, alpha=-lr) "
        "over the parameters that have gradients"
    )


def test_ema_fix_is_not_offered_below_torch_2(tmp_path: Any) -> None:
    (tmp_path / "requirements.txt").write_text("torch>=1.12\n")
    path = tmp_path / "train.py"
    source = textwrap.dedent(
        """
        def train(model, ema, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
                for e, p in zip(ema.parameters(), model.parameters()):
                    e.lerp_(p, 0.001)
        """
    ).lstrip("\n")
    path.write_text(source)
    (finding,) = lint_source(source, path=str(path), select=["TPL204"])
    assert finding.fix is None
    assert finding.message.endswith("(torch._foreach_lerp_ needs torch 2.0)")


def test_weight_read_from_the_loop_variables_gets_no_fix() -> None:
    source = textwrap.dedent(
        """
        def train(model, ema, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
                for e, p in zip(ema.parameters(), model.parameters()):
                    e.lerp_(p, p.lr)
        """
    ).lstrip("\n")
    assert fix_source(source, path="m.py", unsafe=True, select=["TPL204"]) == source


# -- the fixed EMA computes what the loop computed ---------------------------------------------
_EMA_FORMS = {
    "mul-add-alpha": "e.mul_(m).add_(p, alpha=1 - m)",
    "mul-add-product": "e.data.mul_(m).add_((1 - m) * p.data)",
    "copy-blend": "e.copy_(m * e + (1 - m) * p.detach())",
    "data-assignment": "e.data = e.data * m + p.data * (1.0 - m)",
    "lerp": "e.lerp_(p, 1 - m)",
    "copy-of-model-lerp": "e.copy_(p.detach().lerp(e, m))",
}


def _update_function(body: str, fixed: bool) -> Callable[..., None]:
    source = textwrap.dedent(
        f"""
        import torch

        @torch.no_grad()
        def update(ema, model, m):
            for e, p in zip(ema.parameters(), model.parameters()):
                {body}

        def train(model, ema, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
                update(ema, model, 0.99)
        """
    ).lstrip("\n")
    if fixed:
        changed = fix_source(source, path="m.py", unsafe=True, select=["TPL204"])
        assert "\n    torch._foreach_lerp_(" in changed and "\n    for e, p" not in changed
        source = changed
    namespace: dict[str, Any] = {}
    exec(compile(source, "m.py", "exec"), namespace)
    return namespace["update"]  # type: ignore[no-any-return]


def _model(dtype: torch.dtype, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)).to(
        dtype
    )


@pytest.mark.parametrize("form", sorted(_EMA_FORMS))
@pytest.mark.parametrize("dtype, tolerance", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_fixed_ema_matches_the_loop(form: str, dtype: torch.dtype, tolerance: float) -> None:
    model = _model(dtype, seed=0)
    by_loop, by_fix = _model(dtype, seed=1), _model(dtype, seed=1)
    loop, fixed = (
        _update_function(_EMA_FORMS[form], fixed=False),
        _update_function(_EMA_FORMS[form], fixed=True),
    )
    for step in range(5):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.1)
        loop(by_loop, model, 0.9 + step / 100)
        fixed(by_fix, model, 0.9 + step / 100)
    for a, b in zip(by_loop.parameters(), by_fix.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=tolerance, atol=tolerance)


def test_fixed_ema_keeps_a_float32_average_of_a_bfloat16_model() -> None:
    model = _model(torch.bfloat16, seed=0)
    by_loop, by_fix = _model(torch.float32, seed=1), _model(torch.float32, seed=1)
    loop = _update_function(_EMA_FORMS["mul-add-alpha"], fixed=False)
    fixed = _update_function(_EMA_FORMS["mul-add-alpha"], fixed=True)
    loop(by_loop, model, 0.9)
    fixed(by_fix, model, 0.9)
    for a, b in zip(by_loop.parameters(), by_fix.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_ema_over_mapping_keys_and_buffer_copies_are_named_for_what_they_do() -> None:
    assert _messages(
        """
        import torch
        from torch import nn

        class LitEma(nn.Module):
            def forward(self, model):
                with torch.no_grad():
                    m_param = dict(model.named_parameters())
                    shadow = dict(self.named_buffers())
                    for key in m_param:
                        shadow[self.names[key]].sub_(self.rate * (shadow[self.names[key]] - m_param[key]))
                    for name, buf in dict(model.named_buffers()).items():
                        shadow[name].copy_(buf)
        """
    ) == [
        "loop over m_param in forward() updates an EMA one tensor at a time; use one torch._foreach_lerp_ over "
        "lists of both models' tensors (or torch.optim.swa_utils.AveragedModel with get_ema_multi_avg_fn)",
        "loop over dict(model.named_buffers()).items() in forward() copies tensors one at a time; "
        "use one torch._foreach_copy_ over lists (torch 2.1)",
    ]


def test_a_header_written_over_several_lines_is_shown_on_one() -> None:
    (message,) = _messages(
        """
        import torch
        from torch import nn

        class MoCo(nn.Module):
            def forward(self, x):
                for q, k in zip(
                    self.encoder_q.parameters(), self.encoder_k.parameters()
                ):
                    k.mul_(0.9).add_(q * 0.2)
                return x
        """
    )
    assert message.startswith(
        "loop over zip(self.encoder_q.parameters(), self.encoder_k.parameters()) in forward() updates an EMA"
    )


# -- optimizers the project writes -------------------------------------------------------------
def test_param_groups_params_are_the_optimizers_parameters() -> None:
    assert _loops(
        """
        class LARS(torch.optim.Optimizer):
            def step(self):
                for g in self.param_groups:
                    params = g["params"]
                    for p in g["params"]:
                        pass
                    for p in params:
                        pass
                    for name in g["names"]:
                        pass
        """
    ) == [('g["params"]', {"p": "param_groups"}), ("params", {"p": "param_groups"})]


def test_an_optimizer_step_of_the_project_is_pointed_at_the_multi_tensor_update() -> None:
    (message,) = _messages(
        """
        class Muon(torch.optim.Optimizer):
            @torch.no_grad()
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        buf = self.state[p]["momentum_buffer"]
                        buf.lerp_(p.grad, 1 - group["momentum"])
                        update = zeropower_via_newtonschulz5(buf, steps=group["ns_steps"])
                        p.mul_(1 - group["lr"] * group["weight_decay"])
                        p.add_(update.reshape(p.shape), alpha=-group["lr"])

        def train(model, loader):
            optimizer = Muon(model.cuda().parameters())
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
        """
    )
    assert message == (
        'loop over group["params"] in step() updates each parameter of the group with kernels of its own; '
        "write the update over the group's lists with the multi-tensor ops, as torch.optim's optimizers do "
        "(torch._foreach_norm for per-tensor norms, torch._foreach_mul_/_foreach_add_/_foreach_addcmul_ "
        "for the momentum and the step)"
    )


_LARS = """
    import torch

    class LARS(torch.optim.Optimizer):
        @torch.no_grad()
        def step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    update = p.grad.add(p, alpha=g["weight_decay"])
                    p.add_(update * (g["eta"] * torch.norm(p) / torch.norm(update)), alpha=-g["lr"])
    """
_TRAINED_UNDER_A_SCALER = """
    import torch
    {imports}

    def main(model, loader):
        optimizer = LARS(model.cuda().parameters())
        scaler = torch.cuda.amp.GradScaler()
        for x in loader:
            with torch.cuda.amp.autocast():
                loss = model(x)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    """


def test_a_grad_scaler_steps_the_optimizer_it_is_given(tmp_path: Any) -> None:
    """`scaler.step(optimizer)` runs LARS.step every step: in the file (barlowtwins' main.py) and
    across modules (both passes)."""
    (one_file,) = _messages(
        textwrap.dedent(_LARS) + textwrap.dedent(_TRAINED_UNDER_A_SCALER.format(imports=""))
    )
    assert one_file.startswith('loop over g["params"] in step()')
    root = write_project(
        tmp_path,
        {"optim.py": _LARS, "train.py": _TRAINED_UNDER_A_SCALER.format(imports="from optim import LARS")},
    )
    assert finding_lines(root, "optim.py", "TPL204") == [7]


def test_a_scaler_stepping_a_torch_optimizer_runs_no_project_step() -> None:
    assert (
        _messages(
            """
        import torch

        def main(model, loader, scaler):
            optimizer = torch.optim.SGD(model.cuda().parameters(), lr=0.1)
            for x in loader:
                scaler.scale(model(x)).backward()
                scaler.step(optimizer)
                scaler.update()
                for group in optimizer.param_groups:
                    group["lr"] *= 0.99
        """
        )
        == []
    )


def test_code_after_an_optimizer_state_guard_runs_once() -> None:
    """`if optim.state: return`: what follows runs only before the optimizer's first step
    (torchtitan's init_optim_state, reached from a checkpoint's state_dict())."""
    assert (
        _messages(
            """
        import torch

        def init_optim_state(optim, model):
            if optim.state:
                return
            for group in optim.param_groups:
                for p in group["params"]:
                    p.grad = torch.zeros_like(p)
            for p in model.parameters():
                p.grad = torch.zeros_like(p)
            optim.step()

        def train(model, loader, optim):
            model.cuda()
            for x in loader:
                init_optim_state(optim, model)
                model(x).sum().backward()
                optim.step()
        """
        )
        == []
    )
