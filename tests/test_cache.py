"""The content-addressed lint cache."""

from __future__ import annotations

from pathlib import Path

from torchperf_lint import cache as cache_module
from torchperf_lint.cache import Cache
from torchperf_lint.cache_files import source_identity
from torchperf_lint.config import Settings
from torchperf_lint.engine.findings import Finding, Fix, Safety

FINDING = Finding(
    "TPL101",
    "cpu-factory-in-hot-path",
    "msg",
    "a.py",
    3,
    5,
    3,
    20,
    "in Net.forward",
    Fix((), Safety.SAFE, "pass device="),
)


def test_entry_round_trips_findings_with_fix_safety(tmp_path: Path) -> None:
    cache = Cache(tmp_path, Settings(), ["TPL101"])
    key = cache.key("a.py", b"import torch\n")
    assert cache.get(key) is None
    cache.put(key, [FINDING])
    (restored,) = cache.get(key) or []
    assert restored == FINDING
    assert restored.fix is not None and restored.fix.safety is Safety.SAFE


def test_key_changes_with_bytes_path_settings_rules_and_version(tmp_path: Path, monkeypatch) -> None:
    base = Cache(tmp_path, Settings(), ["TPL101"]).key("a.py", b"x")
    assert Cache(tmp_path, Settings(), ["TPL101"]).key("a.py", b"y") != base
    assert Cache(tmp_path, Settings(), ["TPL101"]).key("b.py", b"x") != base
    assert Cache(tmp_path, Settings(torch_version=(1, 13)), ["TPL101"]).key("a.py", b"x") != base
    assert Cache(tmp_path, Settings(), ["TPL101", "TPL103"]).key("a.py", b"x") != base
    monkeypatch.setattr(cache_module, "__version__", "9.9.9")
    assert Cache(tmp_path, Settings(), ["TPL101"]).key("a.py", b"x") != base


def test_an_edit_to_the_tools_own_sources_changes_its_identity_and_every_key(
    tmp_path: Path, monkeypatch
) -> None:
    package = tmp_path / "package"
    (package / "rules").mkdir(parents=True)
    (package / "__pycache__").mkdir()
    (package / "rules" / "rule.py").write_text("LIMIT = 1\n")
    before = source_identity(package)
    (package / "__pycache__" / "rule.cpython-311.pyc").write_bytes(b"compiled")  # not a source
    assert source_identity(package) == before
    (package / "rules" / "rule.py").write_text("LIMIT = 10\n")  # a developer edits a rule
    assert source_identity(package) != before
    key = Cache(tmp_path, Settings(), ["TPL101"]).key("a.py", b"x")
    monkeypatch.setattr(cache_module, "tool_identity", lambda: "0.1.0+edited")
    assert Cache(tmp_path, Settings(), ["TPL101"]).key("a.py", b"x") != key


def test_corrupt_entry_is_a_miss_and_leaves_no_temp_files(tmp_path: Path) -> None:
    cache = Cache(tmp_path, Settings(), ["TPL101"])
    key = cache.key("a.py", b"x")
    cache.put(key, [FINDING])
    entry = next(tmp_path.rglob("*.json"))
    entry.write_text("{ torn", encoding="utf-8")
    assert cache.get(key) is None
    assert list(tmp_path.rglob("*.tmp")) == []


def test_unwritable_cache_directory_only_costs_speed(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = Cache(blocker, Settings(), ["TPL101"])
    cache.put(cache.key("a.py", b"x"), [FINDING])  # must not raise
    assert cache.get(cache.key("a.py", b"x")) is None


def test_cache_directory_ignores_itself_for_git(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache", Settings(), ["TPL101"])
    cache.put(cache.key("a.py", b"x"), [FINDING])
    assert (tmp_path / "cache" / ".gitignore").read_text().splitlines()[-1] == "*"
