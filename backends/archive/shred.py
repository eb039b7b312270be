"""Crypto-shredding: each subject's records in an archive sealed under a data key of that
subject, kept in a keyring apart from the archives (``--shred-keys DIR``), so that
destroying the key (``erase --apply --shred-keys DIR``) makes every archive made with the
keyring unreadable for that subject, to semvecctl and to anyone holding the archive and
its age identity, while the other subjects still restore.

Keys are named only by the keyed hashes the erasure ledger uses (never an id):
``s.<key id>.<subject hash>`` for a subject's events (``subject_digest`` of the user and
owner) and ``x.<key id>.<session hash>`` for a session's state (``session_digest``), so a
state that names no user (a prune archive: sessions without events) is shredded when the
erasure that removed its session destroys its key. ``<key id>`` names the ledger secret
the hashes are made under.

The keyring is a directory (0700, refused when group or others can enter it) of bucket
files ``keys-X`` (X: the hash's first hex digit; 0600, refused otherwise), one
``<name> <key hex>`` line per key: an export of 100k sessions writes (and fsyncs) at most
16 files, not 100k. Every write replaces a bucket atomically (temp file 0600, fsync, rename, fsync of
the directory); a destroyed key's bucket is rewritten without it and the old file
unlinked. One ``flock`` on ``.lock`` serialises the exports and erasures sharing a
keyring, so a key is made once. What this cannot undo is written in the manual
("Erasure and backups"): a copy of the keyring taken before the erasure, and the blocks
of a replaced file that the filesystem has not reused yet.

Sealing is ChaCha20-Poly1305 (``cryptography``, imported when a keyring is used), a
random 96-bit nonce per part, the part's place in the archive as associated data (a part
cannot be moved to another record or key). Checksums and the chain digest cover the
ciphertext, so ``archive verify`` checks a sealed archive without the keyring.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable

from backends.archive.errors import ArchiveDamaged
from backends.errors import BackendError, Category, OperationRefused

KEY_BYTES = 32
NONCE_BYTES = 12
_LOCK = ".lock"
_PREFIX = "keys-"
#: the kinds of key: a subject's (its events) and a session's (its state)
SUBJECT, SESSION = "s", "x"


class KeyringRefused(OperationRefused):
    """A keyring that is not a private directory of private files (nothing was done)."""


class ShreddingUnavailable(BackendError, ImportError):
    """--shred-keys was asked for without the cryptography package."""

    category = Category.MISSING_DRIVER


def _aead(key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    except ImportError:
        raise ShreddingUnavailable("--shred-keys needs the cryptography package, which is not "
                                   "installed: pip install 'semvecctl[signing]'") from None
    return ChaCha20Poly1305(key)


def require_cipher() -> None:
    """Refuse early (exit 3) when the cipher's package is missing."""
    _aead(bytes(KEY_BYTES))


def key_name(kind: str, key_id: str, digest: str) -> str:
    return f"{kind}.{key_id}.{digest}"


def _private(path: Path, what: str, mask: int = 0o077) -> None:
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    if mode & mask:
        raise KeyringRefused(f"permissions {mode:04o} for {what} {path} are too open: a shred "
                             f"keyring must be its owner's only; chmod "
                             f"{'700' if what == 'keyring' else '600'} {path}")


