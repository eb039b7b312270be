"""Turn what an operator or author types (a backend name, a URI, ``module:factory``) into
a zero-argument adapter factory plus the name the adapter must answer to. The factory carries the recipe
(``semvec_recipe``) child processes rebuild the adapter from.

Unlike ordinary selection, an unknown backend name is an error here: silently certifying
``memory`` in place of a mistyped backend would be a false pass.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from backends.errors import BackendConfigError


def import_object(target: str) -> Any:
    """Import ``module:attr.attr``; errors name the target."""
    from backends.registry import TargetNotFound
    from backends.registry import import_object as _import

    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise BackendConfigError(f"expected module:factory, got {target!r}")
    try:
        return _import(target)
    except TargetNotFound as exc:
        raise BackendConfigError(str(exc)) from None


def load_adapter_factory(spec: str, *, uri: str | None = None,
                         **options: Any) -> tuple[Callable[[], Any], str | None]:
    """``(factory, selected_name)`` for a backend name, a URI or ``module:factory``.

    ``selected_name`` is None for ``module:factory`` (nothing to compare the name with).
    """
    from backends.selection import backend_for_uri

    from backends.conformance.children import registry_recipe, target_recipe

    spec = spec.strip()
    if "://" in spec or spec.startswith("memory:"):
        if uri is not None:
            raise BackendConfigError("give the URI once: as the spec or as uri=, not both")
        backend = backend_for_uri(spec)
        factory = _registry_factory(backend, uri=spec, **options)
        factory.semvec_recipe = registry_recipe(backend, spec, options)  # type: ignore[attr-defined]
        return factory, backend
    if ":" in spec:
        target = import_object(spec)
        if not callable(target):
            raise BackendConfigError(f"{spec!r} is not callable")
        kwargs = dict(options)
        if uri is not None:
            kwargs["uri"] = uri
        built = functools.partial(target, **kwargs)
        built.semvec_recipe = target_recipe(spec, kwargs)  # type: ignore[attr-defined]
        return built, None
    factory = _registry_factory(spec, uri=uri, **options)
    factory.semvec_recipe = registry_recipe(spec, uri, options)  # type: ignore[attr-defined]
    return factory, spec


def _registry_factory(name: str, *, uri: str | None, **options: Any) -> Callable[[], Any]:
    from backends.registry import Registry

    registry = Registry()
    resolution = registry.resolve(name)
    if resolution.fell_back:
        raise BackendConfigError(
            f"{resolution.warning}; conformance does not certify 'memory' in its place")
    config = dict(options)
    if uri is not None:
        config["uri"] = uri

    def factory() -> Any:
        return registry.load_adapter(name, warn=False, **config)

    factory.name = name  # type: ignore[attr-defined]  # shown if construction fails
    return factory
