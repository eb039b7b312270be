"""``semvecctl shards plan|run|status|verify|cutover|abort``: change the shard list of a
live SQL deployment (grow, shrink, reorder) while the engine keeps writing on the old one.

The deployment is the one the connection names (``--uri`` or ``DATABASE_URL``, and
``--shards`` or ``SEMVEC_STATE_DB_SHARDS``: the OLD list); ``--to-shards`` is the NEW
list. Only the sessions whose shard changes are copied, with their events and items, to
their new shard, by the live migration's machinery (:mod:`backends.migrate.shards`):
the same state file, resume, verify, cutover and abort as ``migrate``. Exit codes: 0 done
(or a preview); 1 a check failed (conflicts, differences, writers still active at
cutover); 2 usage (a bad --to-shards, a state file of another reshard, no state file);
3 the backend has no shard list or lacks what is needed; 4 a database is unreachable.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.exit_codes import ExitCode
from semvecctl.connection import Connection
from semvecctl.options import Apply, MetricsFile, Output, Overwrite, SignWith, Watch, Yes, store_command
from semvecctl.signing import sign, signing_key
from semvecctl.live_view import (STATUS_COLUMNS, said_when_interrupted, refuse_conflicts, refuse_foreign_state, resumes,
                                 run_passes, status_line, status_of, status_view)
from semvecctl.output import Column, OutputFormat

NAME = "shards"
HELP = help_of(NAME)
app = typer.Typer(no_args_is_help=True, help=HELP)

ToShardsOpt = typer.Option(..., "--to-shards", metavar="DSN,DSN,...", show_default=False,
                           help="The NEW shard list, in the engine's order (as "
                                "SEMVEC_STATE_DB_SHARDS will hold it; postgresql:// or the "
                                "engine's postgresql+psycopg:// spellings); '' for none.")
StateOpt = typer.Option(..., "--state", show_default=False,
                        help="The reshard's state file (created by the first 'shards run', "
                             "continued by every later one; bound to the two lists).")
FollowOpt = typer.Option(False, "--follow", help="After the bulk pass, keep copying what "
                                                 "changes (catch-up passes) until interrupted.")
IntervalOpt = typer.Option(1.0, "--interval", min=0.0, max=3600.0,
                           help="Seconds between catch-up passes.")
MaxPassesOpt = typer.Option(None, "--max-passes", min=1, max=1_000_000, show_default=False,
                            help="With --follow: stop after this many passes.")
BatchOpt = typer.Option(500, "--batch-size", min=1, max=100_000,
                        help="Sessions copied per batch (one state-file step and one COPY each).")
SampleOpt = typer.Option(None, "--sample", min=1, max=100_000_000, show_default=False,
                         help="Compare only the first N moved sessions: a quick check.")
QuietOpt = typer.Option(2.0, "--quiet-window", min=0.0, max=3600.0,
                        help="Seconds the moved sessions must stay unchanged after the final pass.")
ReceiptOpt = typer.Option(None, "--receipt", show_default=False,
                          help="Where the JSON receipt goes (default: the state file's name + .receipt.json).")


# -- the two lists ---------------------------------------------------------------------


def _new_list(text: str) -> tuple[str, ...]:
    """The ``--to-shards`` entries as the engine reads the variable; each must be a
    PostgreSQL URL (exit 2 naming the entry, redacted)."""
    from semvecctl.connection import shard_list

    return shard_list(text, "--to-shards")


def _sharded(deployed: Connection) -> Any:
    """The connection's spec, refused (exit 2) unless it names a SQL deployment."""
    from backends.registry import fold_name

    from semvecctl.connection import SHARDED_BACKENDS

    spec = deployed.spec
    if spec.adapter_factory or fold_name(spec.backend) not in SHARDED_BACKENDS:
        current().abort(f"'shards' changes a SQL deployment's shard list; backend "
                        f"{spec.backend!r} has none (name the deployment with --uri "
                        "postgresql://... or DATABASE_URL)", ExitCode.USAGE)
    return spec


