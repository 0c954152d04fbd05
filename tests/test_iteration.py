"""Iterations.repeated_pass: is the object a call builds iterated again and again?"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchperf_lint.config import Settings
from torchperf_lint.engine.context import Context
from torchperf_lint.syntax.walker import walk


def _repeated(source: str) -> tuple[str, int, int] | None:
    """(target, line of the iterating loop, line of the repeating loop) for the `Loader(...)` call."""
    source = textwrap.dedent(source).lstrip("\n")
    module = cst.parse_module(source)
    facts = walk(module, frozenset({cst.Call}))
    ctx = Context("example.py", source, facts, Settings())
    call = next(c for c in ctx.nodes(cst.Call) if ctx.code(c.func) == "Loader")  # type: ignore[attr-defined]
    found = ctx.iterations.repeated_pass(call)  # type: ignore[arg-type]
    if found is None:
        return None
    lines = source.splitlines()

    def line_of(loop: cst.CSTNode) -> int:
        first = module.code_for_node(loop).strip().splitlines()[0]
        return next(n for n, text in enumerate(lines, start=1) if text.strip() == first.strip())

    return found.target, line_of(found.loop), line_of(found.outer)


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            """
            loader = Loader()
            while True:
                for batch in tqdm(enumerate(loader), total=10):
                    step(batch)
            """,
            ("loader", 3, 2),
        ),
        (
            """
            def run(epochs):
                loader = Loader()
                for epoch in range(epochs):
                    for i, batch in enumerate(loader):
                        step(batch)
            """,
            ("loader", 4, 3),
        ),
        (
            """
            def train_one_epoch(model, *, data):
                for batch in data:
                    model(batch)

            def main(model):
                train_loader = Loader()
                for epoch in range(3):
                    train_one_epoch(model, data=train_loader)
            """,
            ("train_loader", 2, 7),
        ),
        (
            """
            class Trainer:
                def __init__(self):
                    self.loader = Loader()

                def epoch(self, model, loader):
                    for batch in loader:
                        model(batch)

                def fit(self, model):
                    for _ in range(3):
                        self.epoch(model, self.loader)
            """,
            ("self.loader", 6, 10),
        ),
        (
            """
            class Trainer:
                def __init__(self):
                    self.loader = Loader()

                def epoch(self):
                    for batch in self.loader:
                        pass

            def fit(trainer):
                for _ in range(3):
                    trainer.epoch()
            trainer = Trainer()
            """,
            None,  # `trainer.epoch()` on a parameter does not resolve to the method: unknown, silent
        ),
    ],
    ids=[
        "while-true-and-wrappers",
        "epoch-loop",
        "keyword-argument",
        "method-parameter",
        "unresolved-caller",
    ],
)
def test_repeated_pass_is_found_through_loops_and_calls(
    source: str, expected: tuple[str, int, int] | None
) -> None:
    assert _repeated(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        """
        loader = Loader()
        for batch in loader:
            step(batch)
        """,
        """
        for epoch in range(3):
            loader = Loader()
            for batch in loader:
                step(batch)
        """,
        """
        def one_pass():
            loader = Loader()
            for batch in loader:
                step(batch)

        for epoch in range(3):
            one_pass()
        """,
        """
        def make():
            loader = Loader()
            return loader

        def train(loader):
            for epoch in range(3):
                for batch in loader:
                    step(batch)
        """,
        """
        items = [Loader()]
        for epoch in range(3):
            for batch in items:
                step(batch)
        """,
    ],
    ids=[
        "iterated-once",
        "rebuilt-every-epoch",
        "rebuilt-every-call",
        "same-name-elsewhere",
        "not-bound-to-a-name",
    ],
)
def test_no_repeated_pass(source: str) -> None:
    assert _repeated(source) is None
