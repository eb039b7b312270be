"""``semvecctl`` in a process that SIGKILLs itself inside a batch write: right after the
N-th set-based write of a kind has landed on the target, before the command records or
counts it (the hardest moment for a resume: written, not known to be).

    python -c 'from tests.backends.transfer.killer import main; main()' KIND N ARGS...

KIND ``sessions``: a batch of sessions (``restore_sessions`` on Redis and PostgreSQL,
the reshard copier's write); ``events``: a batch of events (``restore_event_batch`` on
Redis and PostgreSQL, Redis's ``append_batch`` of unnumbered events). ARGS are
``semvecctl``'s."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

_calls = [0]


def _die_after(cls: type, name: str, n: int) -> None:
    inner = cls.__dict__[name]

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = inner(self, *args, **kwargs)
        _calls[0] += 1
        if _calls[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return out

    setattr(cls, name, wrapped)


def main() -> None:
    kind, n = sys.argv[1], int(sys.argv[2])
    sys.argv = ["semvecctl", *sys.argv[3:]]
    from backends.migrate.reshard_copy import ReshardCopier
    from backends.postgres.bulk import SqlEventBulk
    from backends.postgres.state import SqlStateStore
    from backends.redis.bulk import RedisEventBulk, RedisStateBulk
    from backends.redis.events import RedisEventStore

    if kind == "events":
        targets = [(SqlEventBulk, "restore_event_batch"), (RedisEventBulk, "restore_event_batch"),
                   (RedisEventStore, "append_batch")]
    else:
        targets = [(SqlStateStore, "restore_sessions"), (RedisStateBulk, "restore_sessions"),
                   (ReshardCopier, "write")]
    for cls, name in targets:
        _die_after(cls, name, n)
    from semvecctl.__main__ import main as run

    run()
