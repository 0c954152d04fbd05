"""Whether a loop's trip count grows with the data (RULES.md, TPL202/TPL203): outside hot code a
re-grown concatenation or a list of device values costs something only when the loop runs once per
batch, per sample or per row. A loop over a loader, a dataset, a collection named for what each
step or batch produces (`step_losses`, `val_batches`), the rows or pieces of a tensor, a range
counted by a tensor dimension or by a number that is not a small constant (`range(n)`), the files
found on disk (`glob.glob(...)`), or a `while` loop (it runs until the data says stop) is
data-sized. A handful of keyframes or reference latents walked once per call (`for frame in
keyframes:`, `range(3)`) is not: the items of a collection whose size nothing here tells run as
often as the caller made them, a few.
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from ..syntax.walker import dotted_name

IsTensor = Callable[[cst.BaseExpression], bool]
LoaderLabel = Callable[[cst.BaseExpression], Optional[str]]
IntValue = Callable[[cst.BaseExpression], Optional[int]]
BoundValues = Callable[[cst.Name], list[cst.BaseExpression]]

# More iterations than this is data, whatever spelled the count.
SMALL_COUNT = 16
# Calls that hand the items of their first argument to the loop (for this purpose).
_WRAPPERS = frozenset({"enumerate", "reversed", "list", "tuple", "sorted", "iter", "tqdm", "track"})
_PIECES = frozenset({"split", "chunk", "unbind", "tensor_split"})
# Files found on disk: shards, images, checkpoints of a data set, as many as the data has.
_LISTINGS = frozenset({"glob", "iglob", "rglob", "listdir", "iterdir", "scandir", "walk"})
_SIZES = frozenset({"numel", "nelement"})
# Collections named for what a run produces once per batch or per step: `step_losses`, `val_batches`
_DATA_WORDS = ("dataset", "loader", "step", "losses")


class TripCounts:
    def __init__(
        self, is_tensor: IsTensor, loader_label: LoaderLabel, int_value: IntValue, bound_values: BoundValues
    ) -> None:
        self._is_tensor = is_tensor
        self._loader_label = loader_label
        self._int_value = int_value
        self._bound_values = bound_values

    def loop(self, loop: cst.For | cst.While) -> Optional[str]:
        """What data `loop` walks, said for a reader ("train_loader", "range(n)"), or None."""
        if isinstance(loop, cst.While):
            return "a while loop"
        return self.iteration(loop.iter)

    def iteration(self, iterated: cst.BaseExpression, depth: int = 0) -> Optional[str]:
        """What data iterating `iterated` walks, or None for a handful or an unknown collection."""
        if isinstance(iterated, cst.Name) and depth < 3:
            # `progress = tqdm(range(n)) if verbose else iter(range(n))`, then `for i in progress:`
            for value in self._bound_values(iterated):
                for side in _if_sides(value):
                    found = self.iteration(side, depth + 1)
                    if found is not None:
                        return found
        if isinstance(iterated, cst.Call):
            func = dotted_name(iterated.func) or ""
            last = func.rsplit(".", 1)[-1]
            positional = [a.value for a in iterated.args if a.keyword is None and not a.star]
            if last in _WRAPPERS and positional:
                return self.iteration(positional[0])
            if last == "zip":
                return next(filter(None, map(self.iteration, positional)), None)
            if func == "range":
                return self._range(iterated, positional)
            if last in _LISTINGS:
                return f"the files of {func}()"
            if last in _PIECES and self._pieces_of_tensor(iterated, positional):
                return f"the pieces of {func}()"
        label = self._loader_label(iterated)
        if label is not None:
            return label
        name = (dotted_name(iterated) or "").rsplit(".", 1)[-1].lower()
        if any(word in name for word in _DATA_WORDS) or name.endswith("batches"):
            return dotted_name(iterated)
        if self._is_tensor(iterated):
            return f"the rows of {dotted_name(iterated) or 'a tensor'}"
        return None

    def _pieces_of_tensor(self, call: cst.Call, positional: list[cst.BaseExpression]) -> bool:
        """`x.split(k)`, `torch.chunk(x, n)`: the pieces of a tensor, as many as its rows allow."""
        func = call.func
        if isinstance(func, cst.Attribute) and self._is_tensor(func.value):
            return True
        return bool(positional) and self._is_tensor(positional[0])

    def _range(self, call: cst.Call, positional: list[cst.BaseExpression]) -> Optional[str]:
        if not 1 <= len(positional) <= 3 or len(positional) != len(call.args):
            return None
        values = [self._int_value(value) for value in positional]
        if all(v is not None for v in values):
            bounds = [v for v in values if v is not None]
            if len(bounds) == 3 and bounds[2] == 0:
                return None
            return "range()" if len(range(*bounds)) > SMALL_COUNT else None
        counted = positional[-1] if len(positional) < 3 else positional[1]
        if isinstance(counted, cst.BinaryOperation):  # `range(n - 1)`, `range(len(x) // 2)`
            counted = counted.left
        if _is_self_attribute(counted):
            return None  # configuration: `range(self.num_layers)` (analysis/configuration.py)
        measured = _measured(counted)
        if measured is not None:  # `len(x)`, `x.shape[0]`, `x.size(0)`: as many as x holds
            # only arrays have a shape: `x.size(0)` counts rows whatever x was passed as
            if self._is_tensor(measured) or not _is_len(counted):
                return f"a dimension of {dotted_name(measured) or 'a tensor'}"
            return self.iteration(measured)
        return f"range({dotted_name(counted) or '...'})"


def _if_sides(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(value, cst.IfExp):
        return [*_if_sides(value.body), *_if_sides(value.orelse)]
    return [value]


def _is_len(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "len"


def _measured(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x` of `len(x)`, `x.shape[d]`, `x.size(d)`, `x.numel()`."""
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Name) and func.value == "len" and len(expr.args) == 1:
            return expr.args[0].value
        if isinstance(func, cst.Attribute) and func.attr.value in ("size", *_SIZES):
            return func.value
        return None
    if (
        isinstance(expr, cst.Subscript)
        and isinstance(expr.value, cst.Attribute)
        and expr.value.attr.value == "shape"
    ):
        return expr.value.value
    return None


def _is_self_attribute(expr: cst.BaseExpression) -> bool:
    name = dotted_name(expr) if isinstance(expr, cst.Attribute) else None
    return name is not None and name.startswith("self.")
