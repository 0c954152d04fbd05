"""Where an assert on tensor values costs a step nothing, or is a function's contract with its caller
(TPL104's precise form, RULES.md "Defaults follow evidence").

- The function reads the same tensor on the host anyway (`.tolist()`, `.item()`, `int()` of it, a
  size or slice bound, an `if` on it) on every path that runs the assert: the host waits for that
  value once per call whatever the assert does.
- The assert sits outside a loop of its own function that runs a model per iteration: a generation
  function's checks after its token loop run once per many model calls. Not in `forward` or a step
  hook, whose loops (over layers, over experts) run inside one step.
- The assert validates the caller's arguments and tells the caller what was wrong (a message): an
  entry's contract, kept deliberately, not a check computed inside the step.

"Same tensor" means the same sources: names are followed back through the function's assignments to
its parameters, the attributes of `self` that hold tensors, and the loop or `with` targets it binds.
Shapes, dtypes and other Python values on the way are not sources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from ...syntax.walker import children
from .common import condition_parts, host_sync, on_device, on_error_path, scalar_read

if TYPE_CHECKING:
    from ...engine.context import Context

# What reads a Python value off a tensor, never its elements: not a source of the values compared.
_PYTHON_ATTRIBUTES = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad", "layout"})
_PYTHON_METHODS = frozenset({"size", "dim", "numel", "nelement", "stride", "get_device", "is_contiguous"})
_PYTHON_BUILTINS = frozenset({"builtins.len", "builtins.isinstance", "builtins.type", "builtins.id"})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_SOURCE_LIMIT = 500  # nodes visited per expression: a bound on pathological functions
SELF = "self"


def _self_chain(node: cst.Attribute) -> Optional[str]:
    """`self.a.b` as a dotted string, or None when the chain does not start at `self`."""
    parts = [node.attr.value]
    value = node.value
    while isinstance(value, cst.Attribute):
        parts.append(value.attr.value)
        value = value.value
    if isinstance(value, cst.Name) and value.value == SELF:
        return ".".join([SELF, *reversed(parts)])
    return None


def _reads_python_value(call: cst.Call, ctx: Context) -> bool:
    """`x.size(0)`, `len(x)`: a Python value read off a tensor, never its elements."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in _PYTHON_METHODS:
        return True
    return ctx.qualified_name(call) in _PYTHON_BUILTINS


def _operands(call: cst.Call) -> list[cst.BaseExpression]:
    """What a call computes from: the receiver of a method (a module's name leads nowhere) and
    its arguments."""
    receiver = [call.func.value] if isinstance(call.func, cst.Attribute) else []
    return [*receiver, *(arg.value for arg in call.args)]


def sources(
    expr: cst.BaseExpression,
    function: cst.FunctionDef,
    ctx: Context,
    computed: Optional[list[cst.Call]] = None,
) -> set[str]:
    """The names whose values `expr` computes from, within `function`: its parameters (by name),
    `self.<attr>` tensors, entries of a container under a literal key (`batch["mask"]`), and locals
    bound by unpacking, a loop, `with` or comprehension (`local:<name>`).
    `computed` collects the calls on the way that are neither torch functions nor tensor methods (a
    layer, a helper): where the value is computed, not passed in."""
    found: set[str] = set()
    seen: set[str] = set()
    stack: list[cst.CSTNode] = [expr]
    visited = 0
    while stack and visited < _SOURCE_LIMIT:
        node = stack.pop()
        visited += 1
        if isinstance(node, cst.Attribute):
            if node.attr.value in _PYTHON_ATTRIBUTES:
                continue
            chain = _self_chain(node)
            if chain is not None:
                if ctx.is_tensor(node):
                    found.add(chain)
                continue
            stack.append(node.value)
        elif isinstance(node, cst.Call):
            if _reads_python_value(node, ctx):
                continue
            if computed is not None and _computes(node, ctx):
                computed.append(node)
            stack.extend(_operands(node))
        elif isinstance(node, cst.Subscript) and _keyed(node) is not None:
            found.add(_keyed(node) or "")  # `batch["mask"]`: one entry of a container, not all of it
        elif isinstance(node, cst.Name):
            if node.value in seen or node.value == SELF:
                continue
            seen.add(node.value)
            stack.extend(_bound_values(node, function, ctx, found))
        elif isinstance(node, (cst.Lambda, cst.FunctionDef)):
            continue
        else:
            stack.extend(child for child in children(node))
    return found


