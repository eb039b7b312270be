"""What a case works with: the adapter, ids under the run prefix, and checks.

Every id a case uses comes from here, so everything a run creates carries the run's
unique prefix and is remembered for cleanup. Cleanup removes exactly those ids (sessions
by id, events by user for the run's own user ids, then any of the run's event ids still
stored, whatever a defective adapter left unindexed) and nothing else: a case never
reads, changes or deletes a row it did not create.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator, NoReturn

from backends.conformance.drive import EventsDriver, StoreDriver, WireEvent
from backends.conformance.drive import commit_turn as _commit_turn
from backends.conformance.model import CaseFailure, NotApplicable, SubCheckNotApplicable
from backends.contract import MemoryItem
from backends.errors import is_state_version_conflict


def redis_url_of(uri: str | None) -> str | None:
    """``uri`` when it names a Redis server (the run's target), else None."""
    from backends.info import declared

    if uri and uri.split("://", 1)[0].lower() in declared("redis").schemes:
        return uri
    return None


def new_run_prefix() -> str:
    return f"semvec-conf-{uuid.uuid4().hex[:8]}-"


def describe_exception(exc: BaseException) -> str:
    text = str(exc)
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class ConformanceOptions:
    """Knobs of a run. Defaults are what the CLI and the mixins use."""

    #: Writers racing in the concurrency cases.
    writers: int = 8
    #: Attempts per writer.
    attempts: int = 12
    #: check_health must answer within this many seconds.
    health_timeout: float = 5.0
    #: How long a retrieval case waits for a mirror to become queryable (eventual stores).
    retrieval_wait: float = 30.0
    #: Embedding width used by the retrieval cases (None: the adapter's configured
    #: ``dimensions`` when it exposes one, else 8).
    retrieval_dimensions: int | None = None
    #: Let the ``indexes`` group create missing indexes (a store-wide change).
    allow_provisioning: bool = False
    #: Passed to the IndexManager calls.
    index_dimensions: int | None = None
    #: A case (and, separately, its cleanup) that runs longer is abandoned as an error,
    #: so one hung adapter call cannot hang the whole run.
    case_timeout: float = 120.0
    #: The Redis server the adapter writes to, for the case that plants a wrong-typed key
    #: (``commit_turn.atomic_on_server_error``). None: ``REDIS_URL`` from the
    #: environment (how the engine configures its Redis), else the case is not applicable.
    redis_url: str | None = None
    #: Child processes racing in ``concurrency.processes``, and attempts per process.
    processes: int = 4
    process_attempts: int = 6
    #: SIGKILLs ``durability.sigkill`` deals (at least 20 is the published bar), and the
    #: seconds the whole case may take for them.
    kills: int = 20
    kill_budget: float = 60.0
    #: Seed of the kill moments (None: a fresh one, reported in the case's message).
    kill_seed: int | None = None
    #: The deployment the ``failover`` group may break (``failover.FailoverTopology``);
    #: None: the group is not applicable.
    failover: Any = None
    #: Writer processes of the failover group, and the seconds replication is stalled
    #: before the primary fails (where the topology can stall it).
    failover_writers: int = 4
    failover_stall: float = 0.5
    #: Seed of the failure moment (None: a fresh one, reported with the figures).
    failover_seed: int | None = None
    #: Keep the writers' histories here (one file per writer) for an audit of one's own.
    failover_history: str | None = None

    def resolved_redis_url(self) -> str | None:
        from backends.info import declared

        return self.redis_url or os.environ.get(declared("redis").uri_env[0]) or None


@dataclass
class CaseContext:
    adapter: Any
    prefix: str
    case_slug: str
    options: ConformanceOptions = field(default_factory=ConformanceOptions)
    selected_name: str | None = None
    factory: Callable[[], Any] | None = None
    #: How a child process rebuilds the adapter (``children.AdapterRecipe``), if known.
    recipe: Any = None
    sessions: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    item_sessions: list[str] = field(default_factory=list)
    #: Every event id the case made (cleanup removes those still stored by id).
    event_ids: list[str] = field(default_factory=list)
    #: Clean up through an adapter built afresh (a case that ran child processes).
    cleanup_fresh: bool = False
    #: Steps skipped as not applicable (reported with the result, never failed).
    notes: list[str] = field(default_factory=list)
    #: Measured figures of the case (counts, seconds, its seed), reported with the result.
    figures: dict[str, Any] = field(default_factory=dict)
    #: Adapters the case opened for the rest of its life (closed after its cleanup).
    opened: list[Any] = field(default_factory=list)
    _counter: Any = field(default_factory=lambda: itertools.count(1))

    # -- the adapter's halves, in the suite's terms ----------------------------------

    @property
    def store(self) -> StoreDriver:
        """The state store, driven in its own owner convention (see ``drive``)."""
        return StoreDriver(self.adapter.state_store())

    @property
    def events(self) -> EventsDriver | None:
        raw = self.adapter.event_store()
        return None if raw is None else EventsDriver(raw)

    def require_events(self) -> EventsDriver:
        events = self.adapter.event_store()
        if events is None:
            raise NotApplicable("event_store() is None: this backend keeps no event log")
        return EventsDriver(events)

    def commit_turn(self, session_id: str, blob: bytes, *, expected_version: int | None,
                    owner_subject: str | None = None, pending_message: str | None = None,
                    events: Any = None, adapter: Any = None) -> Any:
        """``commit_turn`` on the adapter (or ``adapter``) in its own owner convention."""
        return _commit_turn(adapter if adapter is not None else self.adapter, session_id,
                            blob, expected_version=expected_version,
                            owner_subject=owner_subject, pending_message=pending_message,
                            events=events)

    def raw_redis(self, purpose: str) -> Any:
        """A plain client on the Redis the adapter writes to: ConformanceOptions.redis_url,
        else REDIS_URL (how the engine is configured); not applicable without either
        (``purpose`` says what the case would have done with it)."""
        from backends.info import known
        from backends.registry import fold_name

        name = fold_name(str(getattr(self.adapter, "name", "") or self.selected_name or ""))
        info = known(name)
        if info is not None and info.name != "redis":
            # not a Redis store at all: a missing Redis URI is not the reason
            raise NotApplicable(f"the case needs the engine's Redis layout and backend "
                                f"{info.name!r} keeps its sessions elsewhere: {purpose}")
        url = self.options.resolved_redis_url()
        if not url:
            raise NotApplicable("no Redis URI for the run (ConformanceOptions.redis_url, "
                                f"--uri redis://..., or REDIS_URL): {purpose}")
        try:
            import redis
        except ImportError:
            raise NotApplicable("the redis driver is not installed") from None
        try:
            return redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=10)
        except ValueError as exc:
            raise NotApplicable(f"the run's Redis URI is not one a plain client can open "
                                f"({type(exc).__name__})") from None

    @contextlib.contextmanager
    def subcheck(self, label: str) -> Iterator[None]:
        """Run one step; a step this adapter cannot be asked is skipped with a note."""
        try:
            yield
        except SubCheckNotApplicable as exc:
            note = f"{label}: not applicable ({exc.reason})"
            if note not in self.notes:
                self.notes.append(note)

    # -- ids under the run prefix ----------------------------------------------------

    def _name(self, kind: str, label: str) -> str:
        return f"{self.prefix}{self.case_slug}-{kind}{next(self._counter)}-{label}"

    def session(self, label: str = "s") -> str:
        """A fresh session id, remembered for cleanup."""
        sid = self._name("s", label)
        self.sessions.append(sid)
        return sid

    def user(self, label: str = "u") -> str:
        """A fresh event user id, remembered for cleanup."""
        uid = self._name("u", label)
        self.users.append(uid)
        return uid

    def owner(self, label: str = "tenant") -> str:
        """A fresh owner string (a tenant, or ``tenant/agent`` when the label has a /)."""
        return f"{self.prefix}{label}"

    def event(
        self,
        user_id: str,
        content: str = "event",
        *,
        session_id: str | None = None,
        owner_subject: str | None = None,
        created_at: datetime | None = None,
        embedding: Iterable[float] | None = (0.5, -0.25, 1.0),
        meta: dict[str, Any] | None = None,
        source_event_id: uuid.UUID | None = None,
    ) -> WireEvent:
        """A new event in the engine's shape (UUID ids, list embedding, "" = none),
        remembered for cleanup."""
        event_id = uuid.uuid4()
        self.event_ids.append(str(event_id))
        return WireEvent(
            event_id=event_id,
            user_id=user_id,
            content=content,
            created_at=created_at or datetime.now(timezone.utc).replace(microsecond=0),
            embedding=list(embedding) if embedding is not None else [],
            meta=dict(meta or {}),
            source_event_id=source_event_id,
            owner_subject=owner_subject or "",
            session_id=session_id or "",
        )

    def item(self, item_id: str, text: str, embedding: Iterable[float], **kw: Any) -> MemoryItem:
        return MemoryItem(item_id=f"{self.prefix}{item_id}", text=text,
                          embedding=tuple(embedding), **kw)

    def item_session(self, label: str = "items") -> str:
        sid = self.session(label)
        self.item_sessions.append(sid)
        return sid

    # -- checks ----------------------------------------------------------------------

    def fail(self, check: str, expected: Any, actual: Any) -> NoReturn:
        raise CaseFailure(check, expected, actual)

    def expect(self, condition: bool, check: str, expected: Any, actual: Any) -> None:
        if not condition:
            raise CaseFailure(check, expected, actual)

    def advise(self, check: str, expected: Any, actual: Any) -> None:
        """End the case with an advisory finding (beyond the published contract)."""
        from backends.conformance.model import AdvisoryFinding

        raise AdvisoryFinding(check, expected, actual)

    def expect_equal(self, actual: Any, expected: Any, check: str) -> None:
        if actual != expected:
            raise CaseFailure(check, repr(expected), repr(actual))

    def call(self, check: str, fn: Callable[[], Any]) -> Any:
        """Run a step that must succeed; an exception fails the case naming the step."""
        try:
            return fn()
        except (CaseFailure, NotApplicable):
            raise
        except Exception as exc:  # noqa: BLE001 - any exception is the finding
            raise CaseFailure(check, "success", f"raised {describe_exception(exc)}") from exc

    def expect_conflict(self, check: str, fn: Callable[[], Any]) -> BaseException:
        """The step must raise the contract's conflict type (any class named
        StateVersionConflict); returning is the silent-data-loss bug."""
        try:
            result = fn()
        except NotApplicable:
            raise
        except Exception as exc:  # noqa: BLE001
            if is_state_version_conflict(exc):
                return exc
            raise CaseFailure(check, "StateVersionConflict",
                              f"raised {describe_exception(exc)}") from exc
        raise CaseFailure(check, "StateVersionConflict", f"returned {result!r}")

    def expect_refusal(self, check: str, fn: Callable[[], Any], *,
                       conflict_ok: bool = False) -> BaseException:
        """The step must raise (any exception except a conflict, unless allowed)."""
        try:
            result = fn()
        except NotApplicable:
            raise
        except Exception as exc:  # noqa: BLE001
            if is_state_version_conflict(exc) and not conflict_ok:
                raise CaseFailure(check, "a refusal that is not a version conflict",
                                  f"raised {describe_exception(exc)}") from exc
            return exc
        raise CaseFailure(check, "an exception (nothing written)", f"returned {result!r}")

    def expect_log(self, actual: list, expected: list, check: str, *,
                   in_order: bool = False) -> None:
        """A listing of the event log compared as a collection: a case that does not
        check order never depends on it (a store without sequences lists in its own
        order). ``in_order``: the order is what is checked (sequence order, asked only of
        a store seen to assign sequences)."""
        if not in_order:
            actual, expected = sorted(actual, key=repr), sorted(expected, key=repr)
            check = f"{check} (in any order)"
        self.expect_equal(actual, expected, check)

    def sequenced(self, events: Iterable[Any]) -> bool:
        """Whether the store assigns sequences, as its own events read back show: False
        when it declares ``assigns_sequences = False`` or when no event read back carries
        one (sequence 0 or None, as the engine's SQL layout returns them)."""
        driver = self.events
        if driver is not None and not driver.assigns_sequences:
            return False
        return any(getattr(e, "sequence", None) not in (0, None) for e in events)

    def require_sequences(self, events: list, what: str) -> None:
        """Not applicable (with the reason) unless ``events``, read back from the store,
        show that it assigns sequences."""
        driver = self.events
        if driver is not None and not driver.assigns_sequences:
            raise NotApplicable("the event store declares assigns_sequences = False (its "
                                "layout keeps no per-user sequence, as the engine's SQL "
                                "layout)")
        if not self.sequenced(events):
            seen = sorted({repr(getattr(e, "sequence", None)) for e in events})
            raise NotApplicable(
                f"events read back without a sequence ({what}: sequence "
                f"{' / '.join(seen) or 'none'}): this store assigns none (as the engine's "
                "SQL layout), so there is no sequence to check")

    def expect_int_version(self, value: Any, expected: int, check: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise CaseFailure(check, f"int {expected}", f"{type(value).__name__} {value!r}")
        if value != expected:
            raise CaseFailure(check, f"version {expected}", f"version {value}")

    # -- cleanup ---------------------------------------------------------------------

    def move_to(self, recipe: Any) -> None:
        """The deployment's primary moved (the failover group promoted a replica): the
        rest of the case, its cleanup and the leftover check go to where ``recipe``
        builds the adapter now."""
        adapter = recipe.build()
        self.opened.append(adapter)
        self.adapter, self.recipe, self.factory, self.cleanup_fresh = adapter, recipe, None, True

    def close_opened(self) -> None:
        from backends.contract import close_quietly

        for adapter in self.opened:
            close_quietly(adapter)
        self.opened.clear()

    def cleanup(self) -> list[str]:
        """Remove what this case created; return the problems (never raise). A case that
        ran children (``cleanup_fresh``) is cleaned up through an adapter built afresh in
        this process (the factory, else the recipe), closed afterwards; the run's own
        adapter when none can be built."""
        from backends.conformance.cleanup import remove_run
        from backends.contract import close_quietly

        adapter, fresh = self.adapter, None
        if self.cleanup_fresh:
            build = self.factory or (self.recipe.build if self.recipe is not None else None)
            try:
                fresh = build() if build is not None else None
            except Exception:  # noqa: BLE001 - fall back to the run's adapter
                fresh = None
            adapter = fresh if fresh is not None else self.adapter
        try:
            return remove_run(adapter, self.prefix, sessions=self.sessions, users=self.users,
                              item_sessions=self.item_sessions, event_ids=self.event_ids,
                              describe=describe_exception)
        finally:
            if fresh is not None:
                close_quietly(fresh)