@contextlib.contextmanager
def _deployment(deployed: Connection, to_shards: str) -> Iterator[Any]:
    """The reshard of the named deployment (old list) to ``to_shards`` (new list), both
    adapters closed afterwards."""
    from backends.migrate.shards import Reshard

    new_list = _new_list(to_shards)
    spec = _sharded(deployed)
    # the same backend and location (no second detection), the new list in place of the old
    moved = Connection(spec.backend, spec.uri, shards=",".join(new_list))
    with deployed.open() as old, moved.open() as new:
        yield Reshard(old, new)


@contextlib.contextmanager
def _existing(path: str, reshard: Any) -> Iterator[Any]:
    """The state file, refused (exit 2) when missing or another reshard's; a claim in
    the block refused with exit 3 while another process runs it."""
    from backends.migrate import StateBusy, StateMismatch
    from backends.migrate.shards import read_state

    try:
        state = read_state(path, reshard)
    except StateMismatch as exc:
        current().abort(str(exc).replace("'semvecctl migrate run", "'semvecctl shards run")
                        .replace("'migrate run --state'", "'shards run --state'"),
                        ExitCode.USAGE, cause=None)
    try:
        yield state
    except StateBusy as exc:
        current().abort(str(exc), ExitCode.ENVIRONMENT, cause=None)
    finally:
        state.close()


def _lists(reshard: Any) -> str:
    return (f"[{', '.join(reshard.old_shards) or 'primary only'}] -> "
            f"[{', '.join(reshard.new_shards) or 'primary only'}]")


# -- plan ------------------------------------------------------------------------------


@app.command("plan")
@store_command(adapter=False)
def plan_reshard(*, to_shards: str = ToShardsOpt, conn: Connection,
                 output: Output = OutputFormat.table) -> None:
    """What changing the shard list would move (read-only).

    Sessions per shard now and after, the moves (sessions whose shard changes) and their
    bytes, the events and items that go with them, the new databases' health and tables,
    and a bulk-pass estimate from a timed sample of reads. Writes nothing.
    """
    from backends.migrate.shards import plan_reshard as plan

    out = current().output
    with _deployment(conn, to_shards) as reshard:
        report = plan(reshard)
    if output != OutputFormat.table:
        out.emit(report, output)
        return
    rows = [("deployment", f"{report['backend']} {report['primary']}"),
            ("shard lists", _lists(reshard)),
            ("sessions", report["sessions"]),
            ("now", ", ".join(f"{r['shard']}: {r['sessions']}" for r in report["now"])),
            ("after", ", ".join(f"{r['shard']}: {r['sessions']}" for r in report["after"])),
            ("moves", f"{report['moves']} session(s), {report['bytes_to_move']} byte(s)"),
            ("events", f"{report['events_to_move']} of {report['users_with_moving_events']} user(s)"),
            ("items", "-" if report["items_to_move"] is None else report["items_to_move"]),
            ("new list needs", "; ".join(report["requirements"]) or "nothing missing"),
            ("estimate", "-" if report["estimate_bulk_seconds"] is None else
             f"bulk pass ~{report['estimate_bulk_seconds']}s (reads at "
             f"~{report['estimate_read_rate_per_s']}/s over {report['sample_sessions']} sessions)")]
    out.table([Column("CHECK", lambda r: r[0]), Column("RESULT", lambda r: r[1])], rows)
    for db in report["new_databases"]:
        tables = ", ".join(f"{t} {'yes' if ok else 'MISSING'}" for t, ok in db["tables"].items())
        out.info(f"{db['database']} {db['uri']}: reachable {'yes' if db.get('reachable') else 'no'}"
                 + (f", tables: {tables}" if tables else "") + (" (joins)" if db["joins"] else ""))
    for uri_left in report["leaving"]:
        out.info(f"leaves the list: {uri_left} (its moved copies stay until doctor removes them)")


# -- run -------------------------------------------------------------------------------


