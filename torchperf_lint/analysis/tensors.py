"""Light, local tensor inference (RULES.md, "Tensor and device inference").

No type checker: an expression is a tensor when it is built by torch, by a tensor method, by
arithmetic on a tensor, or is a name bound to one of those, a `Tensor`-annotated parameter, a
plain parameter (no default, no other annotation) of `forward` or of a hot function, a
DataLoader loop target, or the result of calling a module (`self.fc(x)`, `model(x)`).
Results of torch calls, tensor methods and tensor arithmetic are *certain*; parameters, loop
targets and module calls are only *likely*.
"""

from __future__ import annotations

import enum
import functools
import re
from typing import Optional

import libcst as cst

from ..syntax.ast_view import as_ast
from ..syntax.walker import Binding, FileFacts, bound_value, dotted_name, returned_values, visit
from .cold import enumerate_counter
from .dict_items import DictItems, mapping_values, summed_values, walked_mapping
from .hotpath import HotPaths
from .names import Names, annotated_parameter
from .parameters import ParameterSequences
from .unpacked_items import drawn_path


class Tensorness(enum.IntEnum):
    NO = 0
    LIKELY = 1
    CERTAIN = 2


# torch.<name> callables that return something other than a tensor.
_NOT_TENSOR_FUNCTIONS = frozenset(
    """device dtype no_grad enable_grad inference_mode set_grad_enabled is_grad_enabled
    is_tensor is_storage is_floating_point is_complex is_nonzero numel manual_seed seed
    initial_seed save load compile get_default_dtype set_default_dtype set_default_device
    set_printoptions use_deterministic_algorithms set_float32_matmul_precision
    get_float32_matmul_precision allclose equal typename set_num_threads get_num_threads
    autocast result_type promote_types can_cast finfo iinfo split chunk unbind meshgrid
    broadcast_tensors set_rng_state is_inference_mode_enabled""".split()
)
# Predicates, getters and setters of global state: torch.are_deterministic_algorithms_enabled()...
_NOT_TENSOR_PREFIXES = ("is_", "are_", "get_", "set_")
_TENSOR_NAMESPACES = ("torch.nn.functional.", "torch.fft.", "torch.linalg.", "torch.special.")
# Tensor methods whose result is not a tensor.
NON_TENSOR_METHODS = frozenset(
    """size dim numel item tolist nelement ndimension element_size stride data_ptr get_device
    storage_offset is_contiguous is_floating_point is_complex equal numpy backward
    register_hook untyped_storage storage is_pinned is_shared is_set_to
    append extend keys items values get split chunk unbind""".split()
)
# Tensor methods common enough that their result is certainly a tensor when the receiver is one.
TENSOR_METHODS = frozenset(
    """sum mean max min amax amin any all abs exp log sqrt pow float half double bfloat16 long
    int bool to cuda cpu clone detach contiguous view reshape flatten squeeze unsqueeze permute
    transpose t softmax log_softmax sigmoid tanh relu argmax argmin norm matmul mm bmm gather
    isnan isinf isfinite eq ne lt le gt ge logical_and logical_or logical_not masked_fill
    expand expand_as repeat type_as new_zeros new_ones new_full new_empty nonzero sort topk
    cumsum prod std var clamp floor ceil round sign neg square mul add sub div""".split()
)
# Collectives of a process group's helper (Accelerate) that return what they are handed,
# gathered or reduced over the processes: a tensor for a tensor.
_GATHERING = frozenset({"gather", "gather_for_metrics", "reduce", "pad_across_processes"})
# Tensor methods that hand the values to the host: a NumPy array, a list or a number.
_HOST_READS = frozenset({"numpy", "tolist", "item"})
NON_TENSOR_ATTRIBUTES = frozenset(
    """shape dtype device ndim is_cuda requires_grad layout names is_leaf grad_fn itemsize
    nbytes""".split()
)
TENSOR_ATTRIBUTES = frozenset("T mT H mH data grad real imag".split())
_NOT_TENSOR_COMPARISONS = (cst.Is, cst.IsNot, cst.In, cst.NotIn)
# Annotations of sequences: `images: list[Tensor]` holds one tensor per image, of its own size.
_SEQUENCE_ANNOTATIONS = frozenset("list List tuple Tuple Sequence MutableSequence".split())
# Containers that hold modules only.
_MODULE_CONTAINERS = frozenset(
    {
        "torch.nn.ModuleDict",
        "torch.nn.ModuleList",
        "torch.nn.Sequential",
        "torch.nn.modules.container.ModuleDict",
        "torch.nn.modules.container.ModuleList",
        "torch.nn.modules.container.Sequential",
    }
)
# Names people give to models and losses: calling one yields a tensor.
_MODULE_NAME = re.compile(
    r"^(model|net|network|criterion|loss_fn|loss_func|encoder|decoder|module)$|_model$|_net$"
)


