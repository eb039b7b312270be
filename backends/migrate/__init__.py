"""Live migration: move a session store between backends while the engine keeps
writing to the source, resumable after any interruption, verified by content, with a
cutover gate. Built on the machinery export, import and copy share (the one loss rule,
strict batched reads, version-checked writes, the verification's comparisons).

Usable without the CLI::

    from backends.migrate import LiveMigration, MigrationState, fingerprint, run_migration
    state = MigrationState.open("m.state", source=fingerprint("redis", redis_label),
                                target=fingerprint("postgres", pg_label))
    mig = LiveMigration(redis_adapter, pg_adapter, state)
    run_migration(mig, follow=True, max_passes=10)
    result = cutover(mig)          # after the writers stop; result.ok and result.receipt
"""

from backends.migrate.checks import check_losses, count_source, plan
from backends.migrate.finish import (
    AbortPlan,
    CutoverResult,
    abort_plan,
    apply_abort,
    cutover,
    switch_settings,
    write_receipt,
)
from backends.migrate.passes import LiveMigration, PassResult, run_migration
from backends.migrate.state import MigrationState, StateBusy, StateMismatch, fingerprint
from backends.migrate.status import MigrationStatus, migration_status
from backends.migrate.verify import LiveVerifyReport, verify_live

__all__ = [
    "AbortPlan", "CutoverResult", "LiveMigration", "LiveVerifyReport", "MigrationState",
    "MigrationStatus", "PassResult", "StateBusy", "StateMismatch", "abort_plan", "apply_abort",
    "check_losses", "count_source", "cutover", "fingerprint", "migration_status", "plan",
    "run_migration", "switch_settings", "verify_live", "write_receipt",
]
