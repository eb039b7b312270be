"""Connection URIs: which backend a scheme implies, validation, and redaction.

Redaction lives here (not in the CLI) because adapters build error messages too, and a
credential must never reach any output, log or report.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

#: scheme -> backend name it implies
SCHEME_BACKENDS: dict[str, str] = {
    "memory": "memory",
    "redis": "redis",
    "rediss": "redis",
    "unix": "redis",
    "mongodb": "mongo",
    "mongodb+srv": "mongo",
    "postgresql": "pgvector",
    "postgres": "pgvector",
}

#: query parameters whose values are secrets, compared lower-case
_SECRET_PARAMS = frozenset(
    {
        "password",
        "pass",
        "passwd",
        "pwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "access_token",
        "sslpassword",
        "tlscertificatekeyfilepassword",
        "authmechanismproperties",
    }
)

REDACTED = "***"


class InvalidURI(ValueError):
    """A URI we cannot use; the message says what was wrong (never the secret)."""


def _split(uri: str) -> SplitResult:
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError as exc:
        raise InvalidURI(f"malformed URI {redact_uri(uri)!r}: {exc}") from None
    return parts


def redact_uri(uri: str | None) -> str:
    """Return ``uri`` with any password and secret query values replaced by ``***``.

    Never raises: a string that does not parse is redacted heuristically.
    """
    if not uri:
        return uri or ""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return re.sub(r"//[^@/]*@", f"//{REDACTED}@", uri)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            userinfo = f"{user}:{REDACTED}"
        elif parts.scheme in ("redis", "rediss"):
            # redis://secret@host: a bare userinfo is the password in redis URLs
            userinfo = REDACTED
        netloc = f"{userinfo}@{hostinfo}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        pairs = [(k, REDACTED if k.lower() in _SECRET_PARAMS else v) for k, v in pairs]
        query = urlencode(pairs, safe="*/:,")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def uri_secrets(uri: str | None) -> list[str]:
    """Every secret embedded in ``uri``: the password and secret query values."""
    if not uri:
        return []
    try:
        parts = urlsplit(uri)
        password = parts.password
    except ValueError:
        return []
    found: list[str] = []
    if password:
        found.append(password)
    elif parts.scheme in ("redis", "rediss") and parts.username and "@" in parts.netloc:
        found.append(parts.username)  # redis://secret@host: the bare userinfo is a password
    found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True)
              if k.lower() in _SECRET_PARAMS and v]
    return found


def scrub(text: str, *uris: str | None) -> str:
    """Remove every secret of ``uris`` (and any inline URI credential) from ``text``."""
    for uri in uris:
        if uri:
            text = text.replace(uri, redact_uri(uri))
        for secret in uri_secrets(uri):
            text = text.replace(secret, REDACTED)
    return re.sub(r"([a-z][a-z0-9+.-]*://[^:/@\s]*):[^@/\s]+@", rf"\1:{REDACTED}@", text)


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
    scheme = parts.scheme.lower()
    if scheme not in SCHEME_BACKENDS:
        known = ", ".join(sorted(f"{s}://" for s in SCHEME_BACKENDS))
        raise InvalidURI(f"unknown URI scheme {scheme + '://'!r}: use one of {known}")
    if scheme in ("redis", "rediss", "mongodb", "mongodb+srv", "postgresql", "postgres"):
        if not parts.hostname and not (scheme.startswith("postgres") and "host=" in parts.query):
            raise InvalidURI(f"URI {redact_uri(uri)!r} names no host")
    if scheme == "unix" and not parts.path:
        raise InvalidURI(f"URI {redact_uri(uri)!r} names no socket path")
    return SCHEME_BACKENDS[scheme]
