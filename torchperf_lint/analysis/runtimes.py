"""Tensors handed to another framework's runtime: a module that runs an exported model (ONNX
Runtime, OpenVINO, OpenCV DNN, CoreML, TensorFlow) converts its input with `.cpu().numpy()` and
feeds the array to an object it holds (`self.session.run(..., {name: im})`, `self.net.setInput(im)`,
`self.model.predict({"image": Image.fromarray(im)})`). That copy is the runtime's input, not a
sync in the middle of torch work: nothing on the torch side can keep the value on the device.

An object the module holds is reached through `self`: `self.A.m(...)`, or `self.A(...)` where A
is none of the class's own methods nor a framework hook (`self.log`). A NumPy function
(`np.lexsort(x.cpu().numpy())`), a function of the project or an object of a class it defines
(`self.evaluator = Evaluator(n)`) is not another runtime: there the host copy feeds a host
algorithm the code could move to the device.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ..syntax.walker import FileFacts, descendants, dotted_name
from .hotpath import HotPaths
from .names import Names

# Methods a framework base gives `self` that take host values (Lightning's logging).
_FRAMEWORK_HOOKS = frozenset({"log", "log_dict", "print"})
# Tensor and array methods that keep a converted value what it is (`.numpy().astype(np.float32)`).
_CONVERSIONS = frozenset({"cpu", "numpy", "detach", "astype", "float", "half", "copy"})
# Methods of the lists, dicts and sets a module keeps values in (`self.preds.append(p)`).
_CONTAINER_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "put"})
_MAX_HOPS = 3  # names a value passes through (`im = Image.fromarray(im)`) before it is fed


class Runtimes:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot

    def fed_to_other_runtime(self, conversion: cst.Call) -> bool:
        """`conversion` (a `.cpu()`/`.numpy()` call) makes a value that some later statement of
        its block hands to an object the module holds, directly or through names bound from it."""
        value = self._converted(conversion)
        if not _makes_numpy(value):
            return False  # runtimes take NumPy arrays; a CPU tensor stays torch's
        parent = self._facts.parents.get(value)
        if isinstance(parent, cst.Arg):
            return self._feeds(value)
        return self._flows_into_runtime(value, _MAX_HOPS)

    def _converted(self, call: cst.Call) -> cst.BaseExpression:
        """The whole conversion chain `call` is part of: `im.cpu().numpy().astype(np.float32)`."""
        current: cst.BaseExpression = call
        while True:
            attribute = self._facts.parents.get(current)
            above = self._facts.parents.get(attribute) if attribute is not None else None
            if (
                isinstance(attribute, cst.Attribute)
                and attribute.value is current
                and attribute.attr.value in _CONVERSIONS
                and isinstance(above, cst.Call)
                and above.func is attribute
            ):
                current = above
            else:
                return current

    def _flows_into_runtime(self, value: cst.CSTNode, hops: int) -> bool:
        """`name = value` and a read of `name` in the statements after it in the same block is
        fed to a runtime, or bound to another name that is (`hops` more times)."""
        statement, block = self._statement_in_block(value)
        assign = self._facts.parents.get(value)
        if (
            hops == 0
            or statement is None
            or block is None
            or not isinstance(assign, cst.Assign)
            or len(assign.targets) != 1
            or not isinstance(assign.targets[0].target, cst.Name)
        ):
            return False
        name = assign.targets[0].target.value
        after = list(block.body)[list(block.body).index(statement) + 1 :]
        for following in after:
            for read in descendants(following):
                if not (isinstance(read, cst.Name) and read.value == name) or self._is_binding(read):
                    continue
                if self._feeds(read):
                    return True
                bound = self._bound_from(read)
                if bound is None or self._back_in_torch(bound):
                    continue  # `x = pack_padded_sequence(x, lengths)`: torch data again
                if self._flows_into_runtime(bound, hops - 1):
                    return True
            if any(
                self._is_binding(n) and n.value == name
                for n in descendants(following)
                if isinstance(n, cst.Name)
            ):
                return False  # rebound: later reads see another value
        return False

    def _feeds(self, expr: cst.CSTNode) -> bool:
        """`expr` is inside the arguments of a call of an object the module holds."""
        for ancestor in self._facts.ancestors(expr):
            if isinstance(ancestor, cst.BaseStatement):
                return False
            if isinstance(ancestor, cst.Call) and self._held_object_call(ancestor, expr):
                return True
        return False

    def _held_object_call(self, call: cst.Call, inner: cst.CSTNode) -> bool:
        if any(inner is node for node in descendants(call.func)):
            return False
        written = dotted_name(call.func) or ""
        parts = written.split(".")
        if len(parts) < 2 or parts[0] != "self":
            return False
        if len(parts) > 2:
            # self.session.run(...), self.net.setInput(...); not a container the module keeps, nor
            # an object of the project's own (deeplab-xception's `self.evaluator.add_batch(target,
            # pred)`: a host algorithm the project could run on the device)
            return parts[-1] not in _CONTAINER_METHODS and not self._holds_project_object(call, parts[1])
        attribute = parts[1]
        cls = self._hot.enclosing_class(call)
        methods = {m for c in self._hot.lineage(cls) for m in c.methods} if cls is not None else set()
        return attribute not in methods and attribute not in _FRAMEWORK_HOOKS

    def _holds_project_object(self, call: cst.Call, attribute: str) -> bool:
        """Every value the class sets `self.<attribute>` to builds an instance of a project class."""
        cls = self._hot.enclosing_class(call)
        values = self._hot.attribute_values(cls, attribute) if cls is not None else []
        built = self._hot.entry.project_classes
        return bool(values) and all(
            isinstance(v, cst.Call)
            and (dotted_name(v.func) in built or self._hot.local_class(v.func) is not None)
            for v in values
        )

    def _back_in_torch(self, value: cst.BaseExpression) -> bool:
        """`value` calls torch: what it makes is torch's, not the runtime's input."""
        return any(
            isinstance(n, cst.Call) and (self._names.qualified_name(n) or "").startswith("torch.")
            for n in [value, *descendants(value)]
        )

    def _bound_from(self, read: cst.Name) -> Optional[cst.BaseExpression]:
        """The value of `other = <... read ...>` that `read` is part of."""
        for ancestor in self._facts.ancestors(read):
            if isinstance(ancestor, cst.Assign):
                return ancestor.value if len(ancestor.targets) == 1 else None
            if isinstance(ancestor, cst.BaseStatement):
                return None
        return None

    def _statement_in_block(
        self, value: cst.CSTNode
    ) -> tuple[Optional[cst.BaseStatement], Optional[cst.IndentedBlock | cst.Module]]:
        """The statement holding `value` and the block (or module) it belongs to."""
        for ancestor in self._facts.ancestors(value):
            if isinstance(ancestor, cst.BaseStatement):
                block = self._facts.parents.get(ancestor)
                if isinstance(block, (cst.IndentedBlock, cst.Module)):
                    return ancestor, block
                return None, None
        return None, None

    def _is_binding(self, name: cst.Name) -> bool:
        parent = self._facts.parents.get(name)
        return isinstance(parent, cst.AssignTarget) and parent.target is name


def _makes_numpy(value: cst.BaseExpression) -> bool:
    """The conversion chain `value` ends in a NumPy array: it calls `.numpy()`."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value == "numpy":
            return True
        value = value.func.value
    return False
