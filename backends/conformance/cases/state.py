"""The state store's compare-and-set, row and owner rules (the semantics isinstance
cannot see). Every case works on sessions of its own and reads only those."""

from __future__ import annotations

import os
from typing import Any

from backends.conformance.catalogue import case
from backends.conformance.context import CaseContext
from backends.conformance.model import NotApplicable
from backends.contract import ANONYMOUS_OWNER, LoadedState, state_defaults


def loaded_blob(got):
    """The blob of a ``load`` result, whichever shape the adapter returns: the engine's
    ``(blob, version)`` or the older bare bytes."""
    if isinstance(got, tuple):
        return got[0]
    return got


def _full(ctx: CaseContext, sid: str, **owner) -> LoadedState | None:
    return ctx.call(f"load_full({sid!r})", lambda: ctx.store.load_full(sid, **owner))


def _expect_row(ctx: CaseContext, sid: str, check: str, *, blob: bytes, version: int,
                owner: str | None, pending: str | None = None) -> None:
    row = _full(ctx, sid)
    expected = LoadedState(blob, version, owner, pending)
    if row is None:
        ctx.fail(check, _show(expected), "no row")
    actual = LoadedState(bytes(row.blob), row.version, row.owner_subject, row.pending_message)
    if actual != expected:
        ctx.fail(check, _show(expected), _show(actual))


def _show(row: LoadedState) -> str:
    blob = row.blob if len(row.blob) <= 24 else row.blob[:21] + b"..."
    return (f"blob={blob!r} version={row.version!r} owner={row.owner_subject!r} "
            f"pending={row.pending_message!r}")


@case("state")
def insert_creates_version_1(ctx: CaseContext) -> None:
    """expected_version=None inserts the row at version 1."""
    sid = ctx.session()
    version = ctx.call("insert", lambda: ctx.store.save(sid, b"first", expected_version=None))
    ctx.expect_int_version(version, 1, "insert return value")
    _expect_row(ctx, sid, "row after insert", blob=b"first", version=1, owner=None)


@case("state")
def insert_never_overwrites(ctx: CaseContext) -> None:
    """A second insert of an existing session is a conflict and leaves the row as it was."""
    sid = ctx.session()
    owner = ctx.owner("tenant-a")
    ctx.call("first insert", lambda: ctx.store.save(sid, b"original", expected_version=None,
                                                    owner_subject=owner, pending_message="p"))
    ctx.expect_conflict("second insert of the same session",
                        lambda: ctx.store.save(sid, b"overwritten", expected_version=None))
    ctx.expect_conflict("second insert naming the same owner",
                        lambda: ctx.store.save(sid, b"overwritten", expected_version=None,
                                               owner_subject=owner))
    _expect_row(ctx, sid, "row after the refused inserts", blob=b"original", version=1,
                owner=owner, pending="p")


@case("state")
def cas_advances_by_one(ctx: CaseContext) -> None:
    """An update on the exact version succeeds and moves the version by exactly one."""
    sid = ctx.session()
    ctx.call("insert", lambda: ctx.store.save(sid, b"v1", expected_version=None))
    for current in range(1, 5):
        blob = f"v{current + 1}".encode()
        version = ctx.call(f"update at version {current}",
                           lambda: ctx.store.save(sid, blob, expected_version=current))
        ctx.expect_int_version(version, current + 1, f"update at version {current}")
        ctx.expect_equal(ctx.store.current_version(sid), current + 1,
                         f"current_version after the update at version {current}")
    _expect_row(ctx, sid, "row after four updates", blob=b"v5", version=5, owner=None)


@case("state")
def stale_version_conflicts(ctx: CaseContext) -> None:
    """An update naming an older or a future version raises the conflict, changing nothing."""
    sid = ctx.session()
    ctx.call("insert", lambda: ctx.store.save(sid, b"v1", expected_version=None))
    ctx.call("update", lambda: ctx.store.save(sid, b"v2", expected_version=1))
    ctx.expect_conflict("update naming the stale version 1",
                        lambda: ctx.store.save(sid, b"stale", expected_version=1))
    ctx.expect_conflict("update naming the future version 7",
                        lambda: ctx.store.save(sid, b"future", expected_version=7))
    _expect_row(ctx, sid, "row after the refused updates", blob=b"v2", version=2, owner=None)


