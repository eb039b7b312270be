"""A backend from a URI: which backend a scheme implies, URI validation, and the choice
between backends sharing a scheme (asked of the detector their ``BackendInfo`` declares);
and :func:`choose_store`, the one call from whatever names a store (URI, backend name,
environment, profile) to the store chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol
from urllib.parse import SplitResult, urlsplit

from backends.errors import OperationRefused
from backends.info import KNOWN_INFO, scheme_claims
from backends.redaction import redact_uri

_CLAIMS = scheme_claims(KNOWN_INFO)
_INFO_BY_NAME = {info.name: info for info in KNOWN_INFO}
#: schemes whose authority may list several hosts (each one's port is checked)
_HOST_LIST_SCHEMES = frozenset(s for info in KNOWN_INFO for s in info.host_list_schemes)

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
    hosts = parts.netloc.rpartition("@")[2]
    each = ([urlsplit(f"//{host}") for host in hosts.split(",")]
            if "," in hosts and parts.scheme.lower() in _HOST_LIST_SCHEMES else [parts])
    try:
        for one in each:
            one.port  # noqa: B018 - raises ValueError on a malformed port
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


# -- one call from what names a store (URI, backend name, environment, profile) to it -------

#: backend -> the variable holding its URI (declared in backends.info)
_URI_VARIABLES = {info.name: info.uri_env[0] for info in KNOWN_INFO if info.uri_env}

#: backends a URI scheme can imply; a backend name may not contradict these
SCHEME_IMPLIED = frozenset(info.name for info in KNOWN_INFO if info.schemes)


class ProfileLike(Protocol):
    """What a named profile offers the choice (``semvecctl.config.Profile``)."""

    name: str
    backend: str | None
    uri: str | None
    database: str | None
    options: Mapping[str, Any]


@dataclass(frozen=True)
class StoreChoice:
    """A store named: its backend, URI (None: the backend's default), options, where the
    choice came from (``flag``, ``env``, ``profile NAME``, ``default``) and why a URI that
    fits several backends got this one."""

    backend: str
    uri: str | None = None
    origin: str = "default"
    reason: str = ""
    options: dict[str, Any] = field(default_factory=dict)


def uri_variable(name: str) -> str:
    """The variable holding a backend's URI: declared, or the selected plugin's own
    ``uri_env`` class attribute (reading it imports the plugin, which is selected)."""
    from backends.registry import Registry, fold_name

    if fold_name(name) in _URI_VARIABLES:
        return _URI_VARIABLES[fold_name(name)]
    info = Registry().info_of(name)
    return info.uri_env[0] if info is not None and info.uri_env else ""


def _from_uri(uri: str, backend: str | None, shards: str | None) -> tuple[str, str]:
    """The backend a URI names (a given ``backend`` may pick among those its scheme fits,
    never contradict it), and why when the store itself decided."""
    from backends.registry import fold_name

    scheme_backend = backend_for_uri(uri)
    fits = fitting_backends(uri)
    if backend and fold_name(backend) in SCHEME_IMPLIED and fold_name(backend) not in fits:
        raise OperationRefused(
            f"--backend {backend} contradicts the URI scheme, which implies "
            f"{' or '.join(repr(f) for f in fits)}; drop one of them")
    if not backend and len(fits) > 1:
        return choose_backend_for_uri(uri, shards=shards)
    return backend or scheme_backend, ""


def _fits_profile(backend: str, profile: ProfileLike | None) -> bool:
    """Whether the profile's URI is one for ``backend`` (its backend, or its scheme)."""
    from backends.registry import fold_name

    if profile is None or not profile.uri:
        return False
    if profile.backend:
        return fold_name(profile.backend) == fold_name(backend)
    return bool(backend_for_uri(profile.uri)) and fold_name(backend) in fitting_backends(profile.uri)


def _uri_for_named(backend: str, env: Mapping[str, str], profile: ProfileLike | None,
                   named: bool) -> str | None:
    """The URI of a backend named by flag: its variable's, or the profile's when the
    profile is for it and was named on the command line (or the variable is unset)."""
    env_uri = env.get(uri_variable(backend), "") or None
    if _fits_profile(backend, profile) and (named or env_uri is None):
        return profile.uri  # type: ignore[union-attr]
    return env_uri


def _from_environment(env: Mapping[str, str], profile: ProfileLike | None,
                      named: bool) -> StoreChoice | None:
    """``$SEMVEC_SESSION_BACKEND`` and its URI variable (a profile named on the command
    line that names a store beats them); None when it is unset."""
    from backends.registry import ENV_VAR, fold_name

    if named and profile is not None and (profile.backend or profile.uri):
        return None
    chosen = env.get(ENV_VAR, "").strip()
    if not chosen:
        return None
    uri = env.get(uri_variable(chosen), "") or None
    if uri is None and profile is not None and profile.uri and backend_for_uri(profile.uri) \
            and fold_name(chosen) in fitting_backends(profile.uri):
        uri = profile.uri
    return StoreChoice(chosen, uri, "env")


def _from_profile(env: Mapping[str, str], profile: ProfileLike | None,
                  named: bool) -> StoreChoice | None:
    """The profile's store (None when it names none); its URI unless the environment
    holds one for its backend and the profile was not named on the command line."""
    if profile is None or not (profile.backend or profile.uri):
        return None
    chosen, reason = profile.backend or backend_for_uri(profile.uri or ""), ""
    if not profile.backend and profile.uri and len(fitting_backends(profile.uri)) > 1:
        chosen, reason = choose_backend_for_uri(profile.uri)
    uri = (profile.uri if named and profile.uri else None) \
        or env.get(uri_variable(chosen), "") or profile.uri
    return StoreChoice(chosen, uri, f"profile {profile.name}", reason)


def choose_store(backend: str | None = None, uri: str | None = None, *,
                 env: Mapping[str, str], profile: ProfileLike | None = None,
                 profile_named: bool = False, shards: str | None = None,
                 database_env: str | None = None) -> StoreChoice:
    """The store named by a URI and/or backend name, else the environment
    (``$SEMVEC_SESSION_BACKEND`` and the backend's URI variable), else a profile, else
    the default backend (as fsspec's ``url_to_fs`` turns a URL into a filesystem).

    A profile named on the command line (``profile_named``) beats the environment;
    the profile's options come along, and the database named by the variable
    ``database_env`` (the mongo backend's, passed by the caller) or the profile's database
    for a MongoDB store. ``shards`` is the SQL deployment's shard list that
    helps tell apart backends sharing ``postgresql://``. InvalidURI for a URI we cannot
    use; OperationRefused for a backend name that contradicts the URI's scheme."""
    from backends.registry import DEFAULT_BACKEND, fold_name

    named = profile is not None and profile_named
    if uri:
        chosen, reason = _from_uri(uri, backend, shards)
        choice = StoreChoice(chosen, uri, "flag", reason)
    elif backend:
        choice = StoreChoice(backend, _uri_for_named(backend, env, profile, named), "flag")
    else:
        choice = (_from_environment(env, profile, named) or _from_profile(env, profile, named)
                  or StoreChoice(DEFAULT_BACKEND))
    if choice.uri:
        backend_for_uri(choice.uri)  # InvalidURI: whichever source gave it
    options: dict[str, Any] = dict(profile.options) if profile is not None else {}
    database = ((profile.database if named else None) or (env.get(database_env) if database_env else None)  # type: ignore[union-attr]
                or (profile.database if profile is not None else None))
    if database and fold_name(choice.backend) == "mongo":
        options.setdefault("database", database)
    return StoreChoice(choice.backend, choice.uri, choice.origin, choice.reason, options)