@app.command("run")
@store_command(adapter=False)
def run_reshard(*, to_shards: str = ToShardsOpt, state_file: str = StateOpt,
                conn: Connection, follow: bool = FollowOpt,
                interval: float = IntervalOpt, max_passes: Optional[int] = MaxPassesOpt,
                batch_size: int = BatchOpt, apply: Apply = False, yes: Yes = False,
                metrics_file: MetricsFile = None, output: Output = OutputFormat.table) -> None:
    """Copy the sessions whose shard changes to their new shard, while the engine keeps
    writing on the old list: a bulk pass, then with --follow catch-up passes.

    Preview unless --apply. Each moved session goes with its events and (pgvector) items;
    nothing is written on the old shards. The state file records every step, so the same
    command continues after any interruption, SIGKILL included. A row someone else wrote
    on a new shard under a moved id is a conflict: reported (exit 1), never overwritten.
    """
    from backends.migrate.shards import SETTINGS

    from semvecctl.metrics import recorder

    apply = current().wants_apply(apply=apply, yes=yes)
    metrics = recorder(metrics_file, "shards run")
    out = current().output
    resuming = resumes(state_file)
    with _deployment(conn, to_shards) as reshard:
        if resuming:  # another reshard's file, or one another process runs: refused first
            source, target = reshard.fingerprints()
            refuse_foreign_state(state_file, source=source, target=target, settings=SETTINGS,
                                 claim=apply)
        what = (f"copy the sessions whose shard changes ({_lists(reshard)}) to their new shard"
                + (" and keep following" if follow else ""))
        if reshard.unchanged:
            out.info("the new list names the same databases in the same order: no session moves")
        if not apply:
            out.info(f"preview: would {what}; state file {state_file} "
                     f"({'resumed' if resuming else 'created'}). Rerun with --apply to start")
            return
        current().confirm(what, yes=yes)
        results = _move_sessions(reshard, state_file, follow, interval, max_passes, batch_size,
                                 output, metrics)
    refuse_conflicts(results, "a new shard", "shards")


def _move_sessions(reshard: Any, state_file: str, follow: bool, interval: float,
                   max_passes: Optional[int], batch_size: int, output: OutputFormat,
                   metrics: Any) -> list[Any]:
    """The passes of an applied run on the state file it opens or resumes, counted in the
    metrics and shown as progress; a finished reshard is refused (exit 2), one another
    process runs exits 3, and the file is closed however the passes end."""
    from backends.migrate import StateBusy
    from backends.migrate.shards import open_state, reshard_migration
    from backends.migrate.shards import run_reshard as run_moves

    out = current().output
    state = open_state(state_file, reshard)
    try:
        if state.phase in ("cut-over", "aborted"):
            current().abort(f"this reshard is {state.phase}; start another with a new "
                            "--state file", ExitCode.USAGE)
        totals = {"passes": 0, "copied": 0, "deleted": 0, "events": 0, "conflicts": 0}
        metrics.track(totals, backend=str(reshard.new.name))
        if state.meta("bulk_done") != "1":  # shards status's total while the bulk pass runs
            from backends.migrate.shards import count_moves

            state.set_meta(source_total=str(count_moves(reshard)))
        with out.progress_task("moving sessions", unit=" sessions") as task:
            mig = reshard_migration(reshard, state, write_batch=batch_size,
                                    progress=task.advance)
            with said_when_interrupted(state, "shards"):
                return run_passes(run_moves, mig, follow, interval, max_passes, output, totals,
                                  scanned="moved sessions scanned", method=False)
    except StateBusy as exc:
        current().abort(str(exc), ExitCode.ENVIRONMENT, cause=None)
    finally:
        state.close()


# -- status ----------------------------------------------------------------------------


@app.command("status")
@store_command(adapter=False)
def reshard_status(*, state_file: str = StateOpt, conn: Connection, watch: Watch = None,
                   output: Output = OutputFormat.table) -> None:
    """Phase, moved sessions copied, remaining, lag, rate, ETA and whether cutover is
    possible (reads the state file only); --watch follows it while a run works.
    --backend/--uri, as the other shards commands take them, are checked to name a SQL
    deployment (exit 2 otherwise) and are not needed."""
    from backends.migrate import StateMismatch

    if conn.backend is not None or conn.uri is not None:
        _sharded(conn)
    try:
        status = status_of(state_file)
    except StateMismatch as exc:
        current().abort(str(exc).replace("migrate run", "shards run"), ExitCode.USAGE, cause=None)
    out = current().output
    if watch is not None:
        from semvecctl.watch import watch as follow

        follow(lambda: status_of(state_file), status_line, every=watch,
               render=lambda status: status_view(status, "reshard status"))
        return
    if output != OutputFormat.table:
        out.emit(status.to_dict(), output)
    else:
        out.table(STATUS_COLUMNS, [status.to_row()])


