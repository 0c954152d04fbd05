"""TPL1xx beyond the rule examples: the batch and step-invariance facts in engine/, fix details,
defaults, and the example script."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchperf_lint.api import fix_source, lint_source
from torchperf_lint.config import Settings
from torchperf_lint.engine.context import Context
from torchperf_lint.engine.findings import Safety
from torchperf_lint.syntax.walker import walk

from .helpers import finding_lines, write_project

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "transfer_syncs.py"


def _probes(source: str) -> tuple[Context, list[cst.BaseExpression]]:
    """The context of `source` and the argument of each `probe(...)` call, in source order."""
    source = textwrap.dedent(source).lstrip("\n")
    facts = walk(cst.parse_module(source), frozenset({cst.Call}))
    ctx = Context("example.py", source, facts, Settings())
    calls = [c for c in ctx.nodes(cst.Call) if ctx.code(c.func) == "probe"]  # type: ignore[attr-defined]
    return ctx, [c.args[0].value for c in calls]  # type: ignore[attr-defined]


def _batch_loops(source: str) -> list[bool]:
    ctx, probes = _probes(source)
    return [ctx.batch_loop(p) is not None for p in probes]


# -- analysis/batches.py: which values are DataLoader batches ---------------------------------


def test_enumerate_index_is_not_a_batch_but_its_items_are() -> None:
    assert _batch_loops(
        """
        for i, (x, y) in enumerate(tqdm(loader)):
            probe(i); probe(x); probe(y)
        """
    ) == [False, True, True]


def test_zip_with_a_counter_keeps_only_the_loader_items() -> None:
    assert _batch_loops(
        """
        for step, batch in zip(range(100), train_loader):
            probe(step); probe(batch)
        """
    ) == [False, True]


def test_elements_reached_by_unpacking_indexing_and_attributes_are_batches() -> None:
    assert _batch_loops(
        """
        for data in loader:
            x, n = data[0], 3
            images = data["image"]
            probe(x); probe(n); probe(images); probe(data.pos); probe(data.shape[0])
        """
    ) == [True, False, True, True, False]


def test_dict_values_are_batches_but_keys_are_not() -> None:
    assert _batch_loops(
        """
        for batch in loader:
            a = {k: probe(v) for k, v in batch.items()}
            b = [probe(k) for k in batch.keys()]
            c = [probe(v) for v in batch.values()]
            d = [probe(k) for k, v in batch.items()]
        """
    ) == [True, False, True, False]


def test_host_conversions_keep_a_batch_and_device_moves_end_it() -> None:
    assert _batch_loops(
        """
        for x, y in loader:
            h = x.permute(0, 3, 1, 2).float()
            d = y.cuda()
            probe(h); probe(d)
        """
    ) == [True, False]


def test_a_name_bound_to_tqdm_of_a_loader_is_iterated_as_the_loader() -> None:
    assert _batch_loops(
        """
        epoch_iterator = tqdm(train_dataloader, desc="Iteration")
        for step, batch in enumerate(epoch_iterator):
            batch = tuple(probe(t) for t in batch)
        """
    ) == [True]


def test_loops_over_plain_iterables_hold_no_batches() -> None:
    assert _batch_loops(
        """
        def f(items, loader):
            for x in items:
                probe(x)
        """
    ) == [False]


def test_a_loader_over_data_moved_to_the_device_yields_no_host_batches() -> None:
    # gpse.py's precompute: `model, data = model.to(device), data.to(device)`, then a
    # NeighborLoader over `data` samples subgraphs that are already on the device
    assert _batch_loops(
        """
        def precompute(model, data, graph, device, on_gpu):
            model, data = model.to(device), data.to(device)
            for a in NeighborLoader(data, num_neighbors=[10]):
                probe(a)
            for b in NeighborLoader(graph.cuda(), num_neighbors=[10]):
                probe(b)
            for c in NeighborLoader(graph, num_neighbors=[10]):
                probe(c)
            half = graph.to(torch.float16)
            for d in DataLoader(half):
                probe(d)
            if on_gpu:
                graph = graph.to(device)
            for e in DataLoader(graph):
                probe(e)
        """
    ) == [False, False, True, True, True]


def test_whole_item_is_the_loop_target_itself_not_an_element() -> None:
    ctx, probes = _probes(
        """
        for i, batch in enumerate(tqdm(loader)):
            probe(batch)
        for x, y in loader:
            probe(x)
        for pair in zip(loader, loader):
            probe(pair)
        """
    )
    assert [ctx.is_whole_batch(p) for p in probes] == [True, False, False]


# -- analysis/constants.py: host values that are the same at every step -------------------------


def _invariant(source: str) -> list[bool]:
    ctx, probes = _probes(source)
    return [ctx.is_step_invariant(p) for p in probes]


def test_literals_and_module_names_are_step_invariant() -> None:
    assert _invariant(
        """
        import numpy as np
        from torch import nn

        WEIGHTS = np.load("w.npy")

        class Loss(nn.Module):
            def forward(self, x, w):
                local = [0.5, 2.0]
                probe([0.1] * 10); probe(-1); probe({"a": (1, 2)}); probe(WEIGHTS)
                probe(local); probe(np.array(local)); probe(w); probe(np.random.rand(3))
        """
    ) == [True, True, True, True, True, True, False, False]


def test_setup_values_are_invariant_in_the_step_loop_but_loop_values_are_not() -> None:
    assert _invariant(
        """
        def train(model, loader, optimizer, counts):
            weights = [1.0 / c for c in counts]
            n = 0
            for x, y in loader:
                n = n + 1
                probe(counts); probe(weights); probe(y); probe(n)
                model(x).backward()
        """
    ) == [True, True, False, False]


def test_self_attributes_are_invariant_unless_hot_code_assigns_them() -> None:
    assert _invariant(
        """
        from torch import nn

        class Net(nn.Module):
            TABLE = [1, 2, 3]

            def __init__(self, mean):
                super().__init__()
                self.mean = mean
                self.decay = [1.0]

            def forward(self, x):
                self.decay = [d * 0.9 for d in self.decay]
                probe(self.mean); probe(self.TABLE); probe(self.decay); probe(self.unknown)
        """
    ) == [True, True, False, False]


# -- analysis/devices.py: tensors that certainly live on the host ------------------------------


def test_factories_without_device_make_host_tensors_until_moved() -> None:
    ctx, probes = _probes(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x, p):
                drop = torch.rand([])
                moved = torch.rand([]).cuda()
                probe(drop < 0.5); probe(torch.isnan(drop)); probe(torch.rand(3, device=x.device))
                probe(moved); probe(x.sum()); probe(drop + x); probe(drop < p)
        """
    )
    assert [ctx.is_host_tensor(p) for p in probes] == [True, True, False, False, False, False, False]


