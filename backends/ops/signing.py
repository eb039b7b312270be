"""Signed receipts: an Ed25519 signature over a receipt's exact bytes, in ``RECEIPT.sig``.

The signature file is JSON: ``algorithm`` ("ed25519"), ``key_id`` (the ``ssh-keygen -l``
fingerprint of the public key, ``SHA256:<base64, no padding>``), ``signature`` (base64)
and ``sha256`` (hex, of the receipt bytes). A private key is an OpenSSH or PKCS8 PEM
file, unencrypted, readable by its owner only (as ssh insists); a public key is an
``ssh-ed25519 AAAA…`` line or a PEM. ``cryptography`` (the ``signing`` extra) is imported
only here, inside the functions that need it: :func:`available` says whether it is.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from typing import Any

from backends.errors import OperationRefused

ALGORITHM = "ed25519"
SUFFIX = ".sig"
#: the extra that brings cryptography
EXTRA = "signing"


class KeyRefused(OperationRefused):
    """A signing or verifying key that cannot be used as given (missing, too open,
    encrypted, not Ed25519, unreadable): refused before anything is done."""


@dataclass(frozen=True)
class SigningKey:
    private: Any  #: cryptography's Ed25519PrivateKey
    key_id: str
    path: str


@dataclass(frozen=True)
class Verdict:
    """What ``receipts verify`` found: ``valid``, ``invalid`` or ``unsigned``."""

    status: str
    receipt: str
    key_id: str | None = None
    reason: str = ""
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "receipt": self.receipt, "key_id": self.key_id,
                "reason": self.reason, "notes": list(self.notes)}


def available() -> bool:
    """Whether ``cryptography`` is installed (the ``signing`` extra)."""
    try:
        import cryptography.hazmat.primitives.asymmetric.ed25519  # noqa: F401
    except ImportError:
        return False
    return True


def signature_path(receipt: str) -> str:
    return f"{receipt}{SUFFIX}"


def key_id(public_key: Any) -> str:
    """The ``ssh-keygen -l`` fingerprint: SHA256 of the OpenSSH public key blob."""
    from cryptography.hazmat.primitives import serialization

    line = public_key.public_bytes(serialization.Encoding.OpenSSH,
                                   serialization.PublicFormat.OpenSSH)
    blob = base64.b64decode(line.split()[1])
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")
    return f"SHA256:{digest}"


def _read_key(path: str, *, private: bool) -> bytes:
    try:
        mode = os.stat(path).st_mode
        if private and stat.S_IMODE(mode) & 0o077:
            raise KeyRefused(f"permissions {stat.S_IMODE(mode):04o} for {path} are too open: "
                             f"a private key must be readable by its owner only; chmod 600 {path}")
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise KeyRefused(f"no such key file: {path}") from None
    except IsADirectoryError:
        raise KeyRefused(f"{path} is a directory, not a key file") from None
    except PermissionError:
        raise KeyRefused(f"cannot read the key file {path}: permission denied") from None


def _parse_private(data: bytes, path: str) -> Any:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    loader = (serialization.load_ssh_private_key if b"OPENSSH PRIVATE KEY" in data
              else serialization.load_pem_private_key)
    try:
        return loader(data, password=None)
    except TypeError:  # "Password was not given but private key is encrypted"
        raise KeyRefused(f"{path} is an encrypted private key: signing needs an unencrypted "
                         "key (a passphrase cannot be asked for here)") from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        if _encrypted(data):
            raise KeyRefused(f"{path} is an encrypted private key: signing needs an "
                             "unencrypted key") from None
        raise KeyRefused(f"{path} is not an OpenSSH or PKCS8 PEM private key "
                         f"({type(exc).__name__})") from None


def _encrypted(data: bytes) -> bool:
    """Whether a private key file is passphrase-protected: a PKCS8 ``ENCRYPTED`` PEM, or an
    OpenSSH key whose cipher is not ``none`` (what older cryptography reports as a
    ValueError, newer as a TypeError)."""
    if b"ENCRYPTED" in data:
        return True
    body = b"".join(line for line in data.splitlines() if line and not line.startswith(b"-----"))
    try:
        blob = base64.b64decode(body)
    except ValueError:
        return False
    magic = b"openssh-key-v1\0"
    if not blob.startswith(magic) or len(blob) < len(magic) + 4:
        return False
    size = int.from_bytes(blob[len(magic):len(magic) + 4], "big")
    return blob[len(magic) + 4:len(magic) + 4 + size] != b"none"


def load_signing_key(path: str) -> SigningKey:
    """The Ed25519 private key in ``path``, checked (mode, format, type): KeyRefused."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = _parse_private(_read_key(path, private=True), path)
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyRefused(f"{path} is not an Ed25519 key ({type(key).__name__.replace('_', '')}): "
                         "receipts are signed with Ed25519 (ssh-keygen -t ed25519)")
    return SigningKey(key, key_id(key.public_key()), path)


