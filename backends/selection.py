"""A backend from a URI: which backend a scheme implies, URI validation, and the choice
between backends sharing a scheme (asked of the detector their ``BackendInfo`` declares).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult, urlsplit

from backends.info import KNOWN_INFO, scheme_claims
from backends.redaction import redact_uri

_CLAIMS = scheme_claims(KNOWN_INFO)
_INFO_BY_NAME = {info.name: info for info in KNOWN_INFO}

#: scheme -> backend name it implies (the first backend declaring it in backends.info)
SCHEME_BACKENDS: dict[str, str] = {scheme: names[0] for scheme, names in _CLAIMS.items()}

#: backends that share a scheme with the one it implies; what the store holds decides
#: between them (:func:`choose_backend_for_uri`), ``--backend`` overrides
SHARED_SCHEME_BACKENDS: dict[str, tuple[str, ...]] = {
    names[0]: names for names in _CLAIMS.values() if len(names) > 1}


class InvalidURI(ValueError):
    """A URI we cannot use; the message says what was wrong (never the secret)."""


def _split(uri: str) -> SplitResult:
    try:
        parts = urlsplit(uri)
    except ValueError:
        raise InvalidURI(f"malformed URI {redact_uri(uri)!r}: it cannot be parsed") from None
    try:
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        # urllib's message quotes the "port", which may be a piece of the password
        raise InvalidURI(f"malformed URI {redact_uri(uri)!r}: the port is not a number "
                         "from 0 to 65535 (percent-encode '/', '?', '#' and '@' in a "
                         "password)") from None
    return parts


def backend_for_uri(uri: str) -> str:
    """The backend a URI's scheme implies. Raises InvalidURI for unknown or malformed URIs."""
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidURI("empty URI: give one like redis://host:6379/0")
    uri = uri.strip()
    if "://" not in uri and not uri.startswith("memory:"):
        raise InvalidURI(
            f"{redact_uri(uri)!r} is not a URI: expected scheme://..., e.g. redis://localhost:6379/0"
        )
    parts = _split(uri)
    scheme = _base_scheme(parts.scheme.lower())
    if scheme not in SCHEME_BACKENDS:
        plugins = _plugin_claims()
        if scheme in plugins:
            return plugins[scheme][0]
        known = ", ".join(sorted(f"{s}://" for s in (*SCHEME_BACKENDS, *plugins)))
        raise InvalidURI(f"unknown URI scheme {scheme + '://'!r}: use one of {known}")
    lacking = _INFO_BY_NAME[SCHEME_BACKENDS[scheme]].names_no_place(
        scheme, hostname=parts.hostname, path=parts.path, query=parts.query)
    if lacking:
        raise InvalidURI(f"URI {redact_uri(uri)!r} names no {lacking}")
    return SCHEME_BACKENDS[scheme]


def _base_scheme(scheme: str) -> str:
    """``postgresql`` for the engine's ``postgresql+psycopg``: a driver suffix the
    backend declares (``BackendInfo.scheme_suffixes``) names the same backend; any other
    scheme is itself (``mongodb+srv`` is a scheme of its own)."""
    base, plus, suffix = scheme.partition("+")
    if plus and scheme not in SCHEME_BACKENDS and base in SCHEME_BACKENDS \
            and suffix in _INFO_BY_NAME[SCHEME_BACKENDS[base]].scheme_suffixes:
        return base
    return scheme


def _plugin_claims() -> dict[str, tuple[str, ...]]:
    """Schemes claimed by installed plugins (their ``uri_schemes`` class attribute). This
    imports them, so it is asked only for a scheme no declared backend claims."""
    from backends.registry import Registry

    return Registry().plugin_scheme_claims()


def fitting_backends(uri: str) -> tuple[str, ...]:
    """Every backend the URI's scheme fits (``postgresql://``: pgvector and postgres)."""
    implied = backend_for_uri(uri)
    return SHARED_SCHEME_BACKENDS.get(implied, (implied,))


def detector_for(scheme: str) -> Any | None:
    """The detector a backend fitting ``scheme`` declares (``BackendInfo.detect``), or
    None where the scheme alone decides."""
    fits = SHARED_SCHEME_BACKENDS.get(SCHEME_BACKENDS.get(scheme, ""), ())
    declared = next((info.detect for info in KNOWN_INFO if info.name in fits and info.detect), None)
    if declared is None:
        return None
    import importlib

    module, _, name = declared.partition(":")
    return getattr(importlib.import_module(module), name)


def choose_backend_for_uri(uri: str, *, shards: str | None = None) -> tuple[str, str]:
    """``(backend, reason)`` for a URI given without a backend name. Where several
    backends fit the scheme, the store's content decides: the detector the first of them
    declares in its :class:`~backends.info.BackendInfo` is asked (for SQL a short
    connection to the database, and to the first shard of a sharded one: ``shards`` is
    the deployment's list where the caller was given one); otherwise the scheme alone
    does."""
    fits = fitting_backends(uri)
    detector = detector_for(_base_scheme(urlsplit(uri).scheme.lower())) if len(fits) > 1 else None
    if detector is None:
        return fits[0], f"the URI scheme implies {fits[0]!r}"
    choice = detector.choose(uri) if shards is None else detector.choose(uri, shards=shards)
    return choice[0], choice[1]