@case("state")
def missing_row_conflicts(ctx: CaseContext) -> None:
    """An update of a session that does not exist raises the conflict and creates nothing."""
    sid = ctx.session()
    ctx.expect_conflict("update of a missing session",
                        lambda: ctx.store.save(sid, b"ghost", expected_version=1))
    ctx.expect_equal(_full(ctx, sid), None, "load_full after the refused update")


@case("state")
def omitted_owner_clears(ctx: CaseContext) -> None:
    """The row is written whole: a save without an owner clears the stored owner."""
    sid = ctx.session()
    owner = ctx.owner("tenant-a/agent-1")
    ctx.call("insert with an owner", lambda: ctx.store.save(
        sid, b"v1", expected_version=None, owner_subject=owner))
    _expect_row(ctx, sid, "row after an owned insert", blob=b"v1", version=1, owner=owner)
    ctx.call("update without an owner", lambda: ctx.store.save(sid, b"v2", expected_version=1))
    _expect_row(ctx, sid, "row after an update that omits the owner", blob=b"v2", version=2,
                owner=None)


@case("state")
def pending_message_rule(ctx: CaseContext) -> None:
    """An empty pending message is stored as none; an omitted one clears it."""
    sid = ctx.session()
    ctx.call("insert with pending ''", lambda: ctx.store.save(
        sid, b"v1", expected_version=None, pending_message=""))
    _expect_row(ctx, sid, "pending after saving ''", blob=b"v1", version=1, owner=None,
                pending=None)
    ctx.call("update with a pending message", lambda: ctx.store.save(
        sid, b"v2", expected_version=1, pending_message="waiting for the tool ✓"))
    _expect_row(ctx, sid, "pending after saving a message", blob=b"v2", version=2, owner=None,
                pending="waiting for the tool ✓")
    ctx.call("update without a pending message", lambda: ctx.store.save(
        sid, b"v3", expected_version=2))
    _expect_row(ctx, sid, "pending after a save that omits it", blob=b"v3", version=3,
                owner=None, pending=None)


@case("state")
def owner_filter_reads(ctx: CaseContext) -> None:
    """Every read honours the three-state owner filter: omitted, None, an exact owner."""
    owned, unowned = ctx.session("owned"), ctx.session("unowned")
    owner, other = ctx.owner("tenant-a"), ctx.owner("tenant-b")
    ctx.call("insert an owned row", lambda: ctx.store.save(
        owned, b"owned", expected_version=None, owner_subject=owner, pending_message="p"))
    ctx.call("insert an unowned row", lambda: ctx.store.save(
        unowned, b"unowned", expected_version=None))
    # (session, filter label, filter kwargs, visible?)
    matrix: list[tuple[str, str, dict[str, Any], bool]] = [
        (owned, "omitted", {}, True),
        (owned, "None", {"owner_subject": None}, False),
        (owned, "its owner", {"owner_subject": owner}, True),
        (owned, "another owner", {"owner_subject": other}, False),
        (unowned, "omitted", {}, True),
        (unowned, "None", {"owner_subject": None}, True),
        (unowned, "an owner", {"owner_subject": owner}, False),
    ]
    rows = {owned: (b"owned", 1, owner, "p"), unowned: (b"unowned", 1, None, None)}
    for sid, label, kwargs, visible in matrix:
        kind = "owned" if sid == owned else "unowned"
        blob, version, stored_owner, pending = rows[sid]
        where = f"on the {kind} row with the owner filter {label}"
        with ctx.subcheck(f"load {where}"):
            got = ctx.call(f"load {where}", lambda: loaded_blob(ctx.store.load(sid, **kwargs)))
            ctx.expect_equal(bytes(got) if got is not None else None,
                             blob if visible else None, f"load {where}")
        with ctx.subcheck(f"load_full {where}"):
            got = ctx.call(f"load_full {where}", lambda: ctx.store.load_full(sid, **kwargs))
            expected_full = LoadedState(blob, version, stored_owner, pending) if visible else None
            actual_full = (LoadedState(bytes(got.blob), got.version, got.owner_subject,
                                       got.pending_message) if got is not None else None)
            ctx.expect_equal(actual_full, expected_full, f"load_full {where}")
        with ctx.subcheck(f"load_owner {where}"):
            got = ctx.call(f"load_owner {where}", lambda: ctx.store.load_owner(sid, **kwargs))
            ctx.expect_equal(got, stored_owner if visible else None, f"load_owner {where}")
        with ctx.subcheck(f"current_version {where}"):
            got = ctx.call(f"current_version {where}",
                           lambda: ctx.store.current_version(sid, **kwargs))
            ctx.expect_equal(got, version if visible else None, f"current_version {where}")