def test_the_rows_of_a_host_tensor_are_host_tensors() -> None:
    ctx, probes = _probes(
        """
        import torch

        def schedule(x):
            sigmas = torch.linspace(0, 1, 10).flip(0)
            logs = [probe(sigma.log()) for sigma in sigmas]
            for row in sigmas:
                probe(row)
            for row in x:
                probe(row)
            for a, b in zip(sigmas, x):
                probe(a)
                probe(b)
            for i, (lo, hi) in enumerate(zip(sigmas[:-1], sigmas[1:])):
                probe(hi)
                probe(i)
        """
    )
    # unpacked from zip/enumerate, each name is a row of the argument it comes from
    assert [ctx.is_host_tensor(p) for p in probes] == [True, True, False, True, False, True, False]


def test_in_place_updates_leave_a_tensor_where_it_was() -> None:
    """`x -= a; x *= b` each reach the other through the analysis' reading of in-place updates:
    the plain bindings decide (diffusers' rescale_zero_terminal_snr on host betas)."""
    ctx, probes = _probes(
        """
        import torch

        def rescale(x, y):
            s = torch.linspace(0, 1, 10).sqrt()
            s0 = s[0].clone()
            s -= s0
            s *= 2.0
            probe(s ** 2)
            d = torch.zeros(10, device="cuda")
            d -= 1.0
            d *= 2.0
            probe(d ** 2)
            y += 1.0
            probe(y)
        """
    )
    assert [ctx.is_host_tensor(p) for p in probes] == [True, False, False]


def test_an_attribute_updated_through_itself_is_judged_by_its_other_assignments() -> None:
    """`self.betas = rescale(self.betas)` is host when every other assignment is (diffusers'
    schedulers build their tables in `__init__`), and a move anywhere makes it a device value."""
    ctx, probes = _probes(
        """
        import torch

        def rescale(betas):
            alphas = 1.0 - betas
            return 1 - torch.cumprod(alphas, dim=0)

        class Scheduler:
            def __init__(self, n, zero_snr):
                self.betas = torch.linspace(0.0001, 0.02, n)
                if zero_snr:
                    self.betas = rescale(self.betas)
                self.alphas_cumprod = torch.cumprod(1.0 - self.betas, dim=0)

            def timesteps(self):
                sigmas = ((1 - self.alphas_cumprod) / self.alphas_cumprod) ** 0.5
                return [probe(sigma.log()) for sigma in sigmas]

        class Moved:
            def __init__(self, n):
                self.betas = torch.linspace(0.0001, 0.02, n)
                self.betas = rescale(self.betas)

            def to(self, device):
                self.betas = self.betas.to(device)

            def timesteps(self):
                return [probe(b.log()) for b in self.betas]
        """
    )
    assert [ctx.is_host_tensor(p) for p in probes] == [True, False]


def test_a_loader_batch_stays_on_the_host_until_moved() -> None:
    """DataLoader batches are collated on the host: reading one never waits for the device
    (ultralytics' INT8 calibration resizes `batch["img"]` and takes `.numpy()` without moving it).
    What `torch.nn.functional` computes from host operands stays there too."""
    ctx, probes = _probes(
        """
        import torch
        import torch.nn.functional as F
        from torch.utils.data import DataLoader

        def calibrate(dataset, model, accelerator):
            loader = DataLoader(dataset, batch_size=8)
            for batch in loader:
                probe(batch["img"]); probe(F.interpolate(batch["img"].float(), size=64))
                img = batch["img"].cuda()
                probe(img); probe(F.interpolate(img, size=64)); probe(model(batch["img"]))
            for image, mask in loader:
                mask = mask.to("cuda")
                probe(image); probe(mask)
            for item in loader:
                item = {k: v.cuda() for k, v in item.items()}
                probe(item["img"])
            prepared = accelerator.prepare(DataLoader(dataset))
            for x, y in prepared:
                probe(x)
        """
    )
    assert [ctx.is_host_tensor(p) for p in probes] == [
        True,
        True,
        False,
        False,
        False,
        True,
        False,
        False,
        False,
    ]


