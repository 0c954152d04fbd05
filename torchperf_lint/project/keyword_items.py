"""What a project function's `**kwargs` receives (RULES.md, "Values that travel"): where every call
of the project passes it the same keys (keywords no parameter takes, and the items of a dict it
unpacks whose keys are known: summary's Call.kwargs_items), those keys, each with the token every
call agrees on ("?" where they differ). pytorch-deeplab-xception's train.py calls
`make_data_loader(args, **kwargs)` with `kwargs = {'num_workers': args.workers, 'pin_memory':
True}`: the `DataLoader(train_set, ..., **kwargs)` inside gets `num_workers` and `pin_memory`, and
no `persistent_workers`. A function no call of the project reaches, one a call the project cannot
resolve may reach (a method called on an instance of unknown class), one handed on as a callback,
or one call whose unpacking is not known, leaves its `**kwargs` unknown, and so does a special
method (`__init__` runs from constructions, which the calls by name do not list); calls in test
modules do not count.
"""

from __future__ import annotations

from typing import Optional

from .refs import FunctionRef, ProjectView


def keyword_items(project: ProjectView, function: FunctionRef) -> Optional[dict[str, str]]:
    """The keys (-> token) every project call hands `function`'s `**kwargs`, or None."""
    info = function.info
    # a special method runs from syntax (`Net(...)`, `net(x)`) that the index of calls by name misses
    if not info.varkw or info.name.startswith("__"):
        return None
    if not any(call.star for call in (*info.calls, *info.cold_calls)):
        return None  # it hands its `**kwargs` to no call: nothing of the file pass reads them
    sites = project.every_caller(function)
    if not sites:
        return None
    joined: Optional[dict[str, str]] = None
    for _, call in sites:
        if call.star and not call.kwargs_items:
            return None
        given = {slot: token for slot, token in call.args.items() if not slot.isdigit()}
        given.update(call.kwargs_items)
        keys = {key: token for key, token in given.items() if key not in info.params}
        if joined is None:
            joined = keys
        elif set(joined) != set(keys):
            return None
        else:
            joined = {key: token if token == keys[key] else "?" for key, token in joined.items()}
    return joined
