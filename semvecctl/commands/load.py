"""``semvecctl load run``: evidence, not assurances, that a store loses nothing under load.

N writers commit turns (state + events) to a few shared sessions for a fixed time, with
retries, then an audit reads everything back (see :mod:`backends.ops.loadtest`). It writes
to a LIVE store, under a unique ``semvec-load-<hex>-`` prefix, and removes exactly what
it wrote; so it previews unless ``--apply``, which asks first (``--yes`` without a TTY). Exit 0 when the audit passed, 1
when it found a loss or a half turn, 3 when the store refused the run outright, 4 when
the store is unreachable before it starts.
"""

from __future__ import annotations

from typing import Any

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.metrics import recorder
from semvecctl.options import (Apply, MetricsFile, Output, store_command, Yes)
from semvecctl.output import Column, OutputFormat

NAME = "load"
HELP = help_of(NAME)
app = typer.Typer(no_args_is_help=True, help=HELP)

_PREFLIGHT_TIMEOUT_S = 5.0


def _rows(report: Any, display_uri: str) -> list[dict[str, Any]]:
    v = report.verification
    rows = [
        ("backend", report.backend), ("uri", display_uri), ("prefix", report.prefix),
        ("writers", report.writers), ("sessions", report.sessions),
        ("events per turn", report.events_per_turn), ("elapsed s", report.elapsed_s),
        ("commits", report.commits), ("commits/s", f"{report.commits_per_s:.1f}"),
        ("conflicts", report.conflicts), ("conflicts/s", f"{report.conflicts_per_s:.1f}"),
        ("unknown outcome", report.unknown),
        ("errors", ", ".join(f"{k} {n}" for k, n in report.errors.items()) or "none"),
        ("acknowledged verified", v.acknowledged_verified),
        ("unknown landed / not", f"{v.unknown_landed} / {v.unknown_not_landed}"),
        ("events checked", v.events_checked),
        ("verdict", "OK: nothing lost, no half turn" if report.ok else "FAILED"),
    ]
    rows += [("note", note) for note in report.notes]
    rows += [("problem", p) for p in v.problems[:20]]
    rows += [("cleanup", p) for p in report.cleanup_problems]
    return [{"field": k, "value": value} for k, value in rows]


@app.command("run")
@store_command()
def run(*,
    conn: Connection,
    writers: int = typer.Option(4, "--writers", "-w", min=1, max=256,
                                help="Concurrent writer threads."),
    duration: float = typer.Option(5.0, "--duration", "-d", min=0.1, max=3600.0,
                                   help="Seconds of load."),
    sessions: int = typer.Option(2, "--sessions", min=1, max=10_000,
                                 help="Sessions the writers share (fewer = more conflicts)."),
    events_per_turn: int = typer.Option(1, "--events-per-turn", min=0, max=100,
                                        help="Events each turn carries (0 = state only)."),
    max_commits: int = typer.Option(100_000, "--max-commits", min=1, max=10_000_000,
                                    help="Stop after this many acknowledged commits."),
    apply: Apply = False,
    yes: Yes = False,
    output: Output = OutputFormat.table,
    metrics_file: MetricsFile = None,
) -> None:
    """Write load-test turns to a live store under a unique prefix, audit, remove them
    (a preview unless --apply)."""
    from backends.ops.loadtest import LoadPlan, new_load_prefix

    out = current().output
    apply = current().wants_apply(apply=apply, yes=yes)
    metrics = recorder(metrics_file, "load run")
    spec = conn.spec
    if not apply:
        out.info(f"preview only: would run {writers} writer(s) on {sessions} session(s) of "
                 f"{spec.display_uri} for up to {duration:g}s under a new semvec-load- prefix "
                 "(removed afterwards); nothing was written (pass --apply to run)")
        return
    current().confirm(f"write load-test sessions and events to {spec.display_uri} "
                "(removed afterwards)", yes=yes)
    prefix = new_load_prefix()
    plan = LoadPlan(writers=writers, duration_s=duration, sessions=sessions,
                    events_per_turn=events_per_turn, max_commits=max_commits, prefix=prefix)
    with conn.open() as adapter_obj:
        _require_reachable(adapter_obj, spec)
        out.info(f"writing under prefix {prefix} for up to {duration:g}s")
        report = _run_interruptible(adapter_obj, plan, spec, out)
        metrics.track(report, backend=adapter_obj.name)
    data = {"uri": spec.display_uri, **report.to_dict()}
    out.emit(data, output, columns=[Column("CHECK", "field", style="bold"),
                                    Column("RESULT", "value")],
             rows=_rows(report, spec.display_uri))
    if report.fatal:
        current().abort(f"the store refused the load run: {report.fatal}", ExitCode.ENVIRONMENT)
    if report.cleanup_problems:
        out.warn(f"{len(report.cleanup_problems)} cleanup problem(s): rows under prefix "
                 f"{report.prefix} may remain; remove them with: "
                 f"{cleanup_command(spec, report.prefix, report.sessions)}")
    if not report.verification.ok:
        current().abort(f"audit failed: {len(report.verification.problems)} problem(s), "
                        f"first: {report.verification.problems[0]}", ExitCode.CHECK_FAILED)
    out.success(f"{report.commits} commits ({report.commits_per_s:.0f}/s), "
                f"{report.conflicts} conflicts ({report.conflicts_per_s:.0f}/s) in "
                f"{report.elapsed_s:.1f}s: nothing lost")