# Functions outside torch's tensor namespaces that return a tensor: the total norm that gradient
# clipping hands back lives on the gradients' device (`grad_norm = clip_grad_norm_(...)`).
_TENSOR_UTILITIES = frozenset(
    """torch.nn.utils.clip_grad_norm_ torch.nn.utils.clip_grad.clip_grad_norm_
    torch.nn.utils.clip_grad_norm torch.nn.utils.get_total_norm torch.nn.utils.clip_grad.get_total_norm
    torch.nn.utils.parameters_to_vector torch.nn.utils.convert_parameters.parameters_to_vector""".split()
)


def is_torch_tensor_function(qualified: str) -> bool:
    """`torch.zeros`, `torch.nn.functional.relu`, `torch.FloatTensor`, `clip_grad_norm_`... but not
    `torch.device`."""
    if qualified.startswith(_TENSOR_NAMESPACES) or qualified in _TENSOR_UTILITIES:
        return True
    if not qualified.startswith("torch."):
        return False
    name = qualified[len("torch.") :]
    if "." in name:
        return False
    if name[:1].isupper():
        return name.endswith("Tensor")
    if name.startswith(_NOT_TENSOR_PREFIXES) and name != "get_rng_state":
        return False  # torch.is_autocast_enabled(), torch.get_default_device()...
    return name not in _NOT_TENSOR_FUNCTIONS


