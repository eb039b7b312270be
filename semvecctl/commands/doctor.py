"""``semvecctl doctor``: a read-only, streaming consistency audit of a store.

One finding per problem (severity, section, where, what, why, repair). Exit 0 when no
finding is an error (warnings and advice allowed), 1 otherwise. ``--fix`` shows the
repair plan; ``--fix --apply`` performs only the repairs that cannot lose data, reports
each, re-reads the place it repaired, then audits the whole store again: the exit code and
the repaired count are those of that re-audit (a repair it finds undone is not counted).
On a sharded SQL deployment every database is audited, and rows the routing never reads
(misplaced, duplicate or conflicting sessions, events and items away from their shard)
are findings with their own repairs (:mod:`backends.postgres.relocation`). The audit logic is
in :mod:`backends.ops.doctor`.
"""


from typing import Any, Iterator

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.metrics import recorder
from semvecctl.options import (BatchSize, MetricsFile, store_command, StreamOutput, Timeout, Yes)
from semvecctl.output import Column, StreamFormat

NAME = "doctor"
HELP = help_of(NAME)

_COLUMNS = [
    Column("SEVERITY", "severity", style="bold"),
    Column("SECTION", "section"),
    Column("CHECK", "check"),
    Column("WHERE", "where"),
    Column("WHAT", "what"),
    Column("REPAIR", "repair"),
]


@store_command()
def app(*,
    conn: Connection,
    fix: bool = typer.Option(False, "--fix", help="Show the repair plan (nothing is written without --apply)."),
    apply: bool = typer.Option(False, "--apply", help="With --fix: perform the repairs that cannot lose data, then audit the whole store again (exit 0 only when that re-audit finds no error). Asks first: --yes answers, required without a terminal (else exit 2)."),
    batch_size: BatchSize = 500,
    timeout: Timeout = 5.0,
    output: StreamOutput = StreamFormat.table,
    yes: Yes = False,
    metrics_file: MetricsFile = None,
) -> None:
    """Audit a store for damage (read-only); --fix shows repairs, --fix --apply makes the safe ones."""
    from backends.ops.doctor import apply_repair, audit, blocking, plan


    if apply and not fix:
        current().abort("--apply only goes with --fix (see the plan first)", ExitCode.USAGE)
    apply = current().wants_apply(apply=apply, yes=yes, option="--fix --apply")
    out = current().output
    metrics = recorder(metrics_file, NAME)
    spec = conn.spec
    if apply:
        current().confirm(f"make the safe repairs doctor finds in {spec.display_uri}", yes=yes)
    counts = {"error": 0, "warning": 0, "info": 0, "repaired": 0, "blocking": 0}
    checks: dict[tuple[str, str], int] = {}  # findings by (check, severity), for the metrics
    metrics.track(counts, backend=spec.backend).track(checks)
    reaudit: dict[str, int] | None = None
    with conn.open() as adapter_obj, out.progress_task("auditing", unit=" keys") as task:
        findings = audit(adapter_obj, batch=batch_size, timeout=timeout, progress=task.set)
        claimed: set[tuple[str, str]] = set()  # what this run says it repaired
        listed_places: set[tuple[str, str]] = set()  # what the first pass showed

        def rows() -> Iterator[dict[str, Any]]:
            nonlocal reaudit
            attempted = 0
            for finding in findings:
                if fix:
                    (apply_repair if apply else plan)(finding)
                attempted += apply and finding.safe
                counts[finding.severity.value] += 1
                key = (finding.check, finding.severity.value)
                checks[key] = checks.get(key, 0) + 1
                if finding.outcome == "repaired":
                    counts["repaired"] += 1
                    claimed.add((finding.check, finding.where))
                counts["blocking"] += blocking(finding)
                if apply:
                    listed_places.add((finding.check, finding.where))
                yield finding.to_dict()
            if not attempted:
                return
            # the proof: the whole store audited again, read-only. What a repair claimed
            # and the re-audit still finds is not repaired; a repairable problem, or any
            # problem the first pass did not show (never reached, or new), is listed too;
            # one that needs a human and was listed above is counted, not listed twice.
            reaudit = {"error": 0, "warning": 0, "info": 0, "remaining": 0, "blocking": 0,
                       "false_claims": 0}
            for again in audit(adapter_obj, batch=batch_size, timeout=timeout,
                               progress=task.set):
                reaudit[again.severity.value] += 1
                reaudit["blocking"] += blocking(again)
                place = (again.check, again.where)
                if place in claimed:
                    reaudit["false_claims"] += 1
                if again.safe or place in claimed or place not in listed_places:
                    reaudit["remaining"] += 1
                    again.outcome = "remains after the re-audit"
                    yield again.to_dict()
            counts["repaired"] -= reaudit["false_claims"]
            counts["blocking"] = reaudit["blocking"]

        columns = _COLUMNS + ([Column("OUTCOME", "outcome")] if fix else [])
        if output in (StreamFormat.json, StreamFormat.yaml):  # streamed, totals after

            def totals() -> dict[str, Any]:
                body: dict[str, Any] = {"summary": dict(counts)}
                if reaudit is not None:
                    body["reaudit"] = dict(reaudit)
                return body

            out.stream_document({"backend": adapter_obj.name, "uri": spec.display_uri},
                                "findings", rows(), totals, output)
        else:
            out.stream(rows(), output, columns)
    summary = (f"{counts['error']} error(s), {counts['warning']} warning(s), "
               f"{counts['info']} note(s)")
    if fix:
        summary += f"; {counts['repaired']} repaired" if apply else "; plan only, nothing written"
    if reaudit is not None:
        summary += (f"; re-audit: {reaudit['error']} error(s), {reaudit['warning']} "
                    f"warning(s); {reaudit['remaining']} listed as remaining")
    out.info(f"{summary} {task.summary()}")
    if counts["blocking"]:
        current().abort(f"{counts['blocking']} finding(s) at error severity remain",
                        ExitCode.CHECK_FAILED)