# -- verify ----------------------------------------------------------------------------


def _render_verify(report: Any, output: OutputFormat) -> None:
    out = current().output
    if output != OutputFormat.table:
        out.emit(report.to_dict(), output)
        return
    rows = [("moved sessions", f"{report.sessions_matched}/{report.sessions_compared} match"),
            ("events", f"{report.events_matched}/{report.events_compared} match "
                       f"({report.users} user(s))"),
            ("not yet copied", report.source_moved), ("differences", report.different),
            ("conflicts", len(report.conflicts)), ("foreign (kept)", len(report.foreign))]
    out.table([Column("CHECK", lambda r: r[0]), Column("RESULT", lambda r: r[1])], rows)
    for line in report.differences:
        out.warn(line)
    for sid, why in report.conflicts:
        out.warn(f"conflict: session {sid!r}: {why}")
    for sid in report.foreign:
        out.info(f"kept: session {sid!r} is on its new shard, written by someone else")


@app.command("verify")
@store_command(adapter=False)
def verify_reshard(*, to_shards: str = ToShardsOpt, state_file: str = StateOpt,
                   conn: Connection, sample: Optional[int] = SampleOpt,
                   output: Output = OutputFormat.table) -> None:
    """Compare the moved sessions on their old and new shards by content (read-only):
    state blob, version, owner, pending message, drift flag; events; items. Exit 1 with
    the differences when they are not identical."""
    from backends.migrate.shards import reshard_migration, verify_reshard as verify

    out = current().output
    with _deployment(conn, to_shards) as reshard, _existing(state_file, reshard) as state:
        report = verify(reshard_migration(reshard, state), reshard, sample=sample)
    _render_verify(report, output)
    if not report.ok:
        current().abort(f"old and new shards differ: {report.different} difference(s), "
                        f"{report.source_moved} change(s) not yet copied, "
                        f"{len(report.conflicts)} conflict(s)", ExitCode.CHECK_FAILED)
    out.success(f"identical: {report.sessions_matched} moved session(s), {report.events_matched} "
                f"event(s) of {report.users} user(s)" + (" (sample)" if report.sampled else ""))
    if report.withheld or report.withheld_events:
        out.info(f"withheld by the erasure ledger, absent on the target as they should be: "
                 f"{report.withheld} session(s), {report.withheld_events} event(s)")


# -- cutover ---------------------------------------------------------------------------


@app.command("cutover")
@store_command(adapter=False)
def cutover_reshard(*, to_shards: str = ToShardsOpt, state_file: str = StateOpt,
                    conn: Connection, quiet_window: float = QuietOpt,
                    receipt: Optional[str] = ReceiptOpt, overwrite: Overwrite = False,
                    apply: Apply = False, yes: Yes = False,
                    output: Output = OutputFormat.table, sign_with: SignWith = None) -> None:
    """After the writers stop: a final pass, a quiet window and a full verify of the moves.

    Exit 0 means: switch the engine's SEMVEC_STATE_DB_SHARDS to the printed value now
    (printed redacted: put the DSNs with their credentials), and a JSON receipt is
    written. Exit 1 while writers still change moved sessions (no receipt). After the
    switch the old copies are misplaced rows: 'semvecctl doctor --fix --apply' removes
    them. Preview unless --apply.
    """
    from backends.migrate.shards import cutover_reshard as cutover
    from backends.migrate.shards import reshard_migration
    from backends.migrate import write_receipt

    apply = current().wants_apply(apply=apply, yes=yes)
    out = current().output
    key = signing_key(sign_with, receipt)  # checked before a store is opened
    receipt = receipt or f"{state_file}.receipt.json"
    current().may_replace(receipt, overwrite=overwrite, option="--receipt")
    with _deployment(conn, to_shards) as reshard, _existing(state_file, reshard) as state:
        if state.phase == "aborted":
            current().abort("this reshard was aborted; nothing to cut over", ExitCode.USAGE)
        what = f"run the final pass of the reshard {_lists(reshard)} and verify it"
        if not apply:
            out.info(f"preview: would {what}, after a {quiet_window:g}s quiet window, and write "
                     f"{receipt}. Stop the writers first, then rerun with --apply")
            return
        state.claim()  # before asking: refused (exit 3) while another process runs it
        current().confirm(what, yes=yes)
        result = cutover(reshard_migration(reshard, state), reshard, quiet_seconds=quiet_window)
        value = reshard.switch_value
    _render_verify(result.report, output)
    if not result.ok:
        current().abort(f"cutover refused: {result.reason}", ExitCode.CHECK_FAILED)
    write_receipt(receipt, result.receipt)
    sign(receipt, key)
    out.success(f"cutover possible: the {result.report.sessions_matched} moved session(s) and "
                f"{result.report.events_matched} event(s) are identical on their new shards; "
                f"receipt {receipt}")
    _say_switch(reshard, conn, value)


