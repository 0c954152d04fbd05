"""The first torch release of each API a fix writes or a message recommends: one table, read by
every rule through `Context.api(name)` (RULES.md, "Which torch the code runs on").

A fix is written only when its API exists in the oldest torch the project supports; otherwise
the finding names the release it needs. Advice is dropped where the runtime cannot have the API.

| API (key)                   | first | where it was read                                                     |
|-----------------------------|-------|-----------------------------------------------------------------------|
| torch.channels_last         | 1.5   | pytorch.org/docs/1.5 tensor_attributes: memory_format channels_last   |
| zero_grad(set_to_none=)     | 1.7   | pytorch/pytorch#44423 (Sept 2020) adds it to Module/Optimizer.zero_grad |
| DataLoader persistent_workers | 1.7 | open-mmlab/mmsegmentation#646 "persistent_workers (PyTorch>=1.7.0)"   |
| set_float32_matmul_precision | 1.12 | pytorch.org/docs/1.12/generated/torch.set_float32_matmul_precision    |
| optimizer(foreach=)         | 1.12  | pytorch/pytorch#70295 and its stack (Jan 2022) add the flag; 1.11's adam.py still calls `_functional` |
| foreach by default          | 2.0   | pytorch/pytorch#97712: "between 1.13 and 2.0 ... we now default to the faster foreach implementation" |
| Adam(fused=)                | 1.13  | pytorch.org/docs/1.13/_modules/torch/optim/adam.html (fused Adam)      |
| AdamW(fused=)               | 2.0   | pytorch.org/docs/2.0/_modules/torch/optim/adamw.html                   |
| SGD(fused=)                 | 2.3   | pytorch.org/docs/2.3/_modules/torch/optim/sgd.html                     |
| F.scaled_dot_product_attention | 2.0 | its docs page; beta in the 2.0 release                                |
| scaled_dot_product_attention(scale=) | 2.1 | keyword-only `scale` in the 2.1 signature                      |
| torch._foreach_lerp_        | 2.0   | pytorch/pytorch#87562 (Oct 2022, after the 1.13 branch cut)            |
| torch.compile               | 2.0   | the 2.0 release notes: torch.compile is 2.0's headline feature         |
"""

from __future__ import annotations

import dataclasses

from .torch_version import Declared, Version

FIRST_RELEASE: dict[str, Version] = {
    "channels_last": (1, 5),
    "zero_grad(set_to_none=)": (1, 7),
    "persistent_workers": (1, 7),
    "set_float32_matmul_precision": (1, 12),
    "optimizer(foreach=)": (1, 12),
    "foreach by default": (2, 0),
    "Adam(fused=)": (1, 13),
    "AdamW(fused=)": (2, 0),
    "SGD(fused=)": (2, 3),
    "scaled_dot_product_attention": (2, 0),
    "scaled_dot_product_attention(scale=)": (2, 1),
    "_foreach_lerp_": (2, 0),
    "torch.compile": (2, 0),
}

# the first torch that has every API above: a run targeting it can give every advice
EVERY_API: Version = max(FIRST_RELEASE.values())


def shown(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


@dataclasses.dataclass(frozen=True)
class ApiSupport:
    """One API against the torch a file targets."""

    name: str
    first: Version
    declared: Declared

    @property
    def writable(self) -> bool:
        """The oldest supported torch has it: a fix may write it."""
        return self.declared.has(self.first)

    @property
    def usable(self) -> bool:
        """The runtime may have it: advice to use it can be followed."""
        return self.declared.may_run(self.first)

    def needs(self) -> str:
        """What a message says when no fix is written: the release the API needs."""
        oldest = self.declared.version
        assert oldest is not None  # only asked when the oldest release lacks it
        return f"needs torch {shown(self.first)}; the project supports torch {shown(oldest)}"


def support(name: str, declared: Declared) -> ApiSupport:
    return ApiSupport(name, FIRST_RELEASE[name], declared)
