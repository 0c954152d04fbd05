"""The project pass proper: from every module's summary, resolve imports (absolute, relative,
re-exports), class lineage, the call graph across modules, step loops and what is hot, to a
fixed point, and hand each module the facts it cannot see by itself (analysis/entry.py).

Linear in the project: each class, call and loop is resolved once and memoised.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
import sys
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from ..analysis.entry import INFERENCE_LOOP, EntryFacts, ExternalReason
from ..analysis.vocabulary import (
    DATASET_BASES,
    DISTRIBUTED_DATA_PARALLEL,
    GRADIENT_SYNC_WRAPPERS,
    MODULE_ENTRY_POINTS,
    NN_CONVS,
    STEP_HOOKS,
    extra_entry_points,
    is_module_base,
    nn_class_name,
    prepares_dataset,
)
from .arguments import (
    Sites,
    Values,
    argument_values,
    bound_self,
    guarded_off,
    handed_methods,
    slot_parameter,
)
from .checkpoints import published_functions
from .datasets import InMemoryDatasets
from .device_tensors import passes_device
from .grad_free import grad_free_functions
from .held_instances import Held, held_instances
from .keyword_items import keyword_items
from .layers import LayerProfiles
from .loaders import plain_loader_parameters, reiterated_loaders
from .options import configured_names, flag_values, option_values
from .refs import ClassRef, External, FunctionRef, Instance, Module, Namespace, Resolved
from .stepping import stepped_functions
from .summary import ENCLOSING, Call, Function

# top-level packages whose modules a project's own files never stand for (see _relocated)
_LIBRARY_ROOTS = frozenset(
    """torch torchvision torchaudio torchtext numpy scipy sklearn PIL cv2 transformers timm lightning
    pytorch_lightning accelerate diffusers datasets tensorflow jax flax detectron2 mmcv mmdet mmengine
    apex deepspeed fairseq einops tqdm matplotlib pandas""".split()
)
_MAX_DEPTH = 12  # re-export chains followed before giving up (and cycles)
_MAX_MODEL_DEPTH = 8  # nesting of model classes followed for what they build
_MODEL_CODE = frozenset({"forward", "step-hook"})  # origins of a model's own code: its forward is the step


class Project:
    def __init__(self, root: Path, modules: Iterable[Module], module_bases: Iterable[str] = ()) -> None:
        self.root = root
        self.modules: dict[Path, Module] = {m.path: m for m in modules}
        self.module_bases = tuple(module_bases)
        self._directories = {d for path in self.modules for d in path.parents}
        self._by_name: dict[str, list[Module]] = {}
        for module in self.modules.values():
            for name in _dotted_names(module.path, root):
                self._by_name.setdefault(name, []).append(module)
        # each module by its whole dotted name under the root, for imports from another root
        self._by_root_name = {
            name: module
            for module in self.modules.values()
            for name in [next(_dotted_names(module.path, root), "")]
            if "." in name
        }
        self._relocations: dict[str, Optional[Module]] = {}
        self._global_memo: dict[tuple[int, str], Optional[Resolved]] = {}
        self._is_module_memo: dict[tuple[int, int], bool] = {}
        self._bases_memo: dict[tuple[int, int], list[Resolved]] = {}
        self._ddp_subclass_memo: dict[tuple[int, int], Optional[str]] = {}
        self._subclasses: Optional[dict[tuple[int, int], list[ClassRef]]] = None
        self._reachable: Optional[frozenset[str]] = None
        self._precision_importers: Optional[dict[int, str]] = None
        self._handed: Optional[frozenset[str]] = None
        self._members: Optional[frozenset[str]] = None
        self._handed_on_memo: dict[tuple[int, int], bool] = {}
        self._built: Optional[frozenset[tuple[int, int]]] = None
        self._runs_step_memo: dict[tuple[int, int], bool] = {}
        self._runs_model_memo: dict[tuple[int, int], bool] = {}
        self._calls_memo: dict[tuple[int, int, int], list[FunctionRef]] = {}
        self._step_loops: dict[int, frozenset[int]] = {}
        self._inference_loops: dict[int, frozenset[int]] = {}  # by module id; set by _spread_hot
        # functions hot code calls that drive a model they are handed in a loop of their own
        self._drivers: dict[tuple[int, int], FunctionRef] = {}  # set by _spread_hot
        self._model_builders: Optional[dict[int, set[int]]] = None
        self._hot: Optional[dict[tuple[int, int], ExternalReason]] = None
        self._arguments: dict[tuple[int, int], Values] = {}
        self._cuda: Optional[dict[int, str]] = None
        self._reiterated: Optional[dict[int, frozenset[int]]] = None
        self._helpers: Optional[dict[int, str]] = None
        self._default: Optional[dict[int, str]] = None  # module -> where its default device is CUDA
        self._host: Optional[dict[tuple[int, int], frozenset[str]]] = None
        self._device: Optional[dict[tuple[int, int], frozenset[str]]] = None
        self._device_by_module: dict[int, list[tuple[int, Any]]] = {}
        self._host_tensors: Optional[dict[tuple[int, int], frozenset[str]]] = None
        self._host_tensors_by_module: dict[int, list[tuple[int, Any]]] = {}
        self._moved_results: Optional[frozenset[tuple[int, int]]] = None
        self._grad_free: Optional[dict[int, frozenset[int]]] = None
        self._movers: Optional[tuple[tuple[str, bool], ...]] = None
        self._key_reads: Optional[dict[str, bool]] = None
        self._imported: Optional[frozenset[int]] = None
        self._cudnn: Optional[bool] = None
        # the two tables above by module (id -> [(index, value)]), so that handing each module its
        # facts does not scan the whole project's
        self._hot_by_module: dict[int, list[tuple[int, Any]]] = {}
        self._host_by_module: dict[int, list[tuple[int, Any]]] = {}
        self._modules_passed: Optional[dict[tuple[int, int], frozenset[str]]] = None
        self._held: Optional[Held] = None
        self._edges: Optional[list[tuple[FunctionRef, Call, FunctionRef]]] = None
        self._modules_by_module: dict[int, list[tuple[int, Any]]] = {}
        self.layers = LayerProfiles(self)
        self.datasets = InMemoryDatasets(self)
        self._datasets_by_module: dict[int, list[tuple[int, Any]]] = {}
        self._channels_last: Optional[dict[int, bool]] = None
        self._published: Optional[dict[tuple[int, int], str]] = None
        self._published_by_module: dict[int, list[tuple[int, Any]]] = {}
        self._wrapped: Optional[dict[tuple[int, int], dict[str, str]]] = None
        self._wrapped_by_module: dict[int, list[tuple[int, Any]]] = {}
        self._compiles: Optional[str] = None  # "" once found to be nowhere
        self._stepped: Optional[dict[int, frozenset[int]]] = None
        self._calls_by_name: Optional[dict[str, list[tuple[FunctionRef, Call]]]] = None
        self._callers_memo: dict[str, tuple[dict[tuple[int, int], list[tuple[FunctionRef, Call]]], bool]] = {}
        self._configured: Optional[frozenset[str]] = None
        self._option_tokens: Optional[dict[tuple[int, int], Values]] = None

    # -- modules and names ---------------------------------------------------------------
    def module_at(self, path: Path) -> Optional[Module]:
        return self.modules.get(path)

    def _file_module(self, base: Path) -> Optional[Union[Module, Namespace]]:
        """The module `base.py`, the package `base/__init__.py`, or the namespace `base/`."""
        found = self.modules.get(base.with_name(base.name + ".py")) or self.modules.get(base / "__init__.py")
        if found is not None:
            return found
        return Namespace(base) if base in self._directories else None

    def resolve_module(self, importer: Module, name: str, level: int) -> Optional[Union[Module, Namespace]]:
        if level:
            base = importer.directory
            for _ in range(level - 1):
                base = base.parent
            return self._file_module(base.joinpath(*name.split(".")) if name else base)
        candidates = self._by_name.get(name)
        if not candidates:
            return self._relocated(name)
        return max(candidates, key=lambda m: (_common_parts(m.path, importer.path), -len(m.path.parts)))

    def _relocated(self, name: str) -> Optional[Module]:
        """The project module an absolute import names under a root the project does not have:
        a repository exported from a larger tree imports `deeplearning.cross_image_ssl.moco.builder`
        for its own `moco/builder.py`. The longest ending of two or more parts that is one
        module's whole dotted name under the project root; never for the standard library or the
        libraries models are built with (`torchvision.models.resnet` is not `models/resnet.py`)."""
        head, _, rest = name.partition(".")
        if not rest or head in _LIBRARY_ROOTS or head in sys.stdlib_module_names:
            return None
        if name not in self._relocations:
            parts = name.split(".")
            found = None
            for start in range(1, len(parts) - 1):
                found = self._by_root_name.get(".".join(parts[start:]))
                if found is not None:
                    break
            self._relocations[name] = found
        return self._relocations[name]

    def resolve_global(
        self, module: Union[Module, Namespace], name: str, depth: int = 0
    ) -> Optional[Resolved]:
        """What a module-level name of `module` refers to."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(module, Namespace):
            return self._file_module(module.directory / name)
        key = (id(module), name)
        if key in self._global_memo:
            return self._global_memo[key]
        self._global_memo[key] = None  # cycles resolve to nothing
        result = self._resolve_global(module, name, depth)
        self._global_memo[key] = result
        return result

    def _resolve_global(self, module: Module, name: str, depth: int) -> Optional[Resolved]:
        summary = module.summary
        bound = summary.globals.get(name)
        if bound is not None:
            kind, value = bound
            if kind == "def":
                return FunctionRef(module, value)
            if kind == "class":
                return ClassRef(module, value)
            constructed = self.resolve_dotted(module, value, depth + 1)
            return Instance(constructed) if isinstance(constructed, ClassRef) else None
        imported = summary.imports.get(name) or summary.local_imports.get(name)
        if imported is not None:
            source, attribute, level = imported
            if not attribute:  # `import a.b as c`, `import a`
                target = self.resolve_module(module, source, 0)
                return target if target is not None else External(source)
            target = self.resolve_module(module, source, level)
            if target is None:
                return External(f"{source}.{attribute}") if not level else None
            found = self.resolve_global(target, attribute, depth + 1)
            if found is None and isinstance(target, Module) and target.is_package:
                found = self._file_module(target.directory / attribute)
            return found
        for source, level in summary.stars:
            target = self.resolve_module(module, source, level)
            if target is not None:
                found = self.resolve_global(target, name, depth + 1)
                if found is not None:
                    return found
        if module.is_package:
            return self._file_module(module.directory / name)
        return None

    def resolve_dotted(self, module: Module, dotted: str, depth: int = 0) -> Optional[Resolved]:
        head, *rest = dotted.split(".")
        found = self.resolve_global(module, head, depth)
        for part in rest:
            if found is None:
                return None
            if isinstance(found, (Module, Namespace)):
                found = self.resolve_global(found, part, depth + 1)
            elif isinstance(found, ClassRef):
                found = self.find_method(found, part)
            elif isinstance(found, Instance):  # `corpus = Corpus()` at module level: `corpus.get_data`
                found = self.find_method(found.cls, part)
            elif isinstance(found, External):
                qualified = f"{found.qualified}.{part}"
                found = self._relocated(qualified) or External(qualified)
            else:
                return None
        return found

    def reiterated_loaders(self) -> dict[int, frozenset[int]]:
        """Module id -> lines of its DataLoaders another function iterates again and again."""
        if self._reiterated is None:
            self._reiterated = reiterated_loaders(self)
        return self._reiterated

    def star_imports(self, module: Module) -> dict[str, str]:
        """What the module's `from m import *` of project modules binds to things outside the
        project: `torch`, `nn`, `F` that m imports (deeplab-xception's train.py gets torch from
        `from modeling.deeplab import *`). A name m's `__all__` leaves out is not bound; one the
        module binds itself is its own."""
        found: dict[str, str] = {}
        summary = module.summary
        for name in sorted(self._star_exports(module, 0)):
            if name in summary.imports or name in summary.globals:
                continue
            resolved = self.resolve_global(module, name)
            if isinstance(resolved, External):
                found[name] = resolved.qualified
        return found

    def _star_exports(self, module: Module, depth: int) -> set[str]:
        """The imported names the module's star imports of project modules may bind."""
        names: set[str] = set()
        if depth > _MAX_DEPTH:
            return names
        for source, level in module.summary.stars:
            target = self.resolve_module(module, source, level)
            if not isinstance(target, Module):
                continue
            if target.summary.all_names is not None:
                names.update(target.summary.all_names)
                continue
            names.update(name for name in target.summary.imports if not name.startswith("_"))
            names.update(self._star_exports(target, depth + 1))
        return names

    # -- classes ---------------------------------------------------------------------------
    def bases(self, cls: ClassRef) -> list[Resolved]:
        key = cls.key()
        if key not in self._bases_memo:
            self._bases_memo[key] = []
            resolved = [self.resolve_dotted(cls.module, b) for b in cls.info.bases]
            self._bases_memo[key] = [r for r in resolved if r is not None]
        return self._bases_memo[key]

    def lineage(self, cls: ClassRef) -> Iterator[ClassRef]:
        """The class, then its project bases, breadth first, each once."""
        seen: set[tuple[int, int]] = set()
        todo = deque([cls])
        while todo:
            current = todo.popleft()
            if current.key() in seen:
                continue
            seen.add(current.key())
            yield current
            todo.extend(b for b in self.bases(current) if isinstance(b, ClassRef))

    def external_bases(self, cls: ClassRef) -> Iterator[str]:
        for current in self.lineage(cls):
            for base in self.bases(current):
                if isinstance(base, External):
                    yield base.qualified

    def is_module_class(self, cls: ClassRef) -> bool:
        key = cls.key()
        if key not in self._is_module_memo:
            self._is_module_memo[key] = any(
                is_module_base(q, self.module_bases) for q in self.external_bases(cls)
            )
        return self._is_module_memo[key]

    def is_dataset_class(self, cls: ClassRef) -> bool:
        """Derives from torch's Dataset or IterableDataset: what a loader draws from, never a batch."""
        return any(q in DATASET_BASES for q in self.external_bases(cls))

    def find_method(self, cls: ClassRef, name: str) -> Optional[FunctionRef]:
        for current in self.lineage(cls):
            index = current.info.methods.get(name)
            if index is not None:
                return FunctionRef(current.module, index)
        return None

    def attribute_classes(self, cls: ClassRef, attribute: str) -> list[ClassRef]:
        """The classes of `self.<attribute> = Callee(...)` in the class or its bases: `Callee`
        itself, or the classes a project function or method `Callee` returns instances of; or of
        `self.<attribute> = param` in `__init__`, from what every construction passes
        (project/held_instances.py)."""
        for current in self.lineage(cls):
            callee = current.info.attributes.get(attribute)
            if callee is not None:
                return self._built_by(cls, current.module, callee)
        init = self.find_method(cls, "__init__")
        if init is None:
            return []
        if self._held is None:
            self._held = held_instances(self)
        return self._held.get(init.key(), {}).get(attribute, [])

    def attribute_methods(self, cls: ClassRef, attribute: str) -> list[FunctionRef]:
        """The bound methods `self.<attribute>` may hold: those a method of the class or a base
        stores there from a builder that returns them (`self.criterion = SegmentationLosses(
        ...).build_loss(mode=args.loss_type)`, which returns `self.CrossEntropyLoss`)."""
        found: dict[tuple[int, int], FunctionRef] = {}
        for current in self.lineage(cls):
            for index in current.info.methods.values():
                function = FunctionRef(current.module, index)
                for call in [*function.info.calls, *function.info.cold_calls]:
                    if call.stored != attribute:
                        continue
                    options = self.option_tokens().get(function.key(), {})
                    for builder in self.resolve_call(function, call):
                        owner = ClassRef(builder.module, builder.info.cls)
                        for name in handed_methods(call, builder, options) if builder.info.cls >= 0 else ():
                            found.update((m.key(), m) for m in self._dispatch(owner, name))
        return list(found.values())

    def option_tokens(self) -> dict[tuple[int, int], Values]:
        """Per function, the options the default run decides (project/options.py), read once."""
        if self._option_tokens is None:
            # working them out follows calls, which may ask again: meanwhile no option is known
            self._option_tokens = {}
            configured = self.configured_names() if self._reads_configuration() else frozenset()
            self._option_tokens = option_values(self, configured)
        return self._option_tokens

    def _built_by(self, cls: ClassRef, module: Module, callee: str) -> list[ClassRef]:
        """What `callee(...)`, written in `module` in a method of `cls`, builds: a class, or the
        project classes its function returns (`return Loss(self)`, `-> LMModel`); a method
        called on `self` may be any override in a subclass (`init_criterion()`)."""
        head, _, name = callee.partition(".")
        if head == "self" and name and "." not in name:
            functions = self._dispatch(cls, name)
        else:
            found = self.resolve_dotted(module, callee)
            if isinstance(found, ClassRef):
                return [found]
            functions = [found] if isinstance(found, FunctionRef) else []
        classes: dict[tuple[int, int], ClassRef] = {}
        for function in functions:
            for built in self.returned_classes(function):
                classes.setdefault(built.key(), built)
        return list(classes.values())

    def attribute_builds(self, cls: ClassRef, callee: str) -> list[ClassRef]:
        """What `self.<attribute> = callee(...)`, written in `cls`, builds."""
        return self._built_by(cls, cls.module, callee)

    def returned_classes(self, function: FunctionRef) -> list[ClassRef]:
        """The project classes `function` returns instances of (`return Loss(self)`, `-> LMModel`)."""
        info = function.info
        names = [returned[0] for returned in info.returns if returned]
        found: list[ClassRef] = []
        for dotted_class in names:
            built = self.resolve_dotted(function.module, dotted_class)
            if not isinstance(built, ClassRef):
                found = []  # one value it may return is no instance known: which is not known
                break
            found.append(built)
        if info.returns_annotation:
            annotated = self.resolve_dotted(function.module, info.returns_annotation)
            if isinstance(annotated, ClassRef):
                found.append(annotated)
        return found

    def subclasses(self, cls: ClassRef) -> list[ClassRef]:
        """Project classes deriving from `cls`, directly or not."""
        if self._subclasses is None:
            children: dict[tuple[int, int], list[ClassRef]] = {}
            for module in self.modules.values():
                for index in range(len(module.summary.classes)):
                    child = ClassRef(module, index)
                    for base in self.bases(child):
                        if isinstance(base, ClassRef):
                            children.setdefault(base.key(), []).append(child)
            self._subclasses = children
        found: list[ClassRef] = []
        seen: set[tuple[int, int]] = {cls.key()}
        todo = list(self._subclasses.get(cls.key(), ()))
        while todo:
            child = todo.pop()
            if child.key() in seen:
                continue
            seen.add(child.key())
            found.append(child)
            todo.extend(self._subclasses.get(child.key(), ()))
        return found

    def entry_point(self, cls: ClassRef) -> Optional[FunctionRef]:
        for name in MODULE_ENTRY_POINTS:
            method = self.find_method(cls, name)
            if method is not None:
                return method
        return None

    # -- calls -----------------------------------------------------------------------------
    def callees(self, function: FunctionRef, position: int) -> list[FunctionRef]:
        """The project functions that call number `position` of `function` may run
        (`position` indexes the module's top level when `function.index` is -1)."""
        key = (id(function.module), function.index, position)
        if key not in self._calls_memo:
            call = self._call(function, position)
            self._calls_memo[key] = self.resolve_call(function, call)
        return self._calls_memo[key]

    @staticmethod
    def _call(function: FunctionRef, position: int) -> Call:
        return function.info.calls[position]

    def callers_of(self, function: FunctionRef) -> list[tuple[FunctionRef, Call]]:
        """Every call in the project, hot or cold, that may run `function`, with the function
        making it. Calls are indexed by the name they call (`f`, `mod.f`, `self.f`, `obj|f`: `f`)
        once, so that only those naming `function` are resolved, each once."""
        if function.index < 0:
            return []
        return self._callers_named(function.info.name)[0].get(function.key(), [])

    def every_caller(self, function: FunctionRef) -> Optional[list[tuple[FunctionRef, Call]]]:
        """The calls outside test modules that run `function`, when they are all it has: None
        where a call naming it resolves to nothing the project knows (`trainer.add_train_dataset(...)`
        on a trainer built by a helper it does not follow: it may be this one) or its name is
        handed on (a callback: its callers are not seen)."""
        if function.index < 0 or self.handed_on(function):
            return None
        by_callee, unresolved = self._callers_named(function.info.name)
        if unresolved:
            return None
        return [
            (caller, call) for caller, call in by_callee.get(function.key(), []) if not caller.module.is_test
        ]

    def _callers_named(self, name: str) -> tuple[dict[tuple[int, int], list[tuple[FunctionRef, Call]]], bool]:
        """The calls naming `name`, by the function each may run, and whether one resolves to none."""
        known = self._callers_memo.get(name)
        if known is not None:
            return known
        by_callee: dict[tuple[int, int], list[tuple[FunctionRef, Call]]] = {}
        unresolved = False
        for caller, call in self._calls_index().get(name, ()):
            callees = self.resolve_call(caller, call)
            unresolved = unresolved or not callees
            for key in dict.fromkeys(callee.key() for callee in callees):
                by_callee.setdefault(key, []).append((caller, call))
        self._callers_memo[name] = (by_callee, unresolved)
        return by_callee, unresolved

    def _calls_index(self) -> dict[str, list[tuple[FunctionRef, Call]]]:
        if self._calls_by_name is None:
            index: dict[str, list[tuple[FunctionRef, Call]]] = {}
            for module in self.modules.values():
                defined = module.summary.functions
                for offset, info in enumerate([module.summary.toplevel, *defined]):
                    caller = FunctionRef(module, offset - 1)
                    for call in (*info.calls, *info.cold_calls):
                        if call.kind == "def":
                            position = int(call.target)
                            name = defined[position].name if 0 <= position < len(defined) else ""
                        else:
                            name = call.target.replace("|", ".").rsplit(".", 1)[-1]
                        index.setdefault(name, []).append((caller, call))
            self._calls_by_name = index
        return self._calls_by_name

    def _owner_class(self, function: FunctionRef) -> Optional[ClassRef]:
        if function.index < 0:
            return None
        cls = function.info.cls
        return ClassRef(function.module, cls) if cls >= 0 else None

    def resolve_call(self, function: FunctionRef, call: Call) -> list[FunctionRef]:
        module, kind, target = function.module, call.kind, call.target
        if kind == "def":
            return [FunctionRef(module, int(target))]
        if kind in ("global", "dotted"):
            return self._runs(self.resolve_dotted(module, target))
        if kind == "instance":
            callee, method = target.split("|")
            found = self.resolve_dotted(module, callee)
            if isinstance(found, FunctionRef):  # `diffusion = create_diffusion(...)`: what it returns
                return [m for cls in self.returned_classes(found) for m in self._method_of(cls, method)]
            return self._method_of(found, method) if isinstance(found, ClassRef) else []
        cls = self._owner_class(function)
        if cls is None:
            return []
        if kind == "self" and target == "__call__":  # `self(x)`: a module runs its own forward
            forwards = self._dispatch(cls, "forward") if self.is_module_class(cls) else []
            return forwards or self._dispatch(cls, target)
        if kind == "self":
            methods = self._dispatch(cls, target)
            if methods:
                return methods
            called = [
                m for held in self.attribute_classes(cls, target) for m in self._method_of(held, "__call__")
            ]
            return called or self.attribute_methods(cls, target)
        if kind == "super":
            for base in self.bases(cls):
                if isinstance(base, ClassRef):
                    inherited = self.find_method(base, target)
                    if inherited is not None:
                        return [inherited]
            return []
        if kind == "selfattr":
            attribute, name = target.split("|")
            return [m for held in self.attribute_classes(cls, attribute) for m in self._method_of(held, name)]
        return []

    def _runs(self, found: Optional[Resolved]) -> list[FunctionRef]:
        if isinstance(found, FunctionRef):
            return [found]
        if isinstance(found, Instance):
            return self._method_of(found.cls, "__call__")
        return []

    def _method_of(self, cls: ClassRef, method: str) -> list[FunctionRef]:
        if method == "__call__":
            entry = self.entry_point(cls) if self.is_module_class(cls) else self.find_method(cls, "__call__")
            return [entry] if entry is not None else []
        return self._dispatch(cls, method)

    def _dispatch(self, cls: ClassRef, name: str) -> list[FunctionRef]:
        """`self.name(...)` in `cls`: its own or inherited method, and overrides in subclasses."""
        found: list[FunctionRef] = []
        method = self.find_method(cls, name)
        if method is not None:
            found.append(method)
        for child in self.subclasses(cls):
            index = child.info.methods.get(name)
            if index is not None:
                found.append(FunctionRef(child.module, index))
        return found

    # -- step loops ----------------------------------------------------------------------
    @staticmethod
    def _function_calls(function: FunctionRef) -> Iterator[tuple[int, Call]]:
        yield from enumerate(function.info.calls)

    def runs_step(self, function: FunctionRef) -> bool:
        """`backward()`/`optimizer.step()` runs when the function is called, outside its loops."""
        key = function.key()
        if key in self._runs_step_memo:
            return self._runs_step_memo[key]
        self._runs_step_memo[key] = False
        result = -1 in function.info.steps or any(
            call.loop < 0 and any(self.runs_step(c) for c in self.callees(function, position))
            for position, call in self._function_calls(function)
        )
        self._runs_step_memo[key] = result
        return result

    def step_loops(self, module: Module) -> frozenset[int]:
        key = id(module)
        if key not in self._step_loops:
            self._step_loops[key] = self._find_step_loops(module)
        return self._step_loops[key]

    def stepped_model_builders(self, module: Module) -> frozenset[int]:
        """The functions of `module` that move a model they build (`model = Darknet(path).to(
        device)`) and that a module with a step loop calls: the model they hand back is the one
        that script steps (PyTorch-YOLOv3's `load_model`)."""
        if self._model_builders is None:
            self._model_builders = {}
            for caller in self.modules.values():
                if caller.is_test or not self.step_loops(caller):
                    continue
                for offset, info in enumerate([caller.summary.toplevel, *caller.summary.functions]):
                    function = FunctionRef(caller, offset - 1)
                    for position in range(len(info.calls)):
                        for callee in self.callees(function, position):
                            if callee.index >= 0 and callee.info.moved and callee.module is not caller:
                                self._model_builders.setdefault(id(callee.module), set()).add(callee.index)
        return frozenset(self._model_builders.get(id(module), ()))

    def _find_step_loops(self, module: Module) -> frozenset[int]:
        loops = module.summary.loops
        found = self._stepping_loops(module)
        if self.shows_cuda(module):
            return found
        # a module-level loop of a module that never uses CUDA is a CPU demo (hotpath.py)
        return frozenset(i for i in found if loops[i].function >= 0)

    def _stepping_loops(self, module: Module) -> frozenset[int]:
        loops = module.summary.loops
        stepping: set[int] = set()

        def mark(loop: int) -> None:
            while loop >= 0 and loop not in stepping:
                stepping.add(loop)
                loop = loops[loop].parent

        owners = [module.summary.toplevel, *module.summary.functions]
        updating = {loop for info in owners for loop in info.updates if loop >= 0}
        for offset, info in enumerate(owners):
            function = FunctionRef(module, offset - 1)
            for loop in info.steps:
                mark(loop)
            for position, call in enumerate(info.calls):
                if call.loop >= 0 and any(self.runs_step(c) for c in self.callees(function, position)):
                    mark(call.loop)
        loaders = {i for i, loop in enumerate(loops) if loop.loader}
        candidates = stepping | loaders
        enclosing = {loops[i].parent for i in candidates}
        parents_of_candidates: set[int] = set()
        for loop in enclosing:
            while loop >= 0:
                parents_of_candidates.add(loop)
                loop = loops[loop].parent
        # the innermost loop that steps; a loop over a loader, or one whose own body steps the
        # optimizer, is a step loop even around an inner loop of gradient accumulation
        return frozenset(
            i for i in candidates if i in loaders or i in updating or i not in parents_of_candidates
        )

    # -- hot paths -----------------------------------------------------------------------
    def roots(self) -> Iterator[tuple[FunctionRef, ExternalReason]]:
        for module in self.modules.values():
            for index, cls in enumerate(module.summary.classes):
                ref = ClassRef(module, index)
                for hook in STEP_HOOKS.intersection(cls.methods):
                    yield FunctionRef(module, cls.methods[hook]), ExternalReason("step-hook", "")
                if not self.is_module_class(ref):
                    continue
                entry = self.entry_point(ref)
                if entry is not None and not self._never_runs(ref, entry):
                    yield entry, ExternalReason("forward", "")
                for qualified in self.external_bases(ref):
                    for name in extra_entry_points(qualified):
                        method = self.find_method(ref, name)
                        if method is not None:
                            yield method, ExternalReason("forward", "")

    def _never_runs(self, cls: ClassRef, entry: FunctionRef) -> bool:
        """`entry` is `cls`'s own and runs on no instance: `cls` is never built in the project nor
        handed on or exported (its users could build it), and every subclass overrides it
        (segmentation-models-pytorch's `Xception`, only ever the base of `XceptionEncoder`)."""
        if entry.info.cls != cls.index or entry.module is not cls.module:
            return False
        subclasses = self.subclasses(cls)
        if not subclasses or cls.info.name in self._reachable_names():
            return False
        if cls.key() in self._built_classes():
            return False
        overrides = (self.find_method(child, entry.info.name) for child in subclasses)
        return all(method is not None and method.key() != entry.key() for method in overrides)

    def handed_names(self) -> frozenset[str]:
        """Names read but not called: a function or class handed on (a callback, a registry
        entry), whose calls are not all seen; `mod.attr` with `mod` imported counts only where
        `mod` is a module of the project (`wandb.run` hands on no project function)."""
        if self._handed is None:
            names = {name for module in self.modules.values() for name in module.summary.handed}
            for module in self.modules.values():
                for base, attr in module.summary.handed_imported:
                    if attr not in names and self._hands_project_name(module, base, attr):
                        names.add(attr)
            self._handed = frozenset(names)
        return self._handed

    def handed_on(self, function: FunctionRef) -> bool:
        """`function` may run from a call the project does not spell, so that its callers are
        not all seen: its name is read without a call (a callback, a registry entry), and a
        method's also as a member of a local object (`hooks.append(trainer.step)`). A
        module-level function counts only where such a read may name it: detectron2's
        `launch(main, ...)` in d2/train_net.py hands on that module's `main`, not main.py's."""
        key = function.key()
        if key not in self._handed_on_memo:
            self._handed_on_memo[key] = self._may_be_handed_on(function)
        return self._handed_on_memo[key]

    def _may_be_handed_on(self, function: FunctionRef) -> bool:
        name = function.info.name
        if function.info.cls >= 0:
            return name in self.handed_names() or name in self.handed_members()
        if name not in self.handed_names():
            return False
        if function.info.parent >= 0:
            return True
        readers = [module for module in self.modules.values() if name in module.summary.handed]
        if not readers:
            return True  # read as `mod.name`: which one is not known
        return any(
            not isinstance(found, FunctionRef) or found.key() == function.key()
            for found in (self.resolve_dotted(module, name) for module in readers)
        )

    def handed_members(self) -> frozenset[str]:
        """Names read as a member of a local object without a call (`obj.method`): methods only."""
        if self._members is None:
            self._members = frozenset(
                name for module in self.modules.values() for name in module.summary.handed_members
            )
        return self._members

    def _hands_project_name(self, module: Module, base: str, attr: str) -> bool:
        """`base.attr` read in `module`, `base` imported, may name a function or class of the
        project: not where `base` is a library, or a project module that binds no `attr`."""
        found = self.resolve_global(module, base)
        if isinstance(found, External):
            return False
        if isinstance(found, (Module, Namespace)):
            return isinstance(self.resolve_global(found, attr), (FunctionRef, ClassRef))
        return True

    def _reachable_names(self) -> frozenset[str]:
        """Names read but not called (handed on), or imported by a package's `__init__.py`."""
        if self._reachable is None:
            names: set[str] = set(self.handed_names())
            for module in self.modules.values():
                names.update(module.summary.handed_members)
                if module.is_package:
                    names.update(module.summary.imports)
            self._reachable = frozenset(names)
        return self._reachable

    def is_built(self, cls: ClassRef) -> bool:
        """Some call of the project, hot or cold, constructs `cls` by name."""
        return cls.key() in self._built_classes()

    def configured_names(self) -> frozenset[str]:
        """The names a shipped config file sets (project/options.py), read once."""
        if self._configured is None:
            self._configured = configured_names(self.root)
        return self._configured

    def _built_classes(self) -> frozenset[tuple[int, int]]:
        """The project classes some call constructs, hot or cold."""
        if self._built is None:
            built: set[tuple[int, int]] = set()
            for module in self.modules.values():
                for info in (module.summary.toplevel, *module.summary.functions):
                    for call in (*info.calls, *info.cold_calls):
                        if call.kind in ("global", "dotted"):
                            target = self.resolve_dotted(module, call.target)
                            if isinstance(target, ClassRef):
                                built.add(target.key())
            self._built = frozenset(built)
        return self._built

    def _loop_owner(self, module: Module, loop: int) -> int:
        """The innermost step or inference loop at or around `loop`, or -1."""
        steps = self.step_loops(module) | self._inference_loops.get(id(module), frozenset())
        loops = module.summary.loops
        while loop >= 0 and loop not in steps:
            loop = loops[loop].parent
        return loop

    def model_loops(self, module: Module) -> frozenset[int]:
        """The loops of `module` whose body calls something that runs a model once (a forward, a
        helper calling one), in any function, hot or not: a token loop inside a `generate` that an
        evaluation loop calls per batch is one, and so is every inference loop."""
        if module.is_test:
            return frozenset()
        found: set[int] = set()
        for index in range(-1, len(module.summary.functions)):
            function = FunctionRef(module, index)
            for position, call in self._function_calls(function):
                if call.loop < 0 or call.loop in found:
                    continue
                if any(self._runs_model(callee) for callee in self.callees(function, position)):
                    found.add(call.loop)
        return frozenset(found)

    def inference_loops(self, module: Module) -> frozenset[int]:
        """Loops outside training and outside hot code whose body calls a model once per
        iteration (RULES.md, hot code item 4): generation, sampling, evaluation, a predictor's
        stream. Each is a hot root of its own; training-only rules do not look there."""
        self.hot()
        return self._inference_loops.get(id(module), frozenset())

    def found_inference_loops(self, module: Module) -> frozenset[int]:
        """The inference loops of `module` found so far: while the hot paths are worked out,
        those of the rounds before (argument values are read between rounds)."""
        return self._inference_loops.get(id(module), frozenset())

    def _find_inference_loops(self, hot: dict[tuple[int, int], ExternalReason]) -> dict[int, frozenset[int]]:
        found: dict[int, frozenset[int]] = {}
        for module in self.modules.values():
            if module.is_test:
                continue
            cuda, loops = self.shows_cuda(module), module.summary.loops
            # an epoch loop around a training loop runs its own statements once per epoch
            epochs: set[int] = set()
            for step in self.step_loops(module):
                outer = loops[step].parent
                while outer >= 0:
                    epochs.add(outer)
                    outer = loops[outer].parent
            chosen: set[int] = set()
            for index in range(-1, len(module.summary.functions)):
                function = FunctionRef(module, index)
                if function.key() in hot or (function.index < 0 and not cuda):
                    continue  # already per step; a module-level loop without CUDA is a CPU demo
                if self._in_rare_function(function):
                    continue  # a dataset's one-off process(), a visualisation helper
                for position, call in self._function_calls(function):
                    if call.loop < 0 or call.loop in chosen or call.loop in epochs:
                        continue
                    if self._loop_owner(module, call.loop) >= 0:
                        continue
                    if any(self._runs_model(callee) for callee in self.callees(function, position)):
                        chosen.add(call.loop)
            if chosen:
                found[id(module)] = frozenset(chosen)
        return found

    @staticmethod
    def _in_rare_function(function: FunctionRef) -> bool:
        """`function`, or one it is nested in, runs once or rarely (summary.py's `rare`)."""
        functions = function.module.summary.functions
        index = function.index
        while index >= 0:
            if functions[index].rare:
                return True
            index = functions[index].parent
        return False

    def _composed(self, cls: ClassRef) -> bool:
        """A model is made of parts: it builds layers, keeps objects it builds, or its forward
        calls one of its attributes. A module with none of these (MONAI's GaussianFilter, which
        applies `F.conv` with its own kernels) is an operation a transform applies, not a model."""
        lineage = list(self.lineage(cls))
        if any(c.info.attributes for c in lineage) or any(dataclasses.astuple(self.layers.of_class(cls))):
            return True
        entry = self.entry_point(cls)
        return entry is not None and any(
            call.kind == "selfattr" or (call.kind == "self" and self.find_method(cls, call.target) is None)
            for call in entry.info.calls
        )

    def _runs_model(self, function: FunctionRef) -> bool:
        """Calling `function` runs a model once: it is a model's forward (or `__call__`), or it
        calls one outside its own loops, directly or through helpers (a predictor's `inference`
        running `self.model(im)`). A function that loops over a model (`generate`) runs it many
        times: its own loop is the inference step, not its caller's."""
        key = function.key()
        known = self._runs_model_memo.get(key)
        if known is not None:
            return known
        cls = function.info.cls
        if function.index >= 0 and cls >= 0 and function.info.name in MODULE_ENTRY_POINTS:
            owner = ClassRef(function.module, cls)
            if self.is_module_class(owner) and self._composed(owner):
                self._runs_model_memo[key] = True
                return True
        self._runs_model_memo[key] = False  # a recursive call proves nothing
        # a layer a helper builds and applies in one call (a transform's `GaussianFilter(...)(x)`)
        # is an operation, not a model
        result = not function.info.rare and any(
            call.loop < 0
            and call.kind != "instance"
            and any(self._runs_model(c) for c in self.callees(function, position))
            for position, call in self._function_calls(function)
        )
        self._runs_model_memo[key] = result
        return result

    def hot(self) -> dict[tuple[int, int], ExternalReason]:
        """Every hot function of the project, with why; computed once. A first spread finds the
        calls made per step, which tell the arguments functions are given (project/arguments.py);
        the second leaves out calls in branches those arguments never take."""
        if self._hot is None:
            sites: Sites = {}
            self._spread_hot({}, sites)
            configured = self.configured_names() if self._reads_configuration() else frozenset()
            option_tokens = self.option_tokens()
            self._arguments = argument_values(self, sites, option_tokens)
            flags = flag_values(self, configured, option_tokens)
            for key, options in [*option_tokens.items(), *flags.items()]:
                values = self._arguments.setdefault(key, {})
                values.update((read, token) for read, token in options.items() if read not in values)
            self._hot = self._spread_hot(self._arguments, {})
        return self._hot

    def _reads_configuration(self) -> bool:
        """Some module declares options or fixes settings, which a shipped config may set."""
        return any(
            m.summary.option_defaults or m.summary.module_flags or m.summary.module_flag_choices
            for m in self.modules.values()
        )

    def argument_values(self) -> dict[tuple[int, int], Values]:
        """Per function, what every call made per step passes (project/arguments.py)."""
        self.hot()
        return self._arguments

    def _spread_hot(
        self, arguments: dict[tuple[int, int], Values], sites: Sites
    ) -> dict[tuple[int, int], ExternalReason]:
        hot: dict[tuple[int, int], ExternalReason] = {}
        queue: deque[tuple[FunctionRef, Optional[int], ExternalReason]] = deque()  # (function, loop, reason)
        for function, reason in self.roots():
            if function.key() not in hot:
                hot[function.key()] = reason
                queue.append((function, None, reason))
        self._inference_loops = {}
        self._drivers = {}
        for module in self.modules.values():
            if module.is_test:
                continue  # a test's loop does not make the code it calls run per step
            for index in sorted(self.step_loops(module)):
                owner = FunctionRef(module, module.summary.loops[index].function)
                queue.append((owner, index, ExternalReason("loop", "")))
        self._drain(queue, hot, arguments, sites)
        # then the inference steps, where training and model code did not reach already
        self._inference_loops = self._find_inference_loops(hot)
        self._called_drivers()
        self._add_driving_loops(hot)
        for module in self.modules.values():
            for index in sorted(self._inference_loops.get(id(module), ())):
                owner = FunctionRef(module, module.summary.loops[index].function)
                queue.append((owner, index, ExternalReason("inference", "")))
        self._drain(queue, hot, arguments, sites)
        # a driver reached only from an inference step: its own loop is a step too
        while added := self._add_driving_loops(hot):
            queue.extend((function, index, ExternalReason("inference", "")) for function, index in added)
            self._drain(queue, hot, arguments, sites)
        return hot

    def _called_drivers(self) -> None:
        """Every function the project calls (outside its tests) that drives a model it is handed
        in a loop of its own is a driver, whoever calls it: a sampler that a script's cold
        `main` calls once per batch of seeds (edm's `edm_sampler(net, latents)`) steps the model
        in its own loop all the same. So does one handed on as a value, whose calls are not seen."""
        for module in self.modules.values():
            if module.is_test:
                continue
            for index, info in enumerate(module.summary.functions):
                function = FunctionRef(module, index)
                if info.handed_model_loops and (
                    self.handed_on(function)  # chosen as a value (`sampler_fn = edm_sampler`)
                    or any(not caller.module.is_test for caller, _ in self.callers_of(function))
                ):
                    self._drivers.setdefault(function.key(), function)

    def _driving_loops(self, function: FunctionRef) -> frozenset[int]:
        """The loops of `function` that call a model it is handed once per iteration, outside
        training (a sampler's `for t in timesteps: model(x, t)`): each is an inference step, and
        the function's other statements run once per many model calls, like an epoch loop's."""
        loops, steps = function.module.summary.loops, self.step_loops(function.module)

        def in_training(loop: int) -> bool:
            while loop >= 0 and loop not in steps:
                loop = loops[loop].parent
            return loop >= 0

        return frozenset(loop for loop in function.info.handed_model_loops if not in_training(loop))

    def _add_driving_loops(self, hot: dict[tuple[int, int], ExternalReason]) -> list[tuple[FunctionRef, int]]:
        """Makes the driving loops of the drivers hot code reached inference loops; returns the new ones."""
        added: list[tuple[FunctionRef, int]] = []
        for key, function in self._drivers.items():
            if key in hot:
                continue
            module = function.module
            known = self._inference_loops.get(id(module), frozenset())
            new = sorted(self._driving_loops(function) - known)
            if new:
                self._inference_loops[id(module)] = known | frozenset(new)
                added.extend((function, index) for index in new)
        return added

    def model_drivers(self, module: Module) -> frozenset[int]:
        """The functions of `module` that code outside the model calls per step and that drive a
        model they are handed in a loop of their own: cold for those callers, their loop hot
        (hotpath.py). Inside a model's forward the forward is the step: a helper that runs a part
        of the model chunk by chunk (NeRF's `inference(model, points)`) stays hot."""
        hot = self.hot()
        return frozenset(
            index for (owner, index) in self._drivers if owner == id(module) and (owner, index) not in hot
        )

    def _drain(
        self,
        queue: deque[tuple[FunctionRef, Optional[int], ExternalReason]],
        hot: dict[tuple[int, int], ExternalReason],
        arguments: dict[tuple[int, int], Values],
        sites: Sites,
    ) -> None:
        while queue:
            function, loop, reason = queue.popleft()
            module = function.module
            caller = self._describe_caller(function, loop)
            for position, call in self._function_calls(function):
                owner_loop = self._loop_owner(module, call.loop)
                if loop is None and owner_loop >= 0:
                    continue  # that call belongs to a step loop, which is a root of its own
                if loop is not None and (owner_loop != loop or self._leaves(module, call, loop)):
                    continue
                if guarded_off(call.guards, arguments.get(function.key())):
                    continue
                for callee in self.callees(function, position):
                    sites.setdefault(callee.key(), (callee, []))[1].append((function, call))
                    if callee.key() in hot or callee.info.rare or self._trains(callee):
                        continue
                    if reason.origin not in _MODEL_CODE and self._driving_loops(callee):
                        self._drivers.setdefault(callee.key(), callee)
                        continue  # runs once per many model calls: its own loop is the step
                    text = f"called from {caller}" + (f", {reason.callers}" if reason.callers else "")
                    hot[callee.key()] = ExternalReason(reason.origin, text)
                    queue.append((callee, None, hot[callee.key()]))

    @staticmethod
    def _leaves(module: Module, call: Call, loop: int) -> bool:
        """`call` is in a block that ends by leaving the step loop `loop` (`if done: ...; break`):
        it runs once per training, on the last step."""
        left, loops = call.leaves, module.summary.loops
        while loop >= 0 and loop != left:
            loop = loops[loop].parent
        return left >= 0 and loop == left

    def _trains(self, function: FunctionRef) -> bool:
        """It runs a step loop of its own: once per training, whoever calls it (hotpath.py)."""
        loops = function.module.summary.loops
        return any(loops[i].function == function.index for i in self.step_loops(function.module))

    def _describe_caller(self, function: FunctionRef, loop: Optional[int]) -> str:
        module = function.module
        if loop is not None:
            info = module.summary.loops[loop]
            what = f"loop over {info.loader}" if info.loader else "training loop"
            if loop in self._inference_loops.get(id(module), ()):
                what = INFERENCE_LOOP
            return f"{what} ({module.display}:{info.line})"
        return f"{function.info.qualname} ({module.display}:{function.info.line})"

    # -- CUDA ----------------------------------------------------------------------------
    def cuda_helpers(self) -> dict[int, str]:
        """Modules that show CUDA use through a project helper that returns a CUDA device
        (`dist_util.dev()`, `select_device(opt.device)`), with the helper named."""
        if self._helpers is not None:
            return self._helpers
        found: dict[int, str] = {}
        for module in self.modules.values():
            for function, position in self._call_sites(module):
                helper = next(
                    (c for c in self.callees(function, position) if c.info.returns_cuda_device), None
                )
                if helper is not None:
                    where = f"{helper.info.qualname} ({helper.module.display}:{helper.info.line})"
                    found[id(module)] = f"calls {where}, which returns a CUDA device"
                    break
        self._helpers = found
        return found

    def shows_cuda(self, module: Module) -> bool:
        return module.summary.shows_cuda or id(module) in self.cuda_helpers()

    @staticmethod
    def _call_sites(module: Module) -> Iterator[tuple[FunctionRef, int]]:
        owners = [module.summary.toplevel, *module.summary.functions]
        for offset, info in enumerate(owners):
            function = FunctionRef(module, offset - 1)
            for position in range(len(info.calls)):
                yield function, position

    def precision_importers(self) -> dict[int, str]:
        """Per module, a module outside the tests that imports it, directly or through others, and
        names a precision decision (DETR-like projects set TF32 or autocast in the script that
        picks the device, not in the engine it imports)."""
        if self._precision_importers is None:
            importers = (
                (importer, importer.display)
                for importer in self._by_display()
                if not importer.is_test and importer.summary.mentions_precision
            )
            self._precision_importers = self._imported_by(importers, with_source=False)
        return self._precision_importers

    def precision_callers(self, module: Module) -> tuple[tuple[int, str], ...]:
        """Per function of `module` that runs a training step (`.backward()`, `optimizer.step()`),
        the module it is called from when every call of it the project resolves comes from other
        modules (not tests) that take a precision decision by default (_sets_precision): the
        caller's process sets the step's precision (pytorch/examples' FSDP `T5_training.py` wraps
        the model with a bfloat16 MixedPrecision policy and calls `utils/train_utils.py`'s
        `train()`)."""
        found: list[tuple[int, str]] = []
        for index, info in enumerate(module.summary.functions):
            callers = self.callers_of(FunctionRef(module, index)) if info.steps else []
            owners = {id(caller.module): caller.module for caller, _ in callers if not caller.module.is_test}
            if owners and all(owner is not module and _sets_precision(owner) for owner in owners.values()):
                found.append((index, min(owner.display for owner in owners.values())))
        return tuple(found)

    def _by_display(self) -> list[Module]:
        return sorted(self.modules.values(), key=lambda m: m.display)

    def _imported_by(self, sources: Iterable[tuple[Module, str]], with_source: bool) -> dict[int, str]:
        """Per module, the reason given with the first of `sources` that imports it, directly or
        through others (or is it, `with_source`): what runs in the process a source starts."""
        found: dict[int, str] = {}
        for source, why in sources:
            todo = [source] if with_source else list(self.imported_modules(source))
            while todo:
                current = todo.pop()
                if id(current) in found or (current is source and not with_source):
                    continue  # reached already, with all it imports
                found[id(current)] = why
                todo.extend(self.imported_modules(current))
        return found

    def cuda_default(self, module: Module) -> Optional[str]:
        """Where the process that runs `module` makes CUDA the default device (NeRF code's
        `torch.set_default_tensor_type("torch.cuda.FloatTensor")`), if anywhere: a module that
        sets it, or one it imports, directly or through others. Another script of the same
        repository runs in a process of its own (cleanrl's single-file scripts)."""
        if self._default is None:
            setters = (
                (setter, f"{setter.display} makes CUDA the default device")
                for setter in self._by_display()
                if not setter.is_test
                and any(
                    info.sets_cuda_default for info in [setter.summary.toplevel, *setter.summary.functions]
                )
            )
            self._default = self._imported_by(setters, with_source=True)
        return self._default.get(id(module))

    def rpc_device_map(self) -> Optional[str]:
        """Where the project configures an RPC device map, if anywhere: then a tensor returned
        over RPC may arrive on a GPU."""
        for module in sorted(self.modules.values(), key=lambda m: m.display):
            if module.summary.rpc_device_map:
                return f"{module.display} configures an RPC device map"
        return None

    def imported_modules(self, module: Module) -> Iterator[Module]:
        """The project modules `module` imports, names from, or reaches through a package."""
        for source, attribute, level in module.summary.imports.values():
            target = self.resolve_module(module, source, level)
            if isinstance(target, Module):
                yield target
            if attribute and target is not None:
                found = self.resolve_global(target, attribute)
                if isinstance(found, Module):
                    yield found
                elif isinstance(found, (FunctionRef, ClassRef)):
                    yield found.module
        for source, level in module.summary.stars:
            target = self.resolve_module(module, source, level)
            if isinstance(target, Module):
                yield target

    def cuda_reasons(self) -> dict[int, str]:
        """Modules that run on CUDA without showing it: reached from hot code or a step loop of a
        module that shows CUDA use, or from the forward of a model such a module moves to the
        device (a device-agnostic `model.py` trained by a `train.py` that picks "cuda"). Being
        imported is not enough: that reaches data transforms and CPU pre-processing."""
        if self._cuda is not None:
            return self._cuda
        reached: dict[int, str] = {}
        queue: deque[tuple[FunctionRef, Optional[int], str]] = deque()
        hot = _of_module(self.hot(), self._hot_by_module)
        for module in self.modules.values():
            if module.is_test or not self.shows_cuda(module):
                continue
            why = f"called per step from {module.display}, which shows CUDA use"
            for index in sorted(self.step_loops(module) | self.inference_loops(module)):
                queue.append((FunctionRef(module, module.summary.loops[index].function), index, why))
            for index, _ in hot.get(id(module), ()):
                queue.append((FunctionRef(module, index), None, why))
            for model, where in self._moved_models(module):
                entry = self.entry_point(model)
                if entry is not None:
                    moved = f"{model.info.qualname} is moved to the device in {where}, which shows CUDA use"
                    queue.append((entry, None, moved))
            # the training function it calls (DETR's main.py calls engine.train_one_epoch once per
            # epoch): its step loops run in this process, on its device
            for function, position in self._call_sites(module):
                for callee in self.callees(function, position):
                    if callee.module is module or callee.index < 0:
                        continue
                    called = f"{callee.info.qualname} is called from {module.display}, which shows CUDA use"
                    for index in sorted(self._loops_of(callee)):
                        queue.append((callee, index, called))
        seen: set[tuple[int, int]] = set()
        while queue:
            function, loop, why = queue.popleft()
            if not self.shows_cuda(function.module):
                reached.setdefault(id(function.module), why)
            for position, call in self._function_calls(function):
                owner_loop = self._loop_owner(function.module, call.loop)
                if (loop is None and owner_loop >= 0) or (loop is not None and owner_loop != loop):
                    continue  # as in hot(): a step loop's calls are its own
                for callee in self.callees(function, position):
                    if callee.key() not in seen:
                        seen.add(callee.key())
                        queue.append((callee, None, why))
        self._cuda = reached
        return reached

    def _loops_of(self, function: FunctionRef) -> frozenset[int]:
        """The step and inference loops `function` owns."""
        module = function.module
        loops = self.step_loops(module) | self.inference_loops(module)
        return frozenset(i for i in loops if module.summary.loops[i].function == function.index)

    # -- memory layout ----------------------------------------------------------------------
    def channels_last_near(self, module: Module) -> bool:
        """A module connected to `module` by imports, either way and through others, names
        channels_last: the project already chose a layout for the models it trains. (Narrower
        than the whole project, so a module that nothing imports stands on its own.)"""
        if self._channels_last is None:
            groups: dict[int, int] = {}

            def find(key: int) -> int:
                while groups.setdefault(key, key) != key:
                    groups[key] = groups[groups[key]]
                    key = groups[key]
                return key

            for each in self.modules.values():
                if each.is_test:
                    continue
                for target in self.imported_modules(each):
                    if not target.is_test:
                        groups[find(id(each))] = find(id(target))
            marked = {find(id(m)) for m in self.modules.values() if m.summary.channels_last and not m.is_test}
            self._channels_last = {id(m): find(id(m)) in marked for m in self.modules.values()}
        return self._channels_last.get(id(module), module.summary.channels_last)

    def convnet_constructors(self, module: Module) -> frozenset[str]:
        """The callees, as `module` writes them, whose calls build a 2-D convnet."""
        return frozenset(w for w in _written_callees(module) if self.layers.builds_2d_convnet(module, w))

    def registry_convnets(self, module: Module) -> frozenset[str]:
        """The members of the project modules `module` looks models up in by name (`resnet` in
        `resnet.__dict__[args.arch]()`) that build a 2-D convnet, as `resnet.resnet32`: the file
        pass picks the member the name selects (analysis/registries.py)."""
        found: set[str] = set()
        for written in module.summary.registries:
            registry = self.resolve_dotted(module, written)
            if not isinstance(registry, Module):
                continue
            # the module's own top level
            names = [f.name for f in registry.summary.functions if f.qualname == f.name]
            names += [c.name for c in registry.summary.classes if c.qualname == c.name]
            found.update(
                f"{written}.{name}" for name in names if self.layers.builds_2d_convnet(registry, name)
            )
        return frozenset(found)

    def encoder_wrappers(self, module: Module) -> tuple[tuple[str, str, int], ...]:
        """The project classes `module` builds, as it writes them, that are 2-D convnets when the
        class one parameter names, which `__init__` calls, is a library convnet (SimSiam and MoCo
        handed `models.__dict__[args.arch]`): (callee, parameter, its position after `self`)."""
        found: set[tuple[str, str, int]] = set()
        for written in _written_callees(module):
            cls = self.resolve_dotted(module, written)
            handed = self.layers.convnet_when_handed_one(cls) if isinstance(cls, ClassRef) else None
            if handed is not None:
                found.add((written, *handed))
        return tuple(sorted(found))

    def keyword_items(self, module: Module) -> tuple[tuple[int, tuple[tuple[str, str], ...]], ...]:
        """Per function of `module` with `**kwargs`, the keys every project call hands it
        (project/keyword_items.py)."""
        found = []
        for index in range(len(module.summary.functions)):
            items = keyword_items(self, FunctionRef(module, index))
            if items is not None:
                found.append((index, tuple(sorted(items.items()))))
        return tuple(found)

    def conv_wrappers(self, module: Module) -> tuple[tuple[str, str, int, str], ...]:
        """The project classes `module` builds, as it writes them, that are one `torch.nn`
        convolution under another name (project/conv_wrappers.py): (callee, bias parameter, its
        position, the convolution's class)."""
        found: set[tuple[str, str, int, str]] = set()
        for written in _written_callees(module):
            cls = self.resolve_dotted(module, written)
            if not isinstance(cls, ClassRef) or not cls.info.conv_wrapper:
                continue
            callee, param, position = cls.info.conv_wrapper
            conv = self.resolve_dotted(cls.module, callee)
            name = nn_class_name(conv.qualified, NN_CONVS) if isinstance(conv, External) else None
            if name is not None:
                found.add((written, param, int(position), name))
        return tuple(sorted(found))

    def own_call_classes(self, module: Module) -> frozenset[str]:
        """The callees, as `module` writes them, that build an instance of a project class whose
        `__call__` is the project's own and does not hand on to `super().__call__`: calling the
        instance runs that method, not a module's forward."""
        return frozenset(
            written
            for written in _written_callees(module)
            if isinstance(cls := self.resolve_dotted(module, written), ClassRef) and self._own_call(cls)
        )

    def project_classes(self, module: Module) -> frozenset[str]:
        """The callees, as `module` writes them, that build an instance of a project class."""
        return frozenset(
            written
            for written in _written_callees(module)
            if isinstance(self.resolve_dotted(module, written), ClassRef)
        )

    def handed_back(self, module: Module) -> tuple[tuple[str, int, str], ...]:
        """The plain project functions `module` calls, as it writes them, that hand back one of
        their parameters as it came in on some path: (callee, position, parameter)."""
        found: set[tuple[str, int, str]] = set()
        for written in _written_callees(module):
            callee = self.resolve_dotted(module, written)
            if isinstance(callee, FunctionRef) and callee.info.cls < 0:
                found.update((written, callee.info.params.index(p), p) for p in callee.info.returns_params)
        return tuple(sorted(found))

    def host_data_builders(self, module: Module) -> frozenset[str]:
        """The project functions and methods `module` calls, as it writes them (`load_ids`,
        `corpus.get_data`), whose every `return` hands back host data they build: what each call
        may run, at every place the module writes it."""
        verdicts: dict[str, bool] = {}
        for function, position in self._call_sites(module):
            call = self._call(function, position)
            if call.kind not in ("global", "dotted", "instance"):
                continue
            written = call.target.replace("|", ".")
            callees = self.callees(function, position)
            host = bool(callees) and all(c.info.returns_host_data for c in callees)
            verdicts[written] = verdicts.get(written, True) and host
        return frozenset(written for written, host in verdicts.items() if host)

    def host_copiers(self, module: Module) -> tuple[tuple[str, int], ...]:
        """The project functions `module` calls, as it writes them (`to_cpu`), that copy one of
        their parameters to the host on every `return` (`return tensor.detach().cpu()`), with its
        position: a call handing one a device tensor reads the device, a sync at the call."""
        verdicts: dict[str, Optional[int]] = {}
        for function, position in self._call_sites(module):
            call = self._call(function, position)
            if call.kind not in ("global", "dotted"):
                continue
            written = call.target.replace("|", ".")
            callees = self.callees(function, position)
            copied = {c.info.params.index(c.info.copies_to_host) for c in callees if c.info.copies_to_host}
            known = len(copied) == 1 and all(c.info.copies_to_host and c.info.cls < 0 for c in callees)
            index = copied.pop() if known else None
            verdicts[written] = index if verdicts.get(written, index) == index else None
        return tuple(sorted((written, index) for written, index in verdicts.items() if index is not None))

    def _own_call(self, cls: ClassRef) -> bool:
        method = self.find_method(cls, "__call__")
        return method is not None and not any(
            call.kind == "super" and call.target == "__call__" for call in method.info.calls
        )

    def signal_convnet_constructors(self, module: Module) -> frozenset[str]:
        """Those of convnet_constructors whose model also works on a signal or a volume."""
        return frozenset(
            written
            for written in self.convnet_constructors(module)
            if self.layers.takes_signal(module, written)
        )

    def model_precision(self, module: Module) -> Optional[str]:
        """How a model class `module` constructs (or a class it builds, or a base) runs reduced
        precision by itself on its default configuration (project/precision.py), or None."""
        todo: deque[tuple[Module, str, int]] = deque((module, w, 0) for w in _written_callees(module))
        seen: set[tuple[int, int]] = set()
        while todo:
            owner, written, depth = todo.popleft()
            found = self.resolve_dotted(owner, written.partition("#")[0])
            if not isinstance(found, ClassRef) or found.key() in seen or depth > _MAX_MODEL_DEPTH:
                continue
            seen.add(found.key())
            for current in self.lineage(found):
                if current.info.reduced_precision and self.is_module_class(current):
                    return f"{current.info.reduced_precision} ({current.module.display})"
                todo.extend((current.module, built, depth + 1) for built in current.info.builds)
        return None

    def _moved_models(self, module: Module) -> Iterator[tuple[ClassRef, str]]:
        """The project's model classes `module` constructs and moves (`Net().to(device)`), then those
        the functions it calls move (DETR's main.py calls build_model, whose build() moves the
        criterion to `torch.device(args.device)`: it runs in this process too), each with where."""
        for info in [module.summary.toplevel, *module.summary.functions]:
            yield from ((model, module.display) for model in self._moved_by(module, info))
        for model, mover in self._moved_by_callees(module):
            yield model, f"{mover.info.qualname} ({mover.module.display}), called from {module.display}"

    def _moved_by(self, module: Module, info: Function) -> Iterator[ClassRef]:
        for callee in info.moved:
            found = self.resolve_dotted(module, callee)
            if isinstance(found, ClassRef) and self.is_module_class(found):
                yield found

    def _moved_by_callees(self, module: Module) -> Iterator[tuple[ClassRef, FunctionRef]]:
        """The model classes that the project functions `module` calls, or those call in turn (a
        few calls deep), construct and move, with the function that moves each; not those of
        `module` itself, which _moved_models gives first."""
        seen: set[tuple[int, int]] = set()
        todo = deque(
            (callee, 1)
            for function, position in self._call_sites(module)
            for callee in self.callees(function, position)
        )
        while todo:
            function, depth = todo.popleft()
            if function.key() in seen:
                continue
            seen.add(function.key())
            if function.module is not module:
                yield from ((model, function) for model in self._moved_by(function.module, function.info))
            if depth < _MOVER_DEPTH:
                todo.extend(
                    (callee, depth + 1)
                    for position in range(len(function.info.calls))
                    for callee in self.callees(function, position)
                )

    # -- host values passed through calls -------------------------------------------------
    def host_parameters(self) -> dict[tuple[int, int], frozenset[str]]:
        """Parameters for which every call site in the project passes a host value (a string,
        a number, `.cpu()`, `.numpy()`, `.item()`, `torch.from_numpy(...)`), or one of its own
        parameters that is such a parameter (iterated to a fixpoint), or leaves it at a constant
        default; at least one call passes a host value itself."""
        if self._host is None:
            plain = plain_loader_parameters(self)

            def passed_host(
                caller: FunctionRef, call: Call, callee: FunctionRef, host: frozenset[str]
            ) -> tuple[set[str], set[str]]:
                batches = [
                    slot for slot, param in call.batches.items() if param in plain.get(caller.key(), ())
                ]
                return _host_parameter_names(call, callee.info, host, batches)

            self._host = self._passed_by_every_call(passed_host)
        return self._host

    def device_parameters(self) -> dict[tuple[int, int], frozenset[str]]:
        """Parameters for which every call site of the project passes a tensor on the device
        (project/device_tensors.py): one it moves or builds there, a local bound once to what a
        project function returns on the device (given what that call passes), or one of its own
        parameters that is such a parameter (iterated to a fixpoint)."""
        if self._device is None:
            moved: dict[int, list[str]] = {}  # per call: the slots it passes on the device itself

            def passed_device(
                caller: FunctionRef, call: Call, callee: FunctionRef, device: frozenset[str]
            ) -> tuple[set[str], set[str]]:
                if id(call) not in moved:
                    bound = [
                        slot for slot, name in call.bound_args.items() if self._binds_device(caller, name)
                    ]
                    moved[id(call)] = [*call.device_args, *bound]
                slots = [
                    *moved[id(call)],
                    *(slot for slot, param in call.param_args.items() if param in device),
                ]
                return _filled_parameters(call, callee, slots, call.star), set()

            self._device = self._passed_by_every_call(passed_device)
        return self._device

    def host_tensor_parameters(self) -> dict[tuple[int, int], frozenset[str]]:
        """Parameters for which every call site of the project passes CPU tensors only, or lists
        and tuples of them (project/host_tensors.py): built there, a local bound only to what
        project functions return so on every `return` (DETR's `indices = self.matcher(outputs,
        targets)`), or one of its own such parameters (iterated to a fixpoint). Where a module
        makes CUDA the default device the file pass does not believe it (analysis/devices.py)."""
        if self._host_tensors is None:
            results: dict[tuple[int, str], bool] = {}

            def passed_host_tensors(
                caller: FunctionRef, call: Call, callee: FunctionRef, known: frozenset[str]
            ) -> tuple[set[str], set[str]]:
                slots = [
                    *call.host_tensor_args,
                    *(
                        slot
                        for slot, name in call.bound_args.items()
                        if self._binds_host_tensors(caller, name, results)
                    ),
                    *(slot for slot, param in call.param_args.items() if param in known),
                ]
                return _filled_parameters(call, callee, slots, call.unpacks_args), set()

            self._host_tensors = self._passed_by_every_call(passed_host_tensors)
        return self._host_tensors

    def _binds_host_tensors(self, caller: FunctionRef, name: str, memo: dict[tuple[int, str], bool]) -> bool:
        """`caller` binds `name` only to calls of project functions that each hand back CPU tensors
        on every `return`."""
        caller, name = _binding_function(caller, name)
        key = (id(caller.info), name)
        if key not in memo:
            binders = caller.info.binders_of(name) if caller.index >= 0 else []
            memo[key] = bool(binders) and all(
                (targets := self.resolve_call(caller, binder))
                and all(t.info.returns_host_tensors for t in targets)
                for binder in binders
            )
        return memo[key]

    def _passed_by_every_call(self, passed_by: _PassedBy) -> dict[tuple[int, int], frozenset[str]]:
        """Per function, the parameters every resolved call of the project passes a value of one
        kind for, or leaves at a default of that kind: `passed_by(caller, call, callee, known)`
        gives both sets for one call, `known` being the caller's own such parameters. Iterated to a
        fixpoint; at least one call passes the value itself."""
        edges = self._call_edges()
        found: dict[tuple[int, int], frozenset[str]] = {}
        while True:
            seen: dict[tuple[int, int], set[str]] = {}
            given: dict[tuple[int, int], set[str]] = {}
            for caller, call, callee in edges:
                passed, omitted = passed_by(caller, call, callee, found.get(caller.key(), frozenset()))
                key = callee.key()
                either = passed | omitted
                seen[key] = either if key not in seen else seen[key] & either
                given.setdefault(key, set()).update(passed)
            now = {key: frozenset(names & given[key]) for key, names in seen.items() if names & given[key]}
            if now == found:
                return found
            found = now

    def moved_results(self) -> frozenset[tuple[int, int]]:
        """Functions whose result every call made from hot code moves to the device right away
        (swinir's `self.calculate_mask(x_size).to(x.device)` in `forward`): what they build on
        the host crosses to the device each time. At least one such call."""
        if self._moved_results is None:
            hot = self.hot()
            moved: dict[tuple[int, int], bool] = {}
            for caller, call, callee in self._call_edges():
                if caller.key() in hot:
                    key = callee.key()
                    moved[key] = moved.get(key, True) and call.moved_result
            self._moved_results = frozenset(key for key, every in moved.items() if every)
        return self._moved_results

    def _binds_device(self, caller: FunctionRef, name: str) -> bool:
        """`caller` binds `name` once to a call of project functions that each hand back a tensor
        on the device on every `return`, given what that call passes."""
        caller, name = _binding_function(caller, name)
        binder = caller.info.binder_of(name) if caller.index >= 0 else None
        if binder is None:
            return False
        targets = self.resolve_call(caller, binder)
        return bool(targets) and all(
            target.info.device_returns
            and all(
                passes_device(source, functools.partial(_given_token, binder, target.info))
                for source in target.info.device_returns
            )
            for target in targets
        )

    def _call_edges(self) -> list[tuple[FunctionRef, Call, FunctionRef]]:
        """Every resolved call of the project: (caller, call, callee)."""
        if self._edges is None:
            self._edges = [
                (function, self._call(function, position), callee)
                for module in self.modules.values()
                for function, position in self._call_sites(module)
                for callee in self.callees(function, position)
            ]
        return self._edges

    def module_parameters(self) -> dict[tuple[int, int], frozenset[str]]:
        """Parameters every call of the project passes a model for: a name its caller binds only
        to instances of nn.Module classes (`train(args, generator, discriminator)` after
        `discriminator = Discriminator(...)`, maybe wrapped in DDP). Calls are those the project
        resolves; a function none of them reaches has none."""
        if self._modules_passed is not None:
            return self._modules_passed
        passed: dict[tuple[int, int], set[str]] = {}
        for caller, call, callee in self._call_edges():
            models = {
                param
                for slot, classes in call.instances.items()
                if (param := slot_parameter(call, callee.info, slot)) is not None
                and all(self._builds_module(caller.module, cls) for cls in classes)
            }
            key = callee.key()
            passed[key] = models if key not in passed else passed[key] & models
        self._modules_passed = {key: frozenset(names) for key, names in passed.items() if names}
        return self._modules_passed

    def _builds_module(self, module: Module, written: str) -> bool:
        found = self.resolve_dotted(module, written)
        if isinstance(found, ClassRef):
            return self.is_module_class(found)
        return isinstance(found, External) and is_module_base(found.qualified, self.module_bases)

    def wrapped_parameters(self) -> dict[tuple[int, int], dict[str, str]]:
        """Per function, the parameters some call of the project passes a model wrapped by DDP or
        FSDP for (`train_one_epoch(model, ...)` after `model = DDP(model)`), with the wrapper: the
        training loop that receives it all-reduces at every backward()."""
        if self._wrapped is None:
            self._wrapped = {}
            for module in self.modules.values():
                for offset, info in enumerate([module.summary.toplevel, *module.summary.functions]):
                    function = FunctionRef(module, offset - 1)
                    for call in (*info.calls, *info.cold_calls):
                        if call.wrapped and not call.star:
                            self._record_wrapped(function, call)
        return self._wrapped

    def _record_wrapped(self, function: FunctionRef, call: Call) -> None:
        assert self._wrapped is not None
        for callee in self.resolve_call(function, call):
            for slot, wrapper in call.wrapped.items():
                param = slot_parameter(call, callee.info, slot)
                if param is not None:
                    self._wrapped.setdefault(callee.key(), {})[param] = wrapper

    def wrapper_builders(self, module: Module) -> dict[str, str]:
        """The callees, as `module` writes them, that are project functions returning a model
        they wrap in DDP or FSDP (yolov5's `smart_DDP`): callee -> the wrapper's qualified name."""
        found: dict[str, str] = {}
        for offset, info in enumerate([module.summary.toplevel, *module.summary.functions]):
            function = FunctionRef(module, offset - 1)
            for call in (*info.calls, *info.cold_calls):
                if call.kind not in ("global", "dotted") or call.target in found:
                    continue
                for callee in self.resolve_call(function, call):
                    for built in callee.info.returns:
                        wrapper = self.resolve_dotted(callee.module, built[0]) if built else None
                        if isinstance(wrapper, External) and wrapper.qualified in GRADIENT_SYNC_WRAPPERS:
                            found[call.target] = wrapper.qualified
        return found

    def compiles(self) -> Optional[str]:
        """Where some module of the project compiles (a `torch.compile` call or decorator): a
        training script whose model another module compiles is compiled."""
        if self._compiles is None:
            self._compiles = ""
            for module in self.modules.values():
                if module.is_test:
                    continue
                for info in [module.summary.toplevel, *module.summary.functions]:
                    names = [
                        (c.target, c.line)
                        for c in (*info.calls, *info.cold_calls)
                        if c.kind in ("global", "dotted")
                    ]
                    names.extend((d, info.line) for d in info.decorators)
                    for name, line in names:
                        found = self.resolve_dotted(module, name)
                        if isinstance(found, External) and found.qualified == "torch.compile":
                            self._compiles = f"{module.display}:{line} calls torch.compile"
                            return self._compiles
        return self._compiles or None

    def host_read_keys(self, module: Module) -> frozenset[str]:
        """The keys of the dict literals `module` returns that the project reads, and only ever
        reads on the host (`params["order"].tolist()`, `for i in params["order"]`): an entry
        built there on the host stays where it is used. Keys name entries, not one mapping, so
        a read of the same key anywhere else in the project counts (that only keeps findings)."""
        if self._key_reads is None:
            reads: dict[str, bool] = {}
            for each in self.modules.values():
                if not each.is_test:
                    for key, on_host in each.summary.key_reads.items():
                        reads[key] = reads.get(key, True) and on_host
            self._key_reads = reads
        return frozenset(key for key in module.summary.returned_keys if self._key_reads.get(key, False))

    # -- what one module is handed ---------------------------------------------------------
    def imported_anywhere(self) -> frozenset[int]:
        """The modules (by id) that another module of the project imports."""
        if self._imported is None:
            self._imported = frozenset(
                id(target)
                for module in self.modules.values()
                if not module.is_test  # a test importing the training script leaves it a script
                for target in self.imported_modules(module)
                if target is not module
            )
        return self._imported

    def cudnn_decided(self) -> bool:
        """Some module of the project sets cudnn.benchmark/deterministic (TPL403)."""
        if self._cudnn is None:
            self._cudnn = any(m.summary.cudnn_decision for m in self.modules.values())
        return self._cudnn

    def movers(self) -> tuple[tuple[str, bool], ...]:
        """The project's classes, other than modules and datasets, whose own or inherited project method
        `to`/`cuda` moves them (DETR's `NestedTensor.to(self, device)`), and whether it takes
        `non_blocking` (by name or through `**kwargs`): a batch of such a class cannot be
        given arguments its method lacks."""
        if self._movers is None:
            found: dict[str, bool] = {}
            for module in self.modules.values():
                for index in range(len(module.summary.classes)):
                    cls = ClassRef(module, index)
                    if self.is_module_class(cls) or self.is_dataset_class(cls):
                        continue
                    for name in ("to", "cuda"):
                        method = self.find_method(cls, name)
                        if method is not None:
                            info = method.info
                            takes = info.varkw or "non_blocking" in info.params
                            found[cls.info.name] = found.get(cls.info.name, True) and takes
            self._movers = tuple(sorted(found.items()))
        return self._movers

    def left_unpinned(self, cls: ClassRef) -> bool:
        """A batch of this class stays in pageable memory under `pin_memory=True`: the loader's
        pinning calls a batch's own `pin_memory()` or walks into tensors, mappings and sequences,
        and hands anything else back as it is. Read for the project's own movers (a class, not a
        module, with a `to`/`cuda` of its own, like DETR's `NestedTensor`) whose bases are all
        project classes, so no container base of a library makes them pinnable."""
        for current in self.lineage(cls):
            for base in current.info.bases:
                if base != "object" and not isinstance(self.resolve_dotted(current.module, base), ClassRef):
                    return False
        return (
            not self.is_module_class(cls)
            and self.find_method(cls, "pin_memory") is None
            and any(self.find_method(cls, name) is not None for name in ("to", "cuda"))
        )

    def packs_unpinned(self, function: FunctionRef) -> Optional[ClassRef]:
        """The class left unpinned (`left_unpinned`) that a collate function packs its batch
        into: one it constructs, or one a function it calls returns (DETR's `collate_fn` calls
        `nested_tensor_from_tensor_list`, which returns a `NestedTensor`)."""
        for call in function.info.calls:
            if call.kind == "def":
                found: Optional[Resolved] = FunctionRef(function.module, int(call.target))
            elif call.kind in ("global", "dotted"):
                found = self.resolve_dotted(function.module, call.target)
            else:
                continue
            built = [found]
            if isinstance(found, FunctionRef):
                built = [self.resolve_dotted(found.module, r[0]) for r in found.info.returns if r]
            for cls in built:
                if isinstance(cls, ClassRef) and self.left_unpinned(cls):
                    return cls
        return None

    def unpinned_collates(self, module: Module) -> frozenset[str]:
        """The `collate_fn=` values of the module, as written, whose batches `packs_unpinned`."""
        found = set()
        for name in module.summary.collates:
            collate = self.resolve_dotted(module, name)
            if isinstance(collate, FunctionRef) and self.packs_unpinned(collate) is not None:
                found.add(name)
        return frozenset(found)

    def _is_ddp(self, module: Module, dotted: str) -> bool:
        found = self.resolve_dotted(module, dotted)
        return isinstance(found, External) and found.qualified in DISTRIBUTED_DATA_PARALLEL

    def offers_ddp(self, module: Module) -> Optional[str]:
        """Why the module already offers DistributedDataParallel: a call of its own builds one,
        or calls a project function that returns one it builds (yolov5's `smart_DDP`); or a class
        of it is an alternative to one that builds one, the two deriving from one project base
        (Lightning's DataParallelStrategy and DDPStrategy): the user picks which runs."""
        for index in range(-1, len(module.summary.functions)):
            found = self._builds_ddp(FunctionRef(module, index))
            if found is not None:
                return found
        for index in range(len(module.summary.classes)):
            cls = ClassRef(module, index)
            for base in list(self.lineage(cls))[1:]:
                found = self._ddp_among_subclasses(base)
                if found is not None:
                    return f"{cls.info.name} and {found}, both deriving from {base.info.name}"
        return None

    def _ddp_among_subclasses(self, base: ClassRef) -> Optional[str]:
        """A subclass of `base` whose method builds a DistributedDataParallel, said for a reader."""
        key = base.key()
        if key not in self._ddp_subclass_memo:
            self._ddp_subclass_memo[key] = None
            for sibling in self.subclasses(base):
                for method in sibling.info.methods.values():
                    found = self._builds_ddp(FunctionRef(sibling.module, method))
                    if found is not None:
                        self._ddp_subclass_memo[key] = (
                            f"{sibling.info.name} ({sibling.module.display}) are alternatives;"
                            f" {sibling.info.name} {found}"
                        )
                        break
                if self._ddp_subclass_memo[key] is not None:
                    break
        return self._ddp_subclass_memo[key]

    def _builds_ddp(self, function: FunctionRef) -> Optional[str]:
        """How `function` builds a DistributedDataParallel, itself or through a project helper."""
        for position, call in enumerate(function.info.calls):
            if call.kind in ("global", "dotted") and self._is_ddp(function.module, call.target):
                return f"builds DistributedDataParallel at line {call.line}"
            for callee in self.callees(function, position):
                if any(built and self._is_ddp(callee.module, built[0]) for built in callee.info.returns):
                    return (
                        f"calls {callee.info.qualname} ({callee.module.display}) at line {call.line},"
                        " which returns a DistributedDataParallel"
                    )
        return None

    def published(self) -> dict[tuple[int, int], str]:
        """Functions whose layers keep a published checkpoint's layout, and why (checkpoints.py)."""
        if self._published is None:
            self._published = published_functions(self)
        return self._published

    def grad_free(self, module: Module) -> frozenset[int]:
        """The functions of `module` every project caller runs without grad (grad_free.py)."""
        if self._grad_free is None:
            self._grad_free = grad_free_functions(self)
        return self._grad_free.get(id(module), frozenset())

    def stepped(self, module: Module) -> frozenset[int]:
        """The functions of `module` (-1: its top level) the project's own programs run (stepping.py)."""
        if self._stepped is None:
            self._stepped = stepped_functions(self)
        return self._stepped.get(id(module), frozenset())

    def entry_facts(self, module: Module) -> EntryFacts:
        key = id(module)
        hot = self.hot()
        module_classes = frozenset(
            i for i in range(len(module.summary.classes)) if self.is_module_class(ClassRef(module, i))
        )
        hot_functions = tuple(sorted(_of_module(hot, self._hot_by_module).get(key, ()), key=_first))
        entry_points: list[int] = []
        for index in module_classes:
            ref = ClassRef(module, index)
            for qualified in self.external_bases(ref):
                for name in extra_entry_points(qualified):
                    method = ref.info.methods.get(name)
                    if method is not None:
                        entry_points.append(method)
        idle = frozenset(
            entry.index
            for index in module_classes
            if (entry := self.entry_point(ClassRef(module, index))) is not None
            and self._never_runs(ClassRef(module, index), entry)
        )
        no_grad = frozenset(
            name
            for name in set(module.summary.contexts)
            if isinstance(found := self.resolve_dotted(module, name), FunctionRef) and found.info.no_grad
        )
        host = tuple(
            sorted(_of_module(self.host_parameters(), self._host_by_module).get(key, ()), key=_first)
        )
        arguments = tuple(
            (index, tuple(sorted(values.items())))
            for (owner, index), values in sorted(self.argument_values().items(), key=lambda item: item[0][1])
            if owner == key
        )
        return EntryFacts(
            module_classes=module_classes,
            argument_values=arguments,
            hot_functions=hot_functions,
            entry_points=tuple(sorted(set(entry_points))),
            idle_entry_points=idle,
            step_loops=self.step_loops(module),
            inference_loops=self.inference_loops(module),
            model_loops=self.model_loops(module),
            model_drivers=self.model_drivers(module),
            no_grad_callables=no_grad,
            grad_free_functions=self.grad_free(module),
            host_parameters=host,
            moved_results=frozenset(index for owner, index in self.moved_results() if owner == key),
            device_parameters=tuple(
                sorted(_of_module(self.device_parameters(), self._device_by_module).get(key, ()), key=_first)
            ),
            host_tensor_parameters=tuple(
                sorted(
                    _of_module(self.host_tensor_parameters(), self._host_tensors_by_module).get(key, ()),
                    key=_first,
                )
            ),
            module_parameters=tuple(
                sorted(_of_module(self.module_parameters(), self._modules_by_module).get(key, ()), key=_first)
            ),
            host_read_keys=self.host_read_keys(module),
            runs_on_cuda=self.cuda_reasons().get(key),
            movers=self.movers(),
            unpinned_collates=self.unpinned_collates(module),
            offers_ddp=self.offers_ddp(module),
            compiles=self.compiles(),
            wrapper_builders=tuple(sorted(self.wrapper_builders(module).items())),
            wrapped_parameters=tuple(
                (index, tuple(sorted(params.items())))
                for index, params in sorted(
                    _of_module(self.wrapped_parameters(), self._wrapped_by_module).get(key, ()), key=_first
                )
            ),
            cudnn_decided=self.cudnn_decided(),
            imported=key in self.imported_anywhere(),
            convnet_constructors=self.convnet_constructors(module),
            registry_convnets=self.registry_convnets(module),
            conv_wrappers=self.conv_wrappers(module),
            encoder_wrappers=self.encoder_wrappers(module),
            own_call_classes=self.own_call_classes(module),
            project_classes=self.project_classes(module),
            handed_back=self.handed_back(module),
            host_data_builders=self.host_data_builders(module),
            host_copiers=self.host_copiers(module),
            host_copier_functions=frozenset(
                i for i, f in enumerate(module.summary.functions) if f.copies_to_host and f.cls < 0
            ),
            model_precision=self.model_precision(module),
            signal_convnet_constructors=self.signal_convnet_constructors(module),
            stepped_model_builders=self.stepped_model_builders(module),
            channels_last_near=self.channels_last_near(module),
            cuda_helper=self.cuda_helpers().get(key),
            precision_importer=self.precision_importers().get(key),
            precision_callers=self.precision_callers(module),
            cuda_default=self.cuda_default(module),
            rpc_device_map=self.rpc_device_map(),
            published_weights=tuple(
                sorted(_of_module(self.published(), self._published_by_module).get(key, ()), key=_first)
            ),
            in_memory_datasets=self.datasets.names(module),
            in_memory_parameters=tuple(
                sorted(
                    _of_module(self.datasets.parameters(), self._datasets_by_module).get(key, ()), key=_first
                )
            ),
            keyword_items=self.keyword_items(module),
            stepped_functions=self.stepped(module),
            star_imports=tuple(sorted(self.star_imports(module).items())),
            reiterated_loaders=self.reiterated_loaders().get(key, frozenset()),
            empty_fallbacks=tuple(
                (index, tuple(sorted(function.empty_fallbacks.items())))
                for index, function in enumerate(module.summary.functions)
                if function.empty_fallbacks
            ),
            optimizer_names=tuple(
                (index, frozenset(function.optimizers))
                for index, function in [(-1, module.summary.toplevel), *enumerate(module.summary.functions)]
                if function.optimizers
            ),
            item_generators=tuple(
                (index, function.yields_items_of)
                for index, function in enumerate(module.summary.functions)
                if function.yields_items_of
            ),
            bounded_loops=frozenset(i for i, loop in enumerate(module.summary.loops) if loop.bounded),
            rare_functions=frozenset(
                i for i, function in enumerate(module.summary.functions) if function.rare
            ),
            preparing_functions=frozenset(
                i
                for i, function in enumerate(module.summary.functions)
                if function.cls >= 0
                and prepares_dataset(function.name, module.summary.classes[function.cls].bases)
            ),
            display_name=module.display,
            counts=(len(module.summary.functions), len(module.summary.classes), len(module.summary.loops)),
        )