def _say_switch(reshard: Any, conn: Connection, value: str) -> None:
    """The variable to set, exactly (each DSN redacted on its own), then how the old
    copies go: doctor on the new list, and for databases the new list drops (a shrink),
    the exact doctor command that reaches them, since no list names them any more."""
    from backends.migrate.shards import DOCTOR_ADVICE
    from backends.postgres.config import SHARDS_ENV

    out = current().output
    out.info("switch the engine to the new shard list now, before the writers resume "
             "(credentials redacted here: use the DSNs you passed to --to-shards):")
    out.info(f"  {SHARDS_ENV}={value}")
    out.info(f"then: {DOCTOR_ADVICE}")
    same = {_plain_scheme(dsn) for dsn in reshard.new_shards}
    if any(_plain_scheme(dsn) not in same for dsn in reshard.old_shards):
        out.info("the new list drops database(s) that hold the moved sessions' old copies; "
                 "once the engine runs on the new list, remove them with: semvecctl --shards "
                 f"'{','.join(reshard.new_shards)}' doctor --uri {conn.display_uri} "
                 f"--shards-from '{','.join(reshard.old_shards)}' --fix --apply")


def _plain_scheme(dsn: str) -> str:
    """A DSN without its scheme: the engine's driver spellings of one database compare equal."""
    return dsn.partition("://")[2]


# -- abort -----------------------------------------------------------------------------


@app.command("abort")
@store_command(adapter=False)
def abort_reshard(*, to_shards: str = ToShardsOpt, state_file: str = StateOpt,
                  conn: Connection, apply: Apply = False,
                  yes: Yes = False, output: Output = OutputFormat.table) -> None:
    """Remove from the new shards the copies this reshard wrote (and only those: each
    session still at the version it wrote, each event it wrote); the old shards are not
    touched. Preview unless --apply."""
    from backends.migrate.shards import abort_reshard as abort, reshard_migration

    apply = current().wants_apply(apply=apply, yes=yes)
    out = current().output
    with _deployment(conn, to_shards) as reshard, _existing(state_file, reshard) as state:
        if state.phase == "cut-over":
            current().abort("this reshard was cut over: the new list is live, so abort would "
                            "delete live sessions; nothing was changed", ExitCode.USAGE)
        mig = reshard_migration(reshard, state)
        plan = abort(mig, apply=False)
        what = (f"remove {len(plan.sessions)} session(s) and {len(plan.events)} event(s) this "
                "reshard copied to the new shards")
        for thing, why in plan.kept:
            out.warn(f"kept: {thing}: {why}")
        if not apply:
            if output != OutputFormat.table:
                out.emit(plan.to_dict(), output)
            out.info(f"preview: would {what}. Rerun with --apply")
            return
        state.claim()
        current().confirm(what, yes=yes)
        from backends.migrate import apply_abort

        apply_abort(mig.target, state, plan)
    if output != OutputFormat.table:
        out.emit(plan.to_dict(), output)
    out.success(f"removed {plan.removed_sessions} session(s) and {plan.removed_events} event(s) "
                "from the new shards; the reshard is aborted")
