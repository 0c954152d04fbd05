"""TPL601 anomaly-detection-enabled: Autograd anomaly detection left on."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...engine.context import Context
from ...engine.edits import keyword
from ...engine.findings import Fix, Replacement, Report, Safety
from ..base import Rule

_SET_DETECT_ANOMALY = frozenset(
    {"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"}
)
_DETECT_ANOMALY = frozenset({"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"})


def _is_true(expr: Optional[cst.BaseExpression]) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def _first_argument(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    """The first positional argument, or the keyword `name`."""
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            return arg.value
    found = keyword(call, name)
    return found.value if found is not None else None


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = (test.left, test.comparisons[0].comparator)
    return any(isinstance(s, cst.Name) and s.value == "__name__" for s in sides) and any(
        isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__" for s in sides
    )


def _is_conditional(node: cst.CSTNode, ctx: Context) -> bool:
    """Inside an `if` (other than the `__main__` guard) or a conditional expression of its scope:
    a debug switch someone turns on deliberately."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.IfExp):
            return True
        if isinstance(ancestor, cst.If) and not _is_main_guard(ancestor.test):
            return True
    return False


def _without_last_semicolon(
    statements: list[cst.BaseSmallStatement],
) -> list[cst.BaseSmallStatement]:
    return [*statements[:-1], statements[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]


def _remove_statement(expr: cst.Expr, ctx: Context) -> Optional[tuple[cst.CSTNode, Replacement]]:
    """Remove the expression statement `expr`, leaving `pass` where its block would be empty."""
    line = ctx.parent(expr)
    if isinstance(line, cst.SimpleStatementSuite):
        rest = [s for s in line.body if s is not expr]
        return line, line.with_changes(body=_without_last_semicolon(rest) if rest else [cst.Pass()])
    if not isinstance(line, cst.SimpleStatementLine):
        return None
    if len(line.body) > 1:
        rest = [s for s in line.body if s is not expr]
        return line, line.with_changes(body=_without_last_semicolon(rest))
    block = ctx.parent(line)
    if isinstance(block, cst.IndentedBlock) and len(block.body) == 1:
        return line, line.with_changes(body=[cst.Pass()])
    return line, cst.RemovalSentinel.REMOVE


def _unwrap_with(item: cst.WithItem, ctx: Context) -> Optional[tuple[cst.CSTNode, Replacement]]:
    """Drop `item` from its `with`; a `with` left without items is replaced by its body."""
    with_node = ctx.parent(item)
    if not isinstance(with_node, cst.With) or with_node.asynchronous is not None or item.asname is not None:
        return None
    rest = [i for i in with_node.items if i is not item]
    if rest:
        rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return with_node, with_node.with_changes(items=rest)
    body = with_node.body
    statements: list[cst.BaseStatement]
    if isinstance(body, cst.IndentedBlock):
        statements = list(body.body)
    elif isinstance(body, cst.SimpleStatementSuite):
        statements = [cst.SimpleStatementLine(body=_without_last_semicolon(list(body.body)))]
    else:
        return None
    first = statements[0]
    if isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        # Comments above the `with` stay above the code it held.
        statements[0] = first.with_changes(leading_lines=[*with_node.leading_lines, *first.leading_lines])
    return with_node, cst.FlattenSentinel(statements)


class AnomalyDetectionEnabled(Rule):
    """## What it does
    Flags `torch.autograd.set_detect_anomaly(True)` (also `mode=True`) and
    `with torch.autograd.detect_anomaly():` outside test files.

    ## Why it is slow
    Anomaly mode records a Python traceback for every operation of the forward pass and checks
    every gradient of the backward pass for NaN, which also forces a device sync per checked
    output. It is a debugging tool; left on in training it slows every step. The measured
    effect on an H100 is in the Measured section below.

    ## Fix safety
    Safe: the call statement is removed (a `pass` keeps an otherwise empty block valid), and a
    `with torch.autograd.detect_anomaly():` is replaced by its body, or loses only that item when
    it manages several. What the program computes is unchanged; only the error that anomaly
    mode raises on a NaN gradient goes away. A `with ... as name:` or an assigned call is reported
    without a fix.

    ## When it stays silent
    Test files (`test-file-patterns`); `set_detect_anomaly(False)` or a non-literal mode
    (`set_detect_anomaly(args.debug)`, a switch); calls guarded by an `if` (other than
    `if __name__ == "__main__":`) or a conditional expression, which turn it on deliberately;
    `check_nan=False` written out, which keeps anomaly mode for its tracebacks (PyTorch's own
    tracing uses it to tag graph nodes with their source line), a decision.
    """

    code = "TPL601"
    name = "anomaly-detection-enabled"
    summary = "Autograd anomaly detection left on"
    message = (
        "{what} records a traceback per op and checks every gradient for NaN; remove it outside debugging"
    )
    fix_safety = Safety.SAFE
    where = "outside test files"
    node_types = (cst.Call,)
    benchmark = "TPL601"

    BAD = {
        "set-detect-anomaly-at-module-level": """
            import torch

            torch.autograd.set_detect_anomaly(True)  # expect: TPL601

            def train(model, loader, optimizer):
                for x, y in loader:
                    model(x, y).backward()
                    optimizer.step()
            """,
        "detect-anomaly-with-around-step": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    # checked while the loss is unstable
                    with torch.autograd.detect_anomaly():  # expect: TPL601
                        loss = model(x, y)
                        loss.backward()
                    optimizer.step()
            """,
        "mode-keyword-through-import-in-function": """
            from torch.autograd import set_detect_anomaly

            def main():
                set_detect_anomaly(mode=True)  # expect: TPL601
            """,
        "one-item-of-several": """
            import torch
            from torch import autograd

            def step(model, x, log_path):
                with open(log_path, "a") as log, autograd.detect_anomaly(check_nan=True):  # expect: TPL601
                    loss = model(x)
                    log.write(str(loss.item()))
                    loss.backward()
            """,
        "set-detect-anomaly-as-context-manager": """
            import torch

            def step(model, x):
                with torch.autograd.set_detect_anomaly(True):  # expect: TPL601
                    model(x).sum().backward()
            """,
    }
    FIXED = {
        "set-detect-anomaly-at-module-level": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    model(x, y).backward()
                    optimizer.step()
            """,
        "detect-anomaly-with-around-step": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    # checked while the loss is unstable
                    loss = model(x, y)
                    loss.backward()
                    optimizer.step()
            """,
        "mode-keyword-through-import-in-function": """
            from torch.autograd import set_detect_anomaly

            def main():
                pass
            """,
        "one-item-of-several": """
            import torch
            from torch import autograd

            def step(model, x, log_path):
                with open(log_path, "a") as log:
                    loss = model(x)
                    log.write(str(loss.item()))
                    loss.backward()
            """,
        "set-detect-anomaly-as-context-manager": """
            import torch

            def step(model, x):
                model(x).sum().backward()
            """,
    }
    GOOD = {
        "turned-off": """
            import torch

            torch.autograd.set_detect_anomaly(False)
            torch.autograd.set_detect_anomaly(mode=False)
            """,
        "switch-from-the-command-line": """
            import argparse
            import torch

            args = argparse.ArgumentParser().parse_args()
            torch.autograd.set_detect_anomaly(args.detect_anomaly)
            if args.debug:
                torch.autograd.set_detect_anomaly(True)
            """,
        "conditional-context-manager": """
            import contextlib
            import torch

            def step(model, x, debug):
                with torch.autograd.detect_anomaly() if debug else contextlib.nullcontext():
                    model(x).sum().backward()
            """,
        "look-alike-from-another-library": """
            import torch
            from mylib.debug import set_detect_anomaly, detect_anomaly

            set_detect_anomaly(True)
            with detect_anomaly():
                pass
            """,
        "query-only": """
            import torch

            def report():
                return torch.is_anomaly_enabled()
            """,
        "tracebacks-without-nan-checks": """
            import torch

            def trace(fn, *args):
                with torch.autograd.detect_anomaly(check_nan=False):
                    return fn(*args)
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if ctx.is_test_file:
            return
        qualified = ctx.qualified_name(node)
        parent = ctx.parent(node)
        if qualified in _SET_DETECT_ANOMALY:
            if not _is_true(_first_argument(node, "mode")):
                return
            check_nan_arg = keyword(node, "check_nan")
            check_nan = check_nan_arg.value if check_nan_arg is not None else None
            what = "torch.autograd.set_detect_anomaly(True)"
        elif qualified in _DETECT_ANOMALY:
            if not (isinstance(parent, cst.WithItem) and parent.item is node):
                return  # constructing it enables nothing: only entering the `with` does
            check_nan = _first_argument(node, "check_nan")
            what = "torch.autograd.detect_anomaly()"
        else:
            return
        if check_nan is not None and not _is_true(check_nan):
            return  # kept for its tracebacks only (tracing tools tag graph nodes with them): a decision
        if _is_conditional(node, ctx):
            return
        found: Optional[tuple[cst.CSTNode, Replacement]] = None
        if isinstance(parent, cst.WithItem) and parent.item is node:
            found = _unwrap_with(parent, ctx)
        elif isinstance(parent, cst.Expr):
            found = _remove_statement(parent, ctx)
        fix = Fix.replace(*found, Safety.SAFE, "remove anomaly detection") if found else None
        yield self.report(node, reason=ctx.hot_reason(node), fix=fix, what=what)
