"""The ends of a shard list's change on the suite's PostgreSQL, with DSNs that carry a user
and no password (as the engine's deployment often has them): the cutover prints the
variable line exactly; a shrink's cutover names the doctor command that reaches the
dropped database (--shards-from), which moves home or removes every row left there, so
an erase afterwards leaves nothing anywhere; ``shards status`` takes --backend."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from typer.testing import CliRunner

from backends.postgres.placement import shard_index
from semvecctl.app import app
from tests.backends.postgres.test_reshard import _rows, deployment, seed, snapshot

runner = CliRunner()
pytestmark = pytest.mark.postgres


def cli(primary, old, *args):
    """``shards ...`` on the deployment the engine's own variables name (the old list in
    SEMVEC_STATE_DB_SHARDS: remembered for scrubbing as a list, redacted DSN by DSN)."""
    return runner.invoke(app, ["shards", *args],
                         env={"SEMVEC_SESSION_BACKEND": "postgres", "DATABASE_URL": primary,
                              "SEMVEC_STATE_DB_SHARDS": ",".join(old)})


def _reshard(primary, old, new, state):
    run = cli(primary, old, "run", "--to-shards", ",".join(new), "--state", state, "--apply",
              "--yes", "--batch-size", "7")
    assert run.exit_code == 0, run.stderr
    status = runner.invoke(app, ["shards", "status", "--backend", "postgres", "--state", state,
                                 "-o", "json"])
    assert status.exit_code == 0, status.output
    body = json.loads(status.stdout)
    assert body["cutover_possible"] and body["sessions_remaining"] == 0
    assert body["sessions_total"] == body["sessions_copied"] > 0  # the moves, counted up front
    cut = cli(primary, old, "cutover", "--to-shards", ",".join(new), "--state", state,
              "--quiet-window", "0", "--receipt", state + ".json", "--apply", "--yes")
    assert cut.exit_code == 0, cut.stderr
    (line,) = [ln for ln in cut.stderr.splitlines() if "SEMVEC_STATE_DB_SHARDS=" in ln]
    assert line == "  SEMVEC_STATE_DB_SHARDS=" + ",".join(new), line  # exactly the list
    return cut


def test_grow_then_shrink_prints_the_list_and_doctor_clears_the_dropped_database(
        sharded_sql, tmp_path):
    four = sharded_sql.make(4)
    primary, three, all_four = four.primary, four.shards[:3], four.shards
    assert all("@" in u and ":" not in u.split("@")[0].split("//")[1] for u in all_four)
    writer = deployment("postgres", primary, three)
    sids = seed(writer, 60)
    before = snapshot(writer, sids)
    writer.close()
    grown = _reshard(primary, three, all_four, str(tmp_path / "grow.state"))
    assert "--shards-from" not in grown.stderr  # a grow drops no database
    fixed = runner.invoke(app, ["--shards", ",".join(all_four), "doctor", "--uri", primary,
                                "--fix", "--apply", "--yes"])
    assert fixed.exit_code in (0, 1), fixed.output
    dropped = all_four[3]
    on_dropped = [s for s in sids if shard_index(s, 4) == 3]
    assert sorted(_rows(dropped)) == sorted(on_dropped) and on_dropped

    shrunk = _reshard(primary, all_four, three, str(tmp_path / "shrink.state"))
    said = re.search(r"remove them with: (semvecctl .*--fix --apply)$", shrunk.stderr, re.M)
    assert said, shrunk.stderr
    assert _rows(dropped), "the shrink's cutover itself removes nothing"
    words = shlex.split(said.group(1))[1:]
    assert words == ["--shards", ",".join(three), "doctor", "--uri", primary, "--shards-from",
                     ",".join(all_four), "--fix", "--apply"], words
    cleaned = runner.invoke(app, [*words, "--yes"])
    assert cleaned.exit_code in (0, 1), cleaned.output
    assert "retired 0" in cleaned.stdout + cleaned.stderr
    assert _rows(dropped) == [] and _rows(dropped, "semvec_memory_events") == []
    after = deployment("postgres", primary, three)
    try:
        assert snapshot(after, sids) == before
    finally:
        after.close()
    for user in sorted({f"u-{i}" for i in range(5)}):
        erased = runner.invoke(app, ["--shards", ",".join(three), "erase", "--uri", primary,
                                     "--user", user, "--owner", "acme", "--apply", "--yes",
                                     "--receipt", str(tmp_path / f"erase-{user}.json")])
        assert erased.exit_code == 0, erased.output
    for url in [primary, *all_four]:
        assert _rows(url) == [] and _rows(url, "semvec_memory_events") == [], url
