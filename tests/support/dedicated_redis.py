"""Dedicated redis-server processes for fault, secret and cluster tests.

The suite's shared per-worker server (tests/support/fixtures/redis_server.py) must never be
killed, password-protected or clustered by one test; these servers belong to one test
each, live in their own temporary directory and keep their port across a restart.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from tests.support.fixtures.redis_server import find_redis_binary, free_port, unavailable

START_TIMEOUT_S = 10.0


class DedicatedRedis:
    """One redis-server on a fixed loopback port; ``kill()`` then ``start()`` brings it
    back at the same address with whatever its persistence options kept."""

    def __init__(self, workdir: Path, *, port: int | None = None,
                 extra: Sequence[str] = (), password: str | None = None) -> None:
        binary = find_redis_binary()
        if binary is None:
            unavailable("no redis-server on PATH")
        self.binary = binary
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.extra = list(extra)
        self.password = password
        self._proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.workdir), "--daemonize", "no", "--protected-mode", "no",
                "--logfile", str(self.workdir / "redis.log"), "--save", "", *self.extra]
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, cwd=self.workdir)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._proc.returncode}")
            if self.answers():
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"redis-server did not answer within {START_TIMEOUT_S}s")

    @property
    def pid(self) -> int:
        assert self._proc is not None, "not running"
        return self._proc.pid

    def answers(self) -> bool:
        import redis

        try:
            with redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                             socket_timeout=0.5, socket_connect_timeout=0.5) as client:
                return bool(client.ping())
        except redis.exceptions.ResponseError:
            return True  # up, just wanting a password
        except Exception:  # noqa: BLE001
            return False

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no final save; what survives is what was fsynced."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)

    def client(self, **kwargs):
        import redis

        kwargs.setdefault("socket_timeout", 5)
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, **kwargs)

    def run_cli(self, *args: str, timeout: float = 30) -> str:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("redis-cli not on PATH")
        auth = ["-a", self.password, "--no-auth-warning"] if self.password else []
        out = subprocess.run([cli, "-p", str(self.port), *auth, *args], capture_output=True,
                             text=True, timeout=timeout, check=True)
        return out.stdout


def cluster_port() -> int:
    """A free port whose cluster-bus twin (port + 10000) is free too."""
    import socket

    for _ in range(50):
        port = free_port()
        if port + 10000 >= 65536:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


def start_cluster(root: Path, masters: int = 3) -> list[DedicatedRedis]:
    """``masters`` cluster-enabled nodes joined with ``redis-cli --cluster create`` and
    waited for until every node reports ``cluster_state:ok``. Caller kills the nodes."""
    if shutil.which("redis-cli") is None:
        unavailable("redis-cli is not on PATH (needed to create a cluster)")
    nodes: list[DedicatedRedis] = []
    try:
        for i in range(masters):
            node = DedicatedRedis(root / f"node{i}", port=cluster_port(), extra=[
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "2000", "--appendonly", "no"])
            node.start()
            nodes.append(node)
        addresses = [f"127.0.0.1:{n.port}" for n in nodes]
        nodes[0].run_cli("--cluster", "create", *addresses, "--cluster-replicas", "0",
                         "--cluster-yes", timeout=60)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            states = [n.run_cli("cluster", "info") for n in nodes]
            if all("cluster_state:ok" in s for s in states):
                return nodes
            time.sleep(0.1)
        raise RuntimeError("the cluster did not reach cluster_state:ok within 20s")
    except BaseException:
        for node in nodes:
            node.kill()
        raise


@contextmanager
def throwaway_redis(prefix: str = "semvec-redis-",
                    extra: Sequence[str] = ("--appendonly", "no")) -> Iterator[str]:
    """A private redis-server for one benchmark or script; yields its URL, then removes it."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    server = DedicatedRedis(workdir, extra=extra)
    server.start()
    try:
        yield server.url
    finally:
        server.kill()
        shutil.rmtree(workdir, ignore_errors=True)


class DedicatedSentinel(DedicatedRedis):
    """One redis-server in Sentinel mode watching ``primary_port`` as ``service`` (quorum
    1, a primary is down after 1 s, unless told otherwise): enough to promote a replica
    on loopback."""

    def __init__(self, workdir: Path, primary_port: int, service: str, *,
                 failover_timeout_ms: int = 10000, quorum: int = 1,
                 down_after_ms: int = 1000) -> None:
        super().__init__(workdir)
        self.primary_port, self.service = primary_port, service
        self.failover_timeout_ms = failover_timeout_ms
        self.quorum, self.down_after_ms = quorum, down_after_ms

    def start(self) -> None:
        conf = self.workdir / "sentinel.conf"
        conf.write_text(f"port {self.port}\nbind 127.0.0.1\ndir {self.workdir}\n"
                        "protected-mode no\n"
                        f"sentinel monitor {self.service} 127.0.0.1 {self.primary_port} "
                        f"{self.quorum}\n"
                        f"sentinel down-after-milliseconds {self.service} "
                        f"{self.down_after_ms}\n"
                        f"sentinel failover-timeout {self.service} "
                        f"{self.failover_timeout_ms}\n")
        self._proc = subprocess.Popen(
            [self.binary, str(conf), "--sentinel", "--logfile", str(self.workdir / "log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.workdir)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is None and self.answers():
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"redis sentinel did not answer within {START_TIMEOUT_S}s")

    def primary(self) -> tuple[str, int]:
        host, port = self.client().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                                                   self.service)
        return host.decode(), int(port)


def start_replica(primary: DedicatedRedis, workdir: Path, timeout: float = 20.0, *,
                  via_port: int | None = None) -> DedicatedRedis:
    """A replica of ``primary`` (AOF on), returned once it receives the primary's writes;
    ``via_port``: it replicates through that port (a fault proxy to the primary). The
    primary starts the first full sync at once (Redis 7 otherwise waits
    ``repl-diskless-sync-delay``, 5 s, for more replicas to join)."""
    with primary.client() as client:
        client.config_set("repl-diskless-sync-delay", 0)
    replica = DedicatedRedis(workdir, extra=["--appendonly", "yes", "--replicaof", "127.0.0.1",
                                             str(via_port or primary.port)])
    replica.start()
    deadline = time.monotonic() + timeout
    probe = f"semvec-test:replica-probe:{replica.port}"
    with primary.client() as source, replica.client() as copy:
        while time.monotonic() < deadline:
            # "online" is not enough: Redis 7 starts the command stream on the replica's
            # first REPLCONF ACK after the sync, and one that arrives before the primary has
            # reaped its RDB child is ignored (the next comes a second later); a key written
            # on the primary and read on the replica is
            source.set(probe, b"1")
            if copy.get(probe) == b"1":
                source.delete(probe)
                return replica
            time.sleep(0.05)
    replica.kill()
    raise AssertionError("the replica did not come online")
