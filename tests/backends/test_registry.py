"""The registry against real installed distributions (dist-info + entry_points.txt on
sys.path): every row of the spec's failure table, folding, shadowing, lazy discovery."""

from __future__ import annotations

import sys
import uuid
import warnings

import pytest

from backends.errors import ContestedBackend, ContractError, MissingDriver
from backends.registry import (
    Registry,
    UnknownBackendWarning,
    fold_name,
    load_adapter,
)
from tests.support.plugins import adapter_source, forget_modules, make_distribution


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A fresh sys.path entry to install throw-away distributions into."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def install_plugin(site, *, dist=None, key="pgvector", cls="Adapter", name=None,
                   persistent="True", module=None, source=None):
    module = module or _unique("plug")
    dist = dist or _unique("dist").replace("_", "-")
    make_distribution(site, dist, "1.2.3", {key: f"{module}:{cls}"},
                      {module: source if source is not None else
                       adapter_source(cls, name or key, persistent)})
    return dist, module


@pytest.mark.parametrize("spelling", ["PgVector", "pg-vector", "pg_vector", " pgvector ", "PG.Vector"])
def test_folding_makes_spellings_one_name(spelling):
    assert fold_name(spelling) == "pgvector"
    resolution = Registry().resolve(spelling)  # our own distribution advertises pgvector
    assert not resolution.fell_back
    assert resolution.entry.name == "pgvector" and resolution.entry.source.startswith("semvecctl==")


@pytest.mark.parametrize("spelling", ["My-Store.X", "mystorex", "MY_STORE_X", " my-store.x "])
def test_folded_spellings_load_the_same_plugin(site, spelling):
    key = "My-Store.X"
    _, module = install_plugin(site, key=key, name="my_store_x", module=_unique("mystore"))
    assert Registry().load_adapter(spelling).name == "my_store_x"
    forget_modules(module)


def test_advertised_name_is_honoured(site):
    key = _unique("mystore")
    dist, module = install_plugin(site, key=key)
    resolution = Registry().resolve(key.upper())
    assert not resolution.fell_back
    assert resolution.entry.source == f"{dist}==1.2.3"
    adapter = Registry().load_adapter(key, uri="custom://x")
    assert adapter.name == key and adapter.uri == "custom://x"
    forget_modules(module)


def test_unknown_name_degrades_to_memory_loudly(site):
    install_plugin(site, key="pgvectorz")
    with pytest.warns(UnknownBackendWarning) as caught:
        adapter = Registry().load_adapter("pgvectr")
    assert adapter.name == "memory"
    message = str(caught[0].message)
    assert "'pgvectr'" in message and "memory" in message
    assert "did you mean" in message


def test_unknown_name_lists_close_shipped_matches():
    resolution = Registry(installed=[]).resolve("reddis")
    assert resolution.fell_back
    assert "redis" in resolution.close_matches
    assert "'redis'" in resolution.warning


