"""Redaction of URIs and scrubbing of secrets: a leaf every adapter may import.

Redaction lives in the backend layer (not in the CLI) because adapters build error
messages too, and a credential must never reach any output, log or report. This module
imports nothing from the rest of ``backends``; choosing a backend from a URI is
:mod:`backends.selection`.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

#: schemes whose lone userinfo (``redis://secret@host``) is a password: the schemes of every
#: backend declaring ``bare_userinfo_is_password`` in backends.info (a leaf cannot import
#: it; tests/architecture/test_backend_facts_once.py holds this copy to the declaration)
BARE_USERINFO_SCHEMES = frozenset({"redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel"})

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
        "sentinel_password",
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
    if ":" not in userinfo and not (scheme in BARE_USERINFO_SCHEMES and userinfo):
        return None
    return uri[:start], userinfo, uri[at:]


def _redact_userinfo(userinfo: str, scheme: str) -> str:
    if ":" in userinfo:
        return f"{userinfo.split(':', 1)[0]}:{REDACTED}"
    if scheme in BARE_USERINFO_SCHEMES:
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
    elif parts is not None and parts.scheme in BARE_USERINFO_SCHEMES and parts.username \
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


def _each_uri(uris: tuple[str | None, ...]) -> list[str]:
    """``uris`` with every comma-separated list of URIs (the engine's shard list) split
    into its entries: each is redacted as the URI it is, never the list as one URL (whose
    "userinfo" would run from the first ``://`` to the last ``@`` and garble the line)."""
    found: list[str] = []
    for uri in uris:
        if not uri:
            continue
        parts = [part.strip() for part in uri.split(",")]
        if len(parts) > 1 and sum("://" in part for part in parts) > 1:
            found += [part for part in parts if part]
        else:
            found.append(uri)
    return found


def scrub(text: str, *uris: str | None) -> str:
    """Remove every secret of ``uris`` (and any inline URI credential) from ``text``; a
    list of URIs is redacted entry by entry."""
    for uri in _each_uri(uris):
        if uri:
            text = text.replace(uri, redact_uri(uri))
        for secret in uri_secrets(uri):
            text = text.replace(secret, REDACTED)
    return re.sub(r"([a-z][a-z0-9+.-]*://[^:/@\s]*):[^@/\s]+@", rf"\1:{REDACTED}@", text)
