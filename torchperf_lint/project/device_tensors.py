"""Tensors a function puts on the device, as the project pass reads them (on `ast`): what a call
passes and what a `return` hands back, so that a parameter every call of the project hands a
device tensor is one (graph.py, device_parameters). k-diffusion's training script builds
`sigmas = get_sigmas_karras(..., device=device)`, whose `return append_zero(sigmas).to(device)`
moves the schedule, and hands it to `sample_dpmpp_2m_sde(model, x, sigmas)`, whose step loop
tests `if sigmas[i + 1] == 0:`: the file pass sees only a parameter there.

A source is a token: ON_DEVICE for a tensor on the device whatever the function is given
(`x.cuda()`, `x.to(device)`, `torch.zeros(n, device=dev)`), PARAMETER_PREFIX + P for one moved
to the function's parameter P (`.to(P)`, `device=P`: on the device where the call passes one),
"" for anything else: not known, never assumed.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional, Sequence

from ..analysis.branch_sides import dotted
from ..analysis.vocabulary import FROM_HOST_DATA, GENERATING_FACTORIES

ON_DEVICE = "!"
PARAMETER_PREFIX = "@"

# factories that place what they build where `device=` says
_PLACING = frozenset(f"torch.{name}" for name in GENERATING_FACTORIES | FROM_HOST_DATA - {"from_numpy"})
# the most local names a source is followed through (`s = t.to(d); u = s; f(u)`)
_DEPTH = 3

# every value a local name is bound to, where plain assignments are all that bind it; else none
Bindings = Callable[[str], Sequence[ast.AST]]


def device_source(
    expr: ast.AST, bindings: Bindings, params: frozenset[str], qualify: Callable[[str], str], depth: int = 0
) -> str:
    """Where `expr` puts a tensor: ON_DEVICE, PARAMETER_PREFIX + a parameter, or ""."""
    if isinstance(expr, ast.Name):
        values = bindings(expr.id) if expr.id not in params and depth < _DEPTH else ()
        found = {device_source(v, bindings, params, qualify, depth + 1) for v in values}
        return found.pop() if len(found) == 1 else ""
    if not isinstance(expr, ast.Call):
        return ""
    func = expr.func
    if isinstance(func, ast.Attribute) and func.attr == "cuda":
        return ON_DEVICE
    if isinstance(func, ast.Attribute) and func.attr == "to":
        return _placed(expr.args[0] if expr.args else _device_keyword(expr), params)
    keyword = _device_keyword(expr) if expr.keywords else None
    name = dotted(func) if keyword is not None else None
    if name is not None and qualify(name) in _PLACING:
        return _placed(keyword, params)
    return ""


def _device_keyword(call: ast.Call) -> Optional[ast.AST]:
    return next((k.value for k in call.keywords if k.arg == "device"), None)


def _placed(device: Optional[ast.AST], params: frozenset[str]) -> str:
    """What `.to(device)` or `device=device` says: not the CPU, not a dtype (`.to(torch.half)`,
    `.to(dtype)`), not another tensor's place by a name the reading cannot see."""
    if isinstance(device, ast.Constant):
        text = device.value
        if isinstance(text, str):
            return "" if text.startswith(("cpu", "meta")) else ON_DEVICE
        return ON_DEVICE if isinstance(text, int) and not isinstance(text, bool) else ""
    name = dotted(device) if device is not None else None
    if name is None or name.startswith("torch.") or "dtype" in name.lower():
        return ""
    if name in params:
        return PARAMETER_PREFIX + name
    return ON_DEVICE if "dev" in name.rsplit(".", 1)[-1].lower() else ""


def passes_device(source: str, given: Callable[[str], Optional[str]]) -> bool:
    """A source on the device for one call: `given(param)` is the token the call passes for the
    parameter (analysis/arguments.py), None where it passes nothing for it."""
    if source == ON_DEVICE:
        return True
    if not source.startswith(PARAMETER_PREFIX):
        return False
    token = given(source[len(PARAMETER_PREFIX) :])
    return token is not None and not token.startswith(("'cpu", "'meta", "None"))
