"""Script calls through redis-py's public evalsha on the scripts' own client, on a real server.

Lua script calls (commit_turn above all) go through a client of their own with no command
retry. These tests hold that path to what the pool promises: a connection the server
closed is replaced before a write is sent, a turn after a CLIENT KILL lands once (no
duplicate, nothing lost), a write whose reply is lost is never resent, concurrent callers
still work, a small pool is never starved, a forked child never writes on its parent's
socket, and closing the adapter leaves no connection open.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import uuid
import weakref

import pytest

from backends.contract import MemoryEvent
from backends.errors import BackendUnreachable
from backends.redis import RedisBackendAdapter, schema
from backends.redis.scripts import checkout, script_client
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


def test_turns_from_many_threads_share_the_script_pool_safely(server):
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
    """With max_connections=1 scripts and plain commands each have their one connection."""
    with RedisBackendAdapter(server.url, max_connections=1) as adapter:
        version = adapter.commit_turn("s", b"a", expected_version=None, events=[event("u")])
        assert adapter.state_store().load("s") is not None  # a plain command after a script
        version = adapter.commit_turn("s", b"b", expected_version=version, events=[event("u")])
        assert version == 2
        assert len(adapter.event_store().list_events("u")) == 2


def test_closing_the_adapter_closes_the_script_connections(server):
    """Every connection the adapter opened (reads and scripts) is gone after close();
    counted by client id, so a probe connection the test's own tooling left behind (on
    redis-py 5.0.0, whose close() leaves a pool's sockets to the garbage collector) is
    not taken for the adapter's."""
    with server.client() as raw:
        before = {c["id"] for c in raw.client_list()}

        def opened() -> set:
            return {c["id"] for c in raw.client_list()} - before - {str(raw.client_id())}

        adapter = RedisBackendAdapter(server.url)
        adapter.commit_turn("s", b"a", expected_version=None, events=[event("u")])
        adapter.state_store().load("s")
        assert len(opened()) >= 2  # the scripts' connection and the reads'
        adapter.close()
        deadline = time.monotonic() + 2  # the server drops a closed client on its next loop
        while opened() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert opened() == set()


def test_a_dropped_adapter_is_freed_with_its_pool(server):
    """The scripts' client must not keep a pool (and its sockets) alive after its adapter."""
    adapter = RedisBackendAdapter(server.url)
    adapter.commit_turn("s", b"a", expected_version=None, events=[event("u")])
    pool = weakref.ref(adapter.client.connection_pool)
    script_pool = weakref.ref(script_client(adapter.client).connection_pool)
    assert script_pool() is not pool()  # the scripts really have a pool of their own
    adapter.close()
    del adapter
    gc.collect()
    assert pool() is None
    assert script_pool() is None


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


def test_a_turn_after_client_kill_lands_once_with_no_duplicate_and_no_lost_event(server):
    """CLIENT KILL of every connection of the adapter (the scripts' and the reads') between
    turns: the next turn is written once, its event stored once, none lost."""
    user = "u-kill"
    sent: list[str] = []
    with RedisBackendAdapter(server.url) as adapter, server.client() as raw:
        version = None
        for turn in range(6):
            batch = [event(user)]
            sent.append(batch[0].event_id)
            version = adapter.commit_turn("s", f"v{turn}".encode(), expected_version=version,
                                          events=batch)
            adapter.state_store().load("s")  # the read pool has a connection to kill too
            assert raw.client_kill_filter(_type="normal", skipme=True) >= 2
        assert version == 6
        stored = adapter.event_store().list_events(user)
        assert [e.event_id for e in stored] == sent  # each once, in order
        assert [e.sequence for e in stored] == list(range(1, 7))
        assert raw.get(schema.user_counter_key(user)) == b"6"  # no sequence used twice
        assert raw.zcard(schema.user_seq_index_key(user)) == 6
        assert raw.hget("semvec:state:s", "blob") == b"v5"


def test_a_write_whose_reply_is_lost_is_not_resent(server, monkeypatch):
    """The client's retry policy (retries=1) resends a command whose reply was lost to a
    broken connection; a resent insert that had landed would report "already exists". The
    scripts' client has no command retry: the caller learns the outcome is unknown
    (BackendUnreachable), and the row was written once. The loss is simulated on the
    driver's public Connection.read_response: the reply is read, then the connection
    is dropped as if the reply had never arrived."""
    from redis.connection import Connection
    from redis.exceptions import ConnectionError as DriverConnectionError

    original = Connection.read_response
    armed = {"on": False, "lost": 0}

    def losing_read(self, *args, **kwargs):
        reply = original(self, *args, **kwargs)
        if armed["on"]:
            armed["on"] = False
            armed["lost"] += 1
            self.disconnect()
            raise DriverConnectionError("reply lost (simulated)")
        return reply

    with RedisBackendAdapter(server.url, retries=1) as adapter, server.client() as raw:
        adapter.state_store().save("warm", b"w", expected_version=None)  # script loaded
        monkeypatch.setattr(Connection, "read_response", losing_read)
        raw.config_resetstat()
        armed["on"] = True
        with pytest.raises(BackendUnreachable):
            adapter.state_store().save("lost", b"x", expected_version=None)
        monkeypatch.setattr(Connection, "read_response", original)
        assert armed["lost"] == 1
        assert raw.info("commandstats")["cmdstat_evalsha"]["calls"] == 1  # sent once
        assert adapter.state_store().current_version("lost") == 1


def test_checkout_works_on_the_installed_redis_py(server):
    """redis-py 5.0-5.2 refuse get_connection() without a command name, 5.3+ warn with
    one: the helper must do neither (run by .ci/min-versions on the lowest redis-py)."""
    import warnings

    with RedisBackendAdapter(server.url) as adapter:
        pool = adapter.client.connection_pool
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            connection = checkout(pool)
        try:
            connection.send_command("PING")
            assert connection.read_response() in (b"PONG", "PONG", True)
        finally:
            pool.release(connection)
        assert sum(1 for _ in adapter.iter_sessions()) == 0  # enumeration's checkout too
