"""What keys a scope may add to a dict (analysis/added_keys.py): one reading of the scope's text,
asked by the project pass (a `**name` a call unpacks hands over the keys it was bound with) and by
the file pass (which keys a DataLoader's `**loader_args` holds)."""

from __future__ import annotations

import pytest

from torchperf_lint.analysis.added_keys import added_keys
from torchperf_lint.project.summary import summarize


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("kw = dict(num_workers=4)\nf(**kw)", []),
        ("kw['pin_memory'] = True", ["pin_memory"]),
        ('kw["n"] += 1', ["n"]),
        ("kw.setdefault('betas', (0.9, 0.99))", ["betas"]),
        ("kw['a'] = 1\nkw.setdefault('b', 2)", ["b", "a"]),
        ("kw == other['x']", []),  # a comparison stores nothing
        ("other_kw['x'] = 1", []),  # another name
        ("kw.update(extra)", None),
        ("kw |= extra", None),
        ("kw.__setitem__('x', 1)", None),
        ("kw[key] = 1", None),  # a computed key
        ("kw.setdefault(key, 1)", None),
    ],
)
def test_the_keys_a_scope_adds_to_a_name(text: str, keys: list[str] | None) -> None:
    assert added_keys(text, "kw") == keys


LOADER = """
from torch.utils.data import DataLoader


def make(ds, workers):
    kw = dict(num_workers=workers, pin_memory=True)
{change}
    return DataLoader(ds, batch_size=8, **kw)
"""


@pytest.mark.parametrize(
    ("change", "handed"),
    [
        ("    pass", True),
        ("    kw.update(extra=1)", False),
        ("    kw['persistent_workers'] = True", False),  # keys beyond the binding's: not all known
    ],
)
def test_the_project_pass_hands_over_the_bound_keys_only_where_none_are_added(
    change: str, handed: bool
) -> None:
    summary = summarize(LOADER.replace("{change}", change))
    assert summary is not None
    [loader] = [call for call in summary.functions[0].calls if call.target == "DataLoader"]
    assert bool(loader.kwargs_items) == handed
    if handed:
        assert set(loader.kwargs_items) == {"num_workers", "pin_memory"}
