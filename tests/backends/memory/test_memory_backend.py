"""The `memory` backend: every save/load/delete rule of the contract, in-process."""

from __future__ import annotations

import threading

import pytest

from backends.contract import UNSCOPED, BackendAdapter, LoadedState, MemoryEvent, SessionEnumerator
from backends.errors import StateVersionConflict
from backends.memory import MemoryBackendAdapter


@pytest.fixture
def adapter():
    return MemoryBackendAdapter()


@pytest.fixture
def store(adapter):
    return adapter.state_store()


def test_adapter_shape(adapter):
    assert isinstance(adapter, BackendAdapter)
    assert isinstance(adapter, SessionEnumerator)
    assert MemoryBackendAdapter.is_persistent is False
    assert adapter.state_store() is adapter.state_store()
    assert adapter.event_store() is None and adapter.retrieval_backend() is None
    assert adapter.check_health() is True


def test_insert_never_overwrites(store):
    assert store.save("s", b"a", expected_version=None) == 1
    with pytest.raises(StateVersionConflict):
        store.save("s", b"b", expected_version=None)
    assert store.load("s")[0] == b"a"


def test_compare_and_set_advances_by_exactly_one(store):
    store.save("s", b"a", expected_version=None)
    assert store.save("s", b"b", expected_version=1) == 2
    for stale in (1, 3):
        with pytest.raises(StateVersionConflict):
            store.save("s", b"c", expected_version=stale)
    with pytest.raises(StateVersionConflict):
        store.save("missing", b"c", expected_version=1)
    assert store.load_full("s") == LoadedState(b"b", 2, None, None)


def test_row_written_whole(store):
    store.save("s", b"a", expected_version=None, owner_subject="t1", pending_message="hi")
    store.save("s", b"b", expected_version=1)
    assert store.load_full("s") == LoadedState(b"b", 2, None, None)
    store.save("s", b"c", expected_version=2, pending_message="")
    assert store.load_full("s").pending_message is None


def test_three_state_owner_filter(store):
    store.save("owned", b"1", expected_version=None, owner_subject="t1/agent")
    store.save("anon", b"2", expected_version=None)
    assert store.load("owned")[0] == b"1"
    assert store.load("owned", owner_subject=None) is None
    assert store.load("owned", owner_subject="t1/agent")[0] == b"1"
    assert store.load("owned", owner_subject="t1") is None
    assert store.load("anon", owner_subject=None)[0] == b"2"
    assert store.load("anon", owner_subject="t1") is None
    assert store.current_version("owned", owner_subject="t2") is None
    assert store.load_owner("owned") == "t1/agent"
    assert store.delete("owned", owner_subject=None) is False
    assert store.delete("owned", owner_subject="t2") is False
    assert store.delete("owned", owner_subject="t1/agent") is True
    assert store.delete("anon", owner_subject=UNSCOPED) is True


def test_owner_rule_on_save(store):
    store.save("s", b"a", expected_version=None)
    assert store.save("s", b"b", expected_version=1, owner_subject="t1") == 2  # adopt unowned
    with pytest.raises(StateVersionConflict):
        store.save("s", b"c", expected_version=2, owner_subject="t2")
    assert store.load_full("s").owner_subject == "t1"


def test_commit_turn_refuses_events(adapter):
    event = MemoryEvent(event_id="e1", user_id="u1", content="x")
    with pytest.raises(ValueError, match="no event log"):
        adapter.commit_turn("s", b"a", expected_version=None, events=[event])
    assert adapter.state_store().load("s") is None
    assert adapter.commit_turn("s", b"a", expected_version=None) == 1


def test_concurrent_writers_have_one_winner_per_version(store):
    """Every writer writes its own blob (distinct from every other write), so no write is
    another's idempotent retry: each version has exactly one winner, and the stored blob is
    the last winner's."""
    store.save("race", b"0", expected_version=None)
    wins: dict[int, list[bytes]] = {}
    lock = threading.Lock()

    def writer(n: int):
        for i in range(200):
            blob = f"writer{n}-write{i}".encode()
            while True:
                version = store.current_version("race")
                try:
                    new = store.save("race", blob, expected_version=version)
                except StateVersionConflict:
                    continue
                with lock:
                    wins.setdefault(new, []).append(blob)
                break

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == list(range(2, 1602))
    assert all(len(blobs) == 1 for blobs in wins.values())
    assert store.load("race") == (wins[1601][0], 1601)


def test_an_identical_write_at_the_version_just_produced_is_a_retry_not_a_second_win(store):
    """The rule that let two writers of the same blob both "win" one version: a save whose
    exact result is already stored answers with that version and writes nothing."""
    store.save("retry", b"0", expected_version=None)
    assert store.save("retry", b"x", expected_version=1) == 2
    assert store.save("retry", b"x", expected_version=1) == 2  # the retry: its own success
    assert store.current_version("retry") == 2
    with pytest.raises(StateVersionConflict):
        store.save("retry", b"y", expected_version=1)  # another blob: a lost race
    with pytest.raises(StateVersionConflict):
        store.save("retry", b"x", expected_version=1, owner_subject="t1")  # another owner
    assert store.load("retry") == (b"x", 2)


def test_enumeration_filters(adapter):
    store = adapter.state_store()
    store.save("a-1", b"x", expected_version=None, owner_subject="t1")
    store.save("a-2", b"yy", expected_version=None)
    store.save("b-1", b"z", expected_version=None, owner_subject="t1")
    assert [s.session_id for s in adapter.iter_sessions(match="a-*")] == ["a-1", "a-2"]
    assert [s.session_id for s in adapter.iter_sessions(owner_subject="t1")] == ["a-1", "b-1"]
    assert [s.session_id for s in adapter.iter_sessions(owner_subject=None)] == ["a-2"]
    summary = adapter.describe_session("a-2")
    assert summary.blob_size == 2 and len(summary.blob_sha256) == 64


def test_bad_arguments(store):
    with pytest.raises(ValueError):
        store.load("s", owner_subject="")
    with pytest.raises(ValueError):
        store.save("", b"x", expected_version=None)
    with pytest.raises(ValueError):
        store.save("s", b"x", expected_version=True)
    with pytest.raises(TypeError):
        store.save("s", "text", expected_version=None)
