"""Connection URIs: which backend a scheme implies, validation, and redaction.

Redaction lives here (not in the CLI) because adapters build error messages too, and a
credential must never reach any output, log or report.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from backends.info import KNOWN_INFO, scheme_claims

_CLAIMS = scheme_claims(KNOWN_INFO)

#: scheme -> backend name it implies (the first backend declaring it in backends.info)
SCHEME_BACKENDS: dict[str, str] = {scheme: names[0] for scheme, names in _CLAIMS.items()}

#: backends that share a scheme with the one it implies; what the store holds decides
#: between them (:func:`choose_backend_for_uri`), ``--backend`` overrides
SHARED_SCHEME_BACKENDS: dict[str, tuple[str, ...]] = {
    names[0]: names for names in _CLAIMS.values() if len(names) > 1}


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

#: words that make a setting's NAME secret (``password``, ``api_key``, ``tls_key``...):
#: its value is masked whatever it holds
_SECRET_NAME_WORDS = ("password", "passwd", "pwd", "secret", "token", "apikey", "api_key",
                      "credential", "private", "key")


def is_secret_name(name: str) -> bool:
    """Whether a setting called ``name`` holds a secret (by the words in its name)."""
    lowered = str(name).lower()
    return any(word in lowered for word in _SECRET_NAME_WORDS)


def redact_settings(value: object) -> object:
    """A settings tree (dicts, lists, strings) with values under secret names masked and
    every URI redacted: how configuration is shown."""
    if isinstance(value, dict):
        return {str(k): (REDACTED if is_secret_name(k) else redact_settings(v))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_settings(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return redact_uri(value)
    return value


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


def _loose_userinfo(uri: str) -> tuple[str, str, str] | None:
    """(text before the userinfo, the userinfo, '@' and the rest) where a strict parse
    finds none, or None.

    A password holding an unencoded ``/``, ``?`` or ``#`` ends the authority early for
    urlsplit (the secret lands in the path or fragment), and a string with no scheme is
    no URL at all, yet both still carry the secret. Everything up to the LAST ``@`` is
    then taken for userinfo when it looks like ``user:password`` (or is a bare Redis
    password). That may over-redact an ``@`` in a query; it never under-redacts.
    """
    start = uri.find("//")
    start = start + 2 if start >= 0 else 0
    at = uri.rfind("@")
    if at < start:
        return None
    userinfo = uri[start:at]
    scheme = uri[:max(start - 3, 0)].lower()
    if ":" not in userinfo and not (scheme in ("redis", "rediss", "unix") and userinfo):
        return None
    return uri[:start], userinfo, uri[at:]


def _redact_userinfo(userinfo: str, scheme: str) -> str:
    if ":" in userinfo:
        return f"{userinfo.split(':', 1)[0]}:{REDACTED}"
    if scheme in ("redis", "rediss", "unix"):
        # redis://secret@host: a bare userinfo is the password in redis URLs
        return REDACTED
    return userinfo


def redact_uri(uri: str | None) -> str:
    """Return ``uri`` with any password and secret query values replaced by ``***``.

    Never raises: a string that does not parse is redacted heuristically.
    """
    if not uri:
        return uri or ""
    try:
        parts = urlsplit(uri)
    except ValueError:
        parts = None
    if parts is None or "@" not in parts.netloc:
        loose = _loose_userinfo(uri)
        if loose is not None:
            head, userinfo, tail = loose
            scheme = head[:-3].lower() if head.endswith("://") else ""
            uri = head + _redact_userinfo(userinfo, scheme) + tail
            try:
                parts = urlsplit(uri)
            except ValueError:
                return uri
        if parts is None:
            return re.sub(r"//[^@]*@", f"//{REDACTED}@", uri)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        netloc = f"{_redact_userinfo(userinfo, parts.scheme.lower())}@{hostinfo}"
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
    found: list[str] = []
    parts: SplitResult | None
    try:
        parts = urlsplit(uri)
        password = parts.password
    except ValueError:
        parts, password = None, None
    if password:
        found.append(password)
    elif parts is not None and parts.scheme in ("redis", "rediss") and parts.username \
            and "@" in parts.netloc:
        found.append(parts.username)  # redis://secret@host: the bare userinfo is a password
    # the raw text too: urlsplit drops tabs and newlines, and stops at an unencoded
    # '/', '?' or '#', so its password may differ from what the string carries
    loose = _loose_userinfo(uri)
    if loose is not None:
        userinfo = loose[1]
        found.append(userinfo.split(":", 1)[1] if ":" in userinfo else userinfo)
    if parts is not None:
        found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True)
                  if k.lower() in _SECRET_PARAMS and v]
    # drivers decode percent-escapes: the decoded form is the same secret
    found += [unquote(v) for v in found if unquote(v) != v]
    return [v for v in found if v]


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
        plugins = _plugin_claims()
        if scheme in plugins:
            return plugins[scheme][0]
        known = ", ".join(sorted(f"{s}://" for s in (*SCHEME_BACKENDS, *plugins)))
        raise InvalidURI(f"unknown URI scheme {scheme + '://'!r}: use one of {known}")
    if scheme in ("redis", "rediss", "mongodb", "mongodb+srv", "postgresql", "postgres"):
        if not parts.hostname and not (scheme.startswith("postgres") and "host=" in parts.query):
            raise InvalidURI(f"URI {redact_uri(uri)!r} names no host")
    if scheme == "unix" and not parts.path:
        raise InvalidURI(f"URI {redact_uri(uri)!r} names no socket path")
    return SCHEME_BACKENDS[scheme]


def _plugin_claims() -> dict[str, tuple[str, ...]]:
    """Schemes claimed by installed plugins (their ``uri_schemes`` class attribute). This
    imports them, so it is asked only for a scheme no declared backend claims."""
    from backends.registry import Registry

    return Registry().plugin_scheme_claims()


def fitting_backends(uri: str) -> tuple[str, ...]:
    """Every backend the URI's scheme fits (``postgresql://``: pgvector and postgres)."""
    implied = backend_for_uri(uri)
    return SHARED_SCHEME_BACKENDS.get(implied, (implied,))


def choose_backend_for_uri(uri: str) -> tuple[str, str]:
    """``(backend, reason)`` for a URI given without a backend name. Where several
    backends fit the scheme, the store's content decides (a short connection, see
    :mod:`backends.sql.detect`); otherwise the scheme alone does."""
    fits = fitting_backends(uri)
    if len(fits) == 1:
        return fits[0], f"the URI scheme implies {fits[0]!r}"
    from backends.sql.detect import choose_sql_backend

    choice = choose_sql_backend(uri)
    return choice.backend, choice.reason