def test_default_is_memory_without_warning(monkeypatch):
    monkeypatch.delenv("SEMVEC_SESSION_BACKEND", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adapter = load_adapter()
    assert adapter.name == "memory"


def test_environment_selects_backend(site, monkeypatch):
    key = _unique("envsel")
    _, module = install_plugin(site, key=key)
    monkeypatch.setenv("SEMVEC_SESSION_BACKEND", key.replace("_", "-").upper())
    assert load_adapter().name == key
    forget_modules(module)


def test_shipped_name_without_driver_raises_naming_the_extra(monkeypatch):
    # Blocking the module in sys.modules is how a missing package behaves for import.
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(MissingDriver) as err:
        Registry().load_adapter("Redis")
    assert "pip install 'semvecctl[redis]'" in str(err.value)
    entry = {e.name: e for e in Registry().entries()}["redis"]
    assert entry.status == "driver-missing"
    assert "semvecctl[redis]" in entry.detail


def test_contract_miss_is_a_type_error_naming_members(site):
    source = """
class Broken:
    name = "brokenx"
    is_persistent = True
    check_health = "yes"
    def state_store(self):
        return None
"""
    key = _unique("brokenx")
    _, module = install_plugin(site, key=key, cls="Broken", source=source.replace("brokenx", key))
    with pytest.raises(TypeError) as err:
        Registry().load_adapter(key)
    text = str(err.value)
    for member in ("event_store", "retrieval_backend", "commit_turn"):
        assert member in text
    assert "not callable: check_health" in text
    assert isinstance(err.value, ContractError)
    forget_modules(module)


def test_is_persistent_must_be_a_class_bool(site):
    key = _unique("propx")
    source = adapter_source("Adapter", key).replace(
        "is_persistent = True", "@property\n    def is_persistent(self):\n        return True")
    _, module = install_plugin(site, key=key, source=source)
    with pytest.raises(TypeError, match="is_persistent must be a bool class attribute"):
        Registry().load_adapter(key)
    forget_modules(module)


def test_name_advertised_by_two_distributions_is_contested_only_when_selected(site):
    key = _unique("twice")
    other = _unique("fine")
    dist_a, mod_a = install_plugin(site, key=key)
    dist_b, mod_b = install_plugin(site, key=key.upper())
    _, mod_c = install_plugin(site, key=other)
    registry = Registry()  # discovery does not raise
    rows = [e for e in registry.entries() if e.folded == fold_name(key)]
    assert {r.status for r in rows} == {"contested"}
    with pytest.raises(RuntimeError) as err:
        registry.load_adapter(key)
    assert isinstance(err.value, ContestedBackend)
    assert dist_a in str(err.value) and dist_b in str(err.value)
    assert "uninstall" in str(err.value)
    # an unrelated name still resolves
    assert registry.load_adapter(other).name == other
    for mod in (mod_a, mod_b, mod_c):
        forget_modules(mod)


def test_shipped_names_always_win(site):
    _, module = install_plugin(site, key="Redis", name="redis")
    registry = Registry()
    shadowed = [e for e in registry.entries() if not e.shipped and e.folded == "redis"]
    assert shadowed and shadowed[0].status == "shadowed"
    assert "shipped" in shadowed[0].detail
    resolution = registry.resolve("REDIS")
    assert resolution.entry.source == "shipped"
    assert module not in sys.modules


def test_discovery_imports_no_plugin_module(site, tmp_path, monkeypatch):
    marker = tmp_path / "imported.txt"
    monkeypatch.setenv("SEMVEC_TEST_IMPORT_MARKER", str(marker))
    key = _unique("lazy")
    _, module = install_plugin(site, key=key)
    registry = Registry()
    names = [e.name for e in registry.entries()]
    assert key in names
    registry.resolve(key)
    assert module not in sys.modules
    assert not marker.exists()
    registry.load_adapter(key)  # selecting it is what imports it
    assert marker.read_text().split() == [module]
    forget_modules(module)


def test_plugin_failing_at_import_breaks_only_itself(site):
    bad = _unique("boom")
    good = _unique("calm")
    _, mod_bad = install_plugin(site, key=bad, source="raise RuntimeError('kaboom at import')\n")
    _, mod_good = install_plugin(site, key=good)
    registry = Registry()
    with pytest.raises(ImportError, match="kaboom at import"):
        registry.load_adapter(bad)
    assert registry.load_adapter(good).name == good
    forget_modules(mod_good)


def test_is_persistent_read_without_instantiating(site):
    from backends.ops.inspection import check_entry

    key = _unique("noinit")
    source = adapter_source("Adapter", key, persistent="False").replace(
        "def __init__(self, uri=None):", "def __init__(self, uri=None):\n        raise SystemExit('constructed!')")
    _, module = install_plugin(site, key=key, source=source)
    entry = [e for e in Registry().entries() if e.name == key][0]
    checked = check_entry(entry)
    assert checked["persistent"] is False
    assert "status" not in checked  # no contract problem found statically
    forget_modules(module)


def test_fast_entry_point_scan_matches_importlib_metadata(site):
    """The registry reads entry points without importlib.metadata (cold start); it must
    give the same answer for every group importlib.metadata knows here."""
    from importlib.metadata import entry_points

    from backends.entrypoints import scan_group

    install_plugin(site, key=_unique("parity"))
    groups = set(entry_points().groups) | {"semvec.backends"}
    for group in sorted(groups):
        expected = sorted((ep.name, ep.value, ep.dist.metadata["Name"], ep.dist.version)
                          for ep in entry_points(group=group))
        got = sorted(tuple(e) for e in scan_group(group))
        assert got == expected, group
