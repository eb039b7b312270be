"""Which SQL backend a ``postgresql://`` database is: told by what it holds.

Both ``postgres`` (the engine's layout) and ``pgvector`` (that layout plus an item
mirror) fit the scheme. A database that holds the item table AND the ``vector``
extension is ``pgvector``; anything else (an engine deployment, an empty database) is
``postgres``. ``--backend`` overrides. The decision lives here, with the flavour whose
tables it looks for, and is declared in ``BackendInfo.detect`` (:data:`DETECTOR`), so
neither the selector nor the shared SQL layer names it.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class SqlChoice(NamedTuple):
    backend: str
    reason: str


def choose_from_catalog(conn: Any, schema: str) -> SqlChoice:
    """The choice, from one catalog query on an open connection."""
    from backends.pgvector.schema import ITEMS_TABLE

    items, extension = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')),"
        " EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
        (schema, ITEMS_TABLE),
    ).fetchone()
    where = f"{schema}.{ITEMS_TABLE}"
    if items and extension:
        return SqlChoice("pgvector", f"the database holds {where} and the vector extension")
    if items:
        return SqlChoice("postgres", f"the database holds {where} but not the vector extension")
    return SqlChoice("postgres", f"the database holds no {where} (the engine's SQL layout)")


def choose_sql_backend(uri: str, *, timeout: float = 3.0, shards: str | None = None) -> SqlChoice:
    """Connect briefly and decide; never raises. An unreachable database is ``postgres``
    (the layout every SQL deployment has), with the reason saying it was not inspected.
    On a sharded deployment (``shards``, else the engine's variable) whose primary holds
    no item table, a shard that holds one decides: items live on their sessions' shards."""
    from backends.postgres.config import SqlConfig

    try:
        options: dict = {"connect_timeout": timeout, "statement_timeout_ms": int(timeout * 1000)}
        if shards is not None:
            options["shards"] = shards
        config = SqlConfig.resolve(uri, options)
    except Exception as exc:  # noqa: BLE001 - the caller's next step reports it properly
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return SqlChoice("postgres", f"the database could not be inspected ({first})")
    choice = _choose_on(config, timeout)
    if choice.backend == "postgres" and config.shards:
        try:
            shard_configs = config.shard_configs()
        except Exception:  # noqa: BLE001 - a bad shard entry is reported where it is used
            return choice
        for n, shard_config in enumerate(shard_configs):
            shard = _choose_on(shard_config, timeout)
            if shard.backend == "pgvector":
                return SqlChoice("pgvector", f"shard {n} of the deployment: {shard.reason}")
    return choice


def _choose_on(config: Any, timeout: float) -> SqlChoice:
    try:
        from backends.postgres.pool import ConnectionPool

        conn = ConnectionPool(config).connect()
    except Exception as exc:  # noqa: BLE001 - the caller's next step reports it properly
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return SqlChoice("postgres", f"the database could not be inspected ({first})")
    try:
        return choose_from_catalog(conn, config.schema)
    except Exception as exc:  # noqa: BLE001
        return SqlChoice("postgres", f"the database could not be inspected ({type(exc).__name__})")
    finally:
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass


class SqlDetector:
    """The two questions ``BackendInfo.detect`` answers for the SQL scheme: from a URI
    (connecting briefly) and from a connection already open (health)."""

    @staticmethod
    def choose(uri: str, *, timeout: float = 3.0, shards: str | None = None) -> SqlChoice:
        return choose_sql_backend(uri, timeout=timeout, shards=shards)

    @staticmethod
    def from_catalog(conn: Any, schema: str) -> SqlChoice:
        return choose_from_catalog(conn, schema)


DETECTOR = SqlDetector()
