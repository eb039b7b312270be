"""Turn what an operator or author types (a backend name, a URI, ``module:factory``) into
a zero-argument adapter factory plus the name the adapter must answer to.

Unlike ordinary selection, an unknown backend name is an error here: silently certifying
``memory`` in place of a mistyped backend would be a false pass.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable

from backends.errors import BackendConfigError


def import_object(target: str) -> Any:
    """Import ``module:attr.attr``; errors name the target."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise BackendConfigError(f"expected module:factory, got {target!r}")
    module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise BackendConfigError(f"{module_name!r} has no attribute {attr!r}") from None
    return obj


def load_adapter_factory(spec: str, *, uri: str | None = None,
                         **options: Any) -> tuple[Callable[[], Any], str | None]:
    """``(factory, selected_name)`` for a backend name, a URI or ``module:factory``.

    ``selected_name`` is None for ``module:factory`` (nothing to compare the name with).
    """
    from backends.uris import backend_for_uri

    spec = spec.strip()
    if "://" in spec or spec.startswith("memory:"):
        if uri is not None:
            raise BackendConfigError("give the URI once: as the spec or as uri=, not both")
        backend = backend_for_uri(spec)
        return _registry_factory(backend, uri=spec, **options), backend
    if ":" in spec:
        target = import_object(spec)
        if not callable(target):
            raise BackendConfigError(f"{spec!r} is not callable")
        kwargs = dict(options)
        if uri is not None:
            kwargs["uri"] = uri
        return (functools.partial(target, **kwargs) if kwargs else target), None
    return _registry_factory(spec, uri=uri, **options), spec


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