def _keyed(subscript: cst.Subscript) -> Optional[str]:
    """`name["key"]` as `name["key"]`, or None for another subscript."""
    if not isinstance(subscript.value, cst.Name) or len(subscript.slice) != 1:
        return None
    index = subscript.slice[0].slice
    if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
        return f"{subscript.value.value}[{index.value.value}]"
    return None


def _computes(call: cst.Call, ctx: Context) -> bool:
    """A call that is neither a torch function nor a method of a tensor: a layer, a helper."""
    if (ctx.qualified_name(call) or "").startswith("torch."):
        return False
    func = call.func
    return not (isinstance(func, cst.Attribute) and ctx.is_tensor(func.value))


def _bound_values(
    name: cst.Name, function: cst.FunctionDef, ctx: Context, found: set[str]
) -> list[cst.CSTNode]:
    """The values `name` is bound to in `function` (recording a parameter or a loop target in `found`);
    a global or an import is no source."""
    values: list[cst.CSTNode] = []
    for binding in ctx.bindings(name.value, name):
        if not _inside(binding.node, function, ctx):
            continue
        if binding.kind == "param":
            found.add(name.value)
        elif binding.kind == "assign":
            values.append(binding.node)
        elif binding.kind == "augassign" and isinstance(binding.node, cst.AugAssign):
            values.append(binding.node.value)
        elif binding.kind in ("unpack", "for", "compfor", "with"):
            found.add(f"local:{name.value}")  # one part of what it unpacks, not all of it
    return values


def _inside(node: cst.CSTNode, function: cst.FunctionDef, ctx: Context) -> bool:
    return node is function or any(a is function for a in ctx.ancestors(node))


def _conditional_parents(node: cst.CSTNode, function: cst.FunctionDef, ctx: Context) -> Iterator[cst.CSTNode]:
    """The statements and expressions between `node` and `function` that may skip it: branches,
    loop bodies (which may run no time), `except`/`else` of a `try`, the right of `and`/`or`."""
    child = node
    for parent in ctx.ancestors(node):
        if parent is function:
            return
        if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test:
            yield child  # the branch, not the `if`: the assert may sit in its other branch
        elif isinstance(parent, (cst.For, cst.While)) and child in (parent.body, parent.orelse):
            yield child
        elif isinstance(parent, cst.Try) and child is not parent.body and child is not parent.finalbody:
            yield child
        elif isinstance(parent, cst.BooleanOperation) and child is parent.right:
            yield child
        elif isinstance(parent, _COMPREHENSIONS):
            yield parent
        child = parent


def _read_tensors(node: cst.CSTNode, ctx: Context) -> list[cst.BaseExpression]:
    """The device tensors `node` copies to the host: the receiver of `.item()`/`.tolist()`, the
    argument of `int()`, a 0-dim tensor used as a size or slice bound, the operands an `if` decides on."""
    if isinstance(node, cst.Call):
        sync = host_sync(node, ctx)
        if sync is not None and sync != "print() of a tensor":
            func = node.func
            if isinstance(func, cst.Attribute) and sync.startswith("."):
                return [func.value]
            return [node.args[0].value] if node.args else []
    scalar = scalar_read(node, ctx)
    if scalar is not None:
        return [scalar]
    if isinstance(node, (cst.If, cst.While)):
        return [part for part in condition_parts(node.test, ctx) if on_device(part, ctx, certain=True)]
    return []


