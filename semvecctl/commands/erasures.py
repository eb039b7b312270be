"""``semvecctl erasures list|check|identity|export|import|record``: the store's erasure
ledger, which every restore path consults so that an erased subject's older data is never
written back.

``list`` shows each entry by a prefix of its keyed hash (never an id), its time and its
receipt reference. ``check --user U [--owner O]`` answers whether that subject was erased,
when and by which receipt, as ``grep`` and ``kubectl wait`` answer: exit 0 erased, 1 not
erased, 3 on a backend that keeps no ledger. ``identity`` shows the store's identity and
its ledger's state (what an archive names). ``export FILE`` / ``import FILE`` move a ledger
between stores (signed and verified as receipts are); ``record --certificate`` adds an
erasure the engine made. The work is in :mod:`backends.ops.ledger`.
"""


import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection
from semvecctl.exit_codes import ExitCode
from semvecctl.options import (CertificateKey, LedgerOwner, LedgerSignWith, Output, Overwrite,
                               SubjectOwner, SubjectUnowned, VerifyWith, store_command)
from semvecctl.output import Column, OutputFormat

NAME = "erasures"
HELP = help_of(NAME)

app = typer.Typer(no_args_is_help=True, help=HELP)

_COLUMNS = [Column("SUBJECT", "subject", style="bold"), Column("ERASED AT", "erased_at"),
            Column("RECEIPT", "receipt"), Column("SESSIONS", "sessions", justify="right"),
            Column("KEY", "key")]


@app.command("list")
@store_command()
def list_erasures(*, conn: Connection, output: Output = OutputFormat.table) -> None:
    """List the ledger's entries: hash prefix, erasure time, receipt reference."""
    from backends.ops.ledger import list_erasures as entries_of

    out = current().output
    with conn.open() as adapter_obj:
        rows = entries_of(adapter_obj)
    out.emit(rows, output, columns=_COLUMNS, rows=[{**r, "receipt": r["receipt"] or "-"}
                                                   for r in rows])
    out.info(f"{len(rows)} erased subject(s) in the ledger of {conn.display_uri}")


@app.command("check")
@store_command()
def check(*, user: str = typer.Option(..., "--user", show_default=False,
                                      help="The user id of the data subject."),
          owner: LedgerOwner = None, conn: Connection,
          output: Output = OutputFormat.table) -> None:
    """Was this subject erased? Exit 0 erased (when, which receipt), 1 not erased."""
    from backends.ops.ledger import check_erasure

    if not user.strip():
        current().abort("--user must not be empty", ExitCode.USAGE)
    out = current().output
    with conn.open() as adapter_obj:
        verdict = check_erasure(adapter_obj, user, owner)
    line = (f"erased at {verdict['erased_at']} (receipt {verdict['receipt'] or 'none'})"
            if verdict["erased"] else "not erased: the ledger holds no entry for this subject")
    out.emit(verdict, output, table=lambda: out.write(line))
    if not verdict["erased"]:
        current().abort("", ExitCode.CHECK_FAILED)


@app.command("identity")
@store_command()
def identity(*, conn: Connection, output: Output = OutputFormat.table) -> None:
    """Show the store's identity (made once, on first use) and its ledger's state."""
    from backends.ops.ledger import identity_report

    out = current().output
    with conn.open() as adapter_obj:
        report = identity_report(adapter_obj)
    state = report["ledger"]
    out.emit(report, output, table=lambda: out.write(
        f"{report['identity']} (since {report['created_at']}); ledger: {state['entries']} "
        f"entr{'y' if state['entries'] == 1 else 'ies'}, position {state['seq']}, "
        f"digest {state['digest'][:16]}…"))


_FILE = typer.Argument(..., metavar="FILE", help="The ledger file (JSON; it holds the "
                       "ledger's secrets: keep it as you keep the store's backups).")


