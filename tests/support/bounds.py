"""Time bounds a test may assert without measuring the machine.

A test that checks an operation is *bounded by its timeout* (gives up rather than hangs)
compares the elapsed time with the timeout plus :data:`SCHEDULING_SLACK_S`: wide enough
that no loaded CI machine misses it (a process start, an import, a scheduler that hands
two cores to six jobs), yet far below what the unbounded behaviour takes (a hung server:
forever; an unanswered SYN: the kernel's two minutes; a client's own 30 s+ selection
timeout, made longer still by the tests that use this). The behaviour is what is
checked; the machine's speed is not.
"""

from __future__ import annotations

#: seconds of scheduling slack added to a timeout (see the module's docstring)
SCHEDULING_SLACK_S = 20.0


def bounded_by(timeout_s: float) -> float:
    """The most seconds an operation bounded by ``timeout_s`` may take in a test."""
    return timeout_s + SCHEDULING_SLACK_S
