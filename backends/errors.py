"""Error types of the backend layer.

One conflict type (the contract's), plus a few categories that let a caller (the CLI,
a health endpoint) react to *what kind* of failure happened without parsing driver
messages. Driver exceptions are kept as ``__cause__``; messages never carry credentials.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple, Protocol


class Category(str, Enum):
    """What kind of failure an exception is (a class attribute ``category`` of the error
    classes above; :func:`category_of` finds it for any exception)."""

    CONFLICT = "conflict"
    UNREACHABLE = "unreachable"            # BackendUnreachable
    NETWORK = "network"                    # a builtin ConnectionError / TimeoutError
    TRANSIENT = "transient"
    UNREPLICATED = "unreplicated"          # NotReplicated: written, too few replicas have it
    AUTH = "auth"
    PERMISSION = "permission"              # a builtin PermissionError
    TLS = "tls"                            # only found in a cause chain (health)
    CONFIG = "config"
    UNSUPPORTED = "unsupported"
    MISSING_DRIVER = "missing_driver"
    CONTESTED = "contested"
    CONTRACT = "contract"
    INTEGRITY = "integrity"
    CORRUPT = "corrupt"
    INJECTED = "injected"
    INVALID_EVENT = "invalid_event"
    ARCHIVE_DAMAGED = "archive_damaged"
    ARCHIVE_UNSUPPORTED = "archive_unsupported"
    LOSSY = "lossy"
    INVALID_URI = "invalid_uri"
    NOT_FOUND = "not_found"                # registry.TargetNotFound (module:attr)
    REFUSED = "refused"                    # OperationRefused: the request, as asked
    IMPORT = "import"
    NO_FILE = "no_file"
    OS = "os"
    BACKEND = "backend"                    # any other BackendError
    UNKNOWN = "unknown"


class StateVersionConflict(RuntimeError):
    """A compare-and-set lost: the row exists (insert), or its version moved (update),
    or it belongs to another owner. The caller reloads and retries."""

    category = Category.CONFLICT


class ErrorTranslator(Protocol):
    """The one signature of every driver-error translator (``translate_error`` in
    backends.redis.errors, backends.mongo.errors and backends.postgres.errors): the
    categorised error for a driver exception, or ``exc`` itself when it is not the
    driver's. ``where`` is a redacted location (a store that must not name hosts may
    ignore it), ``action`` what was being done, ``events`` whether the payload was events
    (a rejected document is then InvalidEvent)."""

    def __call__(self, exc: BaseException, where: str, *, action: str = "a call",
                 events: bool = False) -> BaseException: ...


def session_exists(session_id: str) -> StateVersionConflict:
    """An insert (``expected_version=None``) or a restore found the session there."""
    return StateVersionConflict(f"session {session_id!r} already exists")


def cas_refusal(session_id: str, stored_version: object | None, expected_version: int | None,
                *, expired: bool = False) -> StateVersionConflict:
    """Why a compare-and-set update matched nothing, worded once for every store: the
    row is gone (or expired), its version moved, or it belongs to another owner."""
    if stored_version is None:
        return StateVersionConflict(f"session {session_id!r} does not exist")
    if expired:
        return StateVersionConflict(f"session {session_id!r} has expired (idle TTL)")
    if stored_version != expected_version:
        return StateVersionConflict(
            f"session {session_id!r} is at version {stored_version}, not {expected_version}")
    return StateVersionConflict(f"session {session_id!r} belongs to another owner")


def is_state_version_conflict(exc: BaseException) -> bool:
    """True for our conflict type and for any exception class *named*
    ``StateVersionConflict`` (adapters written against the engine's own types)."""
    return any(cls.__name__ == "StateVersionConflict" for cls in type(exc).__mro__)


class BackendError(Exception):
    """Base of the categorised backend failures."""

    category = Category.BACKEND

    def __reduce__(self) -> tuple:
        """Pickled with its attributes, whatever its constructor takes, so it crosses a
        process boundary (an export's events pass) as itself."""
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


def _rebuilt(cls: type[BaseException], args: tuple, state: dict) -> BaseException:
    exc = cls.__new__(cls)
    Exception.__init__(exc, *args)
    exc.__dict__.update(state)
    return exc


class InvalidEvent(BackendError, ValueError):
    """An event failed validation; nothing of its turn was written."""

    category = Category.INVALID_EVENT


class BackendUnreachable(BackendError, ConnectionError):
    """The store could not be reached (refused, timed out, DNS, TLS)."""

    category = Category.UNREACHABLE


class BackendAuthError(BackendError, PermissionError):
    """The store answered but refused our credentials or privileges."""

    category = Category.AUTH


class BackendConfigError(BackendError, ValueError):
    """The backend is misconfigured (missing or malformed URI, bad option)."""

    category = Category.CONFIG


class UnsupportedOperation(BackendError, NotImplementedError):
    """The deployment cannot do this safely (e.g. multi-document transactions on a
    standalone MongoDB, events on a Redis Cluster); refused instead of half-done."""

    category = Category.UNSUPPORTED


class BackendTransient(BackendError):
    """A failure that is expected to pass: retry the same call now (a primary stepping
    down, a failover, a lock timeout). Distinct from :class:`BackendUnreachable`, where
    the host itself cannot be reached."""

    category = Category.TRANSIENT


class NotReplicated(BackendError):
    """The primary applied the write but fewer replicas than asked confirmed it in time
    (Redis ``WAIT``): never a success, since a failover may lose it; an identical retry
    is idempotent."""

    category = Category.UNREPLICATED


class IntegrityError(BackendError):
    """Stored data failed verification (e.g. a blob whose sha256 does not match)."""

    category = Category.INTEGRITY


class CorruptState(IntegrityError):
    """A stored session row cannot be read strictly: a field is missing, has the wrong
    type, holds an impossible value, or the blob fails its digest. Never answered with a
    best-effort value, because a caller would then save over the real state."""

    category = Category.CORRUPT

    def __init__(self, session_id: str, field: str, problem: str) -> None:
        self.session_id = session_id
        self.field = field
        self.problem = problem
        super().__init__(f"session {session_id!r} is damaged: field {field!r} {problem}")


class CorruptEvent(IntegrityError):
    """A stored event cannot be read strictly: a field is missing, is not the JSON it
    must be (``meta`` an object, ``embedding`` an array of finite numbers), or holds an
    impossible value. Names the event (and its user when known) and the field, so the
    operator can find the row; a command that meets it fails with exit 1, never with a
    best-effort event."""

    category = Category.INTEGRITY

    def __init__(self, event_id: str, field: str, problem: str, *,
                 user_id: str | None = None) -> None:
        self.event_id = event_id
        self.field = field
        self.problem = problem
        self.user_id = user_id
        of = f" of user {user_id!r}" if user_id else ""
        super().__init__(f"event {event_id!r}{of} is damaged: field {field!r} {problem} "
                         "(semvecctl doctor lists every damaged row)")


class OperationRefused(BackendError, ValueError):
    """A use case refused the request as asked, before it changed anything: the arguments
    contradict the store, or what an interrupted run left beside its evidence (a journal,
    an archive, a receipt). The message says what to run instead."""

    category = Category.REFUSED


class InjectedFault(BackendError):
    """Raised by an adapter's fault seam (conformance only): a failure planted on purpose
    at a named point of a write, to check that the write leaves all or nothing."""

    category = Category.INJECTED


class MissingDriver(BackendError, ImportError):
    """A shipped backend was selected but its driver is not installed."""

    category = Category.MISSING_DRIVER

    def __init__(self, backend: str, extra: str, module: str) -> None:
        self.backend = backend
        self.extra = extra
        self.module = module
        super().__init__(
            f"backend {backend!r} needs the {module!r} driver, which is not installed: "
            f"pip install 'semvecctl[{extra}]'"
        )


class ContestedBackend(RuntimeError):
    """A name advertised by two or more installed distributions."""

    category = Category.CONTESTED

    def __init__(self, name: str, distributions: list[str]) -> None:
        self.name = name
        self.distributions = list(distributions)
        joined = ", ".join(self.distributions)
        super().__init__(
            f"backend name {name!r} is advertised by several installed distributions "
            f"({joined}); uninstall all but one of them (pip uninstall ...) to use it"
        )


class ContractError(TypeError):
    """An adapter that does not satisfy the BackendAdapter contract."""

    category = Category.CONTRACT

    def __init__(self, target: str, problems: list[str]) -> None:
        self.target = target
        self.problems = list(problems)
        super().__init__(
            f"{target} does not satisfy the BackendAdapter contract: " + "; ".join(problems)
        )


# -- the one failure vocabulary ------------------------------------------------------------
#
# Every failure has ONE category, found by :func:`category_of`; ONE table (:data:`CATEGORIES`)
# says what each category means to every caller: its one-line wording, the label a health
# probe reports and the name a load run counts it under. What a category means to a process
# (the CLI's exit code) is the caller's: ``semvecctl.exit_codes.EXIT_CODES`` maps every
# category to one. Nothing else decides what kind of failure an exception is.


class CategoryRule(NamedTuple):
    """One row of :data:`CATEGORIES`. ``wording`` is formatted with ``exc`` (the
    exception), ``type`` (its class name) and ``filename`` (an OSError's)."""

    wording: str
    #: the cause a health probe reports (and ``semvecctl health`` shows as the status)
    health: str = "error"
    #: the name a load run counts the failure under; None = the exception's class name
    load: str | None = None


#: category -> wording: the one table
CATEGORIES: dict[Category, CategoryRule] = {
    Category.CONFLICT: CategoryRule("conflict: {exc}", load="conflict"),
    Category.UNREACHABLE: CategoryRule("backend unreachable: {exc}",
                                       health="unreachable", load="unreachable"),
    Category.NETWORK: CategoryRule("backend unreachable: {type}: {exc}",
                                   health="unreachable", load="unreachable"),
    Category.TRANSIENT: CategoryRule(
        "backend temporarily unavailable (transient: a failover or a timeout that "
        "should pass): {exc}; retry the command", health="transient failure"),
    Category.UNREPLICATED: CategoryRule(
        "not replicated: {exc}; a failover may lose this write, and an identical retry is "
        "safe", health="not replicated", load="unreplicated"),
    Category.AUTH: CategoryRule("backend refused our credentials: {exc}",
                                health="credentials refused", load="auth"),
    Category.PERMISSION: CategoryRule("permission denied: {exc}", health="credentials refused"),
    Category.TLS: CategoryRule("{exc}", health="tls error"),
    Category.CONFIG: CategoryRule("{exc}", health="misconfigured", load="config"),
    Category.UNSUPPORTED: CategoryRule("{exc}", health="misconfigured", load="unsupported"),
    Category.MISSING_DRIVER: CategoryRule("{exc}", health="misconfigured"),
    Category.CONTESTED: CategoryRule("{exc}"),
    Category.CONTRACT: CategoryRule("{exc}"),
    Category.INTEGRITY: CategoryRule("integrity check failed: {exc}", load="integrity"),
    Category.CORRUPT: CategoryRule("damaged data: {exc} (nothing was written; the row "
                                   "is left as it is)", load="integrity"),
    Category.INJECTED: CategoryRule("injected fault (the adapter's conformance fault "
                                    "seam is active): {exc}"),
    Category.INVALID_EVENT: CategoryRule("invalid event: {exc}", load="invalid_event"),
    Category.ARCHIVE_DAMAGED: CategoryRule("archive check failed: {exc}", load="integrity"),
    Category.ARCHIVE_UNSUPPORTED: CategoryRule("{exc}"),
    Category.LOSSY: CategoryRule("{exc}"),
    Category.INVALID_URI: CategoryRule("{exc}"),
    Category.NOT_FOUND: CategoryRule("{exc}"),
    Category.REFUSED: CategoryRule("{exc}"),
    Category.IMPORT: CategoryRule("{exc}"),
    Category.NO_FILE: CategoryRule("no such file: {filename}"),
    Category.OS: CategoryRule("{type}: {exc}"),
    Category.BACKEND: CategoryRule("backend error: {exc}"),
    Category.UNKNOWN: CategoryRule("unexpected {type}: {exc} (rerun with --verbose for details)"),
}

#: error classes defined outside this module (or by the engine), by class name: their
#: modules are imported only on their own paths, so they are not imported here
_BY_CLASS_NAME: dict[str, Category] = {
    "StateVersionConflict": Category.CONFLICT,  # the engine's own type too
    "ArchiveDamaged": Category.ARCHIVE_DAMAGED,
    "ArchiveError": Category.ARCHIVE_UNSUPPORTED,
    "LossyTransfer": Category.LOSSY,
    "InvalidURI": Category.INVALID_URI,
    "TargetNotFound": Category.NOT_FOUND,
}

#: builtin exceptions, most specific first
_BUILTIN: tuple[tuple[type[BaseException], Category], ...] = (
    (ImportError, Category.IMPORT),
    (ConnectionError, Category.NETWORK),
    (TimeoutError, Category.NETWORK),
    (PermissionError, Category.PERMISSION),
    (FileNotFoundError, Category.NO_FILE),
    (OSError, Category.OS),
)


def category_of(exc: BaseException) -> Category:
    """The category of ``exc``: the most specific class in its MRO that declares one
    (``category`` attribute, or a name in :data:`_BY_CLASS_NAME`), else a builtin's."""
    for cls in type(exc).__mro__:
        own = cls.__dict__.get("category")
        if isinstance(own, Category):
            return own
        named = _BY_CLASS_NAME.get(cls.__name__)
        if named is not None:
            return named
    for builtin, category in _BUILTIN:
        if isinstance(exc, builtin):
            return category
    return Category.UNKNOWN


def rule_of(exc: BaseException) -> CategoryRule:
    return CATEGORIES[category_of(exc)]


def describe(exc: BaseException) -> str:
    """The one-line wording of ``exc`` from the table."""
    return rule_of(exc).wording.format(exc=exc, type=type(exc).__name__,
                                       filename=getattr(exc, "filename", None))


def load_category(exc: BaseException) -> str:
    """The short, stable name a load run counts ``exc`` under."""
    return rule_of(exc).load or type(exc).__name__


_TLS_WORDS = ("certificate verify", "[ssl", "tls handshake", "ssl handshake")
#: found anywhere in a cause chain, these explain an unhealthy backend (in this order)
_CHAIN_PRIORITY = (
    frozenset({Category.AUTH, Category.PERMISSION}),
    frozenset({Category.CONFIG, Category.MISSING_DRIVER, Category.UNSUPPORTED}),
)


def diagnosis_of(exc: BaseException) -> Category:
    """Why a backend is unhealthy, reading ``exc`` and its causes: a TLS failure, refused
    credentials or a misconfiguration anywhere in the chain explain it; else the
    category of ``exc`` itself."""
    import ssl

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    if any(isinstance(e, (ssl.SSLError, ssl.CertificateError)) for e in chain) or \
            any(word in str(e).lower() for e in chain for word in _TLS_WORDS):
        return Category.TLS
    categories = [category_of(e) for e in chain]
    for wanted in _CHAIN_PRIORITY:
        for category in categories:
            if category in wanted:
                return category
    return categories[0]
