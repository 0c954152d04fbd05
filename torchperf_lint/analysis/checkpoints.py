"""The words that say a model's weights are published (RULES.md, TPL401): a checkpoint downloaded
for it, or a registry of pretrained models. A layer such a model builds keeps its parameter
layout, since changing it breaks every published checkpoint's `load_state_dict(strict=True)`.
Read by the project pass (project/summary.py, project/graph.py); nothing here imports libcst.
"""

from __future__ import annotations

import re

# Callees (their last name) that fetch published weights: torch.hub and model_zoo, the Hugging
# Face hub, torchvision's weights enums (`weights.get_state_dict(...)`) and timm's builders.
WEIGHT_LOADERS = frozenset(
    {
        "load_state_dict_from_url",
        "load_url",
        "download_url_to_file",
        "hf_hub_download",
        "get_state_dict",
        "load_pretrained",
        "build_model_with_cfg",
    }
)
# Qualified callees whose last name alone says too little (`load`).
QUALIFIED_WEIGHT_LOADERS = frozenset({"torch.hub.load"})
# Decorators of functions that hand out pretrained models by name (timm, torchvision).
MODEL_REGISTRIES = frozenset({"register_model"})
_WEIGHTS_URL = re.compile(r"^https?://\S+\.(pth|pt|pth\.tar|tar|ckpt|bin|safetensors|npz)(\?\S*)?$")


def loads_weights(callee: str, qualified: str) -> bool:
    """A call of `callee` (as written; `qualified` through the imports) fetches published weights."""
    return callee.split(".")[-1] in WEIGHT_LOADERS or qualified in QUALIFIED_WEIGHT_LOADERS


def registers_model(decorator: str) -> bool:
    return decorator.split(".")[-1] in MODEL_REGISTRIES


def is_weights_url(text: str) -> bool:
    """`"https://github.com/.../weights/nisqa.tar"`: where a checkpoint is downloaded from."""
    return _WEIGHTS_URL.match(text) is not None
