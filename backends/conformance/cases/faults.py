"""Connection faults no adapter has to cooperate with: the suite routes a second adapter,
built from the run's recipe with its URI pointed at a loopback proxy (``proxy.py``),
and loses replies, cuts and stalls the connection there.

Judged through the run's own adapter (straight to the server): every turn whole or absent
whatever the caller was told (a reply is lost at each request of a turn in turn), a turn reported committed is there exactly once, no event
of a turn stored twice (a blind retry after a lost reply duplicates it), ``check_health``
says False within its bound while the connection is cut or stalled and True again after,
and a turn after the faults commits. (No turn is tried while the connection is cut: it
would only wait out the adapter's own connect timeout, a pool's is 30 s.)

Not applicable without a recipe whose URI names a TCP host and port (``--uri``, or
``--adapter`` given a URI): an adapter configured otherwise (the engine's, from its
environment) cannot be pointed at the proxy.
"""

from __future__ import annotations

import threading
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from backends.conformance.catalogue import case
from backends.conformance.context import CaseContext, describe_exception
from backends.conformance.model import NotApplicable

#: Requests of one turn the lost-reply fault is tried at (1 = the turn's first), until
#: a turn needs fewer (a SQL turn is BEGIN ... COMMIT, the reply lost last is COMMIT's).
_ROUND_TRIPS = 10
#: How long the adapter may take to come back after the proxy is restored.
_RECOVERY = 15.0


def _proxied(ctx: CaseContext) -> tuple[Any, str, int]:
    if ctx.adapter.is_persistent is not True:
        raise NotApplicable("is_persistent is not True: the adapter keeps nothing on a "
                            "server, so there is no connection to cut")
    recipe = getattr(ctx, "recipe", None)
    uri = recipe.uri if recipe is not None else None
    if not uri:
        raise NotApplicable("the adapter is not configured by a URI the suite was given "
                            "(--uri, or --adapter with a URI), so it cannot be routed "
                            "through the suite's proxy")
    parts = urlsplit(uri)
    if _names_a_locator(parts.scheme.lower()):
        raise NotApplicable(f"the run's URI ({parts.scheme}://...) names the servers that "
                            "find the primary, not the primary; give the primary's own URI "
                            "to cut its connections")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    port = port or _default_port(parts.scheme.lower())
    if not host or not port:
        raise NotApplicable(f"the run's URI ({parts.scheme}://...) names no TCP host and "
                            "port to proxy")
    if "," in (parts.netloc or ""):
        raise NotApplicable("the run's URI names several hosts; the proxy stands for one")
    return recipe, host, port


def _facts_of(scheme: str) -> Any:
    """The BackendInfo of the backend a URI ``scheme`` implies, or None."""
    from backends.info import known
    from backends.selection import SCHEME_BACKENDS

    return known(SCHEME_BACKENDS.get(scheme, ""))


def _names_a_locator(scheme: str) -> bool:
    """A scheme whose hosts find the server rather than being it (Redis Sentinel)."""
    info = _facts_of(scheme)
    return info is not None and scheme in info.locator_schemes


def _default_port(scheme: str) -> int | None:
    """The port a URI of ``scheme`` without one means (BackendInfo.default_port)."""
    info = _facts_of(scheme)
    return info.default_port if info else None


