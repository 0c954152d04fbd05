"""What the project's models are made of: the layers each module class builds (in its methods and
those of its project bases, through the classes and factory functions it calls or is handed), added
up by analysis/layers.py's words. Answers which constructors, as one module writes them, build a
2-D convnet (TPL404).
"""

from __future__ import annotations

from typing import Optional

from ..analysis.layers import LayerCounts, is_library_convnet, library_layer
from .refs import ClassRef, External, FunctionRef, Module, ProjectView

_MAX_DEPTH = 16  # nesting of classes and factories followed
# what one call of a library convnet handed in as a class (`models.resnet50`) adds to a profile
_HANDED_CONVNET = library_layer("torchvision.models.resnet50") or LayerCounts()


class LayerProfiles:
    def __init__(self, project: ProjectView) -> None:
        self._project = project
        self._memo: dict[tuple[str, int, int], LayerCounts] = {}
        self._convnets: dict[tuple[int, str], bool] = {}

    def of_name(self, module: Module, written: str, depth: int = 0) -> Optional[LayerCounts]:
        """The layers one call of `written` (as `module` spells it, with built()'s `#grouped`
        tag) builds; None when it builds nothing counted or cannot be resolved."""

        name, _, tag = written.partition("#")
        found = self._project.resolve_dotted(module, name)
        if isinstance(found, External):
            return library_layer(found.qualified + (f"#{tag}" if tag else ""))
        if depth >= _MAX_DEPTH:
            return None
        if isinstance(found, ClassRef):
            return self.of_class(found, depth + 1)
        if isinstance(found, FunctionRef):
            return self._of_factory(found, depth + 1)
        return None

    def of_class(self, cls: ClassRef, depth: int = 0) -> LayerCounts:
        key = ("class", *cls.key())
        known = self._memo.get(key)
        if known is not None:
            return known
        total = self._memo[key] = LayerCounts()  # a cycle adds nothing
        if cls.info.name.endswith(("LayerNorm", "LayerNorm2d")):
            total.layer_norms += 1
        for current in self._project.lineage(cls):
            for written in current.info.builds:
                counts = self.of_name(current.module, written, depth)
                if counts is not None:
                    total.add(counts)
        return total

    def _of_factory(self, function: FunctionRef, depth: int) -> LayerCounts:
        """A function's layers: those of what its `return` statements build (`def resnet50():
        return ResNet(Bottleneck, [3, 4, 6, 3])`, `def conv3x3(...): return nn.Conv2d(...)`), or,
        for a builder that returns a container it fills (`return hyperparams, module_list`),
        everything its body builds."""
        key = ("function", *function.key())
        known = self._memo.get(key)
        if known is not None:
            return known
        total = self._memo[key] = LayerCounts()
        written_calls = function.info.builds or [w for returned in function.info.returns for w in returned]
        for written in written_calls:
            counts = self.of_name(function.module, written, depth)
            if counts is not None:
                total.add(counts)
        return total

    def convnet_when_handed_one(self, cls: ClassRef) -> Optional[tuple[str, int]]:
        """(the parameter, its position after `self`, -1 for keyword-only) of a class whose
        `__init__` calls one of its parameters to build a part (SimSiam's `self.encoder =
        base_encoder(num_classes=dim)`), when the class is a 2-D convnet once that part is a library
        convnet (a ResNet under a projection head); None for any other class."""
        index = cls.info.methods.get("__init__")
        if index is None:
            return None
        init = cls.module.summary.functions[index]
        params = init.params[1:]
        called = [p for p in params if p in cls.info.builds]
        if len(called) != 1:
            return None
        total = LayerCounts()
        total.add(self.of_class(cls))
        for written in cls.info.builds:
            if written == called[0]:
                total.add(_HANDED_CONVNET)
        if not total.is_2d_convnet:
            return None
        position = params.index(called[0])
        return called[0], position if position < init.positional - 1 else -1

    def builds_2d_convnet(self, module: Module, written: str) -> bool:
        """A call of `written` in `module` builds a 2-D convnet: a project model whose layers
        say so, a factory whose every `return` builds one, or a library convnet constructor."""
        key = (id(module), written)
        if key not in self._convnets:
            self._convnets[key] = self._builds_2d_convnet(module, written)
        return self._convnets[key]

    def takes_signal(self, module: Module, written: str) -> bool:
        """A 2-D convnet built by a call of `written` that also works on a signal or a volume
        (1-D or 3-D convolutions, folded kernels): its input may not be a 4-D batch."""

        if isinstance(self._project.resolve_dotted(module, written), External):
            return False
        counts = self.of_name(module, written)
        return counts is not None and not counts.takes_image_batch

    def _builds_2d_convnet(self, module: Module, written: str) -> bool:

        found = self._project.resolve_dotted(module, written)
        if isinstance(found, External):
            return is_library_convnet(found.qualified)
        if isinstance(found, FunctionRef) and found.info.returns and not found.info.builds:
            return all(self._builds_convnet(found.module, returned) for returned in found.info.returns)
        counts = self.of_name(module, written)
        return counts is not None and counts.is_2d_convnet

    def _builds_convnet(self, module: Module, returned: list[str]) -> bool:
        total = LayerCounts()
        for written in returned:
            counts = self.of_name(module, written)
            if counts is not None:
                total.add(counts)
        return total.is_2d_convnet