class TensorInference:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot
        self._memo: dict[cst.CSTNode, Tensorness] = {}
        self._in_progress: set[cst.CSTNode] = set()
        self._assumed: set[cst.CSTNode] = set()
        self._provisional: dict[cst.CSTNode, Tensorness] = {}
        self._strings: dict[cst.FunctionDef, frozenset[str]] = {}
        self.parameters = ParameterSequences(names, hot)
        self.dict_items = DictItems(names, hot.entry.handed_back)

    def infer(self, expr: cst.BaseExpression) -> Tensorness:
        cached = self._memo.get(expr)
        if cached is None:
            cached = self._provisional.get(expr)
        if cached is not None:
            return cached
        if expr in self._in_progress:
            self._assumed.add(expr)  # a cycle (a name read round a loop): assumed not a tensor
            return Tensorness.NO
        self._in_progress.add(expr)
        try:
            result = self._infer(expr)
        finally:
            self._in_progress.discard(expr)
        self._assumed.discard(expr)
        # an answer that leant on an assumption about a question still open is kept only until
        # the outermost question is answered: kept longer, later answers would depend on which
        # question was asked first
        if self._assumed:
            self._provisional[expr] = result
        else:
            self._memo[expr] = result
        if not self._in_progress:
            self._provisional.clear()
        return result

    def _infer(self, expr: cst.BaseExpression) -> Tensorness:
        if isinstance(expr, cst.Name):
            return self._name(expr)
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.Attribute):
            attr = expr.attr.value
            if attr in TENSOR_ATTRIBUTES:
                return self.infer(expr.value)
            if isinstance(expr.value, cst.Name) and expr.value.value == "self":
                return self._self_attribute(expr)
            return Tensorness.NO
        if isinstance(expr, cst.Subscript):
            if isinstance(expr.value, cst.Attribute) and expr.value.attr.value in (NON_TENSOR_ATTRIBUTES):
                return Tensorness.NO
            if self.parameters.is_tensor_mapping(expr.value):
                return Tensorness.LIKELY  # `shadow[name]` of `shadow = dict(ema.named_buffers())`
            stored = self.dict_items.values(expr)
            if stored is not None:  # `losses["d"]` of `losses = {}` after `losses["d"] = d_loss`
                return self._joined([self.infer(v) for v in stored])
            if isinstance(expr.value, cst.Name):
                # a value that is not a Tensor may hold tensors: `edge_index[0]` of a tuple
                return self._name(expr.value, narrow=False)
            return self.infer(expr.value)
        if isinstance(expr, cst.BinaryOperation):
            if is_string_formatting(expr):
                return Tensorness.NO  # `"loss %.3f" % loss` is a str
            return max(self.infer(expr.left), self.infer(expr.right))
        if isinstance(expr, cst.UnaryOperation):
            if isinstance(expr.operator, cst.Not):
                return Tensorness.NO
            return self.infer(expr.expression)
        if isinstance(expr, cst.Comparison):
            if any(isinstance(t.operator, _NOT_TENSOR_COMPARISONS) for t in expr.comparisons):
                return Tensorness.NO
            levels = [self.infer(expr.left)] + [self.infer(t.comparator) for t in expr.comparisons]
            return max(levels)
        if isinstance(expr, cst.IfExp):
            return min(self.infer(expr.body), self.infer(expr.orelse))
        return Tensorness.NO

    def _call(self, call: cst.Call) -> Tensorness:
        qualified = self._names.qualified_name(call)
        if qualified is not None:
            if is_torch_tensor_function(qualified):
                # private helpers are internal, and some return bools (torch._use_cudnn_rnn_flatten_weight)
                return Tensorness.LIKELY if qualified.startswith("torch._") else Tensorness.CERTAIN
            return self._summed(call) if qualified == "builtins.sum" else Tensorness.NO
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in NON_TENSOR_METHODS:
                return Tensorness.NO
            receiver = self.infer(func.value)
            if receiver >= Tensorness.LIKELY:
                return Tensorness.CERTAIN if method in TENSOR_METHODS else Tensorness.LIKELY
            if method in _GATHERING and call.args and call.args[0].keyword is None:
                # `accelerator.gather(losses)`: the processes' tensors, gathered, are one
                return Tensorness.LIKELY if self.infer(call.args[0].value) else Tensorness.NO
        if self.is_module_value(func) and not self._given_numpy(call):
            return Tensorness.LIKELY  # a model or loss call; may return a tuple
        return Tensorness.NO

    def _given_numpy(self, call: cst.Call) -> bool:
        """An argument is a NumPy array made by `.numpy()`: torch modules take tensors, so the
        callee is another framework's model (an exported TensorFlow model fed `im.cpu().numpy()`)
        and what it returns is that framework's."""
        return any(self._numpy_array(arg.value) for arg in call.args)

    def _numpy_array(self, expr: cst.BaseExpression) -> bool:
        while (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ("astype", "copy")
        ):
            expr = expr.func.value
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            return expr.func.attr.value == "numpy" and not expr.args
        if isinstance(expr, cst.Name):
            bindings = self._names.reaching(expr)
            return bool(bindings) and all(
                b.kind == "assign" and isinstance(b.node, cst.BaseExpression) and self._numpy_array(b.node)
                for b in bindings
            )
        return False

    def is_computed(self, expr: cst.BaseExpression, seen: frozenset[cst.CSTNode] = frozenset()) -> bool:
        """A tensor the code computes: a certain one (a torch result, a tensor method's), the
        output of a model or loss call (`loss = criterion(out, y)`), or a part of one, through
        names bound only to those. Not a value that is a tensor only if a parameter or a loop
        target is one (`unet_number - 1`, `dt[-1]`)."""
        if expr in seen:
            return False
        seen = seen | {expr}
        if self.infer(expr) >= Tensorness.CERTAIN:
            return True
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value not in NON_TENSOR_METHODS:
                if self.is_computed(func.value, seen):
                    return True
            return self.is_module_value(func) and not self._given_numpy(expr)
        if isinstance(expr, (cst.Subscript, cst.Attribute)):
            if isinstance(expr, cst.Attribute) and expr.attr.value not in TENSOR_ATTRIBUTES:
                return False
            return self.infer(expr) >= Tensorness.LIKELY and self.is_computed(expr.value, seen)
        if isinstance(expr, cst.BinaryOperation):
            return self.is_computed(expr.left, seen) or self.is_computed(expr.right, seen)
        if isinstance(expr, cst.Name):
            values = [b.node for b in self._names.reaching(expr)]
            return bool(values) and all(
                isinstance(v, cst.BaseExpression) and self.is_computed(v, seen) for v in values
            )
        return False

    def is_module_value(self, expr: cst.BaseExpression) -> bool:
        """`expr` holds an nn.Module: `self.fc` set to `nn.Linear(...)`, `model = Net()`, or a
        name that says so (`model`, `net`, `criterion`...)."""
        last = (dotted_name(expr) or "").rsplit(".", 1)[-1].lower()
        if _MODULE_NAME.search(last):
            return True
        if isinstance(expr, cst.Name) and (self._module_parameter(expr) or self._walks_modules(expr)):
            return True
        if isinstance(expr, (cst.Attribute, cst.Subscript)) and self._module_container(expr.value):
            return True  # `self.transformer.ln_f` of `self.transformer = nn.ModuleDict(...)`
        return any(self._constructs_module(v) for v in self._assigned_values(expr))

    def _module_container(self, expr: cst.BaseExpression) -> bool:
        """`expr` is set, wherever it is set, to an nn.ModuleDict, ModuleList or Sequential:
        whatever it holds is a module."""
        values = self._assigned_values(expr)
        return bool(values) and all(
            isinstance(v, cst.Call) and self._names.qualified_name(v) in _MODULE_CONTAINERS for v in values
        )

    def _walks_modules(self, name: cst.Name) -> bool:
        """`name` is bound only as the target of loops over a module (`for block in
        self.transformer.h:`): only containers are iterable, and a ModuleList or Sequential yields
        its modules."""
        bindings = self._names.lookup(name.value, name)
        return bool(bindings) and all(
            b.kind == "for"
            and isinstance(b.node, cst.For)
            and isinstance(b.node.target, cst.Name)
            and self.is_module_value(b.node.iter)
            and not self._module_dict(b.node.iter)
            for b in bindings
        )

    def _module_dict(self, expr: cst.BaseExpression) -> bool:
        """`expr` may be an nn.ModuleDict, which yields its keys (either spelling of the class
        `_MODULE_CONTAINERS` accepts)."""
        for value in self._assigned_values(expr):
            qualified = self._names.qualified_name(value) if isinstance(value, cst.Call) else None
            if qualified in _MODULE_CONTAINERS and qualified.endswith(".ModuleDict"):
                return True
        return False

    def _module_parameter(self, name: cst.Name) -> bool:
        """A parameter, never rebound, that every project call passes a model for
        (EntryFacts.module_parameters: `train(args, generator, discriminator)`)."""
        bindings = self._names.lookup(name.value, name)
        if len(bindings) != 1 or bindings[0].kind != "param":
            return False
        function = bindings[0].scope.node
        return isinstance(function, cst.FunctionDef) and self._hot.is_module_parameter(function, name.value)

    def runs_own_call(self, expr: cst.BaseExpression) -> bool:
        """`expr` holds, wherever it is set, an instance of a project class with a `__call__` of
        its own (EntryFacts.own_call_classes): calling it runs that method, not a forward."""
        built = [
            v for v in self._assigned_values(expr) if not (isinstance(v, cst.Name) and v.value == "None")
        ]
        return bool(built) and all(
            isinstance(v, cst.Call) and dotted_name(v.func) in self._hot.entry.own_call_classes for v in built
        )

    def _assigned_values(self, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
        """What `self.attr` is set to in its class, or a name in its scope."""
        if isinstance(expr, cst.Attribute) and dotted_name(expr.value) == "self":
            cls = self._hot.enclosing_class(expr)
            return self._hot.attribute_values(cls, expr.attr.value) if cls is not None else []
        if isinstance(expr, cst.Name):
            return [
                b.node
                for b in self._names.lookup(expr.value, expr)
                if b.kind == "assign" and isinstance(b.node, cst.BaseExpression)
            ]
        return []

    def _constructs_module(self, value: cst.BaseExpression) -> bool:
        cls = self._hot.instance_class(value)
        if cls is not None:
            return self._hot.is_module_class(cls)
        # `nn.Linear(...).cuda()`, `Net().to(device)`: the module is the call the chain starts from
        while (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and isinstance(value.func.value, cst.Call)
        ):
            value = value.func.value
        if not isinstance(value, cst.Call):
            return False
        qualified = self._names.qualified_name(value) or ""
        last = qualified.rsplit(".", 1)[-1]
        return qualified.startswith("torch.nn.") and last[:1].isupper()

    def _self_attribute(self, expr: cst.Attribute) -> Tensorness:
        cls = self._hot.enclosing_class(expr)
        if cls is None:
            return Tensorness.NO
        values = self._hot.attribute_values(cls, expr.attr.value)
        registered = self._hot.registered_values(cls, expr.attr.value)
        if (
            registered
            and all(v is not None and self.infer(v) >= Tensorness.CERTAIN for v in registered)
            and all(self.infer(v) >= Tensorness.LIKELY for v in values)
        ):
            # a buffer registered from a tensor (MoCo's `queue_ptr`): assigning it anything but a
            # tensor or None raises
            return Tensorness.CERTAIN
        # what the class's own stores give it, joined: certain where every one is certain
        # (nerf_pl's `self.freq_bands = 2 ** torch.linspace(...)` on either side of a flag)
        levels = [self.infer(v) for v in values]
        return self._joined(levels) if levels and all(levels) else Tensorness.NO

    def _name(self, name: cst.Name, narrow: bool = True) -> Tensorness:
        bindings = self._names.lookup(name.value, name)
        if not bindings or (narrow and (self._narrowed_to_non_tensor(name) or self._handed_to_numpy(name))):
            return Tensorness.NO
        if narrow and self._rebound_to_host_values(name):
            return Tensorness.NO
        return self._joined([self._binding(b, name.value) for b in bindings])

    @staticmethod
    def _joined(levels: list[Tensorness]) -> Tensorness:
        """What a value that may be any of these holds: certain where all are."""
        if levels and all(level == Tensorness.CERTAIN for level in levels):
            return Tensorness.CERTAIN
        return Tensorness.LIKELY if any(levels) else Tensorness.NO

    def _rebound_to_host_values(self, name: cst.Name) -> bool:
        """Every binding that reaches `name` makes a host value: a NumPy array (`np.stack(...)`,
        `t.cpu().numpy()`), a list or a number read off a tensor (`.tolist()`, `.item()`), or the
        result of a function of this file that returns one on every path but its error handlers
        (`to_numpy(labels)`). The tensor a parameter held before no longer reaches it."""
        reaching = self._names.reaching(name)
        return all(
            b.kind == "assign" and isinstance(b.node, cst.BaseExpression) and self._host_value(b.node)
            for b in reaching
        )

    def _host_value(self, expr: cst.BaseExpression, seen: frozenset[cst.FunctionDef] = frozenset()) -> bool:
        if not isinstance(expr, cst.Call):
            return False
        if (self._names.qualified_name(expr) or "").startswith("numpy."):
            return True
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _HOST_READS:
            return True
        functions = self._hot.resolve_call(expr)
        if len(functions) != 1 or functions[0] in seen:
            return False
        function = functions[0]
        values, yields = returned_values(function)
        values = [v for v in values if not self._in_error_handler(v, function)]
        return not yields and bool(values) and all(self._host_value(v, seen | {function}) for v in values)

    def _in_error_handler(self, node: cst.CSTNode, function: cst.FunctionDef) -> bool:
        """`node` sits in an `except` block of `function` (`except AttributeError: return v`, the
        fallback for a value that is no tensor)."""
        current = self._facts.parents.get(node)
        while current is not None and current is not function:
            if isinstance(current, cst.ExceptHandler):
                return True
            current = self._facts.parents.get(current)
        return False

    def _narrowed_to_non_tensor(self, name: cst.Name) -> bool:
        """`name` is read where an `isinstance(name, torch.Tensor)` test has failed: the else
        branch of `if isinstance(x, Tensor):` (or the body of `if not isinstance(...)`), and the
        same for `a if isinstance(x, Tensor) else b`. The NumPy or list branch of a helper that
        takes either is not tensor code."""
        child: cst.CSTNode = name
        parent = self._facts.parents.get(child)
        while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.Lambda)):
            if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test:
                test_holds = _isinstance_tensor_test(parent.test, name.value, self._names)
                if test_holds is not None and (child is parent.orelse) == test_holds:
                    return True
            child, parent = parent, self._facts.parents.get(parent)
        return False

    def _handed_to_numpy(self, name: cst.Name) -> bool:
        """`name`'s value, indexed or chosen by an if-expression but not converted, is an
        argument of a NumPy function: swinir's `np.transpose(img if c else img[:, :, [2, 1, 0]],
        ...)`. NumPy raises on a CUDA tensor, so where the code runs the value is on the host."""
        child: cst.CSTNode = name
        parent = self._facts.parents.get(child)
        while isinstance(parent, (cst.Subscript, cst.IfExp)):
            if (isinstance(parent, cst.Subscript) and child is not parent.value) or (
                isinstance(parent, cst.IfExp) and child is parent.test
            ):
                return False
            child, parent = parent, self._facts.parents.get(parent)
        if not isinstance(parent, cst.Arg) or parent.star:
            return False
        call = self._facts.parents.get(parent)
        return isinstance(call, cst.Call) and (self._names.qualified_name(call) or "").startswith("numpy.")

    @functools.cached_property
    def _backpropagated(self) -> frozenset[Binding]:
        """The bindings that reach a `name.backward()`: whatever produced it (a loss read out of
        a dict a project method returned), a value the code back-propagates is a tensor."""
        found: set[Binding] = set()
        for call in self._facts.method_calls.get("backward", ()):
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            first = call.args[0] if call.args else None
            if first is not None and first.keyword is None and not first.star:
                # `accelerator.backward(loss)`, `torch.autograd.backward(loss)`: the loss is
                # handed over (and `loss.backward(gradient)`'s gradient is a tensor too)
                receiver = first.value
            # `accelerator.backward(losses.mean())`: what a tensor method reduces is a tensor
            while (
                isinstance(receiver, cst.Call)
                and isinstance(receiver.func, cst.Attribute)
                and receiver.func.attr.value in TENSOR_METHODS
            ):
                receiver = receiver.func.value
            if isinstance(receiver, cst.Name):
                found.update(self._names.reaching(receiver))
        return frozenset(found)

    def _binding(self, binding: Binding, name: str) -> Tensorness:
        if binding in self._backpropagated:
            return Tensorness.CERTAIN
        node = binding.node
        if binding.kind in ("assign", "unpack") and isinstance(node, cst.BaseExpression):
            # `image, target = sample["image"], sample["label"]`: the element the name takes
            return self.infer(bound_value(binding, name, self._facts) or node)
        if binding.kind == "augassign" and isinstance(node, cst.AugAssign):
            return self.infer(node.value)
        if binding.kind == "param" and isinstance(node, cst.Param):
            return self._param(node, binding)
        if binding.kind == "for" and isinstance(node, cst.For):
            if name == enumerate_counter(node):
                return Tensorness.NO  # `step` of `for step, batch in enumerate(loader)` counts
            if self._hot.iterates_loader(node) is not None or name in self.parameters.tensor_targets(node):
                return Tensorness.LIKELY
            if node in self._hot.step_loops or node in self._hot.inference_loops:
                # a step's own value drawn from a tensor: edm's noise level of the sampling loop
                # `for t_cur, t_next in zip(t_steps[:-1], t_steps[1:])`. An inner loop over a
                # tensor's rows is TPL201's finding as a whole, and where its rows live is rarely
                # known (a per-image loop of a host-side transform): its items stay unknown.
                return self._drawn(node.target, node.iter, name, items=False)
            return Tensorness.NO
        if binding.kind == "compfor" and isinstance(node, cst.CompFor):
            if name in self.parameters.tensor_targets(node):
                return Tensorness.LIKELY
            return self._drawn(node.target, node.iter, name, items=True)
        return Tensorness.NO

    def _drawn(
        self, target: cst.BaseExpression, source: cst.BaseExpression, name: str, items: bool
    ) -> Tensorness:
        """What `name` takes from the iterable `target` unpacks: an item of a tensor (a row, or
        a 0-d tensor: edm's `for t_cur, t_next in zip(t_steps[:-1], t_steps[1:])`) is one. With
        `items`, a comprehension's: the values of a mapping of tensors (`{k: v for k, v in
        losses.items()}`) are tensors too, and its items stay likely ones, whose rank the device
        values decide (`[int(v) for v in self.pad]` reads numbers of a 1-D buffer, rows of a 2-D
        one); a step loop's value is as surely a tensor as its schedule."""
        mapping = walked_mapping(source) if items else None
        if mapping is not None:
            return self.items_of(mapping)
        drawn: Optional[cst.BaseExpression] = source
        if isinstance(source, cst.Call) and self._names.qualified_name(source) in _ZIPPING:
            # `{t["image_id"].item(): o for t, o in zip(targets, results)}`: what `name` is drawn from
            drawn = walked_source(target, source, name, items_of_items=False)
        found = self.infer(drawn) if drawn is not None else Tensorness.NO
        return min(found, Tensorness.LIKELY) if items else found

    def items_of(self, mapping: cst.BaseExpression) -> Tensorness:
        """Whether the values of `mapping` are tensors (likely ones at most: a mapping may mix):
        those of a dict display or comprehension, and of what a model or loss call returns (a
        tensor or a mapping of them: DETR's `loss_dict = criterion(outputs, targets)`), through
        names and project helpers that hand it back (analysis/dict_items.py)."""
        return self._values_of(*mapping_values(mapping, self._names, self._hot.entry.handed_back))

    def _values_of(self, values: list[cst.BaseExpression], opaque: list[cst.BaseExpression]) -> Tensorness:
        """The items of a container: likely tensors at most, where any of them may be one."""
        found = self._joined([*map(self.infer, values), *map(self.infer, opaque)] or [Tensorness.NO])
        return min(found, Tensorness.LIKELY)

    def _summed(self, call: cst.Call) -> Tensorness:
        """`sum(losses.values())`, `sum(w[k] * d[k] for k in d)`: a sum of tensors is one."""
        summed = summed_values(call, self._names, self._hot.entry.handed_back)
        return self._values_of(*summed) if summed is not None else Tensorness.NO

    def _param(self, param: cst.Param, binding: Binding) -> Tensorness:
        func = binding.scope.node
        if isinstance(func, cst.FunctionDef) and self._hot.is_device_parameter(func, param.name.value):
            return Tensorness.CERTAIN  # every call of the project hands it a tensor on the device
        if param.annotation is not None:
            annotation = self._facts.module.code_for_node(param.annotation.annotation)
            return Tensorness.LIKELY if "Tensor" in annotation else Tensorness.NO
        if isinstance(func, cst.FunctionDef) and self._hot.is_host_parameter(func, param.name.value):
            return Tensorness.NO  # every caller passes a string, a number or a host copy
        if isinstance(func, cst.FunctionDef) and param.name.value in self._string_parameters(func):
            return Tensorness.NO
        if (
            isinstance(func, cst.FunctionDef)
            and (func.name.value == "forward" or func in self._hot.hot_functions)
            and param.default is None
            and param.star == ""
            and param.name.value != "self"
        ):
            return Tensorness.LIKELY
        return Tensorness.NO

    def is_declared_sequence(self, expr: cst.BaseExpression) -> bool:
        """`expr` is a parameter annotated as a list or tuple (`images: list[Tensor]`): its
        items may be tensors, but it is not one, and each item may have a size of its own."""
        if not isinstance(expr, cst.Name):
            return False
        return annotated_parameter(self._names.lookup(expr.value, expr), _sequence_annotation)

    def _string_parameters(self, func: cst.FunctionDef) -> frozenset[str]:
        """Parameters the function itself treats as strings: compared with a string literal
        (`if split == "train":`), or formatted into one (nanoGPT's `get_batch(split)`)."""
        cached = self._strings.get(func)
        if cached is None:
            visitor = _StringUses()
            visit(func.body, visitor)
            cached = self._strings[func] = frozenset(visitor.names)
        return cached

    def device_of_scope(self, node: cst.CSTNode) -> Optional[str]:
        """A tensor name in scope at `node` whose `.device` a fix can use: a tensor parameter
        of the enclosing function first, then a name bound earlier to a `.to(...)`/`.cuda()`."""
        scope = self._names.scope_at(node)
        if not isinstance(scope.node, cst.FunctionDef):
            return None
        order = self._facts.order.get(node, 0)
        params: list[str] = []
        moved: list[str] = []
        plain = _plain_values(scope.node)
        for name, bindings in scope.bindings.items():
            first = bindings[0]
            if (
                first.kind == "param"
                and name not in plain
                and self._binding(first, name) >= Tensorness.LIKELY
            ):
                params.append(name)
            elif all(b.order < order and _is_device_move(b) for b in bindings):
                moved.append(name)
        candidates = params or moved
        return candidates[0] if candidates else None