class Keyring:
    """A shred keyring directory, locked while open (see module). ``create``: make the
    directory (0700) when absent, as an export does; an erasure or an import never makes
    one."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False) -> None:
        self.path = Path(path)
        if not self.path.exists():
            if not create:
                raise KeyringRefused(f"no such shred keyring: {self.path} (give the directory "
                                     "the archives were written with)")
            try:
                self.path.mkdir(mode=0o700)
            except FileNotFoundError:
                raise KeyringRefused(f"cannot make the shred keyring {self.path}: its parent "
                                     "directory does not exist") from None
        if self.path.is_symlink() or not self.path.is_dir():
            raise KeyringRefused(f"--shred-keys {self.path} is not a directory")
        _private(self.path, "keyring")
        for entry in os.listdir(self.path):  # every file, not only those read later
            if entry.startswith(_PREFIX):
                _private(self.path / entry, "keyring file")
        fd = os.open(self.path / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)
        self._lock_fd: int | None = fd
        self._buckets: dict[str, dict[str, bytes]] = {}
        self._dirty: set[str] = set()

    # -- plumbing ----------------------------------------------------------------------

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def __enter__(self) -> "Keyring":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bucket_path(self, bucket: str) -> Path:
        return self.path / f"{_PREFIX}{bucket}"

    def _bucket(self, name: str) -> dict[str, bytes]:
        bucket = name.rsplit(".", 1)[-1][:1]
        found = self._buckets.get(bucket)
        if found is None:
            found = self._buckets[bucket] = self._read(bucket)
        return found

    def _read(self, bucket: str) -> dict[str, bytes]:
        path = self._bucket_path(bucket)
        if not path.exists():
            return {}
        _private(path, "keyring file")
        keys: dict[str, bytes] = {}
        for line in path.read_text(encoding="ascii").splitlines():
            name, _, value = line.partition(" ")
            try:
                keys[name] = bytes.fromhex(value)
            except ValueError:
                raise KeyringRefused(f"keyring file {path} is damaged (a line is not "
                                     "'<name> <key hex>')") from None
        return keys

    # -- keys --------------------------------------------------------------------------

    def key(self, name: str) -> bytes | None:
        """The key called ``name``, or None (never made, or destroyed)."""
        return self._bucket(name).get(name)

    def key_for(self, name: str) -> bytes:
        """The key called ``name``, made (and kept, once :meth:`flush` runs) if absent."""
        bucket = self._bucket(name)
        found = bucket.get(name)
        if found is None:
            found = bucket[name] = secrets.token_bytes(KEY_BYTES)
            self._dirty.add(name.rsplit(".", 1)[-1][:1])
        return found

    def flush(self) -> None:
        """Make every key made since the last flush durable (before the archive sealed
        with them appears)."""
        for bucket in sorted(self._dirty):
            self._write(bucket)
        if self._dirty:
            _sync_directory(self.path)
        self._dirty.clear()

    def destroy(self, names: Iterable[str]) -> int:
        """Destroy the keys called ``names`` durably; how many there were."""
        gone = 0
        touched: set[str] = set()
        for name in set(names):
            if self._bucket(name).pop(name, None) is not None:
                gone += 1
                touched.add(name.rsplit(".", 1)[-1][:1])
        for bucket in sorted(touched):
            self._write(bucket)
        if touched:
            _sync_directory(self.path)
        return gone

    def _write(self, bucket: str) -> None:
        keys = self._buckets.get(bucket, {})
        target = self._bucket_path(bucket)
        if not keys:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=self.path)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write("".join(f"{n} {k.hex()}\n" for n, k in sorted(keys.items())))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- sealing and opening one record's parts ----------------------------------------------


def _associated(n: int, index: int, name: str) -> bytes:
    return f"semvecctl sealed part\x00{n}\x00{index}\x00{name}".encode("ascii")


class Sealer:
    """Seals a record's parts for an archive under the keyring's keys (writing side)."""

    def __init__(self, keyring: Keyring, key_id: str, secret: bytes) -> None:
        self.keyring, self.key_id, self._secret = keyring, key_id, secret
        self._ciphers: dict[str, Any] = {}
        self._names: dict[tuple[str, str | None], str] = {}

    def subject(self, user_id: str, owner: str | None) -> str:
        """The key name of a subject (its events)."""
        pair = (user_id, owner or None)
        found = self._names.get(pair)
        if found is None:
            from backends.contract.ledger import subject_digest

            found = key_name(SUBJECT, self.key_id, subject_digest(self._secret, user_id, owner))
            self._names[pair] = found
        return found

    def session(self, session_id: str) -> str:
        """The key name of a session (its state)."""
        from backends.contract.ledger import session_digest

        return key_name(SESSION, self.key_id, session_digest(self._secret, session_id))

    def seal(self, name: str, plaintext: bytes, n: int, index: int) -> dict[str, str]:
        cipher = self._ciphers.get(name)
        if cipher is None:
            cipher = _aead(self.keyring.key_for(name))
            if len(self._ciphers) > 4096:
                self._ciphers.clear()
            self._ciphers[name] = cipher
        nonce = secrets.token_bytes(NONCE_BYTES)
        data = cipher.encrypt(nonce, plaintext, _associated(n, index, name))
        return {"key": name, "nonce": base64.b64encode(nonce).decode("ascii"),
                "data": base64.b64encode(data).decode("ascii")}


def open_part(keyring: Keyring, part: dict[str, Any], n: int, index: int,
              line_no: int) -> bytes | None:
    """A sealed part's plaintext, or None when its key is gone (shredded). A part that
    does not authenticate under its key is damage."""
    key = keyring.key(part["key"])
    if key is None:
        return None
    from cryptography.exceptions import InvalidTag

    try:
        return bytes(_aead(key).decrypt(base64.b64decode(part["nonce"]),
                                        base64.b64decode(part["data"]),
                                        _associated(n, index, part["key"])))
    except (InvalidTag, ValueError):
        raise ArchiveDamaged(f"archive line {line_no}: a sealed part does not decrypt under "
                             "its key (altered, or a keyring other than the archive's); "
                             "nothing was imported from it") from None
