"""Index provisioning: ``validate`` is read-only, ``ensure`` is idempotent and makes
``validate`` pass.

Creating indexes changes the store for everyone, not only for the run's own ids, so
the suite provisions only when told to (``allow_provisioning``). Without it, ``ensure``
runs only when every index already validates, where an idempotent ensure is a no-op.
"""

from __future__ import annotations

import time

from backends.conformance.catalogue import case
from backends.conformance.context import CaseContext
from backends.conformance.model import NotApplicable

#: Statuses that need no provisioning: ready, informational, or not possible here.
_SETTLED = ("ok", "extra", "unsupported")
_MUTATING = ("create", "recreate", "update")
_PENDING_WAIT = 60.0


def _validate(ctx: CaseContext, label: str) -> list:
    return list(ctx.call(label, lambda: ctx.adapter.validate_indexes(
        dimensions=ctx.options.index_dimensions)))


def _verdicts(reports) -> list[tuple[str, str, str]]:
    return sorted((r.target, r.name, r.status) for r in reports)


def _unsettled(reports) -> list[str]:
    return [f"{r.target}/{r.name}: {r.status}" for r in reports if r.status not in _SETTLED]


@case("indexes")
def validate_is_read_only(ctx: CaseContext) -> None:
    """validate twice and a preview ensure change nothing: the verdicts stay the same."""
    first = _validate(ctx, "validate_indexes")
    preview = ctx.call("ensure_indexes(apply=False)", lambda: ctx.adapter.ensure_indexes(
        dimensions=ctx.options.index_dimensions, apply=False))
    applied = [a.name for a in preview if a.applied]
    ctx.expect(not applied, "ensure_indexes(apply=False)", "a preview (nothing applied)",
               f"applied {applied}")
    second = _validate(ctx, "second validate_indexes")
    ctx.expect_equal(_verdicts(second), _verdicts(first), "validate verdicts, before and after")


@case("indexes")
def ensure_is_idempotent(ctx: CaseContext) -> None:
    """After ensure, validate passes, and a second ensure creates nothing."""
    dims = ctx.options.index_dimensions
    before = _validate(ctx, "validate_indexes")
    missing = _unsettled(before)
    if missing and not ctx.options.allow_provisioning:
        raise NotApplicable(
            "indexes are not all provisioned (" + ", ".join(missing[:3]) + "); creating them "
            "changes the store for everyone: allow provisioning to run this case")
    ctx.call("ensure_indexes", lambda: ctx.adapter.ensure_indexes(dimensions=dims, apply=True))
    deadline = time.monotonic() + _PENDING_WAIT
    after = _validate(ctx, "validate_indexes after ensure")
    while any(r.status == "pending" for r in after) and time.monotonic() < deadline:
        time.sleep(1.0)
        after = _validate(ctx, "validate_indexes after ensure")
    ctx.expect(not _unsettled(after), "validate_indexes after ensure", "every index ok",
               ", ".join(_unsettled(after)))
    again = ctx.call("second ensure_indexes", lambda: ctx.adapter.ensure_indexes(
        dimensions=dims, apply=True))
    changed = [f"{a.target}/{a.name}: {a.action}" for a in again
               if a.action in _MUTATING and a.applied]
    ctx.expect(not changed, "second ensure_indexes", "nothing created or changed",
               ", ".join(changed))