# Methods of Python containers: a parameter they are called on is a dict or a list.
_CONTAINER_METHODS = frozenset({"items", "keys", "values", "append", "extend", "get"})


class _PlainUses(cst.CSTVisitor):
    """Names a function uses as sizes or containers, never as tensors: a size argument of a
    torch call (`torch.zeros([n, embed_dim])`, `range(n)`), the receiver of a container method
    (`k_dict.items()`), the sequence of `enumerate(...)`, a name unpacked into names (`h, w =
    x_size`: a tensor can be unpacked too, but a fix that needs a device does not bet on it)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        if (
            isinstance(node.value, cst.Name)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, (cst.Tuple, cst.List))
        ):
            self.names.add(node.value.value)

    def visit_Call(self, node: cst.Call) -> None:
        callee = dotted_name(node.func) or ""
        if callee in ("range", "enumerate") or callee.startswith("torch.") and callee[6:] in _SIZED_FACTORIES:
            for arg in node.args:
                if arg.keyword is None:
                    self._sizes(arg.value)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in _CONTAINER_METHODS:
            if isinstance(node.func.value, cst.Name):
                self.names.add(node.func.value.value)

    def _sizes(self, expr: cst.BaseExpression) -> None:
        if isinstance(expr, cst.Name):
            self.names.add(expr.value)
        elif isinstance(expr, (cst.List, cst.Tuple)):
            for element in expr.elements:
                self._sizes(element.value)


_SIZED_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn", "arange", "eye", "randperm"})


def _plain_values(function: cst.CSTNode) -> set[str]:
    visitor = _PlainUses()
    visit(function, visitor)
    return visitor.names


class _StringUses(cst.CSTVisitor):
    """Names compared with a string literal or formatted into an f-string."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(c.comparator for c in node.comparisons)]
        if any(
            isinstance(o, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)) for o in operands
        ):
            self.names.update(o.value for o in operands if isinstance(o, cst.Name))

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        if isinstance(node.expression, cst.Name):
            self.names.add(node.expression.value)