def _through(uri: str, port: int) -> str:
    parts = urlsplit(uri)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _health(adapter: Any, bound: float) -> tuple[Any, float]:
    """check_health's answer (or "no answer"/"raised ...") and how long it took."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = adapter.check_health()
        except BaseException as exc:  # noqa: BLE001
            outcome["value"] = f"raised {describe_exception(exc)}"

    started = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True, name="semvec-conformance-health")
    thread.start()
    thread.join(bound)
    return outcome.get("value", "no answer"), time.perf_counter() - started


def _healthy_again(adapter: Any, bound: float) -> Any:
    deadline = time.monotonic() + _RECOVERY
    value: Any = None
    while time.monotonic() < deadline:
        value, _ = _health(adapter, bound)
        if value is True:
            return True
        time.sleep(0.1)
    return value


class _Turns:
    """One session committed through the proxied adapter, judged through the direct one."""

    def __init__(self, ctx: CaseContext, proxied: Any) -> None:
        self.ctx, self.proxied = ctx, proxied
        self.sid, self.user = ctx.session("faulted"), ctx.user("faulted")
        self.owner = ctx.owner("tenant-faults")
        self.events = ctx.events
        self.version = 0
        self.turn = 0

    def _events_for(self, label: str) -> Any:
        if self.events is None:
            return None
        return [self.ctx.event(self.user, f"{label} event {i}", session_id=self.sid,
                               owner_subject=self.owner) for i in range(2)]

    def commit(self, label: str, adapter: Any) -> tuple[Any, Any, bytes]:
        """(returned version or None, exception or None, blob) of one turn."""
        self.turn += 1
        blob = f"{self.sid} {label}".encode()
        events = self._events_for(label)
        try:
            got = self.ctx.commit_turn(self.sid, blob, expected_version=self.version or None,
                                       owner_subject=self.owner, events=events,
                                       adapter=adapter)
            return got, None, blob
        except Exception as exc:  # noqa: BLE001 - judged by what is stored
            return None, exc, blob

    def judge(self, label: str, got: Any, raised: Any, blob: bytes) -> bool:
        """Whole or absent, once; True when the turn is stored."""
        ctx = self.ctx
        row = ctx.call("load_full (direct)", lambda: ctx.store.load_full(self.sid))
        before = self.version
        told = "returned" if raised is None else f"raised {type(raised).__name__}"
        stored = row is not None and row.version == before + 1 and bytes(row.blob) == blob
        absent = (row is None and before == 0) or (row is not None and row.version == before)
        ctx.expect(stored or absent, f"state after {label} ({told})",
                   f"version {before + 1} with the turn's blob, or version {before or 'none'}",
                   "none" if row is None else f"version {row.version}, blob "
                   f"{bytes(row.blob)[:60]!r}")
        if raised is None:
            ctx.expect(stored, f"{label} that returned {got!r}", "the turn stored",
                       "it is not")
        events = self.events
        if events is not None:
            listed = ctx.call("events (direct)", lambda: events.list_events(self.user))
            contents = [e.content for e in listed]
            doubled = sorted({c for c in contents if contents.count(c) > 1})
            ctx.expect(not doubled, f"events after {label} ({told})",
                       "each event of a turn stored once", f"stored twice: {doubled[:3]}")
            mine = sorted(c for c in contents if c.startswith(f"{label} event"))
            want = [f"{label} event {i}" for i in range(2)] if stored else []
            ctx.expect_equal(mine, want, f"the events of {label} ({told}, state "
                                         f"{'stored' if stored else 'absent'})")
        if stored:
            self.version = before + 1
        return stored


@case("faults", needs_event_turns=True)
def connection(ctx: CaseContext) -> None:
    """Replies lost, connections cut, reset and stalled mid-call: every turn whole or
    absent, never twice; health False while cut or stalled, True after."""
    from backends.conformance.proxy import FaultProxy

    recipe, host, port = _proxied(ctx)
    bound = ctx.options.health_timeout
    with FaultProxy(host, port) as proxy:
        proxied = ctx.call("building the adapter through the proxy",
                           lambda: recipe.with_uri(_through(recipe.uri, proxy.port)).build())
        try:
            ctx.expect_equal(_health(proxied, bound)[0], True,
                             "check_health() through the proxy, before any fault")
            turns = _Turns(ctx, proxied)
            turns.judge("turn 0", *turns.commit("turn 0", proxied))
            for how in ("reset", "close"):
                for nth in range(1, _ROUND_TRIPS + 1):
                    label = f"{how} at request {nth}"
                    proxy.lose_reply(nth, how)
                    got, raised, blob = turns.commit(label, proxied)
                    proxy.disarm()
                    fired = proxy.fired.is_set()
                    stored = turns.judge(label, got, raised, blob)
                    if raised is not None and not stored:
                        # the caller retries a turn that failed and is absent
                        retry = f"retry after {label}"
                        turns.judge(retry, *turns.commit(retry, proxied))
                    if not fired:
                        break  # the turn took fewer requests: every one was tried
            for fault in ("cut", "stall"):
                getattr(proxy, fault)()
                value, took = _health(proxied, bound)
                ctx.expect(value is False and took <= bound,
                           f"check_health() while the connection is {fault}",
                           f"False within {bound:g}s", f"{value!r} after {took:.2f}s")
                proxy.restore()
                ctx.expect_equal(_healthy_again(proxied, bound), True,
                                 f"check_health() after the {fault} ended")
            label = "a turn after the faults"
            got, raised, blob = turns.commit(label, proxied)
            ctx.expect(raised is None, label, "committed",
                       f"raised {describe_exception(raised)}" if raised else "")
            turns.judge(label, got, raised, blob)
        finally:
            try:
                proxied.close()
            except Exception:  # noqa: BLE001
                pass
