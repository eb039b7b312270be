"""Name folding for the ``name`` check, shared with the registry when it is present."""

from __future__ import annotations


def fold_name(name: str) -> str:
    """Case-insensitive; ``-``, ``_``, ``.`` and surrounding white space ignored."""
    try:
        from backends.registry import fold_name as registry_fold
    except ImportError:  # pragma: no cover - the registry ships with this package
        return "".join(ch for ch in name.strip().lower() if ch not in "-_.")
    return registry_fold(name)
