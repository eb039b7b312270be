"""``semvecctl archive verify FILE``: check an archive without a store.

Every line checksum, sequence number, blob sha256, the trailer's count and chain digest,
and duplicate ids: the checks an import runs before its first write, run offline (a
backup checked the day it is taken, not the day it is needed). An age-encrypted archive
is decrypted in a pipe with ``--identity``; the checks run on what it decrypts to. Exit 0
intact, 1 damaged (the line names the first fault), 2 usage (a missing file, an encrypted
archive without ``--identity``). The work is :func:`backends.archive.verify_archive`.
"""


from typing import Any

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.keyrings import open_keyring
from semvecctl.options import Identity, Output, ShredKeys
from semvecctl.output import OutputFormat

NAME = "archive"
HELP = help_of(NAME)
app = typer.Typer(no_args_is_help=True, help=HELP)


def _facts(path: str, summary: Any, encrypted: bool) -> dict[str, Any]:
    header = summary.header
    return {"archive": path, "intact": True, "encrypted": encrypted,
            "format_version": header.format_version, "source_backend": header.source_backend,
            "created_at": header.created_at, "sessions": summary.count,
            "sessions_with_events": summary.sessions_with_events, "users": summary.users,
            "events": summary.events, "items": summary.items,
            "erasure_ledger_entries": len((header.ledger or {}).get("entries", ())),
            "sealed": bool(header.shred), "sealed_unopened": summary.sealed,
            "shredded": {"subjects": summary.shredded_subjects,
                         "sessions": summary.shredded_session_keys,
                         "session_records": summary.shredded_sessions,
                         "events": summary.shredded_events},
            "digest": summary.digest}


def _sealing(facts: dict[str, Any]) -> str:
    """How a sealed archive stands: unopened (no keyring), or what is shredded."""
    if not facts["sealed"]:
        return ""
    if facts["sealed_unopened"]:
        return ", sealed (checksums verified; give --shred-keys DIR to count what is shredded)"
    shredded = facts["shredded"]
    return (f", sealed: {shredded['subjects']} subject(s) and {shredded['sessions']} "
            f"session(s) shredded ({shredded['session_records']} session record(s), "
            f"{shredded['events']} event(s) unreadable)")


@app.command("verify")
def verify(archive: str = typer.Argument(..., metavar="FILE",
                                         help="An archive written by sessions export, events "
                                              "export or sessions prune --archive."),
           identity: Identity = None,
           shred_keys: ShredKeys = None,
           output: Output = OutputFormat.table) -> None:
    """Check every checksum, the trailer and duplicate ids of FILE: exit 0 intact, 1 damaged."""
    import os

    from backends.archive import verify_archive
    from backends.archive.encryption import file_is_encrypted
    from backends.transfer import ArchiveFile
    from semvecctl.commands.sessions_transfer import archive_identities
    from semvecctl.exit_codes import ExitCode

    if not os.path.isfile(archive):
        current().abort(f"no such archive file: {archive}", ExitCode.USAGE)
    source = ArchiveFile(archive, archive_identities(identity))
    with open_keyring(shred_keys) as ring:
        summary = verify_archive(source.open, keyring=ring)
    facts = _facts(archive, summary, file_is_encrypted(archive))
    out = current().output
    line = (f"intact: {facts['sessions']} session(s), {facts['users']} user log(s), "
            f"{facts['events']} event(s), format {facts['format_version']}"
            f"{', age-encrypted' if facts['encrypted'] else ''}{_sealing(facts)}; "
            f"digest {summary.digest[:16]}…")
    out.emit(facts, output, table=lambda: out.write(line))
