"""Script calls on a reserved connection: as safe as the pool's checkout, on a real server.

Lua script calls (commit_turn above all) keep one connection of a large pool reserved
instead of checking one out per call. These tests hold that shortcut to what the pool
promised: a connection the server closed is replaced before a write is sent, concurrent
callers still work, a small pool is never starved, a forked child never writes on its
parent's socket, and closing the adapter leaves no connection open.
"""

from __future__ import annotations

import gc
import os
import threading
import uuid
import weakref

import pytest

from backends.contract import MemoryEvent
from backends.redis import RedisBackendAdapter
from tests.support.dedicated_redis import DedicatedRedis

pytestmark = pytest.mark.redis


@pytest.fixture
def server(tmp_path):
    """A private server: these tests count its connections."""
    dedicated = DedicatedRedis(tmp_path / "redis")
    dedicated.start()
    yield dedicated
    dedicated.kill()


def event(user: str) -> MemoryEvent:
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id=user, content="turn",
                       embedding=(0.25, -0.5, 0.125))


def connections(client) -> int:
    """Clients connected to the server, the asking one excluded."""
    return len(client.client_list()) - 1


def test_a_connection_the_server_closed_is_replaced_before_the_turn_is_sent(server):
    with RedisBackendAdapter(server.url) as adapter, server.client() as raw:
        assert adapter.commit_turn("s", b"v1", expected_version=None, events=[event("u")]) == 1
        killed = raw.client_kill_filter(_type="normal", skipme=True)
        assert killed >= 1
        # the next turn must not be sent on the dead socket (that would surface as
        # BackendUnreachable, a write whose outcome the caller cannot know)
        assert adapter.commit_turn("s", b"v2", expected_version=1, events=[event("u")]) == 2
        assert raw.hget("semvec:state:s", "blob") == b"v2"
        assert [e.sequence for e in adapter.event_store().list_events("u")] == [1, 2]


def test_turns_from_many_threads_share_the_reserved_connection_safely(server):
    threads, turns = 6, 60
    errors: list[BaseException] = []
    with RedisBackendAdapter(server.url) as adapter:
        def worker(index: int) -> None:
            try:
                version = None
                for _ in range(turns):
                    version = adapter.commit_turn(f"s{index}", b"x", expected_version=version,
                                                  events=[event(f"u{index}")])
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(60)
        assert not errors, errors[:3]
        store = adapter.event_store()
        for index in range(threads):
            assert adapter.state_store().current_version(f"s{index}") == turns
            assert [e.sequence for e in store.list_events(f"u{index}")] == list(range(1, turns + 1))


def test_a_pool_of_one_connection_is_never_starved(server):
    """With max_connections=1 nothing is reserved: scripts and plain commands take turns."""
    with RedisBackendAdapter(server.url, max_connections=1) as adapter:
        version = adapter.commit_turn("s", b"a", expected_version=None, events=[event("u")])
        assert adapter.state_store().load("s") is not None  # a plain command after a script
        version = adapter.commit_turn("s", b"b", expected_version=version, events=[event("u")])
        assert version == 2
        assert len(adapter.event_store().list_events("u")) == 2


def test_closing_the_adapter_closes_the_reserved_connection(server):
    with server.client() as raw:
        adapter = RedisBackendAdapter(server.url)
        adapter.commit_turn("s", b"a", expected_version=None, events=[event("u")])
        adapter.state_store().load("s")
        assert connections(raw) >= 1
        adapter.close()
        assert connections(raw) == 0


def test_a_dropped_adapter_is_freed_with_its_pool(server):
    """The reservation must not keep a pool (and its sockets) alive after its adapter."""
    adapter = RedisBackendAdapter(server.url)
    adapter.commit_turn("s", b"a", expected_version=None, events=[event("u")])
    pool = weakref.ref(adapter.client.connection_pool)
    adapter.close()
    del adapter
    gc.collect()
    assert pool() is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_writes_on_its_parents_connection(server):
    """Parent and child run turns at the same time: on one shared socket their replies
    would cross (wrong versions, protocol errors or a timeout)."""
    turns = 150
    with RedisBackendAdapter(server.url, timeout=2) as adapter:
        assert adapter.commit_turn("parent", b"p", expected_version=None) == 1
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for n in range(turns):
                    assert adapter.commit_turn("child", b"c", expected_version=n or None) == n + 1
                code = 0
            finally:
                os._exit(code)
        try:
            for n in range(1, turns):
                assert adapter.commit_turn("parent", b"p", expected_version=n) == n + 1
        finally:
            _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert adapter.state_store().current_version("child") == turns
