"""The audit any adapter that enumerates sessions gets (the memory backend, third-party
plugins): every row read strictly, one finding per row that fails."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from backends.contract.findings import Finding, unreadable_state


def audit(adapter: Any, *, batch: int = 500,
          progress: Callable[[int], None] | None = None, **_: Any) -> Iterator[Finding]:
    from backends.errors import CorruptState

    store = adapter.state_store()
    seen = 0
    for seen, summary in enumerate(adapter.iter_sessions(batch_size=batch), 1):
        if progress is not None and seen % batch == 0:
            progress(seen)
        try:
            store.load_full(summary.session_id)
        except CorruptState as exc:
            yield unreadable_state(f"session {summary.session_id}", summary.session_id,
                                   f"field {exc.field!r} {exc.problem}")
    if progress is not None:
        progress(seen)  # the whole count, not the last full batch
