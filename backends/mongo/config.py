"""Where the Mongo adapter's settings come from: explicit arguments first, then the
environment (``MONGODB_URI``, ``SEMVEC_MONGO_DB``, ...). There is no default host on
purpose: silently connecting to localhost would hide a misconfigured deployment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from backends.errors import BackendConfigError
from backends.info import declared, declared_ttl_env
from backends.mongo.schema import DEFAULT_DATABASE
from backends.redaction import redact_uri

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}

ENV_URL = declared("mongo").uri_env[0]
_TTL_ENV = declared_ttl_env("mongo")
DEFAULT_SERVER_SELECTION_TIMEOUT_MS = 5000
DEFAULT_CONNECT_TIMEOUT_MS = 5000


def parse_flag(name: str, value: str | None) -> bool:
    text = (value or "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise BackendConfigError(f"{name} must be one of 1/0, true/false, yes/no, on/off")


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
    db_name = database or env.get("SEMVEC_MONGO_DB") or DEFAULT_DATABASE
    if any(ch in db_name for ch in '/\\. "$') or len(db_name) > 63:
        raise BackendConfigError("SEMVEC_MONGO_DB is not a valid MongoDB database name")
    ttl = session_ttl_s if session_ttl_s is not None else env.get(_TTL_ENV)
    sync = item_sync if item_sync is not None else parse_flag(
        "SEMVEC_MONGO_ITEM_SYNC", env.get("SEMVEC_MONGO_ITEM_SYNC")
    )
    dims = dimensions if dimensions is not None else env.get("SEMVEC_MONGO_EMBEDDING_DIM")
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