_ZIPPING = frozenset({"builtins.zip", "builtins.enumerate"})


def walked_source(
    target: cst.BaseExpression, walked: cst.BaseExpression, name: str, items_of_items: bool = True
) -> Optional[cst.BaseExpression]:
    """What a loop or comprehension target walking `walked` draws `name` from
    (analysis/unpacked_items.py's one reading, on the converted target and iterable): `walked`
    itself, or an argument of the `zip`/`enumerate` calls in it; None for a count, or for a name
    drawn from items' items without `items_of_items`."""
    converted_target, converted_walked = as_ast(target), as_ast(walked)
    if converted_target is None or converted_walked is None:
        return None
    path = drawn_path(converted_target, converted_walked, name, items_of_items)
    if path is None:
        return None
    found = walked
    for index in path:
        assert isinstance(found, cst.Call)  # the path descends through the calls it read
        found = found.args[index].value
    return found


_TENSOR_TYPES = frozenset({"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _isinstance_tensor_test(test: cst.BaseExpression, name: str, names: Names) -> Optional[bool]:
    """True for `isinstance(name, torch.Tensor)` (or `torch.is_tensor(name)`), False for its
    negation, None for any other test (a tuple of types that includes Tensor still says nothing
    of the else branch's type)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _isinstance_tensor_test(test.expression, name, names)
        return None if inner is None else not inner
    if isinstance(test, cst.Call) and len(test.args) == 1 and names.qualified_name(test) == "torch.is_tensor":
        subject = test.args[0].value
        return True if isinstance(subject, cst.Name) and subject.value == name else None
    if not (isinstance(test, cst.Call) and dotted_name(test.func) == "isinstance" and len(test.args) == 2):
        return None
    subject, kind = test.args[0].value, test.args[1].value
    if not (isinstance(subject, cst.Name) and subject.value == name):
        return None
    return True if names.qualified_name(kind) in _TENSOR_TYPES else None


def _is_device_move(binding: Binding) -> bool:
    node = binding.node
    return (
        binding.kind == "assign"
        and isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in ("to", "cuda")
    )


def _sequence_annotation(annotation: cst.BaseExpression) -> bool:
    """`list[Tensor]`, `List[Tensor]`, `Sequence[Tensor]`, `tuple[Tensor, ...]`, `list`."""
    if isinstance(annotation, cst.Subscript):
        annotation = annotation.value
    name = dotted_name(annotation) or ""
    return name.rsplit(".", 1)[-1] in _SEQUENCE_ANNOTATIONS


_STRINGS = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)


def is_string_formatting(expr: cst.BaseExpression) -> bool:
    """`"loss %.3f" % loss`: printf-style formatting of a string literal."""
    return (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Modulo)
        and isinstance(expr.left, _STRINGS)
    )


def formatted_values(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values a string expression formats, each read through `format()`, `str()` or `float()`
    (a tensor's through its values): the fields of an f-string, the operands of `"..." % x`
    (a tuple's elements, a dict's values) and the arguments of `"...".format(...)`."""
    if isinstance(expr, cst.FormattedString):
        return [p.expression for p in expr.parts if isinstance(p, cst.FormattedStringExpression)]
    if isinstance(expr, cst.ConcatenatedString):
        return [*formatted_values(expr.left), *formatted_values(expr.right)]
    if is_string_formatting(expr):
        right = expr.right  # type: ignore[attr-defined]  # a BinaryOperation
        if isinstance(right, cst.Tuple):
            return [e.value for e in right.elements if not isinstance(e, cst.StarredElement)]
        if isinstance(right, cst.Dict):
            return [e.value for e in right.elements if isinstance(e, cst.DictElement)]
        return [right]
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "format"
        and isinstance(expr.func.value, _STRINGS)
    ):
        return [a.value for a in expr.args if not a.star]
    return []
