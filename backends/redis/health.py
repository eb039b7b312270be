"""Liveness and durability probes, each bounded by its timeout whatever the network does.

A probe uses its own one-shot connection (no retries, short socket timeouts) so a slow
pool or a retry policy cannot stretch it, and runs in a daemon thread so even a hanging
DNS lookup cannot hold the caller past the deadline.
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from backends.errors import CATEGORIES, BackendUnreachable, Category, category_of
from backends.probe import call_with_timeout
from backends.redis.config import RedisSettings, make_client, new_follower

T = TypeVar("T")
_GRACE_S = 0.25


class ProbeTimeout(BackendUnreachable):
    """The probe's deadline passed: the server did not answer in time."""


def _with_probe_client(settings: RedisSettings, timeout: float, fn: Callable[[Any], T]) -> T:
    def run() -> T:
        client = make_client(settings, timeout=timeout, retries=0,
                             follower=new_follower(settings, listen=False))
        try:
            return fn(client)
        finally:
            client.close()

    outcome = call_with_timeout(run, timeout + _GRACE_S)
    if outcome.timed_out:
        raise ProbeTimeout(f"no answer within {timeout:g}s")
    if outcome.error is not None:
        raise outcome.error
    return outcome.value


def _primaries(client: Any) -> list[Any]:
    """Plain clients of every primary of a cluster client."""
    cluster = client.cluster()
    return [cluster.get_redis_connection(node) for node in cluster.get_primaries()]


def _ping(client: Any) -> bool:
    if getattr(client, "is_cluster", False):  # healthy only when every primary answers
        return all(node.ping() for node in _primaries(client))
    return bool(client.ping())


def ping(settings: RedisSettings, timeout: float) -> bool:
    """PING within ``timeout``; False on any failure, never raises."""
    try:
        return bool(_with_probe_client(settings, timeout, _ping))
    except BaseException:  # noqa: BLE001 - a health probe answers, it does not raise
        return False


def _eviction(maxmemory: int, policy: str) -> str:
    """Which keys the server may drop under memory pressure: 'none', 'volatile' or 'any'."""
    if maxmemory <= 0 or policy == "noeviction":
        return "none"
    if policy.startswith("volatile-"):
        return "volatile"
    return "any"


def durability_verdict(info: dict[str, Any], session_ttl_s: int) -> dict[str, Any]:
    """Decide whether acknowledged writes survive a restart and memory pressure.

    Durable means: AOF on and its last write succeeded, and no eviction policy can drop
    session or event keys. ``volatile-*`` policies only evict keys that carry an expiry;
    events never do, and sessions do only when a session TTL is configured, so those
    policies are safe exactly when this adapter writes no TTL (other writers that set
    one are called out in the reason).
    """
    aof = str(info.get("aof_enabled", "0")) == "1"
    aof_status = str(info.get("aof_last_write_status", "ok"))
    maxmemory = int(info.get("maxmemory", 0) or 0)
    policy = str(info.get("maxmemory_policy", "noeviction"))
    evicts = _eviction(maxmemory, policy)
    problems: list[str] = []
    if not aof:
        problems.append("AOF is off (appendonly no): acknowledged writes since the last "
                        "snapshot are lost on a restart")
    elif aof_status != "ok":
        problems.append(f"the last AOF write failed (aof_last_write_status {aof_status})")
    if evicts == "any":
        problems.append(f"maxmemory-policy {policy} with maxmemory {maxmemory} can evict any key")
    elif evicts == "volatile" and session_ttl_s > 0:
        problems.append(f"maxmemory-policy {policy} can evict sessions, which carry a "
                        f"{session_ttl_s}s TTL")
    if problems:
        reason = "; ".join(problems)
    else:
        reason = "AOF on and no eviction policy can drop session or event keys"
        if evicts == "volatile":
            reason += (f" (maxmemory-policy {policy} only evicts keys with an expiry; "
                       "sessions written with a TTL by other writers are at risk)")
    return {
        "aof_enabled": aof,
        "aof_last_write_status": aof_status,
        "maxmemory": maxmemory,
        "maxmemory_policy": policy,
        "can_evict_keys": evicts != "none",
        "evicts": evicts,
        "durable": not problems,
        "reason": reason,
    }


def _replica_lags(info: dict[str, Any]) -> list[dict[str, Any]]:
    """The connected replicas INFO lists (``slave0``, ``slave1``, …): address, state, the
    seconds since each last acknowledged, and how many bytes of the stream it is behind."""
    head = int(info.get("master_repl_offset", 0) or 0)
    found = []
    for index in range(int(info.get("connected_slaves", 0) or 0)):
        entry = info.get(f"slave{index}")
        if not isinstance(entry, dict):
            continue
        found.append({"address": f"{entry.get('ip')}:{entry.get('port')}",
                      "state": str(entry.get("state", "?")),
                      "lag_s": int(entry.get("lag", 0) or 0),
                      "behind_bytes": max(0, head - int(entry.get("offset", 0) or 0))})
    return found


