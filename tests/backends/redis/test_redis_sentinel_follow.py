"""Through ``redis+sentinel://`` the adapter follows a switch the moment the sentinels
announce it (real servers on loopback: a primary, a replica, three sentinels).

An old primary still up takes writes until the sentinels demote it, seconds later; a
client that kept its connections there was told "acknowledged" for turns the promoted
replica never saw. Here a writer commits turns (one event each) through a SENTINEL
FAILOVER, and every turn acknowledged more than 100 ms after the promotion was announced
is on the new primary; an unknown service name is a usage error naming the known ones.
"""

from __future__ import annotations

import threading
import time

import pytest

from backends.conformance.children import turn_event
from backends.redis import RedisBackendAdapter
from tests.support.failover_topologies import WAIT_S, redis_sentinel_trio

pytestmark = pytest.mark.redis

#: how long after the announcement a turn may still be answered by the old primary
GRACE_S = 0.1


class Announcements:
    """The first time a sentinel announced the new primary (its own subscription)."""

    def __init__(self, sentinel) -> None:
        self.first: float | None = None
        self._pubsub = sentinel.client().pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe("+promoted-slave", "+switch-master")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.05)
            if message and self.first is None:
                self.first = time.monotonic()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._pubsub.close()


class Writer(threading.Thread):
    """Turns on fresh sessions, each with one event; what was acknowledged, and when."""

    def __init__(self, adapter, prefix: str) -> None:
        super().__init__(daemon=True)
        self.adapter, self.prefix = adapter, prefix
        self.acks: list[tuple[str, float]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            sid = f"{self.prefix}-{n}"
            try:
                self.adapter.commit_turn(sid, b"turn", expected_version=None,
                                         events=[turn_event("u-follow", sid, None, f"t{n}")])
            except Exception as exc:  # noqa: BLE001 - counted, never acknowledged
                self.errors.append(type(exc).__name__)
            else:
                self.acks.append((sid, time.monotonic()))
            time.sleep(0.005)


def _until(check, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_no_turn_acknowledged_after_the_announcement_is_lost(tmp_path):
    with redis_sentinel_trio(tmp_path) as trio:
        adapter = RedisBackendAdapter(trio.uri)
        heard = Announcements(trio.sentinels[1])
        writer = Writer(adapter, "follow")
        writer.start()
        try:
            _until(lambda: len(writer.acks) >= 20, "the writer got no turn through")
            trio.switchover()
            _until(lambda: heard.first is not None, "no promotion was announced")
            # the old primary takes writes until the sentinels demote it: write past that
            _until(lambda: trio.role(trio.primary) == "slave", "the old primary was not demoted")
            after = len(writer.acks)
            _until(lambda: len(writer.acks) >= after + 20, "no turn after the demotion")
        finally:
            writer.stop.set()
            writer.join(10)
            heard.close()
        announced = heard.first
        late = [sid for sid, at in writer.acks if at > announced + GRACE_S]
        with trio.replica.client() as new_primary:
            lost = [sid for sid in late if not new_primary.exists(f"semvec:state:{sid}")]
        switches = getattr(adapter._follower, "switches", 0)
        adapter.close()
    assert late, "no turn was acknowledged after the announcement"
    assert lost == [], f"{len(lost)} of {len(late)} turns acknowledged after the promotion lost"
    assert switches >= 1


def test_an_unknown_service_is_a_usage_error_naming_the_known_ones(tmp_path):
    from typer.testing import CliRunner

    from semvecctl.app import app

    with redis_sentinel_trio(tmp_path) as trio:
        wrong = trio.uri.replace(f"/{trio.service}/", "/nosuchservice/")
        result = CliRunner().invoke(app, ["health", "--uri", wrong])
        listing = CliRunner().invoke(app, ["sessions", "list", "--uri", wrong])
    for outcome in (result, listing):
        assert outcome.exit_code == 2, outcome.output
        assert "'nosuchservice'" in outcome.stderr and trio.service in outcome.stderr
        assert "Traceback" not in outcome.output


def test_a_readonly_reply_is_a_switch_and_never_a_success(tmp_path):
    from backends.errors import BackendUnreachable

    with redis_sentinel_trio(tmp_path) as trio:
        adapter = RedisBackendAdapter(trio.uri)
        try:
            assert adapter.commit_turn("ro", b"1", expected_version=None) == 1
            # the roles swapped behind the sentinels' back: the server the pool knows
            # answers READONLY now
            with trio.replica.client() as replica:
                replica.execute_command("REPLICAOF", "NO", "ONE")
            with trio.primary.client() as primary:
                primary.execute_command("REPLICAOF", "127.0.0.1", str(trio.replica.port))
            _until(lambda: trio.role(trio.primary) == "slave", "the primary did not follow")
            before = adapter._follower.switches
            with pytest.raises(BackendUnreachable) as refused:
                adapter.commit_turn("ro", b"2", expected_version=1)
            assert "READONLY" in str(refused.value.__cause__)
            assert adapter._follower.switches > before
            with trio.replica.client() as new_primary:
                assert new_primary.hget("semvec:state:ro", "version") == b"1"
        finally:
            adapter.close()