def load_public_key(path: str) -> Any:
    """The Ed25519 public key in ``path`` (an ``ssh-ed25519`` line or a PEM): KeyRefused."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = _read_key(path, private=False).strip()
    key: Any
    try:
        if data.startswith(b"ssh-"):
            key = serialization.load_ssh_public_key(b" ".join(data.split()[:2]))
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise KeyRefused(f"{path} is not an OpenSSH or PEM public key "
                         f"({type(exc).__name__})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyRefused(f"{path} is not an Ed25519 public key")
    return key


def sign_receipt(receipt: str, key: SigningKey) -> dict[str, Any]:
    """Sign the receipt's bytes as they are on disk; write ``RECEIPT.sig`` atomically."""
    from backends.archive import atomic_output

    with open(receipt, "rb") as handle:
        data = handle.read()
    record = {"algorithm": ALGORITHM, "key_id": key.key_id,
              "signature": base64.b64encode(key.private.sign(data)).decode("ascii"),
              "sha256": hashlib.sha256(data).hexdigest()}
    with atomic_output(signature_path(receipt)) as stream:
        stream.write((json.dumps(record, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return record


def _read_signature(path: str) -> dict[str, Any] | None:
    """The .sig record; None when there is none; ValueError when it is not one."""
    try:
        with open(path, "rb") as handle:
            record = json.loads(handle.read().decode("utf-8"))
    except FileNotFoundError:
        return None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a signature file ({exc})") from None
    if not isinstance(record, dict) or record.get("algorithm") != ALGORITHM \
            or not isinstance(record.get("signature"), str):
        raise ValueError(f"{path} is not an {ALGORITHM} signature record")
    return record


def verify_receipt(receipt: str, public_key_path: str) -> Verdict:
    """Check ``RECEIPT.sig`` against the receipt's bytes and the public key in
    ``public_key_path``; then the receipt's own digest over the ids it removed, when the
    receipt lets it be recomputed. Without a .sig the answer is ``unsigned`` whatever the
    key (it is not read)."""
    from cryptography.exceptions import InvalidSignature

    with open(receipt, "rb") as handle:
        data = handle.read()
    try:
        record = _read_signature(signature_path(receipt))
    except ValueError as exc:
        return Verdict("invalid", receipt, reason=str(exc))
    if record is None:
        return Verdict("unsigned", receipt, reason=f"no {signature_path(receipt)}")
    public_key = load_public_key(public_key_path)
    signer, expected = key_id(public_key), record.get("key_id")
    if expected != signer:
        return Verdict("invalid", receipt, signer,
                       f"signed by {expected}, not by the given key {signer}")
    if record.get("sha256") != hashlib.sha256(data).hexdigest():
        return Verdict("invalid", receipt, signer, "the receipt's bytes changed since it was signed")
    try:
        public_key.verify(base64.b64decode(record["signature"], validate=True), data)
    except (InvalidSignature, ValueError):
        return Verdict("invalid", receipt, signer, "the signature does not match the receipt")
    return _check_digest(receipt, data, signer)


def _check_digest(receipt: str, data: bytes, signer: str) -> Verdict:
    """An erase receipt's digest over its removed ids, recomputed when every planned
    event and every derived session's state was removed (the ids are then all listed)."""
    from backends.ops.erasure import removed_digest, removed_ids

    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return Verdict("invalid", receipt, signer, "the receipt is not JSON")
    digest = body.get("digest") if isinstance(body, dict) else None
    if not isinstance(digest, dict) or not isinstance(body.get("event_ids"), list):
        return Verdict("valid", receipt, signer)
    events, sessions = body["event_ids"], body.get("sessions") or []
    if body.get("events_deleted") != len(events) or body.get("states_deleted") != len(sessions):
        return Verdict("valid", receipt, signer, notes=(
            "the removed-ids digest was not recomputed: the receipt lists more ids than it removed",))
    if removed_digest(removed_ids(events, sessions)) != digest.get("value"):
        return Verdict("invalid", receipt, signer,
                       "the digest over the removed ids does not match the receipt's event_ids")
    return Verdict("valid", receipt, signer, notes=("removed-ids digest recomputed: matches",))