def replication_verdict(info: dict[str, Any]) -> dict[str, Any]:
    """Where this server stands in its replication topology, and what that costs.

    A replica refuses every write (READONLY), so a store that is written cannot be served
    by it: ``writable`` is False and the reason names the primary it follows. On a primary
    the line says how far behind the replicas are now; what a failover can lose is not
    that lag but :func:`loss_bound` (the old primary acknowledges writes until it is
    demoted, or until ``min-replicas-to-write`` stops it)."""
    role = str(info.get("role", "master"))
    if role in ("slave", "replica"):
        primary = f"{info.get('master_host')}:{info.get('master_port')}"
        link = str(info.get("master_link_status", "?"))
        return {"writable": False, "primary": primary,
                "replication": f"replica of {primary} (link {link}): read-only, the "
                               "engine's writes are refused (READONLY)"}
    replicas = _replica_lags(info)
    found: dict[str, Any] = {"writable": True, "replicas": len(replicas)}
    if not replicas:
        found["replication"] = "no replica: a failure of this server loses what it held"
        return found
    lag = max(r["lag_s"] for r in replicas)
    behind = max(r["behind_bytes"] for r in replicas)
    found.update({"replication_lag_s": lag, "replication_behind_bytes": behind,
                  "replica_addresses": ", ".join(f"{r['address']} ({r['state']})"
                                                  for r in replicas)})
    found["replication"] = (
        f"{len(replicas)} asynchronous replica(s), last acknowledged up to {lag} s ago, "
        f"{behind} byte(s) behind now (what a failover can lose: loss_bound)")
    return found


def _int_config(client: Any, name: str) -> int | None:
    """A numeric server setting, or None where CONFIG is renamed or denied."""
    try:
        found = client.config_get(name)
    except Exception:  # noqa: BLE001 - CONFIG may be renamed or denied
        return None
    value = next(iter(found.values()), None) if found else None
    text = value.decode() if isinstance(value, bytes) else value
    return int(text) if isinstance(text, str) and text.isdigit() else None


def _sentinel_settings(client: Any, service: str) -> dict[str, Any]:
    """The service's ``down-after-milliseconds`` and ``failover-timeout`` as the first
    sentinel that answers has them ({} when none does)."""
    manager = client.connection_pool.sentinel_manager
    for sentinel in manager.sentinels:
        try:
            state = sentinel.sentinel_master(service)
        except Exception:  # noqa: BLE001 - the next sentinel may answer
            continue
        return {"sentinel_down_after_ms": int(state.get("down-after-milliseconds", 0)),
                "sentinel_failover_timeout_ms": int(state.get("failover-timeout", 0)),
                "sentinel_quorum": int(state.get("quorum", 0))}
    return {}


def loss_facts(client: Any, info: dict[str, Any], service: str | None) -> dict[str, Any]:
    """What bounds the loss of a failover on this primary: ``min-replicas-to-write`` and
    ``min-replicas-max-lag``, and through Sentinel its timing settings."""
    facts: dict[str, Any] = {
        "min_replicas_to_write": _int_config(client, "min-replicas-to-write"),
        "min_replicas_max_lag": _int_config(client, "min-replicas-max-lag")}
    if facts["min_replicas_to_write"] is None and "min_slaves_good_slaves" in info:
        facts["min_replicas_to_write"] = 1  # INFO lists it only when the guard is on
    if service is not None:
        facts.update(_sentinel_settings(client, service))
    return facts


def loss_bound(facts: dict[str, Any]) -> dict[str, Any]:
    """The real window a failover can lose, in seconds (None: no bound), and why.

    With ``min-replicas-to-write`` N >= 1 an old primary refuses writes once fewer than N
    replicas acknowledged within ``min-replicas-max-lag`` seconds: at most that many
    seconds of acknowledged turns are lost. With 0 it acknowledges every write until the
    sentinels demote it (after ``down-after-milliseconds`` and a promotion, bounded by
    ``failover-timeout``, and never while it cannot reach them): no bound."""
    if not facts.get("writable", True):
        return {}
    if not facts.get("replicas"):
        return {"loss_bound_s": None,
                "loss_bound": "no replica to fail over to: a failure of this server loses "
                              "what it held"}
    guard, lag = facts.get("min_replicas_to_write"), facts.get("min_replicas_max_lag")
    if guard is None:
        return {"loss_bound_s": None,
                "loss_bound": "unknown: CONFIG GET min-replicas-to-write was refused"}
    if guard >= 1 and lag:
        return {"loss_bound_s": lag, "loss_bound": (
            f"at most the last {lag} s of acknowledged turns: min-replicas-to-write {guard} "
            f"with min-replicas-max-lag {lag} stops a primary cut off from its replicas")}
    down, timeout = facts.get("sentinel_down_after_ms"), facts.get("sentinel_failover_timeout_ms")
    demoted = (f"the sentinels demote it (down-after-milliseconds {down}, failover-timeout "
               f"{timeout}; never while it cannot reach them)" if down is not None
               else "it is demoted by hand")
    return {"loss_bound_s": None, "loss_bound": (
        f"no bound: with min-replicas-to-write {guard} an old primary acknowledges every "
        f"turn until {demoted}; the engine's client sends no WAIT, so each is lost")}


