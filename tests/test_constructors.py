"""ModuleGraph: constructors behind names and attributes, Sequential neighbours, module data flow."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchperf_lint.config import Settings
from torchperf_lint.engine.context import Context
from torchperf_lint.project.summary import summarize
from torchperf_lint.syntax.walker import walk


def _context(source: str) -> Context:
    source = textwrap.dedent(source).lstrip("\n")
    facts = walk(cst.parse_module(source), frozenset({cst.Call}))
    return Context("example.py", source, facts, Settings())


def _call(ctx: Context, callee: str, nth: int = 0) -> cst.Call:
    calls = [c for c in ctx.nodes(cst.Call) if isinstance(c, cst.Call) and ctx.code(c.func) == callee]
    return calls[nth]


def _codes(ctx: Context, calls: list[cst.Call] | None) -> list[str] | None:
    return None if calls is None else [ctx.code(c) for c in calls]


def _neighbours(ctx: Context, callee: str = "nn.Sequential") -> list[tuple[str, str]]:
    return [(ctx.code(a), ctx.code(b)) for a, b in ctx.module_graph.sequential_neighbours(_call(ctx, callee))]


def test_attribute_resolves_to_every_constructor_in_the_class_and_its_bases() -> None:
    ctx = _context(
        """
        import torch.nn as nn
        class Base(nn.Module):
            def __init__(self, wide):
                super().__init__()
                if wide:
                    self.conv = nn.Conv2d(3, 64, 3)
                else:
                    self.conv = nn.Conv2d(3, 32, 3).cuda()
        class Net(Base):
            def forward(self, x):
                return self.conv(x)
        """
    )
    graph = ctx.module_graph
    assert _codes(ctx, graph.constructor_calls(_call(ctx, "self.conv").func)) == [
        "nn.Conv2d(3, 64, 3)",
        "nn.Conv2d(3, 32, 3)",
    ]


def test_attributes_assigned_in_parallel_take_their_own_values() -> None:
    ctx = _context(
        """
        import torch.nn as nn
        class Trainer:
            def __init__(self, width):
                model, optimizer = nn.Conv2d(3, width, 3), None
                self.model, self.optimizer = model, optimizer
                self.head, *self.rest = nn.Linear(2, 2), nn.Linear(3, 3)
            def step(self, x):
                return self.model(x), self.head(x)
        """
    )
    graph = ctx.module_graph
    assert graph.constructor_calls(_call(ctx, "self.model").func) is None  # `model` was unpacked: unknown
    assert graph.constructor_calls(_call(ctx, "self.head").func) is None  # a starred target: not paired
    ctx = _context(
        """
        import torch.nn as nn
        class Trainer:
            def __init__(self, width):
                model = nn.Conv2d(3, width, 3)
                self.model, self.width = model, width
            def step(self, x):
                return self.model(x)
        """
    )
    assert _codes(ctx, ctx.module_graph.constructor_calls(_call(ctx, "self.model").func)) == [
        "nn.Conv2d(3, width, 3)"
    ]


def test_the_project_pass_pairs_attributes_assigned_in_parallel_as_the_file_pass_does() -> None:
    summary = summarize(
        "class Trainer:\n"
        "    def __init__(self, make):\n"
        "        self.model, self.optimizer = Net(), torch.optim.SGD([], lr=0.1)\n"
        "        self.head, *self.rest = Head(), Tail()\n"
        "        self.a, self.b = make()\n"
    )
    assert summary is not None
    assert summary.classes[0].attributes == {"model": "Net", "optimizer": "torch.optim.SGD"}


def test_attribute_with_an_unresolvable_value_is_unknown() -> None:
    ctx = _context(
        """
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self, norm_layer):
                super().__init__()
                self.norm = norm_layer(8) if norm_layer else nn.Identity()
            def forward(self, x):
                return self.norm(x)
        """
    )
    assert ctx.module_graph.constructor_calls(_call(ctx, "self.norm").func) is None


def test_name_resolves_only_through_a_single_binding() -> None:
    ctx = _context(
        """
        import torch.nn as nn
        conv = nn.Conv2d(3, 8, 3)
        bn = nn.BatchNorm2d(8)
        bn = nn.Identity()
        y = bn(conv(x))
        """
    )
    graph = ctx.module_graph
    outer = _call(ctx, "bn")
    assert _codes(ctx, graph.constructor_calls(_call(ctx, "conv").func)) == ["nn.Conv2d(3, 8, 3)"]
    assert graph.constructor_calls(outer.func) is None


def test_sequential_positional_ordered_dict_and_starred_literal() -> None:
    ctx = _context(
        """
        from collections import OrderedDict
        import torch.nn as nn
        a = nn.Sequential(conv, bn, *[relu, pool], drop)
        b = nn.Sequential(OrderedDict([("c", conv), ("n", bn), ("r", relu)]))
        c = nn.Sequential(OrderedDict(c=conv, n=bn))
        """
    )
    graph = ctx.module_graph
    calls = [_call(ctx, "nn.Sequential", n) for n in range(3)]
    pairs = [[(ctx.code(x), ctx.code(y)) for x, y in graph.sequential_neighbours(c)] for c in calls]
    # a starred list is adjacent inside itself, not to the arguments around it
    assert pairs[0] == [("conv", "bn"), ("relu", "pool")]
    assert pairs[1] == [("conv", "bn"), ("bn", "relu")]
    assert pairs[2] == [("conv", "bn")]


def test_layers_list_follows_consecutive_statements_only() -> None:
    ctx = _context(
        """
        import torch.nn as nn
        def make(cfg, bn):
            layers = [stem]
            layers.append(conv1); layers.append(bn1)
            layers += [conv2, bn2]
            layers.extend([relu])
            if bn:
                layers.append(bn3)
            layers.append(conv3)
            log(layers)
            layers.append(bn4)
            return nn.Sequential(*layers)
        """
    )
    assert sorted(_neighbours(ctx)) == [
        ("bn1", "conv2"),
        ("bn2", "relu"),
        ("conv1", "bn1"),
        ("conv2", "bn2"),
        ("stem", "conv1"),
    ]


def test_layers_list_rebound_to_something_else_is_not_followed() -> None:
    ctx = _context(
        """
        import torch.nn as nn
        def make(blocks):
            layers = list(blocks)
            layers.append(conv)
            layers.append(bn)
            return nn.Sequential(*layers)
        """
    )
    assert _neighbours(ctx) == []


def test_super_init_of_a_sequential_subclass_counts_as_sequential() -> None:
    ctx = _context(
        """
        from torch import nn
        class ConvBN(nn.Sequential):
            def __init__(self, c):
                super().__init__(conv, bn)
        class NotSequential(nn.Module):
            def __init__(self, c):
                super().__init__(conv, bn)
        """
    )
    graph = ctx.module_graph
    first, second = (
        c for c in ctx.nodes(cst.Call) if isinstance(c, cst.Call) and ctx.code(c.func) == "super().__init__"
    )
    assert len(graph.sequential_neighbours(first)) == 1
    assert graph.sequential_neighbours(second) == []


def test_producer_of_nested_and_consecutive_calls() -> None:
    ctx = _context(
        """
        class Net:
            def forward(self, x):
                y = self.bn(self.conv(x))
                x = self.conv2(x)
                x = self.bn2(x)
                z = self.conv3(x)
                x = self.bn3(x)
                x = self.conv4(x); x = self.bn4(x)
                return x
        """
    )
    graph = ctx.module_graph

    def producer(callee: str) -> str | None:
        found = graph.producer(_call(ctx, callee))
        return ctx.code(found) if found is not None else None

    assert producer("self.bn") == "self.conv(x)"
    assert producer("self.bn2") == "self.conv2(x)"
    assert producer("self.bn3") is None  # the previous statement assigned z, not x
    assert producer("self.bn4") == "self.conv4(x)"


def test_producer_stops_at_compound_statements() -> None:
    ctx = _context(
        """
        def f(self, x):
            x = self.conv(x)
            if self.use_bn:
                x = self.bn(x)
            return x
        """
    )
    assert ctx.module_graph.producer(_call(ctx, "self.bn")) is None


def test_star_kwargs_with_known_keys_cannot_supply_other_keywords() -> None:
    ctx = _context(
        """
        import torch.nn as nn
        def f(device, dtype, **kwargs):
            dd = {'device': device, 'dtype': dtype}
            opts = dict(bias=True)
            a = nn.Conv2d(1, 2, 3, **dd)
            b = nn.Conv2d(1, 2, 3, **opts)
            c = nn.Conv2d(1, 2, 3, **kwargs)
        """
    )
    graph = ctx.module_graph
    a, b, c = (_call(ctx, "nn.Conv2d", n) for n in range(3))
    assert not graph.star_kwargs_may_supply(a, "bias")
    assert graph.star_kwargs_may_supply(a, "device")
    assert graph.star_kwargs_may_supply(b, "bias")
    assert not graph.star_kwargs_may_supply(b, "padding")
    assert graph.star_kwargs_may_supply(c, "bias")


def test_star_kwargs_that_gain_keys_later_may_supply_anything() -> None:
    ctx = _context(
        """
        import torch
        def main(args, use_cuda, ds):
            train_kwargs = {'batch_size': args.batch_size}
            if use_cuda:
                train_kwargs.update({'num_workers': 1, 'pin_memory': True})
            return torch.utils.data.DataLoader(ds, **train_kwargs)
        """
    )
    loader = _call(ctx, "torch.utils.data.DataLoader")
    assert ctx.module_graph.star_kwargs_may_supply(loader, "pin_memory")