@app.command("export")
@store_command()
def export(file: str = _FILE, *, conn: Connection, overwrite: Overwrite = False,
           sign_with: LedgerSignWith = None, output: Output = OutputFormat.table) -> None:
    """Write the store's ledger (entries, session hashes, secrets, identity) to FILE."""
    from backends.ops.ledger import export_ledger
    from semvecctl.signing import sign, signing_key

    app_ = current()
    app_.evidence_file(file, option="FILE", overwrite=overwrite)
    app_.may_replace(file, overwrite=overwrite, option="FILE")
    key = signing_key(sign_with, file)  # checked before the store is opened
    with conn.open() as adapter_obj:
        summary = export_ledger(adapter_obj, file)
    sign(file, key)
    out = app_.output
    out.emit(summary, output, table=lambda: out.write(
        f"wrote {summary['entries']} entr{'y' if summary['entries'] == 1 else 'ies'} of "
        f"{summary['identity']} to {file}"))


@app.command("import")
@store_command()
def import_(file: str = _FILE, *, conn: Connection, verify_with: VerifyWith = None,
            output: Output = OutputFormat.table) -> None:
    """Add FILE's entries to the store's ledger (a union: importing twice adds nothing)."""
    from backends.ops.ledger import import_ledger, read_ledger_file

    out = current().output
    _verified(file, verify_with)
    found = read_ledger_file(file)  # checked whole before the store is opened
    with conn.open() as adapter_obj:
        summary = import_ledger(adapter_obj, found)
    out.emit(summary, output, table=lambda: out.write(
        f"{summary['added']} added, {summary['updated']} updated, {summary['already_held']} "
        f"already held, of {summary['entries']} in {file}"))


def _verified(file: str, key: "str | None") -> None:
    """FILE.sig checked with ``key`` (exit 1 unless valid); without a key, a word on an
    unchecked signature."""
    import os

    from backends.ops.signing import signature_path

    if key is None:
        if os.path.exists(signature_path(file)):
            current().output.warn(f"{signature_path(file)} was not checked: pass "
                                  "--verify-with PUB to check it")
        return
    from backends.ops.signing import verify_receipt
    from semvecctl.signing import require_signing

    require_signing()
    if not os.path.exists(file):
        current().abort(f"no such file: {file}", ExitCode.USAGE)
    verdict = verify_receipt(file, key)
    if verdict.status != "valid":
        current().abort(f"{file}: {verdict.status}: {verdict.reason}; nothing was recorded",
                        ExitCode.CHECK_FAILED)
    current().output.info(f"{file}: signed by {verdict.key_id}")


@app.command("record")
@store_command()
def record(*, certificate: str = typer.Option(..., "--certificate", metavar="FILE",
                                              show_default=False,
                                              help="The engine's deletion certificate (JSON)."),
           owner: SubjectOwner = None, unowned: SubjectUnowned = False,
           verify_with: CertificateKey = None, conn: Connection,
           output: Output = OutputFormat.table) -> None:
    """Record an erasure the engine made (its certificate's user, time, signature digest)."""
    from backends.ops.ledger import read_certificate, record_certificate, verify_certificate

    if (owner is None) == (not unowned):
        current().abort("name the subject's owner: --owner OWNER (the certificate names none: "
                        "it is the scope the engine was called with), or --unowned",
                        ExitCode.USAGE)
    body = read_certificate(certificate)
    if verify_with is not None:
        from backends.ops.signing import load_public_key
        from semvecctl.signing import require_signing

        require_signing()
        verify_certificate(body, load_public_key(verify_with), verify_with)
    out = current().output
    with conn.open() as adapter_obj:
        summary = record_certificate(adapter_obj, body, owner)
    out.emit(summary, output, table=lambda: out.write(
        f"{'recorded' if summary['recorded'] else 'already in the ledger'}: erased at "
        f"{summary['erased_at']} ({summary['event_count']} event(s), {summary['reason']}); "
        f"receipt {summary['receipt'][:32]}…"))

