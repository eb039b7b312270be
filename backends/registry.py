"""Finding backends: the shipped table, entry-point discovery, name folding, resolution.

Rules (from the spec's failure table):

* shipped names (``memory``, ``redis``, ``mongo``) are consulted first and always win;
* installed backends come from the ``semvec.backends`` entry-point group, read from
  metadata only: a plugin module is imported when its name is selected or checked;
* names are folded (case, ``-``, ``_``, ``.``, surrounding white space) before comparison;
* an unknown name degrades to ``memory`` with a warning naming the close matches;
* a shipped name whose driver is missing raises :class:`MissingDriver` naming the extra;
* an adapter missing the contract raises :class:`ContractError` (a ``TypeError``);
* a name advertised by two distributions is kept as a value during discovery and raises
  :class:`ContestedBackend` (a ``RuntimeError``) only when that name is selected.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import warnings
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from backends.errors import (
    BackendConfigError,
    ContestedBackend,
    ContractError,
    MissingDriver,
)
from backends.info import KNOWN_INFO, SHIPPED_INFO, BackendInfo, info_from_class, scheme_claims

ENTRY_POINT_GROUP = "semvec.backends"
ENV_VAR = "SEMVEC_SESSION_BACKEND"
DEFAULT_BACKEND = "memory"


class UnknownBackendWarning(UserWarning):
    """A selected backend name is neither shipped nor installed; ``memory`` is used."""


class PluginImportError(ImportError):
    """An installed backend's module failed to import; only that backend is affected."""


def fold_name(name: str) -> str:
    """Fold a backend name: ``PgVector``, ``pg-vector`` and `` pg_vector `` are one name."""
    return "".join(ch for ch in name.strip().lower() if ch not in "-_.").strip()


SHIPPED: dict[str, BackendInfo] = {info.name: info for info in SHIPPED_INFO}


class InstalledBackend(NamedTuple):
    """One ``semvec.backends`` entry point, read from metadata without importing it."""

    name: str
    target: str
    distribution: str
    version: str

    @property
    def folded(self) -> str:
        return fold_name(self.name)

    @property
    def source(self) -> str:
        return f"{self.distribution}=={self.version}"


class BackendEntry(NamedTuple):
    """A row of ``backends list``: what a name is, where it comes from, whether it works.

    ``status`` is one of ``ok``, ``driver-missing``, ``contested``, ``shadowed``.
    """

    name: str
    source: str
    target: str
    status: str
    detail: str = ""
    extra: str | None = None
    driver: str | None = None
    distribution: str | None = None
    version: str | None = None
    contenders: tuple[str, ...] = ()

    @property
    def shipped(self) -> bool:
        return self.source == "shipped"

    @property
    def folded(self) -> str:
        return fold_name(self.name)


class Resolution(NamedTuple):
    """What a selected name resolves to. ``fell_back`` with a ``warning`` for unknown names."""

    requested: str
    entry: BackendEntry
    fell_back: bool = False
    warning: str | None = None
    close_matches: tuple[str, ...] = ()


def driver_available(module: str | None) -> bool:
    """Whether a driver module is importable, without importing it."""
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def discover_installed() -> list[InstalledBackend]:
    """Read the ``semvec.backends`` group from installed metadata; imports no plugin module.

    :mod:`backends.entrypoints` reads the group without importing ``importlib.metadata``
    (a third of the CLI's cold start)."""
    from backends.entrypoints import read_group

    found: dict[tuple[str, str, str], InstalledBackend] = {}
    for ep in read_group(ENTRY_POINT_GROUP):
        item = InstalledBackend(ep.name, ep.value, ep.distribution, ep.version)
        found.setdefault((item.folded, item.distribution.lower(), item.target), item)
    return sorted(found.values(), key=lambda b: (b.folded, b.distribution.lower()))


