"""#28 item 4: ``config use-profile|get-profiles|set-profile|view`` (kubectl style: atomic
edits of the YAML, no credential printed), ``config view`` shows every variable that
changes behaviour (checked against the variables the source reads), and shell completion
offers backend names, profile names and session ids (from the suite's real Redis),
bounded and never erroring into the shell."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from semvecctl.app import app

ROOT = Path(__file__).resolve().parents[3]
CLEAN = {"SEMVEC_SESSION_BACKEND": None, "REDIS_URL": None, "SEMVECCTL_PROFILE": None,
         "SEMVECCTL_CONFIG": None}


@pytest.fixture
def cfg(tmp_path):
    return tmp_path / "semvecctl" / "config.yaml"


def run(cfg, *args: str, env: dict | None = None):
    return CliRunner().invoke(app, ["--config", str(cfg), *args], env={**CLEAN, **(env or {})})


def test_set_get_use_profile_round_trip_without_printing_a_credential(cfg):
    created = run(cfg, "config", "set-profile", "cache", "--uri", "redis://:s3cret@h:6379/0")
    assert created.exit_code == 0, created.output
    assert "s3cret" not in created.output and "created profile 'cache'" in created.stderr
    assert run(cfg, "config", "set-profile", "pg", "--uri", "postgresql://u:pw9@db/semvec",
               "--backend", "postgres").exit_code == 0
    changed = run(cfg, "config", "set-profile", "cache", "--database", "x")
    assert changed.exit_code == 0 and "updated profile 'cache'" in changed.stderr
    raw = yaml.safe_load(cfg.read_text())
    assert raw["profiles"]["cache"] == {"uri": "redis://:s3cret@h:6379/0", "database": "x"}
    assert oct(cfg.stat().st_mode & 0o777) == "0o600"
    listed = run(cfg, "config", "get-profiles", "-o", "json")
    assert listed.exit_code == 0 and "s3cret" not in listed.output and "pw9" not in listed.output
    rows = json.loads(listed.stdout)["profiles"]
    assert [(r["name"], r["current"]) for r in rows] == [("cache", False), ("pg", False)]
    assert run(cfg, "config", "use-profile", "pg").exit_code == 0
    assert yaml.safe_load(cfg.read_text())["current-profile"] == "pg"
    table = run(cfg, "config", "get-profiles")
    assert re.search(r"^\*\s+pg\s+postgres", table.stdout, flags=re.M), table.stdout
    view = json.loads(run(cfg, "config", "view", "-o", "json").stdout)
    assert view["connection"]["backend"] == "postgres" and view["profile"] == "pg"
    assert [p.name for p in cfg.parent.iterdir()] == ["config.yaml"]  # no temp file left


def test_config_edits_refuse_bad_input_and_leave_the_file(cfg):
    assert run(cfg, "config", "set-profile", "a", "--uri", "redis://h/0").exit_code == 0
    before = cfg.read_bytes()
    for args, code in ((["use-profile", "nope"], 2), (["set-profile", "b"], 2),
                       (["set-profile", "b", "--uri", "nosuch://h/0"], 2),
                       (["set-profile", "b", "--uri", ""], 2),
                       (["set-profile", "b", "--backend", "redsi"], 2)):
        result = run(cfg, "config", *args)
        assert result.exit_code == code, (args, result.output)
        assert "Traceback" not in result.output
    assert cfg.read_bytes() == before
    cfg.write_text("profiles: [1, 2]\n")
    assert run(cfg, "config", "set-profile", "c", "--uri", "redis://h/0").exit_code == 3
    assert cfg.read_text() == "profiles: [1, 2]\n"  # a broken file is never rewritten


def _variables_read_by_the_source() -> set[str]:
    names: set[str] = set()
    for path in list((ROOT / "backends").rglob("*.py")) + list((ROOT / "semvecctl").rglob("*.py")):
        names |= set(re.findall(r"[\"'](SEMVEC(?:CTL)?_[A-Z0-9_]+)[\"']", path.read_text()))
    return {n for n in names if not n.startswith("SEMVEC_TEST_")}


def test_config_view_shows_every_variable_the_source_reads(cfg, monkeypatch):
    from backends.info import KNOWN_INFO

    expected = _variables_read_by_the_source() | {v for i in KNOWN_INFO for v in i.uri_env}
    assert "SEMVEC_REDIS_SESSION_TTL_S" in expected and "SEMVEC_SQL_SESSION_TTL_S" in expected
    assert run(cfg, "config", "set-profile", "a", "--uri", "redis://h/0").exit_code == 0
    doc = json.loads(run(cfg, "config", "view", "-o", "json",
                         env={"SEMVEC_REDIS_SESSION_TTL_S": "3600",
                              "DATABASE_URL": "postgresql://u:hidden7@db/x"}).stdout)
    missing = expected - set(doc["environment"])
    assert not missing, f"config view does not show {sorted(missing)}"
    assert doc["environment"]["SEMVEC_REDIS_SESSION_TTL_S"] == "3600"
    assert doc["environment"]["DATABASE_URL"] == "postgresql://u:***@db/x"
    table = run(cfg, "config", "view", env={"DATABASE_URL": "postgresql://u:hidden7@db/x"})
    assert "$SEMVEC_SQL_SESSION_TTL_S" in table.stdout and "hidden7" not in table.output


def test_config_settings_lists_every_declared_variable_in_each_format(cfg):
    from backends.info import KNOWN_INFO
    from backends.settings import declared_settings, variables

    tables = declared_settings()
    assert {"redis", "mongo", "postgres", "pgvector"} <= set(tables)
    declared = {v for table in tables.values() for v in variables(table)}
    # the backends' own facts are among them: every URI variable of a backend with a table
    assert {v for i in KNOWN_INFO if i.name in tables for v in i.uri_env} <= declared
    doc = json.loads(run(cfg, "config", "settings", "-o", "json").stdout)
    assert declared == {v for row in doc["settings"] for v in row["variables"]}
    markdown = run(cfg, "config", "settings", "-o", "markdown")
    table = run(cfg, "config", "settings")
    assert markdown.exit_code == 0 and table.exit_code == 0
    assert "| name | variable | type | default | meaning |" in markdown.stdout
    for variable in declared:
        assert f"`{variable}`" in markdown.stdout and variable in table.stdout, variable
    one = run(cfg, "config", "settings", "mongo", "-o", "markdown").stdout
    assert "`SEMVEC_MONGO_DB`" in one and "REDIS_URL" not in one
    unknown = run(cfg, "config", "settings", "nope")
    assert unknown.exit_code == 2 and "mongo" in unknown.output


def test_config_view_masks_a_secret_setting_without_a_uri_shape(cfg):
    from backends.info import declared

    variable = declared("postgres").shards_env  # a secret of the SQL backends' tables
    assert run(cfg, "config", "set-profile", "a", "--uri", "redis://h/0").exit_code == 0
    result = run(cfg, "config", "view", "-o", "json", env={variable: "hunter2-not-a-dsn"})
    doc = json.loads(result.stdout)
    assert doc["environment"][variable] == "***" and "hunter2" not in result.output


# -- completion ------------------------------------------------------------------------------


def complete(words: str, env: dict | None = None) -> list[str]:
    full = {k: v for k, v in os.environ.items() if k not in CLEAN}
    full.update({"_SEMVECCTL_COMPLETE": "complete_bash", "COMP_WORDS": words,
                 "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
                 "PYTHONPATH": str(ROOT)}, **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "semvecctl"], env=full, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return [ln.split(",", 1)[-1] for ln in proc.stdout.splitlines() if ln.strip()]


def test_completion_offers_backend_and_profile_names(cfg):
    assert "redis" in complete("semvecctl health --backend re")
    assert run(cfg, "config", "set-profile", "staging", "--uri", "redis://h/0").exit_code == 0
    assert run(cfg, "config", "set-profile", "stats", "--uri", "redis://h/1").exit_code == 0
    assert complete(f"semvecctl --config {cfg} -P sta") == ["staging", "stats"]
    assert complete(f"semvecctl --config {cfg} config use-profile st") == ["staging", "stats"]
    assert complete("semvecctl -P x", env={"SEMVECCTL_CONFIG": str(cfg) + ".missing"}) == []


@pytest.mark.redis
def test_completion_offers_session_ids_from_the_selected_store_bounded(redis_url):
    from backends.redis import RedisBackendAdapter

    tag = f"cmp{uuid.uuid4().hex[:6]}"
    with RedisBackendAdapter(redis_url) as adapter:
        for i in range(130):
            adapter.state_store().save(f"{tag}-{i:03d}", b"{}", expected_version=None)
    # the budget is the test's, not the machine's: a loaded machine must not turn the answer
    # into a give-up (the give-up itself is checked below, against a store that never answers)
    roomy = {"SEMVECCTL_COMPLETION_TIMEOUT_S": "120"}
    offered = complete(f"semvecctl sessions inspect --uri {redis_url} {tag}-12", env=roomy)
    assert offered == [f"{tag}-12{i}" for i in range(10)]
    assert len(complete(f"semvecctl sessions delete --uri {redis_url} {tag}", env=roomy)) == 100
    assert complete("semvecctl sessions inspect --uri redis://127.0.0.1:1/0 x") == []
    assert complete("semvecctl sessions inspect x") == []  # no store named: nothing, no error


def test_completion_gives_up_on_a_store_that_never_answers():
    """A listener that accepts and never speaks: completion spends its budget (here a short
    one, set by the variable) and offers nothing, without an error in the shell."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        offered = complete(f"semvecctl sessions inspect --uri redis://127.0.0.1:{port}/0 x",
                           env={"SEMVECCTL_COMPLETION_TIMEOUT_S": "0.5"})
    assert offered == []


@pytest.mark.parametrize("raw, expected", [
    ("", 2.0), ("7.5", 7.5), ("0", 2.0), ("-1", 2.0), ("nan", 2.0), ("inf", 2.0), ("soon", 2.0),
])
def test_completion_budget_comes_from_the_variable_else_the_default(raw, expected):
    from semvecctl.completers import SESSION_ID_TIMEOUT_S, session_id_budget

    assert SESSION_ID_TIMEOUT_S == 2.0
    assert session_id_budget({"SEMVECCTL_COMPLETION_TIMEOUT_S": raw}) == expected
    assert session_id_budget({}) == 2.0
