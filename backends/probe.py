"""Bounding a call by a timeout without trusting the callee to honour one.

Health probes must answer within their timeout even when a driver ignores its own (a
blackholed address, a stuck TLS handshake). The call runs in a daemon thread; if it has not
returned in time the caller gets ``timed_out`` and the thread is abandoned.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Outcome:
    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False


def call_with_timeout(func: Callable[..., Any], timeout: float, *args: Any) -> Outcome:
    """Run ``func(*args)`` for at most ``timeout`` seconds; never raises."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = func(*args)
        except BaseException as exc:  # noqa: BLE001 - reported, not raised: probes never raise
            box["error"] = exc

    worker = threading.Thread(target=target, name="semvec-probe", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return Outcome(timed_out=True)
    return Outcome(value=box.get("value"), error=box.get("error"))
