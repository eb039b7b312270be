"""Who owns a session, and the two ways a caller can say it.

The spec passes the owner as ``owner_subject=`` with three states on reads (omitted =
unscoped, ``None`` = only unowned rows, a string = that exact owner). The deployed engine
passes ``scope=``: an object with an ``owner_subject`` string, or ``None``, and on reads
it knows only two states (``scope=None`` = unscoped). Both are accepted by every store
method and ``commit_turn``; :func:`speaks_both_conventions` makes that true in one place,
so no store restates the translation.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

__all__ = [
    "UNSCOPED",
    "ANONYMOUS_OWNER",
    "OwnerFilter",
    "OwnerScope",
    "owner_of_scope",
    "owner_matches",
    "validate_owner_filter",
    "speaks_both_conventions",
    "takes_scope",
]


class _Unscoped:
    """Sentinel type for an omitted owner filter (administrative, unscoped access)."""

    _instance: "_Unscoped | None" = None

    def __new__(cls) -> "_Unscoped":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSCOPED"

    def __reduce__(self) -> str:
        return "UNSCOPED"


#: Owner filter omitted: read or delete regardless of owner.
UNSCOPED: Any = _Unscoped()

#: What the engine writes for a session with no authenticated owner.
ANONYMOUS_OWNER = "__anonymous__"

#: ``UNSCOPED`` | ``None`` (only unowned rows) | an exact owner string.
OwnerFilter = Any


@dataclass(frozen=True)
class OwnerScope:
    """An owner as the engine encodes it: ``tenant`` or ``tenant/agent``.

    Neither part may be blank or contain ``/`` (the separator), so encoding and
    :meth:`decode` are exact inverses.
    """

    tenant: str
    agent: str | None = None

    def __post_init__(self) -> None:
        for label, part in (("tenant", self.tenant), ("agent", self.agent)):
            if part is None and label == "agent":
                continue
            if not isinstance(part, str) or not part.strip():
                raise ValueError(f"owner scope {label} must be a non-blank string")
            if "/" in part:
                raise ValueError(f"owner scope {label} must not contain '/'")

    @property
    def owner_subject(self) -> str:
        return self.tenant if self.agent is None else f"{self.tenant}/{self.agent}"

    @classmethod
    def decode(cls, owner_subject: str | None) -> "OwnerScope | None":
        """The scope an owner string stands for; ``None`` and ``""`` are no scope."""
        if not owner_subject:
            return None
        tenant, sep, agent = owner_subject.partition("/")
        return cls(tenant, agent if sep else None)

    def __str__(self) -> str:
        return self.owner_subject


def owner_of_scope(scope: Any) -> str | None:
    """The owner string a ``scope=`` argument names (``None`` for no scope)."""
    if scope is None:
        return None
    owner = getattr(scope, "owner_subject", None)
    if not isinstance(owner, str) or not owner:
        raise ValueError(
            "scope must be None or an object whose owner_subject is a non-empty string"
        )
    return owner


def validate_owner_filter(owner_subject: OwnerFilter) -> None:
    """Reject filters that are none of the three states (e.g. an int, an empty string)."""
    if owner_subject is UNSCOPED or owner_subject is None:
        return
    if not isinstance(owner_subject, str) or owner_subject == "":
        raise ValueError(
            "owner filter must be omitted, None (unowned rows only) or a non-empty string"
        )


def owner_matches(stored_owner: str | None, owner_subject: OwnerFilter) -> bool:
    """Apply the three-state owner filter to a stored owner (``None`` or ``""`` = no owner)."""
    if owner_subject is UNSCOPED:
        return True
    if owner_subject is None:
        return not stored_owner
    return stored_owner == owner_subject


_ABSENT = object()
F = TypeVar("F", bound=Callable[..., Any])


def takes_scope(method: F) -> F:
    """Let ``method`` (which takes ``owner_subject=``) also be called with ``scope=``.

    ``scope=None`` leaves ``owner_subject`` at the method's default: unscoped on reads,
    no owner on writes. That is exactly the engine's meaning, which is why ``scope=None``
    is never translated to ``owner_subject=None`` (= unowned rows only).
    """
    if getattr(method, "__takes_scope__", False):
        return method

    @functools.wraps(method)
    def wrapper(*args: Any, scope: Any = _ABSENT, **kwargs: Any) -> Any:
        if scope is not _ABSENT:
            if "owner_subject" in kwargs:
                raise TypeError(
                    f"{method.__name__}() takes owner_subject= or scope=, not both"
                )
            owner = owner_of_scope(scope)
            if owner is not None:
                kwargs["owner_subject"] = owner
        return method(*args, **kwargs)

    signature = inspect.signature(method)
    params = list(signature.parameters.values())
    scope_param = inspect.Parameter("scope", inspect.Parameter.KEYWORD_ONLY, default=None)
    tail = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    head = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    wrapper.__signature__ = signature.replace(parameters=head + [scope_param] + tail)  # type: ignore[attr-defined]
    wrapper.__takes_scope__ = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def speaks_both_conventions(cls: type) -> type:
    """Class decorator: every public method of ``cls`` (its own, not inherited) that takes
    ``owner_subject`` also accepts the engine's ``scope=``."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") or not callable(member):
            continue
        try:
            params = inspect.signature(member).parameters
        except (TypeError, ValueError):
            continue
        if "owner_subject" in params and "scope" not in params:
            setattr(cls, name, takes_scope(member))
    return cls