def test_a_name_is_host_where_its_last_binding_before_the_read_is() -> None:
    ctx, probes = _probes(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x, arr, flag):
                m = x.softmax(-1)
                if m.shape[0] == 0:
                    m = torch.zeros(3, device=x.device)
                else:
                    m = m.argmax(-1)
                m = torch.from_numpy(arr)
                for i in range(3):
                    probe(m.eq(i).sum())
                y = torch.from_numpy(arr)
                if flag:
                    y = y.cuda()
                probe(y)
                z = torch.zeros(3)
                for i in range(3):
                    probe(z)
                    z = x * i
                w = x.sum()
                w = w.cpu()
                probe(w)
                v = torch.zeros(3)
                def later():
                    probe(v)
                probe(v.sum())
                v = x.mean()
        """
    )
    assert [ctx.is_host_tensor(p) for p in probes] == [True, False, False, True, False, True]


def test_dtype_casts_and_moves_to_a_cpu_device_name_stay_on_the_host() -> None:
    ctx, probes = _probes(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x, device):
                host = torch.device("cpu")
                k = x.detach().to(host).double()
                probe(torch.isfinite(k).all(1)); probe(k.to(torch.float64)); probe(k.to(dtype=torch.half))
                probe(k.to(device)); probe(k.to(x)); probe(k.to(x.device, torch.float64))
                a, b = x.cpu(), x.cuda()
                probe(a); probe(b)
                probe(torch.ByteTensor(torch.ByteStorage.from_buffer(bytes(4)))); probe(torch.cuda.FloatTensor(3))
                probe(torch.as_tensor([1.0, 2.0])); probe(torch.as_tensor(x.sum())); probe(torch.tensor(x.mean()))
        """
    )
    host = [ctx.is_host_tensor(p) for p in probes]
    assert host[:6] == [True, True, True, False, False, False]  # casts and moves
    assert host[6:8] == [True, False]  # unpacked from a tuple
    assert host[8:10] == [True, False]  # legacy constructors
    assert host[10:] == [True, False, False]  # copies of host data, of device tensors


def test_self_attributes_assigned_only_host_tensors_are_host() -> None:
    ctx, probes = _probes(
        """
        import torch
        from torch import nn

        class Explainer(nn.Module):
            def __init__(self, weights=None):
                super().__init__()
                w = torch.as_tensor(weights) if weights is not None else torch.ones(4)
                self.weights = w
                self.scale = torch.zeros(3)
                self.register_buffer("class_weight", torch.ones(4))

            def reset(self):
                self.lam = torch.tensor(self.init_lambda)

            def forward(self, x):
                self.scale = self.scale.to(x.device)
                self.class_weight = torch.as_tensor([self.class_weight] * 4)
                probe(self.lam); probe(self.weights.clone().sum()); probe(self.scale); probe(self.class_weight)
        """
    )
    assert [ctx.is_host_tensor(p) for p in probes] == [True, True, False, False]


def test_values_derived_only_from_host_tensors_are_host() -> None:
    ctx, probes = _probes(
        """
        import torch
        from torch import nn

        class Sampler(nn.Module):
            def __init__(self, weights=None):
                super().__init__()
                w = torch.as_tensor(weights) if weights is not None else torch.ones(4)
                if not w.is_floating_point():
                    w = w.to(torch.get_default_dtype())
                self.weights = w

            def crop(self, box: torch.Tensor, sizes: Optional[Union[Sequence[int], torch.Tensor]]):
                src, size = torch.as_tensor(box, dtype=torch.long), torch.as_tensor(sizes)
                probe(torch.stack([src[:, 0], src[:, 1]])); probe(size.max())

            def forward(self, x, kp):
                host = torch.device("cpu")
                device, dtype = x.device, x.dtype
                kp_host, kp_device = kp.detach().to(host).double(), kp.double()
                finite = torch.isfinite(kp_host).all(1)
                scores = kp_host.sum(1)
                earlier = torch.cat([scores.new_full((1,), 0.5), torch.cummax(scores, 0).values[:-1]])
                probe(finite.any()); probe(scores > earlier); probe(kp_host.to(dtype))
                probe(torch.count_nonzero(self.weights.clone())); probe(self.weights.sum() == 0)
                probe(torch.isfinite(kp_device)); probe(finite.any() & torch.isfinite(kp_device))
                probe(torch.cat([scores, x.sum(1)])); probe(torch.cummax(x, 0).values); probe(kp_host.to(device))
                probe(finite.all() & (x.sum(1) > 0))
        """
    )
    host = [ctx.is_host_tensor(p) for p in probes]
    assert host[:2] == [False, True]  # a copy of a tensor parameter stays where the caller's was
    assert host[2:7] == [True, True, True, True, True]
    # a device operand beside 0-dim host ones, or a move
    assert host[7:] == [False, False, False, False, False, False]