def _require_reachable(adapter_obj: Any, spec: Any) -> None:
    """Exit 4 unless the store answers its health check in time: a run against a store
    that is down would measure nothing, and nothing is written yet."""
    from backends.probe import call_with_timeout

    probe = call_with_timeout(adapter_obj.check_health, _PREFLIGHT_TIMEOUT_S)
    if probe.value is not True:
        current().abort(f"backend {adapter_obj.name!r} at {spec.display_uri} is unreachable; "
                        "nothing was written", ExitCode.UNREACHABLE)


def cleanup_command(spec: Any, prefix: str, sessions: int) -> str:
    """The exact command that removes what a run under ``prefix`` left (URI redacted: put
    the credentials back in)."""
    return (f"semvecctl load cleanup --prefix {prefix} --sessions {sessions} {spec.store_flags}"
            " --apply --yes")


def _run_interruptible(adapter_obj: Any, plan: Any, spec: Any, out: Any) -> Any:
    """run_load with progress; on SIGINT/SIGTERM say what was removed, or exactly what is
    left and the command that removes it, then let the signal end the command."""
    from backends.ops.loadtest import LoadInterrupted, run_load

    try:
        with out.progress_task("load", unit=" commits", ends_in=plan.duration_s) as task:
            return run_load(adapter_obj, plan, on_tick=lambda acked, _s: task.set(acked))
    except LoadInterrupted as stopped:
        if stopped.problems:
            out.error(f"interrupted; cleanup could not finish ({stopped.problems[0]}): rows under "
                      f"prefix {stopped.prefix} may remain; remove them with: "
                      f"{cleanup_command(spec, stopped.prefix, stopped.sessions)}")
        else:
            out.info(f"interrupted; removed everything written under prefix {stopped.prefix}")
        raise stopped.cause from None
    except BaseException:
        out.error(f"interrupted during cleanup: rows under prefix {plan.prefix} may remain; "
                  f"remove them with: {cleanup_command(spec, plan.prefix, plan.sessions)}")
        raise


@app.command("cleanup")
@store_command()
def cleanup(*,
    prefix: str = typer.Option(..., "--prefix", help="The run's prefix (semvec-load-<hex>-), as printed by 'load run'."),
    sessions: int = typer.Option(0, "--sessions", min=0, max=10_000,
                                 help="The run's --sessions, if known: a lower bound only (what the "
                                      "run left is found by scanning the prefix)."),
    conn: Connection,
    apply: Apply = False,
    yes: Yes = False,
) -> None:
    """Remove what an interrupted load run left behind (its sessions, events, counters);
    a preview (what it would remove) unless --apply.

    Finds the run's rows by its prefix (a scan of the sessions, a probe of its users),
    removes them, looks again, and says what it removed and what is left: exit 0 only
    when nothing is left, 1 otherwise."""
    from backends.ops.loadtest import cleanup_prefix, find_leftovers

    out = current().output
    if not prefix.startswith("semvec-load-") or len(prefix) <= len("semvec-load-"):
        current().abort(f"--prefix {prefix!r} is not a load-run prefix (semvec-load-<hex>-)",
                        ExitCode.USAGE)
    apply = current().wants_apply(apply=apply, yes=yes)
    spec = conn.spec
    if not apply:
        with conn.open() as adapter_obj:
            found = find_leftovers(adapter_obj, prefix, sessions)
        out.info(f"preview only: would remove {len(found.sessions)} session(s)"
                 f"{_names(found.sessions)} and the events of {len(found.users)} user(s)"
                 f"{_names(found.users)} under {prefix}; nothing was changed (pass --apply)")
        return
    current().confirm(f"delete the load-run rows under {prefix} from {spec.display_uri}", yes=yes)
    with conn.open() as adapter_obj:
        outcome = cleanup_prefix(adapter_obj, prefix, sessions)
    removed = (f"removed {len(outcome.removed.sessions)} session(s) and the events of "
               f"{len(outcome.removed.users)} user(s) under {prefix}")
    for problem in outcome.problems:
        out.error(problem)
    if not outcome.complete:
        left = outcome.left
        current().abort(f"{removed}; left: {len(left.sessions)} session(s)"
                        f"{_names(left.sessions)} and {len(left.users)} user(s) with events"
                        f"{_names(left.users)}; rerun this command", ExitCode.CHECK_FAILED)
    out.success(f"{removed}; nothing is left")


def _names(names: list[str], shown: int = 5) -> str:
    if not names:
        return ""
    return " (" + ", ".join(names[:shown]) + (", ..." if len(names) > shown else "") + ")"