@case("state")
def owner_filter_deletes(ctx: CaseContext) -> None:
    """delete honours the three-state filter, reports whether it deleted, spares the rest."""
    owner, other = ctx.owner("tenant-a"), ctx.owner("tenant-b")

    def make(label: str, row_owner: str | None) -> str:
        sid = ctx.session(label)
        ctx.call(f"insert {label}", lambda: ctx.store.save(
            sid, label.encode(), expected_version=None, owner_subject=row_owner))
        return sid

    owned = make("owned", owner)
    for label, kwargs in (("another owner", {"owner_subject": other}),
                          ("None", {"owner_subject": None})):
        with ctx.subcheck(f"delete of an owned row with the owner filter {label}"):
            ctx.expect_equal(ctx.call("delete", lambda: ctx.store.delete(owned, **kwargs)),
                             False, f"delete of an owned row with the owner filter {label}")
        ctx.expect_equal(ctx.store.current_version(owned), 1,
                         f"owned row after a delete filtered by {label}")
    ctx.expect_equal(ctx.call("delete", lambda: ctx.store.delete(owned, owner_subject=owner)),
                     True, "delete of an owned row by its owner")
    ctx.expect_equal(ctx.store.load_full(owned), None, "owned row after its owner deleted it")

    unowned = make("unowned", None)
    ctx.expect_equal(ctx.call("delete", lambda: ctx.store.delete(unowned, owner_subject=owner)),
                     False, "delete of an unowned row naming an owner")
    with ctx.subcheck("delete of an unowned row with the owner filter None"):
        ctx.expect_equal(ctx.call("delete", lambda: ctx.store.delete(unowned,
                                                                     owner_subject=None)),
                         True, "delete of an unowned row with the owner filter None")
        ctx.expect_equal(ctx.store.load_full(unowned), None, "unowned row after deleting it")

    admin = make("admin", owner)
    ctx.expect_equal(ctx.call("delete", lambda: ctx.store.delete(admin)), True,
                     "unscoped delete (owner filter omitted) of an owned row")
    ctx.expect_equal(ctx.call("delete", lambda: ctx.store.delete(admin)), False,
                     "delete of a session that no longer exists")


@case("state")
def owner_takeover_refused(ctx: CaseContext) -> None:
    """A save naming an owner cannot update a row owned by someone else."""
    sid = ctx.session()
    owner, intruder = ctx.owner("tenant-a"), ctx.owner("tenant-b")
    ctx.call("insert", lambda: ctx.store.save(sid, b"mine", expected_version=None,
                                              owner_subject=owner))
    ctx.expect_conflict("update naming another owner on the right version",
                        lambda: ctx.store.save(sid, b"taken", expected_version=1,
                                               owner_subject=intruder))
    _expect_row(ctx, sid, "row after the refused takeover", blob=b"mine", version=1, owner=owner)
    version = ctx.call("update by the owner", lambda: ctx.store.save(
        sid, b"mine-2", expected_version=1, owner_subject=owner))
    ctx.expect_int_version(version, 2, "update by the row's own owner")


@case("state")
def adopt_unowned_row(ctx: CaseContext) -> None:
    """A save naming an owner may adopt a row that has no owner."""
    sid = ctx.session()
    owner = ctx.owner("tenant-a")
    ctx.call("insert unowned", lambda: ctx.store.save(sid, b"free", expected_version=None))
    version = ctx.call("update naming an owner", lambda: ctx.store.save(
        sid, b"adopted", expected_version=1, owner_subject=owner))
    ctx.expect_int_version(version, 2, "adopting update")
    _expect_row(ctx, sid, "row after adoption", blob=b"adopted", version=2, owner=owner)


@case("state")
def load_full_agrees(ctx: CaseContext) -> None:
    """load_full reports what load, current_version and load_owner report, row or no row."""
    sid = ctx.session()
    owner = ctx.owner("tenant-a")
    ctx.call("insert", lambda: ctx.store.save(sid, b"a", expected_version=None))
    ctx.call("update", lambda: ctx.store.save(sid, b"b", expected_version=1, owner_subject=owner,
                                              pending_message="next"))
    full = _full(ctx, sid)
    if full is None:
        ctx.fail("load_full of an existing row", "a LoadedState", "None")
    ctx.expect_equal(bytes(full.blob), bytes(loaded_blob(ctx.store.load(sid))), "load_full.blob against load")
    ctx.expect_equal(full.version, ctx.store.current_version(sid),
                     "load_full.version against current_version")
    ctx.expect_equal(full.owner_subject, ctx.store.load_owner(sid),
                     "load_full.owner_subject against load_owner")
    ctx.expect_equal(full.pending_message, "next", "load_full.pending_message")
    missing = ctx.session("missing")
    for name in ("load", "load_full", "load_owner", "current_version"):
        got = ctx.call(f"{name} of a missing session", lambda: getattr(ctx.store, name)(missing))
        ctx.expect_equal(got, None, f"{name} of a missing session")