def _filled_parameters(
    call: Call, callee: FunctionRef, slots: Iterable[str], unsure_positions: bool
) -> set[str]:
    """The callee's parameters `call` fills at `slots`; none by position where those are not sure
    (`unsure_positions`: an unpacking comes before them)."""
    return {
        param
        for slot in slots
        if not (unsure_positions and slot.isdigit())
        and (param := slot_parameter(call, callee.info, slot)) is not None
    }


def _binding_function(caller: FunctionRef, name: str) -> tuple[FunctionRef, str]:
    """The function that binds a name Call.bound_args gives, and the name there: the caller, or
    the function it is nested in, one level per ENCLOSING mark (the top level, index -1, where
    there is none)."""
    while name.startswith(ENCLOSING):
        caller = FunctionRef(caller.module, caller.info.parent if caller.index >= 0 else -1)
        name = name[1:]
    return caller, name


# how many calls deep cuda_reasons looks for a model moved by what a CUDA script calls
_MOVER_DEPTH = 3


def _of_module(
    table: dict[tuple[int, int], Any], index: dict[int, list[tuple[int, Any]]]
) -> dict[int, list[tuple[int, Any]]]:
    """`table` ((module id, index) -> value) grouped by module, filled into `index` once."""
    if table and not index:
        for (owner, position), value in table.items():
            index.setdefault(owner, []).append((position, value))
    return index


