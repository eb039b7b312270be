"""Health probes of a PostgreSQL deployment, each database on a fresh connection of its
own with the probe's timeout as connect and statement timeout, so neither the pool's
wait nor a slow query can stretch a probe; every failure is reported, never raised.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from backends.info import declared


def details(adapter: Any, timeout: float) -> dict[str, Any]:
    """Server version, the tables present, the layout the database holds (what
    ``postgresql://`` auto-selection would pick), durability settings, latency.
    Bounded by ``timeout``; failures are reported in the dict, not raised.

    On a sharded deployment the top level speaks for the whole (reachable and durable
    only when every database is) and ``databases`` has each one's own facts, named
    (``primary``, ``shard N``), probed concurrently."""
    details: dict[str, Any] = {"backend": adapter.name, "uri": adapter.config.display_uri,
                               "schema": adapter.config.schema}
    if not adapter.placement.sharded:
        details.update(database_details(adapter, adapter._db, timeout))
        return details
    from concurrent.futures import ThreadPoolExecutor

    databases = adapter.placement.databases()
    with ThreadPoolExecutor(max_workers=min(8, len(databases))) as pool:
        parts = list(pool.map(lambda db: database_details(adapter, db, timeout), databases))
    primary = dict(parts[0])
    listed: list[dict[str, Any]] = []
    for db, part in zip(databases, parts):
        listed.append({"database": adapter.placement.label(db), "uri": db.config.display_uri,
                       **{k: part[k] for k in ("reachable", "latency_ms", "server_version",
                                               "durable", "read_only_replica", "replicated",
                                               "replication", "error")
                          if k in part}})
    down = [f"{p['database']} ({p['uri']}): {p.get('error', 'unreachable')}"
            for p in listed if not p.get("reachable")]
    risky = [f"{p['database']}: {part.get('durability_reason')}"
             for p, part in zip(listed, parts) if p.get("reachable") and not part.get("durable")]
    details.update({k: v for k, v in primary.items() if k not in _ONE_DATABASE_REPLICATION})
    details.update(
        shards=len(adapter.placement.shards),
        reachable=not down,
        durable=not risky and not down,
        **_deployment_replication(listed),
        durability_reason="; ".join(risky) if risky else ("" if not down else
                                                          "not every database answered"),
        databases=listed,
    )
    if down:
        details["error"] = "unreachable: " + "; ".join(down)
    return details


#: facts of one database's own replication, which the top of a sharded report must not take
#: from the primary alone (each database's are in ``databases``)
_ONE_DATABASE_REPLICATION = ("primary", "standbys", "standby_states", "replication_lag_s",
                             "replication")


def _deployment_replication(listed: list[dict[str, Any]]) -> dict[str, Any]:
    """Replicated only when every database is; the line names each database that is not."""
    behind = [f"{p['database']}: {p.get('replication') or 'no replication facts'}"
              for p in listed if not p.get("replicated")]
    return {"replicated": not behind,
            "replication": "; ".join(behind) if behind else
            "every database has a synchronous standby"}


def database_details(adapter: Any, db: Any, timeout: float) -> dict[str, Any]:
    """One database's health facts (see :func:`details`)."""
    from backends.selection import detector_for
    from backends.postgres.schema import legacy_tables, missing_tables

    details: dict[str, Any] = {}
    schema = db.config.schema
    started = time.perf_counter()
    try:
        conn = db.pool.connect(connect_timeout=timeout,
                               statement_timeout_ms=max(1, int(timeout * 1000)))
    except Exception as exc:  # noqa: BLE001 - reported in the details
        details.update(reachable=False, error=str(exc))
        return details
    try:
        server = conn.execute("SHOW server_version").fetchone()[0]
        tables = adapter._tables_of_interest()
        missing = missing_tables(conn, schema, tables)
        legacy = [t for t in legacy_tables(adapter.name, adapter._layout)
                  if t not in missing_tables(conn, schema, (t,))]
        in_recovery = conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
        settings = dict(conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN"
            " ('fsync', 'synchronous_commit', 'full_page_writes', 'synchronous_standby_names')"
        ).fetchall())
        risky = [f"{name}={value}" for name, value in sorted(settings.items())
                 if value == "off" and name != "synchronous_standby_names"]
        detector = detector_for(declared(adapter.name).schemes[0])
        chosen, reason = (detector.from_catalog(conn, schema) if detector
                          else (adapter.name, "no other backend shares the scheme"))
        details.update(
            reachable=True,
            server_version=server,
            read_only_replica=bool(in_recovery),
            tables={t: t not in missing for t in tables},
            database_layout=chosen,
            database_layout_reason=reason,
            durable=not risky,
            durability_reason=("" if not risky else
                               "acknowledged writes can be lost on a crash: " + ", ".join(risky)),
            settings=settings,
            **replication_facts(conn, bool(in_recovery), settings),
        )
        if in_recovery:
            details["durable"] = False
            details["durability_reason"] = (
                f"this server is a standby in recovery (following {details['primary']}): "
                "the engine's writes are refused there; point the store at the primary")
        if legacy:
            details["legacy_tables"] = legacy
        adapter._more_health(conn, details)
        details["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
    except Exception as exc:  # noqa: BLE001 - reported in the details
        details.update(reachable=False, error=str(exc).splitlines()[0] if str(exc) else
                       type(exc).__name__)
    finally:
        with contextlib.suppress(Exception):
            conn.close()
    return details


def replication_facts(conn: Any, in_recovery: bool, settings: dict[str, str]) -> dict[str, Any]:
    """This server's place in streaming replication and what a promotion would cost.

    A standby names the primary it receives from (``pg_stat_wal_receiver``). A primary
    lists its standbys (``pg_stat_replication``: sync state, replay lag); a commit waits for
    a standby only when ``synchronous_standby_names`` names one that is connected as
    ``sync``/``quorum`` and ``synchronous_commit`` is ``on``/``remote_write``/
    ``remote_apply`` (the engine asks for nothing else)."""
    if in_recovery:
        row = conn.execute("SELECT sender_host, sender_port, status FROM pg_stat_wal_receiver"
                           ).fetchone()
        primary = f"{row[0]}:{row[1]}" if row and row[0] else "an unknown primary"
        status = row[2] if row else "not streaming"
        return {"primary": primary, "replicated": False,
                "replication": f"standby of {primary} ({status}): read-only"}
    standbys = conn.execute(
        "SELECT application_name, state, sync_state,"
        " COALESCE(EXTRACT(EPOCH FROM replay_lag), 0)::float8 FROM pg_stat_replication"
    ).fetchall()
    waits = settings.get("synchronous_commit") in ("on", "remote_write", "remote_apply")
    sync = [s for s in standbys if s[2] in ("sync", "quorum")]
    replicated = bool(sync) and waits and bool(settings.get("synchronous_standby_names"))
    found: dict[str, Any] = {"standbys": len(standbys), "replicated": replicated}
    if not standbys:
        found["replication"] = "no standby: a failure of this server loses what it held"
        return found
    lag = max(s[3] for s in standbys)
    found["replication_lag_s"] = round(lag, 3)
    found["standby_states"] = ", ".join(f"{s[0] or '?'} ({s[1]}, {s[2]})" for s in standbys)
    found["replication"] = (
        f"{len(sync)} synchronous standby(s): a commit returns once a standby has it"
        if replicated else
        f"{len(standbys)} asynchronous standby(s), replay lag up to {lag:.3f} s: a "
        "failover can lose turns acknowledged in that window, the engine does not wait "
        "for standbys (synchronous_standby_names and synchronous_commit decide that)")
    return found


def answers(db: Any, timeout: float) -> bool:
    """Whether one database answers ``SELECT 1`` within ``timeout``; never raises."""
    try:
        conn = db.pool.connect(connect_timeout=timeout,
                               statement_timeout_ms=max(1, int(timeout * 1000)))
    except Exception:  # noqa: BLE001 - a health probe answers False, never raises
        return False
    try:
        return conn.execute("SELECT 1").fetchone() == (1,)
    except Exception:  # noqa: BLE001 - a health probe answers False, never raises
        return False
    finally:
        with contextlib.suppress(Exception):
            conn.close()