@case("state")
def blob_fidelity(ctx: CaseContext) -> None:
    """Blobs are opaque bytes: every byte value, NULs, an empty and a large blob round-trip."""
    blobs = {
        "every byte value": bytes(range(256)) * 4,
        "NULs and high bytes": b"\x00\xff\x00\xfe\r\n\x00",
        "empty": b"",
        "256 KiB random": os.urandom(256 * 1024),
    }
    for label, blob in blobs.items():
        sid = ctx.session("blob")
        ctx.call(f"insert the {label} blob", lambda: ctx.store.save(
            sid, blob, expected_version=None))
        got = ctx.call(f"load the {label} blob", lambda: loaded_blob(ctx.store.load(sid)))
        if got is None or bytes(got) != blob:
            ctx.fail(f"round trip of the {label} blob", f"{len(blob)} identical bytes",
                     "None" if got is None else f"{len(got)} bytes, differing")


@case("state")
def session_id_fidelity(ctx: CaseContext) -> None:
    """Session ids with separators, spaces and non-ASCII are kept apart and exact."""
    sids = [ctx.session(label) for label in ("a:b", "a/b", "a b", "ünï-☃", "a{b}")]
    for n, sid in enumerate(sids):
        ctx.call(f"insert {sid!r}", lambda: ctx.store.save(
            sid, f"blob-{n}".encode(), expected_version=None))
    for n, sid in enumerate(sids):
        got = ctx.call(f"load {sid!r}", lambda: loaded_blob(ctx.store.load(sid)))
        ctx.expect_equal(bytes(got) if got is not None else None, f"blob-{n}".encode(),
                         f"load of session id {sid!r}")


@case("state")
def anonymous_owner_is_an_owner(ctx: CaseContext) -> None:
    """The engine's '__anonymous__' owner is stored as an ordinary owner, not as none."""
    sid = ctx.session()
    ctx.call("insert owned by __anonymous__", lambda: ctx.store.save(
        sid, b"anon", expected_version=None, owner_subject=ANONYMOUS_OWNER))
    ctx.expect_equal(ctx.call("load_owner", lambda: ctx.store.load_owner(sid)), ANONYMOUS_OWNER,
                     "stored owner of a row saved by '__anonymous__'")
    with ctx.subcheck("the '__anonymous__' row read with the owner filter None"):
        ctx.expect_equal(ctx.call("load_full",
                                  lambda: ctx.store.load_full(sid, owner_subject=None)),
                         None, "the '__anonymous__' row read with the owner filter None")
    got = ctx.call("load", lambda: loaded_blob(ctx.store.load(sid, owner_subject=ANONYMOUS_OWNER)))
    ctx.expect_equal(bytes(got) if got is not None else None, b"anon",
                     "the '__anonymous__' row read as '__anonymous__'")
    ctx.expect_conflict("update naming another owner of the '__anonymous__' row",
                        lambda: ctx.store.save(sid, b"taken", expected_version=1,
                                               owner_subject=ctx.owner("tenant-a")))