def _written_callees(module: Module) -> list[str]:
    """The module-level and dotted names `module` calls, as it writes them, each once."""
    return list(
        dict.fromkeys(
            call.target
            for function in (module.summary.toplevel, *module.summary.functions)
            for call in function.calls
            if call.kind in ("global", "dotted")
        )
    )


# what one call passes of a kind of value (project.host_parameters, device_parameters): (caller,
# call, callee, the caller's own parameters holding one) -> (parameters it passes one for, those
# it leaves at a default that is one)
_PassedBy = Callable[[FunctionRef, Call, FunctionRef, frozenset[str]], tuple[set[str], set[str]]]


def _first(item: tuple[int, Any]) -> int:
    return item[0]


def _host_parameter_names(
    call: Call, callee: Function, host: frozenset[str], batches: Iterable[str] = ()
) -> tuple[set[str], set[str]]:
    """The callee's parameters that `call` passes a host value for (`host`: the caller's own
    parameters known to hold one; `batches`: the slots passing the unmoved batches of a plain
    loader), and those it leaves at a constant default (`None`, a number)."""
    params = callee.params
    bound = bound_self(call, callee)
    names = set()
    for arg in [*call.host_args, *batches, *(a for a, p in call.param_args.items() if p in host)]:
        if not arg.isdigit():
            if arg in params:
                names.add(arg)
        elif int(arg) + bound < len(params):
            names.add(params[int(arg) + bound])
    if call.star:
        return names, set()
    given = {params[int(a) + bound] for a in call.args if a.isdigit() and int(a) + bound < len(params)}
    given.update(a for a in call.args if not a.isdigit())
    omitted = {p for p in params[bound:] if p not in given and _constant(callee.defaults.get(p))}
    return names, omitted