class Registry:
    """A snapshot of every known backend. Cheap to build: metadata only."""

    def __init__(self, installed: Iterable[InstalledBackend] | None = None,
                 shipped: Mapping[str, BackendInfo] | None = None) -> None:
        self.shipped: dict[str, BackendInfo] = dict(SHIPPED if shipped is None else shipped)
        self.installed: list[InstalledBackend] = list(
            discover_installed() if installed is None else installed
        )

    # -- listing --------------------------------------------------------------------

    def entries(self) -> list[BackendEntry]:
        """Every shipped and installed backend, with its status."""
        rows = [self._shipped_entry(s) for s in self.shipped.values()]
        by_name: dict[str, list[InstalledBackend]] = {}
        for item in self.installed:
            by_name.setdefault(item.folded, []).append(item)
        shipped_folded = {fold_name(n): n for n in self.shipped}
        for folded, items in sorted(by_name.items()):
            contenders = tuple(i.source for i in items)
            for item in items:
                if folded in shipped_folded:
                    status = "shadowed"
                    detail = f"shadowed by the shipped {shipped_folded[folded]!r} backend"
                elif len(items) > 1:
                    status = "contested"
                    others = [c for c in contenders if c != item.source] or list(contenders)
                    detail = "contested by " + ", ".join(others)
                else:
                    status, detail = "ok", ""
                rows.append(
                    BackendEntry(
                        name=item.name,
                        source=item.source,
                        target=item.target,
                        status=status,
                        detail=detail,
                        distribution=item.distribution,
                        version=item.version,
                        contenders=contenders if len(items) > 1 else (),
                    )
                )
        return rows

    def _shipped_entry(self, shipped: BackendInfo) -> BackendEntry:
        if all(driver_available(d) for d in shipped.drivers):
            status, detail = "ok", ""
        else:
            status = "driver-missing"
            detail = f"install it with: {shipped.install_hint}"
        return BackendEntry(
            name=shipped.name,
            source="shipped",
            target=shipped.target,
            status=status,
            detail=detail,
            extra=shipped.extra,
            driver=next((d for d in shipped.drivers if not driver_available(d)), shipped.driver),
        )

    def known_names(self) -> list[str]:
        names = list(self.shipped)
        names += [i.name for i in self.installed if i.folded not in {fold_name(n) for n in names}]
        return names

    # -- resolution -----------------------------------------------------------------

    def resolve(self, name: str | None = None) -> Resolution:
        """Resolve a selected name (``None``/empty: the default). Raises only for a
        contested name; unknown names fall back to ``memory`` with a warning."""
        requested = (name or "").strip()
        if not requested:
            return Resolution(DEFAULT_BACKEND, self._shipped_entry(self.shipped[DEFAULT_BACKEND]))
        folded = fold_name(requested)
        for shipped in self.shipped.values():
            if fold_name(shipped.name) == folded:
                return Resolution(requested, self._shipped_entry(shipped))
        matching = [e for e in self.entries() if not e.shipped and e.folded == folded]
        if matching:
            if len(matching) > 1:
                raise ContestedBackend(requested, [e.source for e in matching])
            return Resolution(requested, matching[0])
        close = self.close_matches(requested)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        warning = (
            f"unknown session backend {requested!r}: neither shipped nor installed, "
            f"falling back to the non-persistent 'memory' backend{hint}"
        )
        return Resolution(
            requested,
            self._shipped_entry(self.shipped[DEFAULT_BACKEND]),
            fell_back=True,
            warning=warning,
            close_matches=tuple(close),
        )

    def info_of(self, name: str) -> BackendInfo | None:
        """A backend's facts: declared ones for shipped backends and our entry points,
        else read from the installed plugin's adapter class (which imports it: call
        this only once the plugin is selected or checked). None when unknown or broken."""
        try:
            resolution = self.resolve(name)
        except ContestedBackend:
            return None
        if resolution.fell_back:
            return None
        entry = resolution.entry
        for info in KNOWN_INFO:
            if info.name == entry.name and info.target == entry.target:
                return info
        try:
            target = import_target(entry)
        except Exception:  # noqa: BLE001 - loading it later reports the failure properly
            return None
        return info_from_class(entry.name, entry.target, target,
                               package=entry.distribution or "semvecctl")

    def plugin_scheme_claims(self) -> dict[str, tuple[str, ...]]:
        """scheme -> installed plugins claiming it. Imports every installed plugin that is
        not declared in backends.info: only asked when a URI's scheme is unknown."""
        declared = {(i.name, i.target) for i in KNOWN_INFO}
        shipped_folded = {fold_name(n) for n in self.shipped}
        infos = []
        for entry in self.entries():
            if entry.shipped or entry.folded in shipped_folded or entry.status != "ok" \
                    or (entry.name, entry.target) in declared:
                continue
            info = self.info_of(entry.name)
            if info is not None:
                infos.append(info)
        return scheme_claims(infos)

    def close_matches(self, name: str) -> list[str]:
        names = self.known_names()
        folded = {fold_name(n): n for n in names}
        import difflib

        hits = difflib.get_close_matches(fold_name(name), list(folded), n=3, cutoff=0.6)
        return [folded[h] for h in hits]

    # -- loading --------------------------------------------------------------------

    def load_adapter(self, name: str | None = None, *, warn: bool = True, **config: Any) -> Any:
        """Resolve, import, instantiate and contract-check an adapter.

        ``config`` (e.g. ``uri=``) is passed to the adapter's constructor.
        """
        resolution = self.resolve(name)
        if resolution.fell_back and warn and resolution.warning:
            import logging  # here, not at the top: `backends list` starts without it

            logging.getLogger(__name__).warning(resolution.warning)
            warnings.warn(resolution.warning, UnknownBackendWarning, stacklevel=2)
        if resolution.fell_back and config.get("uri") not in (None, "", "memory://"):
            config = {k: v for k, v in config.items() if k != "uri"}
        return instantiate(resolution.entry, resolution.requested if not resolution.fell_back
                           else DEFAULT_BACKEND, **config)


