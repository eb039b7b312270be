"""From ``--backend`` / ``--uri`` / ``--adapter``, environment and profile to an adapter.

Precedence: flags beat environment variables, which beat the selected profile, except
that a profile named on the command line (``-P/--profile``, like kubectl's ``--context``)
beats the environment too (``$SEMVECCTL_PROFILE`` and ``current-profile`` do not). The URI's
scheme implies the backend; a ``--backend`` that contradicts a shipped scheme is a usage
error. ``--adapter module:factory`` loads an adapter from Python code (backend authors,
tests) without going through the registry.
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from backends.info import KNOWN_INFO

from semvecctl.application import current
from semvecctl.exit_codes import ExitCode

#: backend -> environment variable holding its URI (declared in backends.info)
URI_ENV: dict[str, str] = {info.name: info.uri_env[0] for info in KNOWN_INFO if info.uri_env}


#: backends whose deployment may be spread over shards (``--shards``, the engine's
#: ``SEMVEC_STATE_DB_SHARDS``): those that declare the shard variable
SHARDED_BACKENDS = frozenset(info.name for info in KNOWN_INFO if info.shards_env)

#: Commands that may run with no backend named (they read no store's data, or refuse an
#: unnamed backend themselves). Every other command works on a store and refuses the
#: implicit in-memory default: a check of an empty store nobody named would go green on
#: nothing (``doctor`` "0 error(s)", ``export`` "0 sessions" while REDIS_URL points at
#: the real one). ``health`` is a gate, so it is not listed here.
UNNAMED_BACKEND_OK = frozenset({
    ("config", "view"),          # shows what would be selected, the default included
    ("backends", "resolve"),     # resolves names and URIs, opens nothing
    ("conformance", "run"),      # refuses an unnamed backend itself (certifies what it is told)
})


def _remember_backend_secrets(name: str, env: Mapping[str, str]) -> None:
    """Register the values of a selected plugin's secret variables with the scrubber
    (the declared backends' are registered when the application starts)."""
    from backends.registry import Registry, fold_name

    if fold_name(name) in {info.name for info in KNOWN_INFO}:
        return
    info = Registry().info_of(name)
    for var in info.secret_variables if info is not None else ():
        current().remember_secret_value(env.get(var))


@dataclass(frozen=True)
class ConnectionSpec:
    backend: str
    uri: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    adapter_factory: str | None = None
    origin: str = "default"
    #: why a URI that fits several backends got this one (shown by health/resolve)
    choice_reason: str = ""

    @property
    def display_uri(self) -> str:
        from backends.redaction import redact_uri

        return redact_uri(self.uri) if self.uri else "-"

    @property
    def display_shards(self) -> str:
        """The shard list given for this store, each DSN redacted ("" when none was)."""
        from backends.redaction import redact_uri

        shards = self.options.get("shards")
        if not isinstance(shards, str):
            return ""
        return ",".join(redact_uri(d.strip()) for d in shards.split(",") if d.strip())

    @property
    def store_flags(self) -> str:
        """The flags that reach this store again, redacted (put the credentials back in):
        for the commands a message tells the operator to run."""

        if self.adapter_factory:
            flags = f"--adapter {self.adapter_factory}" + (f" --uri '{self.display_uri}'" if self.uri else "")
        elif self.uri:
            flags = f"--uri '{self.display_uri}'"
        else:
            flags = f"--backend {self.backend}"
        if isinstance(self.options.get("shards"), str):
            flags += f" --shards '{self.display_shards}'"
        return flags


#: ``shards=`` left to the command line's global ``--shards``
FROM_COMMAND_LINE: Any = object()


def resolve_connection(
    backend: str | None = None,
    uri: str | None = None,
    adapter: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    shards: Any = FROM_COMMAND_LINE,
) -> ConnectionSpec:
    """Combine flags, environment and profile into one connection spec: the choice is
    the discovery layer's (:func:`backends.selection.choose_store`); the command line's
    own rules are here (an unnamed store refused, a typed name that exists, secrets
    scrubbed, the shard list checked). ``shards`` is the SQL deployment's shard list
    given for this store (a two-store command's ``--from-shards``/``--to-shards``); by
    default the global ``--shards``."""
    from backends.mongo.config import ENV_DATABASE
    from backends.selection import choose_store

    env = os.environ if environ is None else environ
    if uri is not None and not uri.strip():
        current().abort("--uri is empty: give a connection URI (redis://, mongodb://, "
                        "postgresql://, memory://) or leave the option out", ExitCode.USAGE)
    profile = _profile(env, uri)
    if adapter:
        return ConnectionSpec(backend=backend or "custom", uri=uri, adapter_factory=adapter,
                              origin="flag")
    shards = current().shards if shards is FROM_COMMAND_LINE else shards
    choice = choose_store(backend, uri, env=env, profile=profile,
                          profile_named=bool(current().profile), shards=shards,
                          database_env=ENV_DATABASE)
    if choice.origin == "default":
        refuse_unnamed_store(env)
    current().remember_secret(choice.uri)
    if choice.origin != "default":
        require_known_backend(choice.backend, choice.origin)
        _remember_backend_secrets(choice.backend, env)
    options = dict(choice.options)
    if shards is not None:
        options["shards"] = _checked_shards(choice.backend, shards)
    return ConnectionSpec(backend=choice.backend, uri=choice.uri, options=options,
                          origin=choice.origin, choice_reason=choice.reason)


def _profile(env: Mapping[str, str], uri: str | None) -> Any:
    """The selected profile (``-P``, ``$SEMVECCTL_PROFILE``, ``current-profile``), its
    URI and the flag's registered for scrubbing."""
    from semvecctl.config import load_config, select_profile

    app = current()
    profile = select_profile(load_config(app.config_path, env), app.profile, env)
    for candidate in (uri, profile.uri if profile else None):
        app.remember_secret(candidate)
    return profile


def _checked_shards(backend: str, shards: str) -> str:
    """A shard list for this store: only a backend that shards takes one (exit 2), and
    every entry must be a PostgreSQL URL (:func:`shard_list`)."""
    from backends.registry import fold_name

    if fold_name(backend) not in SHARDED_BACKENDS:
        current().abort(f"a shard list is a SQL deployment's; backend {backend!r} has "
                        "none (use it with postgres or pgvector)", ExitCode.USAGE)
    shard_list(shards, "a shard list")
    return shards


def _command_path() -> tuple[str, ...]:
    """The running subcommand's names below the root (``("sessions", "list")``); empty
    outside a click context."""
    try:
        from typer._click.globals import get_current_context  # typer vendors click
    except ImportError:  # pragma: no cover - a typer that depends on click instead
        from click import get_current_context

    ctx = get_current_context(silent=True)
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return tuple(reversed(names))


def engine_variables_seen(env: Mapping[str, str]) -> list[str]:
    """``REDIS_URL is set: did you mean --backend redis?`` for every declared backend
    URI variable that holds a value (a variable two backends read names both)."""
    readers: dict[str, list[str]] = {}
    for info in KNOWN_INFO:
        for var in info.uri_env:
            readers.setdefault(var, []).append(info.name)
    return [f"{var} is set: did you mean "
            + " or ".join(f"--backend {name}" for name in names) + "?"
            for var, names in readers.items() if env.get(var, "").strip()]


def refuse_unnamed_store(env: Mapping[str, str]) -> None:
    """The one rule for a command run with no backend named (no ``--backend``, ``--uri``,
    ``--adapter``, ``$SEMVEC_SESSION_BACKEND`` or profile): a command that works on a
    store refuses (exit 2) rather than open an empty in-memory one, and says which engine
    variables it saw. Only the commands in :data:`UNNAMED_BACKEND_OK` go on with memory."""
    path = _command_path()
    if not path or path[:2] in UNNAMED_BACKEND_OK:
        return
    hints = engine_variables_seen(env)
    command = " ".join(path)
    current().abort(
        f"no backend named: '{command}' would run against an empty in-memory store; name the "
        "store with --backend NAME or --uri URI (--backend memory if you mean the in-memory "
        "one)" + ("; " + "; ".join(hints) if hints else ""), ExitCode.USAGE)


def require_known_backend(name: str, origin: str = "flag") -> None:
    """A name the operator typed (flag, environment, profile) must exist: exit 2 with close
    matches. Only the engine's own selection path degrades an unknown name to memory; a
    gate that probes ``memory`` for a typo would go green on nothing."""
    from backends.registry import Registry

    registry = Registry()
    resolution = registry.resolve(name)
    if not resolution.fell_back:
        return
    where = {"flag": "--backend", "env": "$SEMVEC_SESSION_BACKEND"}.get(origin, origin)
    close = resolution.close_matches
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    current().abort(f"unknown backend {name!r} (from {where}): neither shipped nor "
                    f"installed{hint} (see 'semvecctl backends list')", ExitCode.USAGE)


def load_factory(spec: str) -> Any:
    """Import ``module:attr`` for ``--adapter``; a clear error when it cannot."""
    from backends.registry import TargetNotFound, import_object

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        current().abort(f"--adapter expects module:factory, got {spec!r}", ExitCode.USAGE)
    try:
        obj = import_object(spec)
    except TargetNotFound as exc:
        current().abort(f"{exc} (from --adapter)", ExitCode.ENVIRONMENT, cause=None)
    except Exception as exc:  # noqa: BLE001 - any import failure is the --adapter's
        current().abort(f"cannot import {module_name!r} for --adapter: "
                        f"{type(exc).__name__}: {exc}", ExitCode.ENVIRONMENT, cause=None)
    if not callable(obj):
        current().abort(f"--adapter target {spec!r} is not callable", ExitCode.ENVIRONMENT)
    return obj


def adapter_factory(spec: ConnectionSpec) -> Callable[[], Any]:
    """A no-argument factory for ``--adapter module:factory``, given the spec's URI and
    options that its signature accepts (no contract check: callers decide)."""
    target = load_factory(spec.adapter_factory or "")
    kwargs = adapter_factory_kwargs(spec, target)
    return lambda: target(**kwargs)


def adapter_factory_kwargs(spec: ConnectionSpec, target: Any = None) -> dict[str, Any]:
    """The keyword arguments ``--adapter module:factory`` is called with: the spec's URI
    and options that its signature accepts."""
    from backends.registry import accepts_keyword

    target = target if target is not None else load_factory(spec.adapter_factory or "")
    kwargs = {"uri": spec.uri} if spec.uri else {}
    kwargs.update(spec.options)
    return {k: v for k, v in kwargs.items() if accepts_keyword(target, k)}


def build_adapter(spec: ConnectionSpec) -> Any:
    """Instantiate the adapter a spec names, warning loudly on a fallback to memory."""
    from backends.errors import ContractError
    from backends.registry import Registry, contract_problems

    app = current()
    if spec.adapter_factory:
        adapter = adapter_factory(spec)()
        problems = contract_problems(adapter)
        if problems:
            raise ContractError(spec.adapter_factory, problems)
        return adapter
    registry = Registry()
    resolution = registry.resolve(spec.backend)
    if resolution.fell_back and resolution.warning:
        app.output.warn(resolution.warning)
    config: dict[str, Any] = dict(spec.options)
    if spec.uri and not resolution.fell_back:
        config["uri"] = spec.uri
    return registry.load_adapter(spec.backend, warn=False, **config)


@contextlib.contextmanager
def open_adapter(spec: ConnectionSpec) -> Iterator[Any]:
    """Build the adapter for a command and always close it afterwards."""
    adapter = build_adapter(spec)
    try:
        yield adapter
    finally:
        from backends.contract import close_quietly

        close_quietly(adapter)


def require_seam(adapter: Any, capability: Any, what: str) -> Any:
    """Return ``adapter`` if it offers ``capability`` (a :class:`backends.contract.Capability`);
    else exit 3 saying it is unsupported."""
    from backends.contract import offers

    if not offers(adapter, capability):
        current().abort(f"{what} is not supported by backend {getattr(adapter, 'name', '?')!r}",
                        ExitCode.ENVIRONMENT)
    return adapter


def owner_filter(owner: str | None, unowned: bool) -> Any:
    """The three-state owner filter from ``--owner`` / ``--unowned``: neither = every owner
    (``UNSCOPED``), ``--unowned`` = only rows without an owner (``None``), ``--owner`` = exact."""
    from backends.contract import UNSCOPED

    if owner is not None and unowned:
        current().abort("--owner and --unowned exclude each other", ExitCode.USAGE)
    if unowned:
        return None
    if owner is not None:
        if not owner.strip():
            current().abort("--owner needs a non-empty owner (use --unowned for rows without one)", ExitCode.USAGE)
        return owner
    return UNSCOPED


class Connection:
    """The connection bundle of one command: where (``--backend``/``--uri``/``--adapter``
    with environment and profile), whose rows (``--owner``/``--unowned``) and how long
    (``--timeout``). Built from the parsed flags; each part is resolved once, the first
    time the command asks for it, so a command's own checks keep their order (the owner
    flags are refused before the store is looked up when the command asks for
    :attr:`scope` first)::

        conn = Connection(backend, uri, adapter, owner=owner, unowned=unowned)
        scope = conn.scope                  # exit 2 on --owner with --unowned
        with conn.open() as adapter_obj:    # flags > env > profile, closed afterwards
            ...
    """

    def __init__(self, backend: str | None = None, uri: str | None = None,
                 adapter: str | None = None, *, owner: str | None = None,
                 unowned: bool = False, timeout: float | None = None,
                 shards: Any = FROM_COMMAND_LINE) -> None:
        self.backend, self.uri, self.adapter = backend, uri, adapter
        self.owner, self.unowned, self.timeout = owner, unowned, timeout
        self.shards = shards

    @functools.cached_property
    def scope(self) -> Any:
        """The owner filter (``UNSCOPED``, ``None`` for --unowned, or the owner)."""
        return owner_filter(self.owner, self.unowned)

    @functools.cached_property
    def spec(self) -> ConnectionSpec:
        """The resolved connection (backend, URI, options, where they came from)."""
        return resolve_connection(self.backend, self.uri, self.adapter, shards=self.shards)

    def resolve(self) -> ConnectionSpec:
        """Resolve the connection now (an unknown backend or a bad URI fails here), so
        that the command's later checks come second."""
        return self.spec

    @property
    def display_uri(self) -> str:
        return self.spec.display_uri

    def open(self) -> contextlib.AbstractContextManager[Any]:
        """The adapter, closed when the block ends."""
        return open_adapter(self.spec)


def refuse_unnamed_pair(from_uri: str | None, to_uri: str | None, from_adapter: str | None,
                        to_adapter: str | None, *, verb: str, need_source: bool = True) -> None:
    """Exit 2 unless a two-store command names its target (and, with ``need_source``, its
    source) and they are not one store: ``verb`` says what there would be nothing to do."""
    if need_source and not (from_uri or from_adapter):
        current().abort("name the source with --from URI (or --from-adapter module:factory)",
                        ExitCode.USAGE)
    if not (to_uri or to_adapter):
        current().abort("name the target with --to URI (or --to-adapter module:factory)",
                        ExitCode.USAGE)
    if from_uri and to_uri and from_uri == to_uri and not (from_adapter or to_adapter):
        current().abort(f"--from and --to name the same store; nothing to {verb}", ExitCode.USAGE)


def pair_shards(from_shards: str | None, to_shards: str | None) -> tuple[Any, Any]:
    """The shard lists of a two-store command's source and target: ``--from-shards`` and
    ``--to-shards``; the global ``--shards`` would not say which side it means (exit 2)."""
    if current().shards is not None:
        current().abort("--shards names one store's shard list; a copy or migration has two: "
                        "use --from-shards and/or --to-shards", ExitCode.USAGE)
    return from_shards, to_shards


def shard_list(text: str, option: str) -> tuple[str, ...]:
    """The entries of a shard list as the engine reads the variable; each must be a URI of
    a backend that shards (PostgreSQL, in any of the engine's spellings), else exit 2
    naming the entry, redacted. Every entry's credentials are scrubbed from output."""
    from backends.redaction import redact_uri
    from backends.selection import InvalidURI, backend_for_uri
    from backends.postgres.config import parse_shard_list

    entries = parse_shard_list(text)
    for i, dsn in enumerate(entries):
        current().remember_secret(dsn)
        try:
            fits = backend_for_uri(dsn) in SHARDED_BACKENDS
        except InvalidURI:
            fits = False
        if not fits:
            current().abort(f"{option} entry {i} ({redact_uri(dsn)!r}) is not a PostgreSQL "
                            "URL: give postgresql://... (or postgresql+psycopg://, +psycopg2, "
                            "+asyncpg), comma-separated", ExitCode.USAGE)
    return entries