def test_an_operator_with_a_host_operand_of_one_dimension_or_more_runs_on_the_host() -> None:
    # kornia's RANSAC: `mask = finite & (errors <= t)`, `finite` a host mask of one value per
    # correspondence. Only a 0-dim CPU tensor may meet a CUDA tensor in an operator: with any other
    # CPU operand the operation runs on the host, or raises, whatever the other operand is.
    ctx, probes = _probes(
        """
        import torch
        from torch import nn

        class Ransac(nn.Module):
            def forward(self, kp, errors, model):
                host = torch.device("cpu")
                kp_host = kp.detach().to(host).double()
                finite = torch.isfinite(kp_host).all(1)
                drop = torch.rand([])
                t = torch.eye(3, dtype=torch.float64)
                probe(finite & (errors <= 0.5)); probe((errors <= 0.5) & finite); probe(errors * finite)
                probe(kp_host[None] + errors); probe(t @ model @ t); probe(torch.stack([drop]) < errors)
                probe(finite.any() & (errors <= 0.5)); probe(drop < errors); probe(finite.all(0) & errors)
                probe(kp_host.sum() * errors); probe(kp_host.norm(2) * errors); probe(kp * errors)
                probe(kp_host.to(errors.device) * errors); probe(kp.cpu().to(errors.device) & errors)
                probe((not finite) & errors); probe(torch.isin(drop, kp_host) & errors)
        """
    )
    host = [ctx.is_host_tensor(p) for p in probes]
    assert host[:6] == [True] * 6
    # 0-dim host operands (a reduction over everything, or over dimension 0 that may leave none,
    # one flag for one element), operands of unknown place, host copies moved back to the device,
    # a Python bool
    assert host[6:] == [False] * 10


def test_lengths_that_pack_padded_sequence_was_given_are_host_tensors() -> None:
    # pack_padded_sequence raises unless a tensor of lengths is on the CPU: a value it was given
    # by a statement that runs before every later read lives on the host there
    ctx, probes = _probes(
        """
        import torch
        from torch import nn
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        class Framewise(nn.Module):
            def forward(self, x, n_wins):
                probe(n_wins.max())
                packed = pack_padded_sequence(x, n_wins, batch_first=True, enforce_sorted=False)
                x, _ = pad_packed_sequence(packed, batch_first=True, total_length=int(probe(n_wins.max())))
                return x

        class ByKeyword(nn.Module):
            def forward(self, x, lengths):
                packed = nn.utils.rnn.pack_padded_sequence(x, lengths=lengths, batch_first=True)
                probe(lengths.sum())
                lengths = x.sum(1)
                probe(lengths.sum())

        class PackedSometimes(nn.Module):
            def forward(self, x, lengths, packed):
                if packed:
                    x = pack_padded_sequence(x, lengths, batch_first=True)
                probe(lengths.max())

        class OtherLengths(nn.Module):
            def forward(self, x, lengths, n):
                x = pack_padded_sequence(x, lengths.cpu(), batch_first=True)
                probe(lengths.max()); probe(n.max())
        """
    )
    host = [ctx.is_host_tensor(p) for p in probes]
    assert host == [False, True, True, False, False, False, False]  # the first read may run alone


def test_a_function_of_the_file_returning_host_tensors_for_host_arguments_returns_host() -> None:
    ctx, probes = _probes(
        """
        import torch
        from torch import nn

        def _to_uint8(image):
            if not image.is_floating_point():
                return image
            working = torch.promote_types(image.dtype, torch.float32)
            return (image.to(working).clamp(0, 1) * 255).round().to(torch.uint8)

        def _normalize(kp1, kp2):
            return kp1 - kp1.mean(0), kp2 - kp2.mean(0), kp1.std()

        def _scores(model, x):
            return model(x).cpu()

        def _moved(x):
            return x.cuda()

        def _drawn(x):
            yield x.cpu()

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(3, 3)

            def _host_scores(self, x):
                return self.body(x).detach().cpu()

            def _run(self, x):
                return self.body(x)

            def forward(self, x):
                image = _to_uint8(x.detach().cpu())
                probe(image.permute(1, 2, 0).numpy())
                a, b, s = _normalize(x.cpu(), x.cpu())
                probe(a); probe(s); probe(_scores(self.body, x)); probe(self._host_scores(x))
                c, d, t = _normalize(x, x.cpu())
                probe(_to_uint8(x)); probe(c); probe(t); probe(_moved(x.cpu())); probe(self._run(x.cpu()))
                probe(next(_drawn(x)))
        """
    )
    host = [ctx.is_host_tensor(p) for p in probes]
    assert host[:5] == [True, True, True, True, True]
    assert host[5:] == [False, False, False, False, False, False]  # device arguments, moves, a model


def test_a_parameter_every_caller_passes_a_host_copy_is_read_without_a_sync(tmp_path: Path) -> None:
    root = write_project(
        tmp_path,
        {
            "ransac.py": """
                import torch
                from torch import nn

                class Ransac(nn.Module):
                    @staticmethod
                    def _records(scores: torch.Tensor, prior: float):
                        return (scores > prior).nonzero().flatten().tolist()

                    def _counts(self, scores: torch.Tensor):
                        return scores.sum().item()

                    def forward(self, x):
                        scores = self.score(x)
                        scores_host = scores.cpu()
                        records = self._records(scores_host, 0.5)
                        return records, self._counts(scores)
                """
        },
    )
    assert finding_lines(root, "ransac.py", "TPL105") == [10]