class TargetNotFound(LookupError):
    """``module:attr`` named an attribute the (successfully imported) module lacks."""


def import_object(target: str) -> Any:
    """Import ``module:attr.attr`` (or a bare module). The module's own import errors
    propagate unchanged, a missing attribute is :class:`TargetNotFound`: each caller words
    the failure for its own audience."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split(".") if attr else ():
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetNotFound(f"{module_name!r} has no attribute {attr!r}") from None
    return obj


def import_target(entry: BackendEntry) -> Any:
    """Import an entry's ``module:attr`` target.

    Shipped backends with a missing driver raise :class:`MissingDriver`; installed ones
    that fail to import raise :class:`PluginImportError` naming the distribution.
    """
    if entry.shipped and not driver_available(entry.driver):
        raise MissingDriver(entry.name, entry.extra or entry.name, entry.driver or "?")
    try:
        return import_object(entry.target)
    except MissingDriver:
        raise
    except Exception as exc:  # a broken plugin breaks only itself
        where = "shipped" if entry.shipped else f"installed by {entry.source}"
        raise PluginImportError(
            f"backend {entry.name!r} ({where}) failed to import {entry.target}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def contract_problems(obj: Any, *, selected_name: str | None = None) -> list[str]:
    """What ``obj`` (an adapter class or instance) misses of the contract."""
    import inspect

    # the contract is imported here, when an adapter is checked, not when backends are listed
    from backends.contract import REQUIRED_ADAPTER_MEMBERS

    problems: list[str] = []
    missing = [m for m, _ in REQUIRED_ADAPTER_MEMBERS if not hasattr(obj, m)]
    if missing:
        problems.append("missing " + ", ".join(missing))
    not_callable = [
        m for m, must_call in REQUIRED_ADAPTER_MEMBERS
        if must_call and hasattr(obj, m) and not callable(getattr(obj, m))
    ]
    if not_callable:
        problems.append("not callable: " + ", ".join(not_callable))
    cls = obj if inspect.isclass(obj) else type(obj)
    if hasattr(obj, "is_persistent"):
        declared = inspect.getattr_static(cls, "is_persistent", None)
        if not isinstance(declared, bool):
            problems.append(
                "is_persistent must be a bool class attribute, got "
                f"{type(declared).__name__ if declared is not None else 'nothing on the class'}"
            )
    if hasattr(obj, "name"):
        value = obj.name
        if not isinstance(value, str) or not value:
            problems.append("name must be a non-empty str")
        elif selected_name is not None and fold_name(value) != fold_name(selected_name):
            problems.append(f"name {value!r} does not match the selected name {selected_name!r}")
    return problems


def read_persistence(target: Any) -> bool | None:
    """``is_persistent`` read from the class, without instantiating (None if unknowable)."""
    import inspect

    cls = target if inspect.isclass(target) else None
    if cls is None:
        return None
    value = inspect.getattr_static(cls, "is_persistent", None)
    return value if isinstance(value, bool) else None


def accepts_keyword(factory: Callable[..., Any], keyword: str) -> bool:
    """Whether ``factory`` can be called with ``keyword=`` (a named or ``**`` parameter)."""
    import inspect

    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return True
    return any(
        p.kind is p.VAR_KEYWORD or (p.name == keyword and p.kind is not p.POSITIONAL_ONLY)
        for p in sig.parameters.values()
    )


def instantiate(entry: BackendEntry, selected_name: str, **config: Any) -> Any:
    """Import ``entry``'s target, check the class, build the adapter, check the instance."""
    import inspect

    target = import_target(entry)
    where = f"backend {entry.name!r} ({entry.target})"
    if inspect.isclass(target):
        problems = contract_problems(target, selected_name=selected_name)
        if problems:
            raise ContractError(where, problems)
    elif not callable(target):
        raise ContractError(where, [f"target is a {type(target).__name__}, not a class or factory"])
    config = {k: v for k, v in config.items() if v is not None}
    for key in list(config):
        if not accepts_keyword(target, key):
            raise BackendConfigError(
                f"{where} does not accept the {key!r} setting; configure it through the "
                "backend's own environment variables"
            )
    adapter = target(**config)
    problems = contract_problems(adapter, selected_name=selected_name)
    if problems:
        raise ContractError(where, problems)
    return adapter


def selected_from_env(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get(ENV_VAR, "").strip() or DEFAULT_BACKEND


def load_adapter(name: str | None = None, **config: Any) -> Any:
    """Module-level convenience: ``load_adapter()`` honours ``SEMVEC_SESSION_BACKEND``."""
    return Registry().load_adapter(name if name is not None else selected_from_env(), **config)