def details(settings: RedisSettings, timeout: float) -> dict[str, Any]:
    """Reachability, server facts and the durability verdict; never raises."""
    from backends.redis.errors import translate_error

    started = time.monotonic()

    def probe(client: Any) -> tuple[float, dict[str, Any]]:
        if getattr(client, "is_cluster", False):
            return _cluster_probe(client, started, settings.ttl_seconds)
        client.ping()
        latency = (time.monotonic() - started) * 1000.0
        facts = client.info()
        service = settings.sentinel.service if settings.sentinel is not None else None
        if service is not None:
            facts["sentinel_facts"] = sentinel_facts(client, service)
        if str(facts.get("role", "master")) == "master":
            facts["loss_facts"] = loss_facts(client, facts, service)
        return latency, facts

    base: dict[str, Any] = {"backend": "redis", "uri": settings.redacted_url,
                            "session_ttl_seconds": settings.ttl_seconds}
    try:
        latency, info = _with_probe_client(settings, timeout, probe)
    except BaseException as exc:  # noqa: BLE001 - reported, not raised
        mapped = translate_error(exc, settings.redacted_url) if not isinstance(exc, ProbeTimeout) else exc
        category = category_of(mapped)
        return {
            **base,
            # credentials refused: the server answered, but we cannot use it
            "reachable": category in (Category.AUTH, Category.TRANSIENT),
            "error": type(mapped).__name__,
            "category": category.value,
            "durable": False,
            "reason": f"{CATEGORIES[category].health}: {mapped}",
        }
    if info.get("cluster_client"):
        return {**base, "reachable": True, "latency_ms": round(latency, 2), **info}
    return {
        **base,
        "reachable": True,
        "latency_ms": round(latency, 2),
        "server_version": info.get("redis_version"),
        "mode": info.get("redis_mode", "standalone"),
        # one script touches a session and its users' event keys: not possible across slots
        "supported_topology": info.get("redis_mode", "standalone") != "cluster",
        "role": info.get("role"),
        **info.get("sentinel_facts", {}),
        **_with_topology(durability_verdict(info, settings.ttl_seconds),
                         replication_verdict(info), info.get("loss_facts", {}),
                         settings.wait_replicas),
    }


def sentinel_facts(client: Any, service: str) -> dict[str, Any]:
    """Which primary the sentinels name for ``service`` and how many of them answer (a
    failover needs a quorum of them: one answering sentinel cannot promote a replica)."""
    manager = client.connection_pool.sentinel_manager
    host, port = manager.discover_master(service)
    answering = 0
    for sentinel in manager.sentinels:
        try:
            answering += bool(sentinel.ping())
        except Exception:  # noqa: BLE001 - a sentinel that does not answer is counted out
            pass
    total = len(manager.sentinels)
    return {"sentinel_primary": f"{host}:{port}", "sentinels_answering": answering,
            "sentinel": f"service {service}: primary {host}:{port}, {answering} of {total} "
                        "sentinel(s) answer"}


#: the replicated gate's answer for every Redis topology
_NEVER_REPLICATED = {"replicated": False,
                     "replication_reason": "the engine's Redis writes never wait for a replica "
                                           "(it sends no WAIT), so no acknowledged write is "
                                           "sure to be on a second server"}


def _with_topology(durability: dict[str, Any], topology: dict[str, Any],
                   loss: dict[str, Any], wait_replicas: int) -> dict[str, Any]:
    """The durability verdict with the server's place in its replication topology (and,
    on a primary, the loss bound): a read-only replica is never a durable store to write
    to, whatever its AOF says."""
    merged = {**durability, **topology, **_NEVER_REPLICATED, **loss}
    if topology["writable"]:
        merged.update(loss_bound({**topology, **loss}))
        merged["wait_replicas"] = wait_replicas
        if wait_replicas:
            merged["wait"] = (f"this adapter waits for {wait_replicas} replica(s) after "
                              "every write (wait_replicas): none it acknowledges is on "
                              "fewer; the engine's client does not wait")
    if not topology["writable"]:
        merged["durable"] = False
        merged["reason"] = (f"this server is a read-only replica of {topology['primary']}: "
                            "the engine's writes are refused there; point the store at the "
                            "primary")
    return merged


def _cluster_probe(client: Any, started: float, session_ttl_s: int) -> tuple[float, dict[str, Any]]:
    """Every primary's facts; durable only when every primary is."""
    nodes = _primaries(client)
    infos = []
    for node in nodes:
        node.ping()
        infos.append(node.info())
    latency = (time.monotonic() - started) * 1000.0
    verdicts = [durability_verdict(info, session_ttl_s) for info in infos]
    worst = next((v for v in verdicts if not v["durable"]), verdicts[0])
    return latency, {
        **worst,
        "cluster_client": True,
        "server_version": infos[0].get("redis_version"),
        "mode": "cluster",
        "primaries": len(nodes),
        # state works slot by slot; the event log needs several slots per turn
        "supported_topology": True,
        "events_supported": False,
        "durable": all(v["durable"] for v in verdicts),
        **_NEVER_REPLICATED,
    }