def test_values_a_function_of_the_file_returns_on_the_host_are_read_without_a_sync(tmp_path: Path) -> None:
    root = write_project(
        tmp_path,
        {
            "viewer.py": """
                import torch
                from torch import nn

                def _to_uint8(image):
                    if not image.is_floating_point():
                        return image
                    return (image.clamp(0, 1) * 255).round().to(torch.uint8)

                class Viewer(nn.Module):
                    def forward(self, x):
                        image = _to_uint8(x.detach().cpu())
                        shown = image.permute(1, 2, 0).numpy()
                        kept = torch.isfinite(image).all() & (image.sum() > 0)
                        lost = torch.isfinite(_to_uint8(x)).all()
                        return shown, bool(kept), bool(lost)
                """
        },
    )
    # the copy itself waits; the values returned for it do not, those returned for `x` do
    assert finding_lines(root, "viewer.py", "TPL105") == [11, 15]


def test_a_module_every_caller_hands_python_sizes_as_tensors_reads_them_without_a_sync(
    tmp_path: Path,
) -> None:
    root = write_project(
        tmp_path,
        {
            "transform.py": """
                import torch
                from torch import nn

                class _Core(nn.Module):
                    def forward(self, image: torch.Tensor, target_size: torch.Tensor, scale: torch.Tensor):
                        target_h, target_w = target_size.tolist()
                        return image[:, :target_h, :target_w] * scale.item()

                class Transform:
                    def __init__(self):
                        self.core = _Core()

                    def __call__(self, image, sizes, scale):
                        return self.core(image=image, target_size=torch.tensor(sizes), scale=scale.mean())
                """
        },
    )
    assert finding_lines(root, "transform.py", "TPL105") == [7]


# -- rule details ------------------------------------------------------------------------------


