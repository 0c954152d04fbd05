"""What a rule may ask about a file: one object per file, built once after the walk."""

from __future__ import annotations

import re
from typing import Iterator, Optional

import libcst as cst

from ..config import Settings
from .hotpath import HotPaths, Reason
from .names import Names
from .paths import matches_path
from .tensors import TensorInference, Tensorness
from .walker import Binding, FileFacts, Loop

_CUDA_USE = re.compile(r"""\.cuda\(|torch\.cuda\.|["']cuda""")


class Context:
    def __init__(self, path: str, source: str, facts: FileFacts, settings: Settings) -> None:
        self.path = path
        self.source = source
        self.facts = facts
        self.settings = settings
        self.module = facts.module
        self.names = Names(facts)
        self.hot = HotPaths(facts, self.names)
        self.tensors = TensorInference(facts, self.names, self.hot)
        self._shows_cuda: Optional[bool] = None

    # -- names ------------------------------------------------------------------------
    def qualified_name(self, expr: cst.BaseExpression) -> Optional[str]:
        return self.names.qualified_name(expr)

    def bindings(self, name: str, at: cst.CSTNode) -> list[Binding]:
        return self.names.lookup(name, at)

    def torch_name(self) -> tuple[str, bool]:
        """How a fix spells `torch`, and whether it must add `import torch`."""
        alias = self.names.torch_alias()
        return (alias, False) if alias else ("torch", True)

    # -- tree -------------------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.facts.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.facts.parents.get(node)
        while current is not None:
            yield current
            current = self.facts.parents.get(current)

    def enclosing_function(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def nodes(self, kind: type) -> list[cst.CSTNode]:
        """Every node of `kind` in the file; only types that some enabled rule declared."""
        return self.facts.collected.get(kind, [])

    # -- hot paths --------------------------------------------------------------------
    def hot_reason(self, node: cst.CSTNode) -> Optional[Reason]:
        return self.hot.reason(node)

    def is_hot(self, node: cst.CSTNode) -> bool:
        return self.hot.reason(node) is not None

    def step_loop(self, node: cst.CSTNode) -> Optional[Loop]:
        """The step loop whose body holds `node` (in the same function), if any."""
        return self.hot.step_loop(node)

    # -- tensors and devices -----------------------------------------------------------
    def is_tensor(self, expr: cst.BaseExpression, certain: bool = False) -> bool:
        wanted = Tensorness.CERTAIN if certain else Tensorness.LIKELY
        return self.tensors.infer(expr) >= wanted

    def device_for(self, node: cst.CSTNode) -> Optional[cst.BaseExpression]:
        """`<tensor in scope>.device` for a fix that needs a device, or None."""
        name = self.tensors.device_of_scope(node)
        if name is None:
            return None
        return cst.Attribute(value=cst.Name(name), attr=cst.Name("device"))

    @property
    def is_test_file(self) -> bool:
        """The path matches a test-file pattern (pytest's defaults unless configured)."""
        return any(matches_path(self.path, p) for p in self.settings.test_file_patterns)

    @property
    def shows_cuda_use(self) -> bool:
        """`.cuda(`, `torch.cuda.` or a string literal starting with "cuda" in the file."""
        if self._shows_cuda is None:
            self._shows_cuda = bool(_CUDA_USE.search(self.source))
        return self._shows_cuda
