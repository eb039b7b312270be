"""``semvecctl doctor``: a read-only, streaming consistency audit of a store.

One finding per problem (severity, section, where, what, why, repair). Exit 0 when no
finding is an error (warnings and advice allowed), 1 otherwise. ``--fix`` shows the
repair plan; ``--fix --apply`` performs only the repairs that cannot lose data, reports
each, re-reads the place it repaired, then audits the whole store again: the exit code and
the repaired count are those of that re-audit (a repair it finds undone is not counted).
On a sharded SQL deployment every database is audited, and rows the routing never reads
(misplaced, duplicate or conflicting sessions, events and items away from their shard)
are findings with their own repairs (:mod:`backends.postgres.relocation`). The audit logic is
in :mod:`backends.ops.doctor` (the run, repairs and re-audit: :mod:`backends.ops.doctor.checkup`).
"""


from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.metrics import recorder
from semvecctl.options import (BatchSize, FixApply, MetricsFile, StreamOutput, Timeout, Yes,
                               store_command)
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
    apply: FixApply = False,
    batch_size: BatchSize = 500,
    timeout: Timeout = 5.0,
    output: StreamOutput = StreamFormat.table,
    yes: Yes = False,
    metrics_file: MetricsFile = None,
    shards_from: Optional[str] = typer.Option(
        None, "--shards-from", metavar="DSN,DSN,...", show_default=False,
        help="A shard list the deployment ran on before (a shrink's old list): its databases "
             "no longer in the list are audited too, and the rows left on them (the moved "
             "sessions' old copies) are findings --fix --apply moves home or removes."),
) -> None:
    """Audit a store for damage (read-only); --fix shows repairs, --fix --apply makes the safe ones."""
    from backends.ops.doctor.checkup import Checkup

    if apply and not fix:
        current().abort("--apply only goes with --fix (see the plan first)", ExitCode.USAGE)
    apply = current().wants_apply(apply=apply, yes=yes, option="--fix --apply")
    out = current().output
    metrics = recorder(metrics_file, NAME)
    spec = conn.spec
    if apply:
        current().confirm(f"make the safe repairs doctor finds in {spec.display_uri}", yes=yes)
    checkup = Checkup(fix=fix, apply=apply, batch=batch_size, timeout=timeout)
    metrics.track(checkup.counts, backend=spec.backend).track(checkup.checks)
    with conn.open() as adapter_obj, out.progress_task("auditing", unit=" keys") as task:
        _retire(adapter_obj, spec.backend, shards_from)
        rows = (f.to_dict() for f in checkup.findings(adapter_obj, progress=task.set))
        if output in (StreamFormat.json, StreamFormat.yaml):  # streamed, totals after
            out.stream_document({"backend": adapter_obj.name, "uri": spec.display_uri},
                                "findings", rows, checkup.totals, output)
        else:
            out.stream(rows, output, _COLUMNS + ([Column("OUTCOME", "outcome")] if fix else []))
    out.info(f"{_summary(checkup)} {task.summary()}")
    if checkup.counts["blocking"]:
        current().abort(f"{checkup.counts['blocking']} finding(s) at error severity remain",
                        ExitCode.CHECK_FAILED)


def _retire(adapter_obj: Any, backend: str, shards_from: Optional[str]) -> None:
    """Add ``--shards-from``'s databases that left the list to the audit (exit 2 on a
    store that has no shard list)."""
    if shards_from is None:
        return
    from backends.registry import fold_name

    from semvecctl.connection import SHARDED_BACKENDS, shard_list

    if fold_name(backend) not in SHARDED_BACKENDS:
        current().abort(f"--shards-from is for a sharded SQL deployment; backend "
                        f"{adapter_obj.name!r} has no shard list", ExitCode.USAGE)
    added = adapter_obj.retire_shards(shard_list(shards_from, "--shards-from"))
    current().output.info(f"--shards-from: {added} database(s) no longer in the shard list "
                          "audited beside it")


def _summary(checkup: Any) -> str:
    counts, reaudit = checkup.counts, checkup.reaudit
    summary = (f"{counts['error']} error(s), {counts['warning']} warning(s), "
               f"{counts['info']} note(s)")
    if checkup.fix:
        summary += f"; {counts['repaired']} repaired" if checkup.apply else "; plan only, nothing written"
    if reaudit is not None:
        summary += (f"; re-audit: {reaudit['error']} error(s), {reaudit['warning']} "
                    f"warning(s); {reaudit['remaining']} listed as remaining")
    return summary
