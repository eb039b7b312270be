"""Where the Mongo adapter's settings come from: explicit arguments first, then the
environment (``MONGODB_URI``, ``SEMVEC_MONGO_DB``, ...), as :data:`SETTINGS` declares
them (the table ``semvecctl config settings mongo`` renders). There is no default host on
purpose: silently connecting to localhost would hide a misconfigured deployment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from backends.errors import BackendConfigError
from backends.info import declared, declared_ttl_env
from backends.mongo.schema import DEFAULT_DATABASE
from backends.redaction import redact_uri
from backends.settings import Setting, parse_flag, setting

ENV_URL = declared("mongo").uri_env[0]
_TTL_ENV = declared_ttl_env("mongo")
DEFAULT_SERVER_SELECTION_TIMEOUT_MS = 5000
DEFAULT_CONNECT_TIMEOUT_MS = 5000

#: every setting of the mongo backend (the adapter's keyword arguments)
SETTINGS: tuple[Setting, ...] = (
    Setting("uri", ENV_URL, "URI", None,
            "where MongoDB is: mongodb:// or mongodb+srv:// (required: no default host)",
            secret=True, option=False),
    Setting("database", "SEMVEC_MONGO_DB", "database name", DEFAULT_DATABASE,
            "the database holding semvec's collections"),
    Setting("session_ttl_s", _TTL_ENV, "whole seconds", None,
            "idle TTL index on session state"),
    Setting("item_sync", "SEMVEC_MONGO_ITEM_SYNC", "bool", False,
            "1 turns on the item mirror and server-side retrieval"),
    Setting("dimensions", "SEMVEC_MONGO_EMBEDDING_DIM", "int >= 1", None,
            "embedding width of the Atlas vector index"),
    Setting("server_selection_timeout_ms", None, "milliseconds",
            DEFAULT_SERVER_SELECTION_TIMEOUT_MS, "time allowed to find a server"),
    Setting("connect_timeout_ms", None, "milliseconds", DEFAULT_CONNECT_TIMEOUT_MS,
            "time allowed to connect"),
)
#: the database variable (the CLI's profiles fill the same setting)
ENV_DATABASE = setting(SETTINGS, "database").env or ""
_ENV_ITEM_SYNC = setting(SETTINGS, "item_sync").env or ""
_ENV_DIMENSIONS = setting(SETTINGS, "dimensions").env or ""


def parse_positive_int(name: str, value: object, *, allow_zero: bool = False) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise BackendConfigError(f"{name} must be an integer") from None
    if isinstance(value, bool) or number < 0 or (number == 0 and not allow_zero):
        raise BackendConfigError(f"{name} must be a positive integer")
    return number


@dataclass(frozen=True)
class MongoSettings:
    uri: str | None
    database: str
    session_ttl_s: int | None
    item_sync: bool
    dimensions: int | None
    server_selection_timeout_ms: int
    connect_timeout_ms: int


def resolve_settings(
    uri: str | None,
    *,
    database: str | None,
    session_ttl_s: int | None,
    item_sync: bool | None,
    dimensions: int | None,
    server_selection_timeout_ms: int | None,
    connect_timeout_ms: int | None,
    have_client: bool,
    environ: Mapping[str, str] | None = None,
) -> MongoSettings:
    env = os.environ if environ is None else environ
    resolved_uri = uri or env.get(ENV_URL) or None
    if resolved_uri is None and not have_client:
        raise BackendConfigError(
            f"no MongoDB location: pass --uri mongodb://HOST/ or set {ENV_URL} "
            "(there is deliberately no default host)"
        )
    if resolved_uri is not None and not resolved_uri.startswith(("mongodb://", "mongodb+srv://")):
        raise BackendConfigError(
            f"not a MongoDB URI: {redact_uri(resolved_uri)} (expected mongodb:// or mongodb+srv://)"
        )
    db_name = database or env.get(ENV_DATABASE) or DEFAULT_DATABASE
    if any(ch in db_name for ch in '/\\. "$') or len(db_name) > 63:
        raise BackendConfigError(f"{ENV_DATABASE} is not a valid MongoDB database name")
    ttl = session_ttl_s if session_ttl_s is not None else env.get(_TTL_ENV)
    sync = item_sync if item_sync is not None else parse_flag(
        _ENV_ITEM_SYNC, env.get(_ENV_ITEM_SYNC)
    )
    dims = dimensions if dimensions is not None else env.get(_ENV_DIMENSIONS)
    return MongoSettings(
        uri=resolved_uri,
        database=db_name,
        session_ttl_s=parse_positive_int(_TTL_ENV, ttl),
        item_sync=bool(sync),
        dimensions=parse_positive_int("dimensions", dims),
        server_selection_timeout_ms=parse_positive_int(
            "server_selection_timeout_ms", server_selection_timeout_ms
        ) or DEFAULT_SERVER_SELECTION_TIMEOUT_MS,
        connect_timeout_ms=parse_positive_int("connect_timeout_ms", connect_timeout_ms)
        or DEFAULT_CONNECT_TIMEOUT_MS,
    )
