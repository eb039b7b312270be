"""`semvecctl backends list|show|resolve` through the real CLI: formats, exit codes,
collisions, shadowing and the fallback warning."""

from __future__ import annotations

import json
import sys
import uuid

import pytest
import yaml
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.plugins import adapter_source, forget_modules, make_distribution


@pytest.fixture
def site(tmp_path, monkeypatch):
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def run(*args, env=None):
    return CliRunner().invoke(app, list(args), env=env)


def test_list_shows_shipped_backends_as_json():
    result = run("backends", "list", "-o", "json")
    assert result.exit_code == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    for name in ("memory", "redis", "mongo"):
        assert rows[name]["source"] == "shipped"
    assert rows["pgvector"]["source"].startswith("semvecctl==")
    assert rows["pgvector"]["target"] == "backends.pgvector:PgVectorAdapter"


def test_list_table_and_yaml():
    table = run("backends", "list")
    assert table.exit_code == 0
    assert table.stdout.splitlines()[0].split() == ["NAME", "SOURCE", "TARGET", "STATUS"]
    assert "memory" in table.stdout
    data = yaml.safe_load(run("backends", "list", "-o", "yaml").stdout)
    assert {"memory", "redis", "mongo"} <= {r["name"] for r in data}


def test_list_shows_a_collision_between_two_distributions(site):
    key = f"dup_{uuid.uuid4().hex[:6]}"
    mods = []
    for dist in ("alpha-store", "beta-store"):
        module = f"{dist.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
        make_distribution(site, dist, "0.9", {key: f"{module}:Adapter"},
                          {module: adapter_source("Adapter", key)})
        mods.append(module)
    result = run("backends", "list", "-o", "json")
    assert result.exit_code == 0
    rows = [r for r in json.loads(result.stdout) if r["name"] == key]
    assert len(rows) == 2
    assert {r["status"] for r in rows} == {"contested"}
    assert "contested by beta-store==0.9" in [r["detail"] for r in rows if r["source"] == "alpha-store==0.9"][0]
    table = run("backends", "list")
    assert "contested by" in table.stdout
    checked = run("backends", "list", "--check")
    assert checked.exit_code == 1
    for m in mods:
        forget_modules(m)


def test_list_check_reports_persistence_and_capabilities():
    result = run("backends", "list", "--check", "-o", "json")
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["memory"]["persistent"] is False
    assert "sessions" in rows["memory"]["capabilities"]
    assert rows["redis"]["persistent"] is True


def test_list_check_flags_contract_and_import_errors(site):
    broken = f"broken_{uuid.uuid4().hex[:6]}"
    failing = f"failing_{uuid.uuid4().hex[:6]}"
    make_distribution(site, "broken-dist", "1.0", {broken: f"{broken}_mod:Thing",
                                                   failing: f"{failing}_mod:Thing"},
                      {f"{broken}_mod": "class Thing:\n    name = 'x'\n",
                       f"{failing}_mod": "import not_a_module_anywhere_xyz\n"})
    result = run("backends", "list", "--check", "-o", "json")
    assert result.exit_code == 1
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows[broken]["status"] == "contract-error"
    assert "missing" in rows[broken]["detail"] and "commit_turn" in rows[broken]["detail"]
    assert rows[failing]["status"] == "import-error"
    assert "not_a_module_anywhere_xyz" in rows[failing]["detail"]
    forget_modules(f"{broken}_mod")


def test_list_shows_shadowed_plugin(site):
    module = f"shadow_{uuid.uuid4().hex[:6]}"
    make_distribution(site, "shadow-dist", "2.0", {"Memory": f"{module}:Adapter"},
                      {module: adapter_source("Adapter", "memory")})
    rows = json.loads(run("backends", "list", "-o", "json").stdout)
    shadow = [r for r in rows if r["source"] == "shadow-dist==2.0"][0]
    assert shadow["status"] == "shadowed"
    assert module not in sys.modules