def syncs_anyway(node: cst.Assert, ctx: Context) -> Optional[cst.CSTNode]:
    """A host read in the assert's function, on every path that runs the assert, of a tensor with a
    source in common with the assert's test: the read that makes the host wait anyway."""
    function = ctx.enclosing_function(node)
    if function is None:
        return None
    tested = sources(node.test, function, ctx)
    if not tested:
        return None
    around = {id(a) for a in ctx.ancestors(node)}
    for read in _function_nodes(function):
        tensors = _read_tensors(read, ctx)
        if not tensors or on_error_path(read, ctx) or ctx.enclosing_function(read) is not function:
            continue
        if any(id(p) not in around for p in _conditional_parents(read, function, ctx)):
            continue  # a branch or a loop body the assert's path may skip
        if any(tested & sources(tensor, function, ctx) for tensor in tensors):
            return read
    return None


def _function_nodes(function: cst.FunctionDef) -> Iterator[cst.CSTNode]:
    """The calls, subscripts and `if`/`while` statements of `function`'s own body (not of a function,
    class or lambda defined in it)."""
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(node, (cst.Call, cst.Subscript, cst.If, cst.While)):
            yield node
        stack.extend(children(node))


def outside_own_loop(node: cst.Assert, ctx: Context) -> Optional[cst.CSTNode]:
    """The loop of the assert's own function that runs a model per iteration (a step, inference or
    token loop: project/graph.py, model_loops) and does not hold the assert; None in forward or a
    step hook and what they call, where such loops run inside one step."""
    function = ctx.enclosing_function(node)
    reason = ctx.hot_reason(node)
    if function is None or reason is None or reason.from_model_code:
        return None
    loops = ctx.facts.loops
    candidates = [loops[i] for i in sorted(ctx.entry.model_loops) if i < len(loops)]
    candidates += [*ctx.hot.step_loops, *ctx.hot.inference_loops]
    around = {id(a) for a in ctx.ancestors(node)}
    for loop in candidates:
        if id(loop) not in around and ctx.enclosing_function(loop) is function:
            return loop
    return None


def validates_arguments(node: cst.Assert, ctx: Context) -> bool:
    """An assert with a message whose tensors are the function's parameters, as passed or rebound
    to a normalised form of themselves by torch functions and tensor methods (`tokens =
    tokens.masked_fill(~mask, 0)`): an entry's contract. A new name (`y = x.softmax(-1)`) or a layer
    or helper on the way is a value the function computes."""
    function = ctx.enclosing_function(node)
    if node.msg is None or function is None:
        return False
    parameters = {
        p.name.value
        for p in (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params)
    }
    parameters.discard(SELF)
    names = _tested_names(node.test, ctx)
    return bool(names) and all(_as_passed(name, parameters, function, ctx) for name in names)


def _tested_names(test: cst.BaseExpression, ctx: Context) -> list[cst.Name]:
    """The names whose tensor values `test` reads (not through `.shape`, `len()`, `self.<layer>`)."""
    names: list[cst.Name] = []
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute):
            if node.attr.value not in _PYTHON_ATTRIBUTES and _self_chain(node) is None:
                stack.append(node.value)
        elif isinstance(node, cst.Call):
            if not _reads_python_value(node, ctx):
                stack.extend(_operands(node))
        elif isinstance(node, cst.Name):
            if node.value != SELF and ctx.qualified_name(node) is None:
                names.append(node)
        elif not isinstance(node, (cst.Lambda, cst.FunctionDef)):
            stack.extend(children(node))
    return names


def _as_passed(name: cst.Name, parameters: set[str], function: cst.FunctionDef, ctx: Context) -> bool:
    if name.value not in parameters:
        return False
    for binding in ctx.bindings(name.value, name):
        if binding.kind == "param" or not _inside(binding.node, function, ctx):
            continue
        if binding.kind != "assign" or not isinstance(binding.node, cst.BaseExpression):
            return False
        computed: list[cst.Call] = []
        if name.value not in sources(binding.node, function, ctx, computed) or computed:
            return False
    return True