def _findings(source: str, select: list[str]) -> list[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip("\n")
    return [(f.line, f.code) for f in lint_source(source, path="example.py", select=select)]


def test_assert_with_computed_message_is_reported_without_a_fix() -> None:
    source = textwrap.dedent(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                h = x * 2  # a value the step computes (an argument checked with a message is its entry's contract)
                assert (h > 0).all(), f"negative input: {h.min()}"
                assert 0 <= h.min() < 10
                return h
        """
    ).lstrip("\n")
    findings = lint_source(source, path="example.py", select=["TPL104"])
    assert [(f.line, f.fix) for f in findings] == [(7, None), (8, None)]


def test_assert_fix_adds_the_torch_import_when_the_file_has_none() -> None:
    source = textwrap.dedent(
        """
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                assert x.sum(1).all(); y = x * 2
                return y
        """
    ).lstrip("\n")
    fixed = fix_source(source, path="example.py", unsafe=True, select=["TPL104"])
    assert "import torch\n" in fixed
    assert "        torch._assert_async(x.sum(1).all()); y = x * 2\n" in fixed
    assert fix_source(source, path="example.py", unsafe=False, select=["TPL104"]) == source


def test_non_blocking_fix_is_safe_for_elements_and_unsafe_for_a_whole_batch() -> None:
    source = textwrap.dedent(
        """
        def train(model, loader, optimizer):
            for batch in loader:
                batch = batch.to("cuda")
                x, y = batch
                loss = model(x.to("cuda"), y)
                loss.backward()
                optimizer.step()
        """
    ).lstrip("\n")
    findings = lint_source("import torch\n" + source, path="example.py", select=["TPL106"])
    assert [(f.line, f.fix.safety if f.fix else None) for f in findings] == [
        (4, Safety.UNSAFE),
        (6, Safety.SAFE),
    ]


def test_sync_in_forward_reports_elif_and_nonzero_even_as_tuple() -> None:
    assert _findings(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                if x.dim() == 2:
                    pass
                elif (x < 0).any():
                    x = x.abs()
                rows, cols = torch.nonzero(x > 1, as_tuple=True)
                return x[rows, cols]
        """,
        ["TPL105"],
    ) == [(8, "TPL105"), (10, "TPL105")]


@pytest.mark.parametrize("extend, expected", [((), False), (("TPL107",), True)])
def test_sync_per_step_is_off_unless_selected_by_code(extend: tuple[str, ...], expected: bool) -> None:
    source = textwrap.dedent(
        """
        import torch

        def train(model, loader, optimizer):
            for x, y in loader:
                loss = model(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
                loss.backward()
                optimizer.step()
                print(loss.item())
        """
    ).lstrip("\n")
    findings = lint_source(source, path="example.py", settings=Settings(extend_select=extend))
    assert ("TPL107" in {f.code for f in findings}) is expected


@pytest.mark.usefixtures("precision_off_rules_on")
def test_example_script_shows_every_transfer_rule() -> None:
    findings = lint_source(
        EXAMPLE.read_bytes(), path=str(EXAMPLE), settings=Settings(extend_select=("TPL102", "TPL107"))
    )
    codes = sorted(f.code for f in findings)
    assert codes == ["TPL102", "TPL104", "TPL105", "TPL105", "TPL106", "TPL106", "TPL107"]


def test_a_host_copy_read_again_is_one_sync_not_two() -> None:
    # kornia's RANSAC and yolov5's exporters copy once (`.cpu()`, `.to("cpu")`) and then read the
    # host copy: only the copy waits for the device.
    for copy in ("scores.cpu()", 'scores.to("cpu")', 'scores.to(device=torch.device("cpu"))'):
        source = textwrap.dedent(
            f"""
            import torch
            from torch import nn

            class Head(nn.Module):
                def forward(self, x):
                    scores = x.softmax(-1)
                    host = {copy}
                    self.last = host.tolist()
                    return scores
            """
        )
        lines = [f.line for f in lint_source(source, select=["TPL105"])]
        assert 9 not in lines, copy
        assert lines in ([], [8]), copy


def test_the_branch_where_isinstance_tensor_failed_is_not_tensor_code() -> None:
    # yolov5's and ultralytics' clip_boxes take a tensor or a NumPy array: the else branch of
    # `if isinstance(boxes, torch.Tensor):` indexes an array, not a tensor (ecosystem labels).
    ctx, probes = _probes(
        """
        import torch
        from torch import Tensor
        from torch import nn

        class Head(nn.Module):
            def forward(self, boxes, other):
                if isinstance(boxes, torch.Tensor):
                    probe(boxes)
                else:
                    probe(boxes)
                if not isinstance(boxes, Tensor):
                    probe(boxes)
                elif other:
                    probe(boxes)
                if isinstance(other, (torch.Tensor, list)):
                    pass
                else:
                    probe(other)
                probe(boxes if isinstance(boxes, torch.Tensor) else boxes.copy())  # array or tensor
                probe(boxes.copy() if isinstance(boxes, torch.Tensor) else boxes)
                probe(boxes if isinstance(boxes, torch.Tensor) else boxes.size(0))
                if isinstance(other, torch.Tensor):
                    pass
                else:
                    probe(boxes)
                    probe(other[0])  # not a Tensor, but maybe a tuple of them (torch_geometric)
        """
    )
    assert [ctx.is_tensor(p) for p in probes] == [
        True,
        False,
        False,
        True,
        True,
        False,
        False,
        False,
        True,
        True,
    ]


def test_a_fix_never_takes_the_device_of_a_parameter_used_as_a_string() -> None:
    # nanoGPT's get_batch(split): `split` is "train" or "val", so `device=split.device` would crash
    source = textwrap.dedent(
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def forward(self, split, x):
                if split == "train":
                    noise = torch.randn(8)
                else:
                    noise = torch.zeros(8)
                print(f"{split} batch")
                return x.cuda() + noise
        """
    )
    fixed = fix_source(source, path="m.py", unsafe=True, select=["TPL101"])
    assert "split.device" not in fixed
    assert fixed.count("device=x.device") == 2
    ctx, probes = _probes(
        """
        from torch import nn

        class M(nn.Module):
            def forward(self, split, mode, x):
                print(f"{mode}")
                probe(split)
                probe(mode)
                probe(x)
                return x if split != "val" else None
        """
    )
    assert [ctx.is_tensor(p) for p in probes] == [False, False, True]


@pytest.mark.usefixtures("precision_off_rules_on")
def test_a_factory_fix_never_takes_its_device_from_a_size_or_a_container() -> None:
    """diffusers passes `embed_dim` (an int) and torch_geometric `k_dict` (a dict) beside the
    tensors: `.device` of either is not a device, so the suggestion names the tensor."""
    source = textwrap.dedent(
        """
        import torch
        from torch import nn

        class Embed(nn.Module):
            def forward(self, embed_dim, k_dict, grid):
                for key, value in k_dict.items():
                    grid = grid + value
                pos = torch.zeros([4, embed_dim])
                return grid.cuda() + pos
        """
    )
    (finding,) = [f for f in lint_source(source, "embed.py", select=["TPL101"])]
    assert "grid.device" in finding.message
    assert "embed_dim.device" not in finding.message and "k_dict.device" not in finding.message
    # swinir's `calculate_mask(self, x_size)`: `H, W = x_size` unpacks a size, and no tensor is in scope
    mask = textwrap.dedent(
        """
        import torch
        from torch import nn

        class Block(nn.Module):
            def calculate_mask(self, x_size):
                h, w = x_size
                return torch.zeros((1, h, w, 1)) - 100.0

            def forward(self, x, x_size):
                return x.cuda() + self.calculate_mask(x_size).cuda()
        """
    )
    (finding,) = [f for f in lint_source(mask, "block.py", select=["TPL101"])]
    assert "x_size.device" not in finding.message
    assert "x_size.device" not in fix_source(mask, path="block.py", unsafe=True, select=["TPL101"])


_RPC_TRAINER = """
    import torch
    import torch.distributed.rpc as rpc
    import torch.nn.functional as F
    from torch import nn

    def call_method(method, rref, *args):
        return method(rref.local_value(), *args)

    def remote_method(method, rref, *args):
        return rpc.rpc_sync(rref.owner(), call_method, args=[method, rref, *args])

    class TrainerNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = rpc.remote("ps", object)

        def forward(self, x):
            out = remote_method(object.forward, self.ps, x)
            return out

    def train(loader, opt, device):
        net = TrainerNet()
        for data, target in loader:
            output = net(data)
            target = target.to(output.device)
            fetched = rpc.rpc_async("ps", torch.ones, args=(2,)).wait()
            labels = target.to(fetched.device)
            moved = net(data).cuda()
            other = target.to(moved.device)
            F.nll_loss(output, target).backward()
            opt.step()
    """


def test_values_returned_over_rpc_without_a_device_map_are_host_tensors(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"trainer.py": _RPC_TRAINER})
    # the RPC results (through a helper and a module's forward) are CPU tensors: moving the
    # batch to their device copies nothing; a result moved to CUDA after it arrives is a device one
    assert finding_lines(root, "trainer.py", "TPL106") == [29]


def test_a_project_that_configures_an_rpc_device_map_keeps_rpc_results_on_the_device(tmp_path: Path) -> None:
    launch = """
        import torch.distributed.rpc as rpc

        def options():
            opts = rpc.TensorPipeRpcBackendOptions()
            opts.set_device_map("ps", {0: 0})
            return opts
        """
    root = write_project(tmp_path, {"trainer.py": _RPC_TRAINER, "launch.py": launch})
    assert finding_lines(root, "trainer.py", "TPL106") == [25, 27, 29]


_RPC_PIPELINE_MASTER = """
    import torch
    import torch.distributed.rpc as rpc
    from torch import nn
    from torch.distributed.rpc import RRef

    class DistNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.p1 = rpc.remote("worker1", nn.Linear, args=("cuda:0", 8, 8))
            self.p2 = rpc.remote("worker2", nn.Linear, args=("cuda:1", 8, 8))

        def forward(self, xs):
            futures = []
            for x in iter(xs.split(4, dim=0)):
                y = self.p1.remote().forward(RRef(x))
                futures.append(self.p2.rpc_async().forward(y))
            return torch.cat(torch.futures.wait_all(futures))

    def train(steps, one_hot):
        model = DistNet()
        loss_fn = nn.MSELoss()
        for _ in range(steps):
            inputs = torch.randn(16, 8)
            labels = torch.zeros(16, 8).scatter_(1, one_hot, 1)
            outputs = model(inputs)
            loss_fn(outputs, labels).backward()
            sent = torch.randn(16, 8)
            rpc.rpc_sync("worker1", print, args=(sent,))
            local = torch.randn(16, 8)
            rpc.rpc_sync("worker1", print, args=(local,))
            (local + torch.ones(8).cuda()).sum().backward()
    """


def test_values_only_sent_over_rpc_without_a_device_map_stay_on_the_host(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"master.py": _RPC_PIPELINE_MASTER})
    # the batch only goes to a module whose forward sends it over RPC, the labels only meet the
    # results gathered from RPC futures, `sent` is only an RPC argument: CUDA would make the RPC
    # fail; `local` also meets a CUDA tensor here
    assert finding_lines(root, "master.py", "TPL101") == [29, 31]


def test_values_sent_over_rpc_with_a_device_map_stay_device_candidates(tmp_path: Path) -> None:
    launch = """
        import torch.distributed.rpc as rpc

        def options():
            opts = rpc.TensorPipeRpcBackendOptions()
            opts.set_device_map("worker1", {0: 0})
            return opts
        """
    root = write_project(tmp_path, {"master.py": _RPC_PIPELINE_MASTER, "launch.py": launch})
    assert finding_lines(root, "master.py", "TPL101") == [23, 24, 27, 29, 31]


def _lines(source: str, code: str) -> list[int]:
    findings = lint_source(textwrap.dedent(source).lstrip("\n"), path="train.py", select=[code])
    return [f.line for f in findings if f.code == code]


def test_a_value_read_again_in_the_same_step_is_one_sync() -> None:
    """RULES.md: TPL107 is silent on the second read of a value already read on the host."""
    source = """
        import torch

        def train(model, loader, optimizer):
            for step, (x, y) in enumerate(loader):
                loss = model(x.cuda(), y.cuda())
                loss.backward()
                optimizer.step()
                value = loss.item()
                print(loss.item(), float(loss.detach()))
        """
    assert _lines(source, "TPL107") == [8]


@pytest.mark.parametrize(
    "first",
    [
        "if step % 10 == 0:\n            print(loss.item())",  # not every step: the later read is the sync
        "seen = loss.item()\n        loss = model(x.cuda(), y.cuda())",  # rebound: new values to wait for
        "seen = loss.item()\n        optimizer.step()",  # the read waits again, for the step queued since
    ],
)
def test_a_read_that_may_not_run_or_another_value_keeps_the_finding(first: str) -> None:
    source = f"""
        import torch

        def train(model, loader, optimizer):
            for step, (x, y) in enumerate(loader):
                loss = model(x.cuda(), y.cuda())
                loss.backward()
                optimizer.step()
        {textwrap.indent(first, "        ")}
                history.append(loss.item())
        """
    assert _lines(source, "TPL107")[-1] == 10


def test_a_factory_in_a_file_that_never_uses_cuda_is_silent() -> None:
    """RULES.md: TPL101 needs the result to meet a CUDA tensor: chained with a move, combined right
    away with a tensor of the hot function, or anywhere in a file that shows CUDA use. A CPU-only
    script whose factories do none of these is silent."""
    source = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                noise = torch.randn(x.shape[0], 8)
                return self.fc(x + noise)

        def train(model, loader, optimizer):
            for x, y in loader:
                order = torch.randperm(x.shape[0])
                loss = (model(x[order]) - y).pow(2).mean()
                loss.backward()
                optimizer.step()
        """
    assert _lines(source, "TPL101") == []
    assert _lines(source + 'DEVICE = "cuda"\n', "TPL101") == [10, 15]  # the same code once the file uses CUDA
    combined = source.replace("self.fc(x + noise)", "self.fc(x + torch.randn(x.shape[0], 8))")
    assert _lines(combined, "TPL101") == [11]  # met right away: the argument's device decides


def test_a_batch_moved_and_rebound_under_its_own_name_is_not_moved_again() -> None:
    """MelGAN's `x_t = x_t.cuda()` then `netD(x_t.cuda())`: the second `.cuda()` is a no-op on a
    device tensor, no copy to make non-blocking; the first stays reported, and so does a move of a
    batch rebound by `.to(...)` of a device not known to be CUDA."""
    source = textwrap.dedent(
        """
        def train(netD, loader, optimizer, out):
            for x_t, y in loader:
                x_t = x_t.cuda()
                y = y.to(out.device)
                loss = netD(x_t.cuda(), y.cuda()).mean()
                loss.backward()
                optimizer.step()
        """
    ).lstrip("\n")
    findings = lint_source("import torch\n" + source, path="example.py", select=["TPL106"])
    assert [(f.line, f.col) for f in findings] == [
        (4, 15),
        (5, 13),
        (6, 33),
    ]  # the second x_t.cuda() (col 21) is silent


# -- non_blocking=True from pageable memory (TPL106) and the loader's side (TPL502) ---------------
_UNPINNED_LOADER = """
    import torch
    from torch.utils.data import DataLoader

    class Trainer:
        def __init__(self, dataset):
            self.loader = DataLoader(dataset, batch_size=64, num_workers=4{pin})

        def train(self, model, optimizer):
            for x, y in self.loader:
                x = x.cuda(non_blocking=True)
                y = y.cuda(non_blocking=True)
                model(x, y).backward()
                optimizer.step()
    """


@pytest.mark.parametrize(
    "pin, expected",
    [
        ("", [("TPL106", 10)]),  # once for the loader, at its first copy; TPL502 gives way
        (", pin_memory=False", [("TPL106", 10)]),
        (", pin_memory=True", []),
        (", pin_memory=pin", []),  # not known: silent
    ],
)
def test_an_unpinned_loader_copied_with_non_blocking_is_one_finding(pin: str, expected: list) -> None:
    source = textwrap.dedent(_UNPINNED_LOADER.format(pin=pin)).lstrip("\n")
    found = lint_source(source, path="train.py", select=["TPL106", "TPL502"])
    assert [(f.code, f.line) for f in found] == expected
    if pin == "":
        assert "the DataLoader at line 6, built without pin_memory=True" in found[0].message
        assert "pin_memory=True)" in fix_source(source, path="train.py", select=["TPL106"])
    if pin == ", pin_memory=False":
        assert found[0].fix is None  # pin_memory=False is written out: the message says what it costs


def test_counting_a_mask_pinned_to_the_host_by_a_host_operand_is_no_sync() -> None:
    # kornia's RANSAC reads `int(mask.sum())` of `finite & (errors <= t)`, `finite` a host mask
    source = """
        import torch
        from torch import nn

        class Ransac(nn.Module):
            def forward(self, kp, errors):
                kp_host = kp.detach().cpu().double()
                finite = torch.isfinite(kp_host).all(1)
                mask = finite & (errors <= 0.5)
                kept = int(mask.sum())
                near = finite.any() & (errors <= 0.5)
                return kept, int(near.sum()), int((errors <= 0.5).sum()), errors.cuda()
        """
    # the `.cpu()` copy itself stays a sync, and so do the counts beside a 0-dim host flag or alone
    assert _findings(source, ["TPL105"]) == [(6, "TPL105"), (11, "TPL105"), (11, "TPL105")]


def test_an_item_of_a_local_dict_holds_what_the_scope_stores_under_its_key() -> None:
    """`loss_dict["d"] = d_loss` then `loss_dict["d"].mean().item()` (stylegan2's train loop):
    the item is the tensor stored there; a key stored nowhere, a key computed at run time or a
    dict handed in holds what nothing here says."""
    ctx, probes = _probes(
        """
        import torch

        def train(model, x, names, given):
            losses = {}
            losses["d"] = model(x).mean()
            logs = {"lr": 0.1, "loss": torch.zeros(3)}
            probe(losses["d"])
            probe(losses["g"])
            probe(logs["lr"])
            probe(logs["loss"])
            computed = {}
            for name in names:
                computed[name] = model(x)
            computed["d"] = model(x)
            probe(computed["d"])
            probe(given["d"])
            stats = {"count": torch.tensor(0)}
            stats["count"] += 1
            probe(stats["count"])
        """
    )
    assert [ctx.is_tensor(p) for p in probes] == [True, False, False, True, False, False, True]
    assert ctx.is_host_tensor(probes[3]) and ctx.is_host_tensor(probes[6])
    assert not ctx.is_host_tensor(probes[0])
