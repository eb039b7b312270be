"""``retrieve diff`` when both sides rank identically: no divergence and no note blaming
the server side, although the server side declares what usually explains differences
(inert fields, a recency signal). Also: the engine's defaults reach the CLI (bm25_fetch_k
50, SEMVEC_RRF_K / SEMVEC_RRF_WEIGHTS when no flag is given). Test-only adapter over the
real memory backend (tests/support/retrieval_doubles.py)."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from backends.contract import MemoryItem
from semvecctl.app import app
from tests.support import retrieval_doubles as doubles

ADAPTER = ["--adapter", "tests.support.retrieval_doubles:identical_server_adapter"]
INPUT_NOTES = {"items-file", "bm25-without-text"}
#: notes about the in-process side against the ENGINE (not the server side): true whatever
#: the server answers ("apples" gives six equal BM25 scores and a zero tail: ties)
ENGINE_NOTES = {"bm25-ties-numpy1", "positions-unknown"}
#: the notes that blame the server side
SERVER_NOTES = {"inert-field", "mirror-lag", "recency-server-only", "not-live", "no-live-items"}


@pytest.fixture
def session():
    sid = f"s-{uuid.uuid4().hex}"
    doubles.SEEDED[sid] = tuple(
        MemoryItem(f"i{n}", f"note {n} about {'apples' if n % 2 else 'pears'}",
                   (1.0, n / 10, (n % 3) / 5), tier="short_term",
                   positions={"short_term": n})
        for n in range(12))
    yield sid
    doubles.SEEDED.pop(sid, None)


def diff(*args):
    return CliRunner().invoke(app, ["retrieve", "diff", *ADAPTER, *args])


@pytest.mark.parametrize("extra", [[], ["--bm25", "-q", "apples"], ["--mmr-fetch-k", "8"]])
def test_identical_rankings_report_no_divergence_and_blame_nothing(session, extra):
    result = diff("-s", session, "--query-vector", "[1, 0.3, 0.1]", "-k", "5", *extra,
                  "-o", "json")
    assert result.exit_code == 0, result.output
    query = json.loads(result.stdout)["queries"][0]
    assert query["metrics"]["rbo"] == pytest.approx(1.0)
    assert query["metrics"]["only_a"] == query["metrics"]["only_b"] == 0
    assert all(m["delta"] == 0 for m in query["moves"])
    codes = {n["code"] for n in query["notes"]}
    assert codes <= INPUT_NOTES | ENGINE_NOTES, query["notes"]
    assert ("bm25-ties-numpy1" in codes) == ("--bm25" in extra)

    table = diff("-s", session, "--query-vector", "[1, 0.3, 0.1]", "-k", "5", *extra)
    assert table.exit_code == 0, table.output
    assert ("Why they can differ" in table.stdout) == bool(codes)
    assert not any(f"[{code}]" in table.stdout for code in SERVER_NOTES)


def test_the_engine_defaults_reach_the_cli(session, monkeypatch):
    result = diff("-s", session, "--query-vector", "[1, 0.3, 0.1]", "-o", "json")
    settings = json.loads(result.stdout)["queries"][0]["settings"]
    assert settings["bm25_fetch_k"] == 50 and settings["rrf_k"] == 60
    assert settings["rrf_weights"] == [1.0, 1.0]
    monkeypatch.setenv("SEMVEC_RRF_K", "15")
    monkeypatch.setenv("SEMVEC_RRF_WEIGHTS", "1.0,0.4")
    settings = json.loads(diff("-s", session, "--query-vector", "[1, 0.3, 0.1]",
                               "-o", "json").stdout)["queries"][0]["settings"]
    assert settings["rrf_k"] == 15 and settings["rrf_weights"] == [1.0, 0.4]
    settings = json.loads(diff("-s", session, "--query-vector", "[1, 0.3, 0.1]", "--rrf-k", "7",
                               "--rrf-weights", "2,1", "-o", "json").stdout)["queries"][0]["settings"]
    assert settings["rrf_k"] == 7 and settings["rrf_weights"] == [2.0, 1.0]  # the caller wins


def test_the_diff_reports_the_engines_fusion_path(session, monkeypatch):
    """A server side that can tell (MongoDB's) reports both fusion paths in the diff."""
    paths = {"server_has_rank_fusion": True, "engine_probe_rights": False,
             "engine_path": "client", "reason": "the user lacks insert"}
    monkeypatch.setattr(doubles.MirrorLikeInProcess, "fusion_paths", lambda self: paths,
                        raising=False)
    data = json.loads(diff("-s", session, "--query-vector", "[1, 0.3, 0.1]", "-o", "json").stdout)
    assert data["fusion"] == paths
    table = diff("-s", session, "--query-vector", "[1, 0.3, 0.1]")
    assert "the engine would fuse client-side with these credentials" in table.stdout
