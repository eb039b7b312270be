"""The machinery under the issue-25 cases, on its own: the loopback fault proxy (lose a
reply, cut, stall, restore) against a loopback echo server, and the zygote's promise that
no worker outlives it, whether it is closed or its parent simply goes away."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from backends.conformance.children import Zygote, wait_for
from backends.conformance.proxy import FaultProxy
from tests.support import process_doubles as doubles


@pytest.fixture
def echo():
    """A loopback echo server; yields (port, list of what it received)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    received: list[bytes] = []

    def serve(conn):
        with conn:
            while True:
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                received.append(data)
                try:
                    conn.sendall(data)
                except OSError:
                    return

    def accept():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1], received
    server.close()


def _client(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=2)
    sock.settimeout(2)
    return sock


def test_the_proxy_forwards_and_loses_exactly_the_armed_reply(echo):
    port, received = echo
    with FaultProxy("127.0.0.1", port) as proxy:
        sock = _client(proxy.port)
        sock.sendall(b"one")
        assert sock.recv(10) == b"one"
        proxy.lose_reply(1, "reset")
        sock.sendall(b"two")
        with pytest.raises((ConnectionResetError, ConnectionAbortedError)):
            data = sock.recv(10)
            if not data:
                raise ConnectionResetError("EOF")  # some kernels report the RST as EOF
        assert proxy.fired.is_set()
        assert wait_for(lambda: b"two" in received, 2)  # the server did get it
        sock.close()
        again = _client(proxy.port)  # the next connection is untouched
        again.sendall(b"three")
        assert again.recv(10) == b"three"
        again.close()


def test_cut_refuses_until_restored_and_stall_holds_bytes_until_restored(echo):
    port, _received = echo
    with FaultProxy("127.0.0.1", port) as proxy:
        live = _client(proxy.port)
        live.sendall(b"x")
        assert live.recv(1) == b"x"
        proxy.cut()
        with pytest.raises(OSError):
            live.sendall(b"y")
            if not live.recv(1):
                raise ConnectionResetError("EOF")
        with pytest.raises(OSError):
            refused = _client(proxy.port)
            refused.sendall(b"z")
            if not refused.recv(1):
                raise ConnectionResetError("EOF")
        proxy.restore()
        sock = _client(proxy.port)
        proxy.stall()
        sock.settimeout(0.3)
        sock.sendall(b"held")
        with pytest.raises(socket.timeout):
            sock.recv(10)
        proxy.restore()
        sock.settimeout(2)
        assert sock.recv(10) == b"held"
        sock.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("how", ["closed", "parent gone"])
def test_no_worker_outlives_the_zygote(tmp_path, how):
    path = str(tmp_path / "store.pickle")
    recipe = doubles.recipe_for(doubles.SharedFileAdapter, path)
    adapter = doubles.SharedFileAdapter(path=path)
    adapter.commit_turn("s", b"b", expected_version=None)
    zygote = Zygote(recipe)
    ack = str(tmp_path / "acks")
    pid = zygote.fork({"kind": "turns", "session": "s", "user": "u", "owner": None,
                       "version": 1, "events_per_turn": 1, "ack_path": ack,
                       "error_path": str(tmp_path / "error.json")})
    assert wait_for(lambda: os.path.exists(ack) and os.path.getsize(ack) > 0, 30)
    if how == "closed":
        zygote.close()
    else:  # the parent dies without a word: the zygote reads EOF and kills its workers
        zygote._proc.stdin.close()
        zygote._proc.wait(30)
    assert wait_for(lambda: not _alive(pid), 10), f"worker {pid} outlived the zygote"
    time.sleep(0.05)
    assert adapter.state_store().current_version("s") >= 2
