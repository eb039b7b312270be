"""Our Mongo server side is the engine's ``MongoRetrievalBackend`` step for step
(ENGINE-WIRE section 8b). Both are fed the same recorded sub-pipeline results over the
same stubbed collection (tests/support/mongo_engine_bed.py: mongomock, a fake MongoDB,
holds the documents for the final read): ties, duplicates across signals, stale, evicted,
foreign and ghost rows, fewer rows than top_k, an empty unit, a failing signal, other
owners in recency, MMR. Without the engine the rankings and pipelines recorded from it
(semvec 0.8.9, tests/support/golden/mongo_engine.json) pin them; with it importable
(marker ``engine``) the engine itself is run."""

from __future__ import annotations

import json

import pytest

from tests.support import mongo_engine_bed as mb


def _golden():
    return json.loads(mb.GOLDEN.read_text(encoding="utf-8"))


def _as_json(pipelines):
    return json.loads(json.dumps(pipelines, default=str))


def _strip_unowned(pipelines):
    """Our pipelines minus the unowned-only owner clauses (the engine cannot express
    "unowned only": its None means unscoped)."""
    out = _as_json(pipelines)
    for pipeline in out:
        stage = pipeline[0]
        if "$vectorSearch" in stage:
            assert stage["$vectorSearch"]["filter"].pop("$or") == [
                {"owner_subject": {"$eq": None}}, {"owner_subject": {"$eq": ""}}]
        if "$search" in stage:
            filters = stage["$search"]["compound"]["filter"]
            assert filters.pop() == {"compound": {"should": [
                {"equals": {"path": "owner_subject", "value": None}},
                {"equals": {"path": "owner_subject", "value": ""}}], "minimumShouldMatch": 1}}
    return out


def test_every_scenario_ranks_as_the_engine_recorded():
    golden = _golden()["rankings"]
    assert set(golden) == set(mb.SCENARIOS) and len(golden) == 15
    wrong = {name: (mb.ours(settings, results)[0], golden[name])
             for name, (settings, results) in mb.SCENARIOS.items()
             if mb.ours(settings, results)[0] != golden[name]}
    assert not wrong


def test_the_pipelines_we_send_equal_the_engines_for_ten_shapes():
    golden = _golden()["pipelines"]
    assert set(golden) == set(mb.SHAPES) and len(golden) == 10
    for name, settings in mb.SHAPES.items():
        _got, sent = mb.ours(settings, {})
        if name == "unowned-only":
            assert _strip_unowned(sent) == golden[name]
        else:
            assert _as_json(sent) == golden[name], name
    assert golden["no-vector"] == []  # no vector: nothing is sent


def test_the_engines_recency_defect_is_reproduced_and_named():
    settings, results = mb.SCENARIOS["recency-defect-changes-result"]
    engine_like = mb.our_backend(results)
    ctx = mb.our_context(settings)
    units = engine_like.search(ctx)
    assert [u.item_id for u in units] == ["a"]  # as the engine ranks
    assert mb.ours(settings, results, corrected=True)[0] == ["bnew"]  # filtered before top-k
    notes = engine_like.result_notes(ctx, units)
    assert [code for code, _ in notes] == ["engine-recency-defect"]
    assert "bnew" in notes[0][1] and "ENGINE-WIRE section 7" in notes[0][1]
    # no note where the defect changed nothing, nor for the corrected mode
    other_settings, other_results = mb.SCENARIOS["recency-other-owners"]
    plain = mb.our_backend(other_results)
    other_ctx = mb.our_context(other_settings)
    assert plain.result_notes(other_ctx, plain.search(other_ctx)) == []
    corrected = mb.our_backend(results, corrected=True)
    assert corrected.result_notes(ctx, corrected.search(ctx)) == []
    assert corrected.name == "mongo-server (corrected: recency filtered by owner)"


def test_no_vector_and_non_positive_top_k_send_nothing():
    from dataclasses import replace

    backend = mb.our_backend({"semantic": mb.ids("a")})
    ctx = mb.our_context({"top_k": 3})
    assert backend.search(replace(ctx, query_embedding=None)) == []
    assert backend.search(replace(ctx, query_embedding=())) == []
    assert backend.search(replace(ctx, top_k=0)) == []
    assert backend._collection.pipelines == []


def test_client_fusion_reads_semvec_rrf_k(monkeypatch):
    from backends.mongo.retrieval import fuse_client_side

    rankings = {"semantic": ["a", "b"], "recency": ["b", "a"]}
    assert fuse_client_side(rankings)[0][1] == pytest.approx(0.5 / 61 + 0.2 / 62)
    monkeypatch.setenv("SEMVEC_RRF_K", "1")
    assert fuse_client_side(rankings)[0][1] == pytest.approx(0.5 / 2 + 0.2 / 3)


class _Database:
    name = "semvec"

    def __init__(self, status):
        self.status = status

    def command(self, _cmd):
        if isinstance(self.status, Exception):
            raise self.status
        return self.status


def test_engine_probe_rights_from_connection_status():
    from backends.mongo.retrieval import engine_probe_rights

    assert engine_probe_rights(_Database({"authInfo": {"authenticatedUsers": []}}))[0] is True
    read_only = {"authInfo": {"authenticatedUsers": [{"user": "r"}], "authenticatedUserPrivileges": [
        {"resource": {"db": "semvec", "collection": ""}, "actions": ["find", "listCollections"]}]}}
    rights, why = engine_probe_rights(_Database(read_only))
    assert rights is False and "dropCollection, insert" in why
    writer = {"authInfo": {"authenticatedUsers": [{"user": "w"}], "authenticatedUserPrivileges": [
        {"resource": {"db": "semvec", "collection": ""},
         "actions": ["find", "insert", "dropCollection"]}]}}
    assert engine_probe_rights(_Database(writer))[0] is True
    assert engine_probe_rights(_Database(RuntimeError("no")))[0] is None


def test_a_read_only_user_makes_the_engine_fuse_client_side(monkeypatch):
    """Our probe is read-only; the engine's needs insert and drop, so with a read-only
    user it falls back to client-side fusion, and so does "as the engine ranks"."""
    backend = mb.our_backend({})
    backend._force_client_rrf = False
    sent = []
    monkeypatch.setattr(backend, "_probe", lambda: sent.append("probe") or True)
    read_only = {"authInfo": {"authenticatedUsers": [{"user": "r"}],
                              "authenticatedUserPrivileges": []}}
    monkeypatch.setattr(backend._collection, "database", _Database(read_only))
    assert backend.detect_rank_fusion() is False
    assert "engine's probe would fail" in backend.fusion_reason
    paths = backend.fusion_paths()
    assert paths["server_has_rank_fusion"] is True and paths["engine_path"] == "client"
    assert paths["engine_probe_rights"] is False
    notes = backend.result_notes(mb.our_context({"top_k": 1}), [])
    assert [code for code, _ in notes] == ["engine-fusion-path"]


@pytest.mark.engine
def test_the_engines_mongo_retriever_agrees_on_every_case_and_pipeline():
    pytest.importorskip("semvec", reason="the semvec engine is not importable (opt-in)")
    for name, (settings, results) in mb.SCENARIOS.items():
        assert mb.ours(settings, results)[0] == mb.engine(settings, results)[0], name
    for name, settings in mb.SHAPES.items():
        ours = mb.ours(settings, {})[1]
        theirs = _as_json(mb.engine(settings, {})[1])
        assert (_strip_unowned(ours) if name == "unowned-only" else _as_json(ours)) == theirs, name