def test_list_reports_missing_driver(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymongo", None)
    rows = {r["name"]: r for r in json.loads(run("backends", "list", "-o", "json").stdout)}
    assert rows["mongo"]["status"] == "driver-missing"
    assert "pip install 'semvecctl[mongo]'" in rows["mongo"]["detail"]


def test_show_known_and_unknown():
    result = run("backends", "show", "MEMORY", "-o", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["name"] == "memory" and data["persistent"] is False
    missing = run("backends", "show", "reddis")
    assert missing.exit_code == 2
    assert "no backend named 'reddis'" in missing.stderr and "redis" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_resolve_folds_and_warns_on_fallback():
    ok = run("backends", "resolve", "pg-vector", "-o", "json")
    assert ok.exit_code == 0
    assert json.loads(ok.stdout)["resolved"] == "pgvector"
    fallback = run("backends", "resolve", "mongoo", "-o", "json")
    assert fallback.exit_code == 0
    data = json.loads(fallback.stdout)
    assert data["resolved"] == "memory" and data["fell_back"] is True
    assert "mongo" in data["close_matches"]
    assert "warning: unknown session backend 'mongoo'" in fallback.stderr


def test_resolve_reads_the_environment():
    result = run("backends", "resolve", "-o", "json", env={"SEMVEC_SESSION_BACKEND": "PgVector"})
    assert json.loads(result.stdout)["resolved"] == "pgvector"


def test_resolve_contested_exits_3(site):
    key = f"clash_{uuid.uuid4().hex[:6]}"
    for dist in ("one-dist", "two-dist"):
        module = f"{dist.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
        make_distribution(site, dist, "1", {key: f"{module}:Adapter"},
                          {module: adapter_source("Adapter", key)})
    result = run("backends", "resolve", key)
    assert result.exit_code == 3
    assert "one-dist==1" in result.stderr and "two-dist==1" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_output_format_is_a_usage_error():
    result = run("backends", "list", "-o", "xml")
    assert result.exit_code == 2
    assert "xml" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_command_and_option():
    assert run("backendz").exit_code == 2
    result = run("backends", "list", "--frobnicate")
    assert result.exit_code == 2
    assert "--frobnicate" in result.stderr and "Traceback" not in result.stderr


def test_global_flags_work_after_the_subcommand():
    result = run("backends", "list", "--no-color", "-v", "-o", "json")
    assert result.exit_code == 0
    json.loads(result.stdout)


def test_python_dash_m_works():
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "semvecctl", "backends", "list", "-o", "json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "memory" in {r["name"] for r in json.loads(proc.stdout)}


# -- #15.2: --check imports nothing it cannot and constructs nothing, yet is truthful ----


def test_check_reports_pgvector_driver_missing_without_constructing(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    result = run("backends", "list", "--check", "-o", "json")
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["pgvector"]["status"] == "driver-missing", rows["pgvector"]
    assert "psycopg" in rows["pgvector"]["detail"]


def test_check_reports_a_target_that_is_not_an_adapter_as_broken(site):
    name = f"dumps_{uuid.uuid4().hex[:6]}"
    const = f"const_{uuid.uuid4().hex[:6]}"
    make_distribution(site, "odd-dist", "1.0", {name: "json:dumps",
                                                const: "json.decoder:NaN"})
    result = run("backends", "list", "--check", "-o", "json")
    assert result.exit_code == 1, result.stdout
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows[name]["status"] == "contract-error"
    assert "'obj'" in rows[name]["detail"]
    assert rows[const]["status"] == "contract-error"
    assert "not an adapter" in rows[const]["detail"]


def test_check_accepts_a_well_formed_factory_and_checks_its_annotated_class(site):
    good = f"fact_{uuid.uuid4().hex[:6]}"
    module = f"{good}_mod"
    make_distribution(site, "fact-dist", "1.0", {good: f"{module}:make"}, {module: f"""
        from backends.memory import MemoryBackendAdapter
        class A(MemoryBackendAdapter):
            name = {good!r}
        def make(uri=None) -> A:
            raise AssertionError("--check must not construct")
        """})
    result = run("backends", "list", "--check", "-o", "json")
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows[good]["status"] == "ok", rows[good]
    assert rows[good]["persistent"] is False
    forget_modules(module)