def _given_token(call: Call, callee: Function, param: str) -> Optional[str]:
    """What `call` writes for the callee's `param` (analysis/arguments.py's token, "?" for an
    expression), its default where it passes nothing for it, None where `*args`/`**kwargs` may."""
    for slot, token in call.args.items():
        if slot_parameter(call, callee, slot) == param:
            return token
    return None if call.star else callee.defaults.get(param)


def _constant(token: Optional[str]) -> bool:
    """A default that is no tensor: None, a number, a string, a boolean."""
    if token is None:
        return False
    try:
        return isinstance(ast.literal_eval(token), (type(None), int, float, str, bool))
    except (ValueError, SyntaxError):
        return False


def _dotted_names(path: Path, root: Path) -> Iterator[str]:
    """Every name a module may be imported by: the dotted suffixes of its path under the root
    (`src/pkg/mod.py` -> `src.pkg.mod`, `pkg.mod`, `mod`), which covers src layouts, scripts'
    sibling imports and namespace packages."""
    try:
        parts = list(path.relative_to(root).parts)
    except ValueError:
        parts = [path.name]
    if parts[-1] == "__init__.py":
        parts = parts[:-1]
        if not parts:
            return
    else:
        parts[-1] = parts[-1][: -len(".py")]
    for start in range(len(parts)):
        if all(p.isidentifier() for p in parts[start:]):
            yield ".".join(parts[start:])


def _common_parts(a: Path, b: Path) -> int:
    count = 0
    for x, y in zip(a.parts, b.parts, strict=False):
        if x != y:
            break
        count += 1
    return count


# a command-line option that switches reduced precision (`--use_amp`, `--fp16`, `--precision`)
_PRECISION_OPTION = re.compile(r"amp|fp16|bf16|half|precision|autocast", re.IGNORECASE)


def _sets_precision(module: Module) -> bool:
    """`module` names a precision decision (vocabulary.mentions_reduced_precision), and none behind
    an option the default run leaves off: every option of its that names precision defaults to
    True (ConvNeXt's main.py names autocast behind `--use_amp`, False by default: opt-in)."""
    options = module.summary.option_defaults
    return module.summary.mentions_precision and all(
        options[dest] == "True" for dest in options if _PRECISION_OPTION.search(dest)
    )
