"""``semvecctl receipts verify FILE --key PUB``: check a receipt's detached signature.

One line and an exit code: ``valid: signed by SHA256:…`` (0); ``invalid: …`` (1: the
signature does not match, the receipt's bytes changed, another key signed it, or an erase
receipt's digest over its removed ids does not match its ids); ``unsigned: no FILE.sig``
(1, whatever the key: it is not read then). The work is in :mod:`backends.ops.signing`.
"""


import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.exit_codes import ExitCode
from semvecctl.options import Output
from semvecctl.output import OutputFormat
from semvecctl.signing import require_signing

NAME = "receipts"
HELP = help_of(NAME)

app = typer.Typer(no_args_is_help=True, help=HELP)


@app.command("verify")
def verify(receipt: str = typer.Argument(..., metavar="FILE", help="The receipt (its signature is FILE.sig)."),
           key: str = typer.Option(..., "--key", metavar="PUB", show_default=False,
                                   help="The signer's Ed25519 public key: an 'ssh-ed25519 AAAA…' "
                                        "line (KEY.pub) or a PEM file."),
           output: Output = OutputFormat.table) -> None:
    """Verify FILE against FILE.sig and the public key: exit 0 valid, 1 invalid or unsigned."""
    from backends.ops.signing import verify_receipt

    require_signing()
    out = current().output
    verdict = verify_receipt(receipt, key)
    if verdict.status == "valid":
        line = f"valid: signed by {verdict.key_id}"
    else:
        line = f"{verdict.status}: {verdict.reason}"
    out.emit(verdict.as_dict(), output, table=lambda: out.write(line))
    for note in verdict.notes:
        out.info(note)
    if verdict.status != "valid":
        current().abort("", ExitCode.CHECK_FAILED)
