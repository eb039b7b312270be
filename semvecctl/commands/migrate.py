"""``semvecctl migrate plan|run|status|verify|cutover|abort``: move a live deployment
between backends while the engine keeps writing to the source.

The work is done by :mod:`backends.migrate`; this module parses, confirms, renders.
``plan``, ``status`` and ``verify`` only read; ``run``, ``cutover`` and ``abort`` preview
unless ``--apply``, then ask (``--yes`` answers). Exit codes: 0 done (or the preview had
nothing in the way); 1 a check failed (a loss refused without ``--allow-loss``, verify or
cutover found differences or active writers, conflicts were found); 2 usage (bad flags,
a state file of another pair, no state file); 3 a backend lacks what is needed; 4 a
backend is unreachable.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection, pair_shards, refuse_unnamed_pair
from semvecctl.live_view import (STATUS_COLUMNS, refuse_conflicts, refuse_foreign_state, resumes,
                                 run_passes, said_when_interrupted, status_line, status_of,
                                 status_view)
from semvecctl.exit_codes import ExitCode
from semvecctl.signing import sign, signing_key
from semvecctl.options import (
    SignWith,
    FromShards,
    ToShards,
    AllowLoss,
    MigrateApply,
    MatchSessions,
    MigrateFrom,
    MigrateFromAdapter,
    MigrateTo,
    MigrateToAdapter,
    MigrationStateFile,
    Output,
    MetricsFile,
    Overwrite,
    Watch,
    SessionOwner,
    SessionUnowned,
    Yes,
)
from semvecctl.output import Column, OutputFormat

NAME = "migrate"
HELP = help_of(NAME)
app = typer.Typer(no_args_is_help=True, help=HELP)

FollowOpt = typer.Option(False, "--follow", help="After the bulk pass, keep copying what changes "
                                                 "on the source (catch-up passes) until interrupted.")
IntervalOpt = typer.Option(1.0, "--interval", min=0.0, max=3600.0, help="Seconds between catch-up passes.")
MaxPassesOpt = typer.Option(None, "--max-passes", min=1, max=1_000_000, show_default=False,
                            help="With --follow: stop after this many passes (default: until interrupted).")
SampleOpt = typer.Option(None, "--sample", min=1, max=100_000_000, show_default=False,
                         help="Compare only the first N sessions (and their users' events): a quick check.")
TtlToleranceOpt = typer.Option(60.0, "--ttl-tolerance", min=0.0, max=86400.0,
                               help="Seconds two expiry times may differ and still match.")
QuietOpt = typer.Option(2.0, "--quiet-window", min=0.0, max=3600.0,
                        help="Seconds the source must stay unchanged after the final pass.")
ReceiptOpt = typer.Option(None, "--receipt", show_default=False,
                          help="Where the JSON receipt goes (default: the state file's name + .receipt.json).")


# -- the two stores and the state file -----------------------------------------------------


class _Pair:
    def __init__(self, from_uri: Optional[str], to_uri: Optional[str], from_adapter: Optional[str],
                 to_adapter: Optional[str], owner: Optional[str] = None, unowned: bool = False,
                 need_source: bool = True, shards: tuple[Any, Any] = (None, None)) -> None:
        refuse_unnamed_pair(from_uri, to_uri, from_adapter, to_adapter, verb="migrate",
                            need_source=need_source)
        self.source_conn = (Connection(None, from_uri, from_adapter, owner=owner, unowned=unowned,
                                       shards=shards[0])
                            if (from_uri or from_adapter) else None)
        self.target_conn = Connection(None, to_uri, to_adapter, shards=shards[1])
        self.scope = self.source_conn.scope if self.source_conn is not None else None

    @staticmethod
    def label(conn: Connection) -> str:
        spec = conn.spec
        if spec.adapter_factory and not spec.uri:
            return f"adapter {spec.adapter_factory}"
        shards = spec.display_shards
        return f"{spec.display_uri} shards {shards}" if shards else spec.display_uri

    def fingerprints(self) -> tuple[str | None, str]:
        from backends.migrate import fingerprint

        src = (None if self.source_conn is None else
               fingerprint(self.source_conn.spec.backend, self.label(self.source_conn)))
        return src, fingerprint(self.target_conn.spec.backend, self.label(self.target_conn))

    @contextlib.contextmanager
    def open(self) -> Iterator[tuple[Any, Any]]:
        assert self.source_conn is not None
        with self.source_conn.open() as source, self.target_conn.open() as target:
            yield source, target


@contextlib.contextmanager
def _existing_state(path: str, pair: _Pair) -> Iterator[Any]:
    """The state file, refused (exit 2) when missing or bound to another pair; a claim
    made in the block (a command about to write) is refused with exit 3 while another
    process runs the migration."""
    from backends.migrate import MigrationState, StateBusy, StateMismatch

    source_fp, target_fp = pair.fingerprints()
    try:
        state = MigrationState.read(path, source=source_fp, target=target_fp)
    except StateMismatch as exc:
        current().abort(str(exc), ExitCode.USAGE, cause=None)
    try:
        yield state
    except StateBusy as exc:
        current().abort(str(exc), ExitCode.ENVIRONMENT, cause=None)
    finally:
        state.close()


def _migration(source: Any, target: Any, state: Any, progress: Any = None) -> Any:
    from backends.migrate import LiveMigration

    scope, match = state.filters
    return LiveMigration(source, target, state, owner_subject=scope, match=match, progress=progress)


# -- plan ----------------------------------------------------------------------------------


@app.command("plan")
def plan_migration(from_uri: MigrateFrom = None, to_uri: MigrateTo = None,
                   from_adapter: MigrateFromAdapter = None, to_adapter: MigrateToAdapter = None,
                   owner: SessionOwner = None, unowned: SessionUnowned = False,
                   match: MatchSessions = None, output: Output = OutputFormat.table,
                   from_shards: FromShards = None, to_shards: ToShards = None) -> None:
    """Preflight both stores and count what would move (read-only).

    Health of both sides, what the target needs (indexes, restore at a version), counts
    (sessions per owner, events and counters per user, items), what the target cannot
    keep (the loss rule of 'sessions copy'), and a bulk-pass estimate from a timed
    sample of source reads. Writes nothing.
    """
    from backends.migrate import plan

    pair = _Pair(from_uri, to_uri, from_adapter, to_adapter, owner, unowned,
                 shards=pair_shards(from_shards, to_shards))
    out = current().output
    with pair.open() as (source, target):
        report = plan(source, target, owner_subject=pair.scope, match=match)
    report["from"], report["to"] = pair.label(pair.source_conn), pair.label(pair.target_conn)
    if output != OutputFormat.table:
        out.emit(report, output)
        return
    rows = [
        ("from", f"{report['source']['backend']} {report['from']} (healthy: "
                 f"{'yes' if report['source']['healthy'] else 'no'})"),
        ("to", f"{report['target']['backend']} {report['to']} (healthy: "
               f"{'yes' if report['target']['healthy'] else 'no'})"),
        ("sessions", report["sessions"]),
        ("owners", ", ".join(f"{k}: {v}" for k, v in sorted(report["owners"].items())) or "-"),
        ("events", f"{report['events']} of {len(report['users'])} user(s)"),
        ("items", report["items"]),
        ("cannot keep", "; ".join(report["losses"]) or "nothing"),
        ("target needs", "; ".join(report["target_requirements"]) or "nothing missing"),
        ("privileges", report["privileges"]),
        ("estimate", "-" if report["estimate_bulk_seconds"] is None else
         f"bulk pass ~{report['estimate_bulk_seconds']}s (source reads at "
         f"~{report['estimate_read_rate_per_s']}/s over {report['sample_sessions']} sessions)"),
    ]
    out.table([Column("CHECK", lambda r: r[0]), Column("RESULT", lambda r: r[1])], rows)
    for user, facts in report["users"].items():
        out.info(f"user {user!r}: {facts['events']} event(s), counter {facts['counter']}")


# -- run -----------------------------------------------------------------------------------


@app.command("run")
def run_migration(state_file: MigrationStateFile, from_uri: MigrateFrom = None,
                  to_uri: MigrateTo = None, from_adapter: MigrateFromAdapter = None,
                  to_adapter: MigrateToAdapter = None, owner: SessionOwner = None,
                  unowned: SessionUnowned = False, match: MatchSessions = None,
                  follow: bool = FollowOpt, interval: float = IntervalOpt,
                  max_passes: Optional[int] = MaxPassesOpt, allow_loss: AllowLoss = False,
                  apply: MigrateApply = False, yes: Yes = False, metrics_file: MetricsFile = None,
                  output: Output = OutputFormat.table, from_shards: FromShards = None,
                  to_shards: ToShards = None) -> None:
    """Copy the source into the target: a bulk pass, then with --follow catch-up passes.

    Preview unless --apply. The state file records every step (SQLite transactions), so
    the same command continues after any interruption, SIGKILL included, with nothing
    lost or duplicated. Changes are found by a version scan of the source, or with
    --follow through Redis keyspace notifications where the server publishes them, or
    MongoDB change streams on a replica set or mongos (each pass line says which). A
    session someone else wrote on the target is a conflict: reported (exit 1), never
    overwritten.
    """
    from backends.migrate import MigrationState, check_losses

    from semvecctl.metrics import recorder

    apply = current().wants_apply(apply=apply, yes=yes)
    metrics = recorder(metrics_file, "migrate run")
    pair = _Pair(from_uri, to_uri, from_adapter, to_adapter, owner, unowned,
                 shards=pair_shards(from_shards, to_shards))
    out = current().output
    settings = MigrationState.settings_for(pair.scope, match)
    source_fp, target_fp = pair.fingerprints()
    resuming = resumes(state_file)
    if resuming:  # another pair, or (to apply) one another process runs: refused first
        refuse_foreign_state(state_file, source=source_fp, target=target_fp,
                             settings=settings, claim=apply)
    with pair.open() as (source, target):
        for warning in check_losses(source, target, allow_loss=allow_loss,
                                    owner_subject=pair.scope, match=match):
            out.warn(warning)
        src_label, dst_label = pair.label(pair.source_conn), pair.label(pair.target_conn)
        what = (f"copy sessions and events from {source.name} ({src_label}) into {target.name} "
                f"({dst_label})" + (" and keep following" if follow else ""))
        if not apply:
            out.info(f"preview: would {what}; state file {state_file} "
                     f"({'resumed' if resuming else 'created'}). Rerun with --apply to start")
            return
        current().confirm(what, yes=yes)
        labels = None if resuming else {"source": src_label, "target": dst_label,
                                        "source_backend": source.name,
                                        "target_backend": target.name}
        state = _run_state(state_file, (source_fp, target_fp), settings, labels)
        results = _copy_passes(source, target, state, follow, interval, max_passes, output,
                               metrics)
    refuse_conflicts(results, "the target", "migrate")


def _run_state(state_file: str, fingerprints: tuple[Any, str], settings: dict[str, Any],
               labels: dict[str, str] | None) -> Any:
    """The state file an applied run records into, resumed or created (with both stores'
    labels); a migration already cut over or aborted is refused (exit 2)."""
    from backends.migrate import MigrationState

    source_fp, target_fp = fingerprints
    state = MigrationState.open(state_file, source=source_fp, target=target_fp,
                                settings=settings, labels=labels)
    phase = state.phase
    if phase in ("cut-over", "aborted"):
        state.close()
        current().abort(f"this migration is {phase}; start another with a new --state file",
                        ExitCode.USAGE)
    return state


def _copy_passes(source: Any, target: Any, state: Any, follow: bool, interval: float,
                 max_passes: Optional[int], output: OutputFormat, metrics: Any) -> list[Any]:
    """The bulk pass and any catch-up passes, counted in the metrics; the state file is
    closed however they end."""
    from backends.migrate import run_migration as run
    from backends.transfer.progress import store_count

    totals = {"passes": 0, "copied": 0, "deleted": 0, "events": 0, "conflicts": 0}
    metrics.track(totals, backend=target.name)
    try:
        if state.meta("bulk_done") != "1":  # status's total until the bulk pass has seen all
            counted = store_count(source, owner_subject=state.filters[0], match=state.filters[1])
            if counted is not None:
                state.set_meta(source_total=str(counted))
        with said_when_interrupted(state, "migrate"):
            return run_passes(run, _migration(source, target, state), follow, interval,
                              max_passes, output, totals)
    finally:
        state.close()


# -- status --------------------------------------------------------------------------------


@app.command("status")
def migration_status(state_file: MigrationStateFile, watch: Watch = None,
                     output: Output = OutputFormat.table) -> None:
    """Phase, copied, remaining, lag, rate, ETA and whether cutover is possible (reads
    the state file only); --watch follows it while a run works."""
    from backends.migrate import StateMismatch

    try:
        status = status_of(state_file)
    except StateMismatch as exc:
        current().abort(str(exc), ExitCode.USAGE, cause=None)
    out = current().output
    if watch is not None:
        from semvecctl.watch import watch as follow

        follow(lambda: status_of(state_file), status_line, every=watch,
               render=lambda status: status_view(status, "migration status"))
        return
    if output != OutputFormat.table:
        out.emit(status.to_dict(), output)
    else:
        out.table(STATUS_COLUMNS, [status.to_row()])


# -- verify --------------------------------------------------------------------------------


@app.command("verify")
def verify_migration(state_file: MigrationStateFile, from_uri: MigrateFrom = None,
                     to_uri: MigrateTo = None, from_adapter: MigrateFromAdapter = None,
                     to_adapter: MigrateToAdapter = None, sample: Optional[int] = SampleOpt,
                     ttl_tolerance: float = TtlToleranceOpt,
                     output: Output = OutputFormat.table, from_shards: FromShards = None,
                     to_shards: ToShards = None) -> None:
    """Compare source and target by content (read-only); exit 1 with the differences
    when convergence cannot be claimed.

    Per session: blob digest, version, owner, pending message, drift flag, expiry
    (within --ttl-tolerance). Per user: every event (ids, content, order) and the counter.
    """
    from backends.migrate import verify_live

    pair = _Pair(from_uri, to_uri, from_adapter, to_adapter,
                 shards=pair_shards(from_shards, to_shards))
    out = current().output
    with _existing_state(state_file, pair) as state, pair.open() as (source, target):
        scope, match = state.filters
        report = verify_live(source, target, state, owner_subject=scope, match=match,
                             sample=sample, ttl_tolerance=ttl_tolerance)
    _render_verify(report, output)
    if not report.ok:
        current().abort(f"source and target differ: {report.different} difference(s), "
                        f"{report.source_moved} change(s) not yet copied, "
                        f"{len(report.conflicts)} conflict(s)", ExitCode.CHECK_FAILED)
    out.success(f"identical: {report.sessions_matched} session(s), {report.events_matched} "
                f"event(s) of {report.users} user(s)" + (" (sample)" if report.sampled else ""))
    if report.withheld or report.withheld_events:
        out.info(f"withheld by the erasure ledger, absent on the target as they should be: "
                 f"{report.withheld} session(s), {report.withheld_events} event(s)")


def _render_verify(report: Any, output: OutputFormat) -> None:
    out = current().output
    if output != OutputFormat.table:
        out.emit(report.to_dict(), output)
        return
    rows = [("sessions", f"{report.sessions_matched}/{report.sessions_compared} match"),
            ("events", f"{report.events_matched}/{report.events_compared} match "
                       f"({report.users} user(s))"),
            ("not yet copied", report.source_moved), ("differences", report.different),
            ("conflicts", len(report.conflicts)),
            ("foreign (kept)", len(report.foreign))]
    out.table([Column("CHECK", lambda r: r[0]), Column("RESULT", lambda r: r[1])], rows)
    for line in report.differences:
        out.warn(line)
    for sid, why in report.conflicts:
        out.warn(f"conflict: session {sid!r}: {why}")
    for sid in report.foreign:
        out.info(f"kept: session {sid!r} is on the target only, written by someone else")


# -- cutover -------------------------------------------------------------------------------


@app.command("cutover")
def cutover_migration(state_file: MigrationStateFile, from_uri: MigrateFrom = None,
                      to_uri: MigrateTo = None, from_adapter: MigrateFromAdapter = None,
                      to_adapter: MigrateToAdapter = None, quiet_window: float = QuietOpt,
                      ttl_tolerance: float = TtlToleranceOpt, receipt: Optional[str] = ReceiptOpt,
                      overwrite: Overwrite = False, apply: MigrateApply = False,
                      yes: Yes = False, output: Output = OutputFormat.table,
                      from_shards: FromShards = None, to_shards: ToShards = None,
                      sign_with: SignWith = None) -> None:
    """After the writers stop: a final pass, a quiet window and a full verify.

    Exit 0 only when source and target are identical and the source did not change
    during the final window (else exit 1: writers are still active, and no receipt);
    prints the settings to switch (secrets redacted) and writes a JSON receipt. Preview
    unless --apply.
    """
    from backends.migrate import cutover, switch_settings, write_receipt

    apply = current().wants_apply(apply=apply, yes=yes)
    pair = _Pair(from_uri, to_uri, from_adapter, to_adapter,
                 shards=pair_shards(from_shards, to_shards))
    out = current().output
    key = signing_key(sign_with, receipt)  # checked before a store is opened
    receipt = receipt or f"{state_file}.receipt.json"
    current().may_replace(receipt, overwrite=overwrite, option="--receipt")
    with _existing_state(state_file, pair) as state, pair.open() as (source, target):
        if state.phase == "aborted":
            current().abort("this migration was aborted; nothing to cut over", ExitCode.USAGE)
        what = (f"run the final pass into {target.name} ({pair.label(pair.target_conn)}) and "
                "verify it")
        if not apply:
            out.info(f"preview: would {what}, after a {quiet_window:g}s quiet window, and write "
                     f"{receipt}. Stop the writers first, then rerun with --apply")
            return
        state.claim()  # before asking: refused (exit 3) while another process runs it
        current().confirm(what, yes=yes)
        switch = switch_settings(target.name, pair.label(pair.target_conn),
                                 adapter=pair.target_conn.spec.adapter_factory)
        result = cutover(_migration(source, target, state), quiet_seconds=quiet_window,
                         ttl_tolerance=ttl_tolerance, switch=switch)
    _render_verify(result.report, output)
    if not result.ok:  # no receipt: nothing was cut over (rerun once the cause is fixed)
        current().abort(f"cutover refused: {result.reason}", ExitCode.CHECK_FAILED)
    write_receipt(receipt, result.receipt)
    sign(receipt, key)
    out.success(f"cutover possible: source and target identical ({result.report.sessions_matched} "
                f"session(s), {result.report.events_matched} event(s)); receipt {receipt}")
    out.info("switch the engine to the target:")
    for key, value in switch.items():
        out.info(f"  {key}={value}")


# -- abort ---------------------------------------------------------------------------------


@app.command("abort")
def abort_migration(state_file: MigrationStateFile, to_uri: MigrateTo = None,
                    to_adapter: MigrateToAdapter = None, apply: MigrateApply = False, yes: Yes = False,
                    output: Output = OutputFormat.table, to_shards: ToShards = None) -> None:
    """Remove from the target what this migration wrote (and only that), using the state
    file: each session still at the version we wrote, each event we wrote. Preview
    unless --apply."""
    from backends.migrate import abort_plan, apply_abort

    apply = current().wants_apply(apply=apply, yes=yes)
    pair = _Pair(None, to_uri, None, to_adapter, need_source=False,
                 shards=pair_shards(None, to_shards))
    out = current().output
    with _existing_state(state_file, pair) as state, pair.target_conn.open() as target:
        if state.phase == "cut-over":
            current().abort("this migration was cut over: the target is the live store now, "
                            "so abort would delete live sessions; nothing was changed",
                            ExitCode.USAGE)
        plan = abort_plan(target, state)
        what = (f"remove {len(plan.sessions)} session(s) and {len(plan.events)} event(s) this "
                f"migration wrote to {target.name} ({pair.label(pair.target_conn)})")
        for thing, why in plan.kept:
            out.warn(f"kept: {thing}: {why}")
        if not apply:
            if output != OutputFormat.table:
                out.emit(plan.to_dict(), output)
            out.info(f"preview: would {what}. Rerun with --apply")
            return
        state.claim()  # before asking: refused (exit 3) while another process runs it
        current().confirm(what, yes=yes)
        apply_abort(target, state, plan)
    if output != OutputFormat.table:
        out.emit(plan.to_dict(), output)
    out.success(f"removed {plan.removed_sessions} session(s) and {plan.removed_events} event(s) "
                "from the target; the migration is aborted")
