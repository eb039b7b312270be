"""A migration pass's events, a batch of users at a time (:data:`.passes.USER_BATCH`):
the users' source logs in one read, what the state file recorded of them in one query,
every new event announced as an intent in one transaction before the target is touched,
checked on the target in one read and written by :mod:`backends.transfer.batches` (one
set-based write; a clash holds back only that event), then recorded (copied, conflict,
each user's high-water mark) in one transaction, and the users' counters raised in one
call. An interrupted batch is settled on resume: an event the target holds identically
is ours (an intent that landed), so nothing is lost or written twice."""

from __future__ import annotations

from typing import Any, Sequence

from backends.contract import event_defaults
from backends.transfer.batches import copy_events, raise_counters
from backends.transfer.loss import keeps_sequences


class EventBatch:
    """One batch of users' events copied (see module)."""

    def __init__(self, mig: Any, users: Sequence[str], result: Any) -> None:
        """``mig``: the :class:`~.passes.LiveMigration`; ``result``: its pass's result."""
        self.mig, self.users, self.result = mig, list(users), result

    def copy(self) -> None:
        mig, state = self.mig, self.mig.state
        logs, tops = self._source_logs()
        recorded = state.events_of_users(self.users)
        new = [e for u in self.users for e in logs.get(u, ())
               if recorded[u].get(e.event_id) not in ("copied", "conflict")]
        sequences = keeps_sequences(mig._events_dst)
        if new:
            with state.transaction() as db:
                state.mark_events(db, "intent", [(e.event_id, e.user_id, e.sequence) for e in new])
            outcome = copy_events(mig._events_dst, new, sequences=sequences)
            highest: dict[str, int] = {}
            for event in outcome.done:
                highest[event.user_id] = max(highest.get(event.user_id, 0), event.sequence)
            with state.transaction() as db:
                state.mark_events(db, "copied", [(e.event_id, e.user_id, e.sequence)
                                                 for e in outcome.done])
                state.mark_events(db, "conflict", [(e.event_id, e.user_id, e.sequence)
                                                   for e in outcome.clashes])
                state.raise_high_waters(db, highest)
            self.result.events += len(outcome.done)
            self.result.event_conflicts += len(outcome.clashes)
        if sequences:
            source = mig._events_src if mig._source_counter is not None else None
            raise_counters(source, mig._events_dst, self.users, tops)

    def _source_logs(self) -> tuple[dict[str, list[Any]], dict[str, int]]:
        """Each user's source log less what the ledger withholds (named in the result),
        and the highest number of the whole log (the counter goes on past withheld
        events): one read for the batch."""
        mig = self.mig
        logs = mig._logs
        if logs is not None and mig._withholding_active:
            read = logs.user_logs(self.users)
        else:
            read = event_defaults(mig._events_src).events_of_users(self.users,
                                                                   owner_subject=mig.scope)
        tops = {u: max((e.sequence for e in log), default=0) for u, log in read.items()}
        if logs is None or not mig._withholding_active:
            return read, tops
        kept: dict[str, list[Any]] = {}
        for user, log in read.items():
            held = [e for e in log if mig._withholding.withholds_event(e)]
            self.result.withheld_events.extend(e.event_id for e in held)
            kept[user] = [e for e in log if e not in held]
        return kept, tops
