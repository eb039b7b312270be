"""``--sign-with KEY``: the key checked before a command does anything, and the receipt's
detached signature written after it (:mod:`backends.ops.signing` does the work)."""

from __future__ import annotations

from typing import Any, Optional


def require_signing() -> None:
    """Abort (exit 3) when the ``signing`` extra is not installed."""
    from backends.ops.signing import EXTRA, available
    from semvecctl.application import current
    from semvecctl.exit_codes import ExitCode

    if not available():
        current().abort(f"signing receipts needs cryptography: pip install 'semvecctl[{EXTRA}]'",
                        ExitCode.ENVIRONMENT, cause=None)


def signing_key(path: Optional[str], receipt: Optional[str]) -> Any:
    """The checked key of ``--sign-with`` (None without it). A refused key is an
    OperationRefused: one line, exit 2, before any store is opened."""
    from backends.ops.signing import load_signing_key
    from semvecctl.application import current
    from semvecctl.exit_codes import ExitCode

    if path is None:
        return None
    if receipt is None:
        current().abort("--sign-with needs --receipt FILE: the signature is written beside "
                        "the receipt (FILE.sig)", ExitCode.USAGE)
    require_signing()
    return load_signing_key(path)


def sign(receipt: str, key: Any, *, unless_signed: bool = False) -> None:
    """Write ``RECEIPT.sig`` (nothing without a key; with ``unless_signed``, nothing when
    it exists: a rerun of a finished erasure signs a receipt its run could not) and say
    so on stderr."""
    import os

    from backends.ops.signing import sign_receipt, signature_path
    from semvecctl.application import current

    if key is None or (unless_signed and os.path.exists(signature_path(receipt))):
        return
    record = sign_receipt(receipt, key)
    current().output.info(f"signed the receipt with {record['key_id']}: {signature_path(receipt)}")
