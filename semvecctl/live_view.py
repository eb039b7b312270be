"""How the live moves (``migrate`` and ``shards``) show their passes and their status, and
refuse a state file or a run's conflicts: one way for both, since both run on
:mod:`backends.migrate`."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from semvecctl.application import current
from semvecctl.exit_codes import ExitCode
from semvecctl.output import Column, OutputFormat

STATUS_COLUMNS = [Column(h.upper(), h) for h in
                  ("phase", "copied", "remaining", "total", "conflicts", "events", "lag",
                   "lag age", "rate", "eta", "cutover")]


def run_passes(run: Any, mig: Any, follow: bool, interval: float, max_passes: Optional[int],
               output: OutputFormat, totals: dict[str, int], *, scanned: str = "scanned",
               method: bool = True) -> list[Any]:
    """Run the passes, saying each as it ends and adding it to ``totals`` (the metrics).
    ``scanned`` names what a pass scans; ``method`` says how it found the changes."""
    out = current().output
    results: list[Any] = []

    def said(result: Any) -> None:
        results.append(result)
        totals["passes"] += 1
        for key in ("copied", "deleted", "events"):
            totals[key] += getattr(result, key)
        totals["conflicts"] += result.conflicts + result.event_conflicts
        if output != OutputFormat.table:
            out.emit(result.to_dict(), "jsonl" if output == OutputFormat.json else output)
        else:
            how = f" ({result.method})" if method else ""
            out.info(f"{result.kind} pass {result.n}{how}: {scanned} {result.scanned}, "
                     f"copied {result.copied}, deleted {result.deleted}, events {result.events}, "
                     f"conflicts {result.conflicts + result.event_conflicts} "
                     f"in {result.seconds:.2f}s")
        for sid, why in result.new_conflicts:
            out.warn(f"conflict: session {sid!r}: {why}")
        if result.withheld:
            out.info(f"withheld {len(result.withheld)} session(s) of erased subjects (older "
                     f"than the erasure): {', '.join(result.withheld)}")
        if result.withheld_events:
            out.info(f"withheld {len(result.withheld_events)} event(s) of erased subjects "
                     f"(older than the erasure): {', '.join(result.withheld_events)}")

    run(mig, follow=follow, interval=interval, max_passes=max_passes, on_pass=said)
    return results


@contextlib.contextmanager
def said_when_interrupted(state: Any, group: str) -> Iterator[None]:
    """On a signal, say what the run had done, from the state file (as ``migrate status``
    counts it), before the boundary prints "interrupted": an operator sees the counts, not
    only that it stopped."""
    from semvecctl.interrupts import interruption_of

    try:
        yield
    except BaseException as exc:
        signalled = interruption_of(exc)
        if signalled is not None:
            from backends.migrate import migration_status

            try:
                status = migration_status(state)
            except Exception:  # noqa: BLE001 - the interruption is what is reported
                raise exc from None
            total = "" if status.sessions_total is None else f" of {status.sessions_total}"
            left = ("" if status.sessions_remaining is None
                    else f", {status.sessions_remaining} remaining")
            current().output.error(
                f"{signalled.signal_name}: the run stopped after copying "
                f"{status.sessions_copied}{total} session(s){left}, {status.events_copied} "
                f"event(s), {status.conflicts} conflict(s); the same 'semvecctl {group} run' "
                "continues from there")
        raise


def resumes(state_file: str) -> bool:
    """Whether ``--state`` names a file to resume; exit 2 when it is new and its directory
    does not exist (the run could record nothing)."""
    import os

    if os.path.exists(state_file):
        return True
    if not os.path.isdir(os.path.dirname(os.path.abspath(state_file))):
        current().abort(f"the directory of --state {state_file} does not exist", ExitCode.USAGE)
    return False


def refuse_foreign_state(state_file: str, *, source: str, target: str,
                         settings: dict[str, Any], claim: bool) -> None:
    """Exit 2 for a state file of another pair or other filters, exit 3 (with ``claim``)
    for one another process runs: said before either store is touched."""
    from backends.migrate import MigrationState, StateBusy, StateMismatch

    try:
        MigrationState.check_resume(state_file, source=source, target=target,
                                    settings=settings, claim=claim)
    except StateBusy as exc:
        current().abort(str(exc), ExitCode.ENVIRONMENT, cause=None)
    except StateMismatch as exc:
        current().abort(str(exc), ExitCode.USAGE, cause=None)


def refuse_conflicts(results: list[Any], where: str, group: str) -> None:
    """Exit 1 when the passes found conflicts (rows someone else wrote on ``where``, kept):
    a cutover must wait until they are resolved."""
    conflicts = sum(r.conflicts + r.event_conflicts for r in results)
    if conflicts:
        current().abort(f"{conflicts} conflict(s): written on {where} by someone else and "
                        f"kept; see 'semvecctl {group} status' and resolve them before cutover",
                        ExitCode.CHECK_FAILED)


def status_of(state_file: str) -> Any:
    """The status value of a state file (``to_row()`` / ``to_dict()``), for a watch view."""
    from backends.migrate import MigrationState, migration_status

    state = MigrationState.read(state_file, fold=False)  # counts only; a run may be writing
    try:
        return migration_status(state)
    finally:
        state.close()


def status_line(status: Any) -> str:
    from semvecctl.watch import stamp

    return stamp() + " " + ", ".join(f"{key} {value}" for key, value in status.to_row().items())


def status_view(status: Any, title: str) -> Any:
    """The status as a :func:`~semvecctl.output.kube_table` under a stamped title line,
    for a watch redrawn in place on a terminal."""
    from rich.console import Group
    from rich.text import Text

    from semvecctl.output import escape_cell, kube_table
    from semvecctl.watch import stamp

    row = [escape_cell(str(value)) for value in status.to_row().values()]
    return Group(Text(f"{stamp()} · {escape_cell(title)}"), kube_table(STATUS_COLUMNS, [row]))