@case("state")
def tenants_with_identical_rows(ctx: CaseContext) -> None:
    """Two tenants' sessions with identical blobs and pending messages stay apart."""
    owner_a, owner_b = ctx.owner("tenant-a"), ctx.owner("tenant-b")
    sid_a, sid_b = ctx.session("a"), ctx.session("b")
    for sid, owner in ((sid_a, owner_a), (sid_b, owner_b)):
        ctx.call(f"insert for {owner}", lambda: ctx.store.save(
            sid, b"identical blob", expected_version=None, owner_subject=owner,
            pending_message="identical pending"))
    for sid, mine, theirs in ((sid_a, owner_a, owner_b), (sid_b, owner_b, owner_a)):
        got = ctx.call("load_full by its owner",
                       lambda: ctx.store.load_full(sid, owner_subject=mine))
        ctx.expect(got is not None and got.owner_subject == mine,
                   f"the session of {mine} read by its owner", f"owner {mine}",
                   None if got is None else f"owner {got.owner_subject}")
        ctx.expect_equal(ctx.call("load_full by the other tenant",
                                  lambda: ctx.store.load_full(sid, owner_subject=theirs)),
                         None, f"the session of {mine} read by {theirs}")
        ctx.expect_equal(loaded_blob(ctx.call("load by the other tenant", lambda: ctx.store.load(
            sid, owner_subject=theirs))), None, f"load of the session of {mine} by {theirs}")
    ctx.expect_conflict("tenant b updating tenant a's identical row",
                        lambda: ctx.store.save(sid_a, b"identical blob", expected_version=1,
                                               owner_subject=owner_b,
                                               pending_message="identical pending"))
    ctx.expect_equal(ctx.call("delete by the other tenant", lambda: ctx.store.delete(
        sid_a, owner_subject=owner_b)), False, "tenant b deleting tenant a's identical row")
    ctx.expect_equal(ctx.call("delete by its owner", lambda: ctx.store.delete(
        sid_a, owner_subject=owner_a)), True, "tenant a deleting its own row")
    _expect_row(ctx, sid_b, "tenant b's row after tenant a's identical row was deleted",
                blob=b"identical blob", version=1, owner=owner_b, pending="identical pending")


@case("state")
def delete_checks_version(ctx: CaseContext) -> None:
    """delete(expected_version=N) deletes only a row still at N; a moved row is a conflict."""
    if not ctx.store.deletes_by_version:
        raise NotApplicable("delete() takes no expected_version (no version-checked delete)")
    sid = ctx.session()
    ctx.call("insert", lambda: ctx.store.save(sid, b"v1", expected_version=None))
    ctx.call("update", lambda: ctx.store.save(sid, b"v2", expected_version=1))
    ctx.expect_conflict("delete naming the stale version 1",
                        lambda: ctx.store.delete(sid, expected_version=1))
    _expect_row(ctx, sid, "row after the refused delete", blob=b"v2", version=2, owner=None)
    ctx.expect_equal(ctx.call("delete at the current version",
                              lambda: ctx.store.delete(sid, expected_version=2)),
                     True, "delete naming the current version 2")
    ctx.expect_equal(_full(ctx, sid), None, "row after the version-checked delete")
    missing = ctx.call("delete of a missing session naming a version",
                       lambda: ctx.store.delete(sid, expected_version=2))
    ctx.expect_equal(missing, False, "version-checked delete of a session that is gone")


def _declares_idempotent_retries(store) -> bool:
    return state_defaults(store).idempotent_retries


@case("state")
def identical_retry_is_idempotent(ctx: CaseContext) -> None:
    """A retried insert or update whose exact result is stored returns that version."""
    if not _declares_idempotent_retries(ctx.store.raw):
        raise NotApplicable("the state store does not declare idempotent_retries = True")
    sid = ctx.session()
    owner = ctx.owner("tenant-a")
    first: dict[str, Any] = dict(expected_version=None, owner_subject=owner, pending_message="p")
    ctx.call("insert", lambda: ctx.store.save(sid, b"v1", **first))
    ctx.expect_int_version(ctx.call("retried identical insert", lambda: ctx.store.save(
        sid, b"v1", **first)), 1, "retried identical insert (acknowledgement lost)")
    ctx.expect_conflict("an insert with another blob over the row",
                        lambda: ctx.store.save(sid, b"other", **first))
    update: dict[str, Any] = dict(expected_version=1, owner_subject=owner, pending_message="q")
    ctx.call("update", lambda: ctx.store.save(sid, b"v2", **update))
    ctx.expect_int_version(ctx.call("retried identical update", lambda: ctx.store.save(
        sid, b"v2", **update)), 2, "retried identical update (acknowledgement lost)")
    ctx.expect_conflict("a retry at version 1 with another blob",
                        lambda: ctx.store.save(sid, b"v2-other", **update))
    ctx.expect_conflict("a retry at version 1 with another pending message",
                        lambda: ctx.store.save(sid, b"v2", expected_version=1,
                                               owner_subject=owner, pending_message="other"))
    ctx.call("a further update", lambda: ctx.store.save(sid, b"v3", expected_version=2,
                                                       owner_subject=owner))
    ctx.expect_conflict("the version-1 update retried after the row moved on",
                        lambda: ctx.store.save(sid, b"v2", **update))
    _expect_row(ctx, sid, "row after the retries", blob=b"v3", version=3, owner=owner)
