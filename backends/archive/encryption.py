"""age encryption as the outer layer of an archive (the ``age`` extra: pyrage).

An archive is written as JSON Lines, gzip-compressed when its name says so, then
encrypted to one or more age recipients (X25519 ``age1…`` keys, ``ssh-ed25519`` /
``ssh-rsa`` public key lines). Plaintext never touches a file: :func:`encrypting` feeds
pyrage's ``encrypt_io`` from an ``os.pipe`` in a thread and :func:`open_decrypted` reads
``decrypt_io``'s output the same way, so memory stays flat whatever the archive's size.
An encrypted file is recognised by its header (:data:`AGE_MAGIC`), never by its name.

age authenticates the payload in 64 KiB chunks and marks the last one, so a wrong key, a
truncated, bit-flipped or re-ordered ciphertext fails the decryption; the failure is
raised as :class:`DecryptionFailed` (an :class:`ArchiveDamaged`) at the end of the
decrypted stream at the latest, so a reader that checks the trailer (the importer's
verifying pass) never accepts a damaged ciphertext. pyrage is imported only when a
command asks for encryption or meets an encrypted archive.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Sequence

from backends.archive.errors import ArchiveDamaged
from backends.errors import BackendError, Category, OperationRefused

#: the first bytes of every age file (the version line of its header)
AGE_MAGIC = b"age-encryption.org/v1"
#: the extra that brings pyrage
EXTRA = "age"
#: what an encrypted archive's name ends with, by convention only
SUFFIX = ".age"


class EncryptionUnavailable(BackendError, ImportError):
    """age encryption was asked for (or an encrypted archive met) without pyrage."""

    category = Category.MISSING_DRIVER


class BadKey(OperationRefused):
    """A recipient or identity that is not an age or SSH key (nothing was written)."""


class IdentityNeeded(OperationRefused):
    """An encrypted archive was given without an identity to decrypt it."""


class DecryptionFailed(ArchiveDamaged):
    """No identity matches, or the ciphertext is damaged; nothing may be imported."""


def _pyrage() -> Any:
    try:
        import pyrage
    except ImportError:
        raise EncryptionUnavailable("age encryption needs pyrage, which is not installed: "
                                    f"pip install 'semvecctl[{EXTRA}]'") from None
    return pyrage


def is_encrypted(head: bytes) -> bool:
    """Whether the first bytes of a file are an age header."""
    return head.startswith(AGE_MAGIC)


def file_is_encrypted(path: str | os.PathLike[str]) -> bool:
    with open(path, "rb") as stream:
        return is_encrypted(stream.read(len(AGE_MAGIC)))


def _key_lines(text: str) -> Iterator[str]:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            yield line


def parse_recipient(text: str) -> Any:
    """One recipient: ``age1…`` or an SSH public key line (``ssh-ed25519``/``ssh-rsa``)."""
    pyrage = _pyrage()
    module = pyrage.ssh if text.startswith(("ssh-ed25519 ", "ssh-rsa ")) else pyrage.x25519
    if module is pyrage.x25519 and not text.startswith("age1"):
        raise BadKey(f"recipient {text[:60]!r} is neither an age1… key nor an ssh-ed25519/"
                     "ssh-rsa public key line; nothing was written")
    try:
        return module.Recipient.from_str(text)
    except pyrage.RecipientError as exc:
        raise BadKey(f"recipient {text[:60]!r} is not a valid key ({exc}); "
                     "nothing was written") from None


def recipients(values: Iterable[str] = (), files: Iterable[str | os.PathLike[str]] = ()) -> list[Any]:
    """The recipients given on the command line and in files (one a line, ``#`` comments)."""
    texts = [value.strip() for value in values]
    for path in files:
        listed = list(_key_lines(Path(path).read_text(encoding="utf-8")))
        if not listed:  # never an unencrypted archive because a list came out empty
            raise BadKey(f"--encrypt-to-file {path} lists no recipient; nothing was written")
        texts.extend(listed)
    return [parse_recipient(text) for text in texts]


def _refuse_open_key(path: str | os.PathLike[str]) -> None:
    """A secret key readable by the group or others is refused before it is read, as
    ``--sign-with`` refuses one (ssh does the same): a key left open is a leaked key."""
    import stat

    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        raise BadKey(f"--identity {path}: no such file") from None
    if mode & 0o077:
        raise BadKey(f"--identity {path}: permissions {mode:04o} are too open: a secret key "
                     f"must be readable by its owner only; chmod 600 {path}")


def load_identities(paths: Sequence[str | os.PathLike[str]]) -> list[Any]:
    """The identities of age identity files (``AGE-SECRET-KEY-1…`` lines) and of
    unencrypted OpenSSH private keys."""
    pyrage = _pyrage()
    found: list[Any] = []
    for path in paths:
        _refuse_open_key(path)
        data = Path(path).read_bytes()
        try:
            if b"-----BEGIN OPENSSH PRIVATE KEY-----" in data:
                found.append(pyrage.ssh.Identity.from_buffer(data))
                continue
            keys = [line for line in _key_lines(data.decode("utf-8"))
                    if line.startswith("AGE-SECRET-KEY-1")]
            found.extend(pyrage.x25519.Identity.from_str(key) for key in keys)
        except (pyrage.IdentityError, UnicodeDecodeError, ValueError) as exc:
            raise BadKey(f"--identity {path}: not an age identity file or an unencrypted "
                         f"OpenSSH private key ({exc})") from None
        if not keys:
            raise BadKey(f"--identity {path}: no AGE-SECRET-KEY-1… line and no OpenSSH "
                         "private key in it")
    return found


@contextlib.contextmanager
def encrypting(dest: IO[bytes], to: Sequence[Any]) -> Iterator[IO[bytes]]:
    """A stream whose bytes are encrypted to ``to`` onto ``dest`` (a pipe and a thread:
    memory stays flat). Leaving the block finishes the ciphertext; an exception inside it
    still ends the thread before it propagates (the caller discards ``dest``)."""
    pyrage = _pyrage()
    read_fd, write_fd = os.pipe()
    errors: list[BaseException] = []

    def pump() -> None:
        with open(read_fd, "rb") as plain:
            try:
                pyrage.encrypt_io(plain, dest, list(to))
            except BaseException as exc:  # noqa: BLE001 - reported by the caller's thread
                errors.append(exc)

    thread = threading.Thread(target=pump, name="age-encrypt", daemon=True)
    thread.start()
    sink = open(write_fd, "wb")
    stopped = False
    try:
        yield sink
    except BrokenPipeError:
        stopped = True  # the thread stopped reading: its own error says why
    finally:
        with contextlib.suppress(BrokenPipeError):
            sink.close()
        thread.join()
    if errors:
        raise _encryption_failure(errors[0])
    if stopped:
        raise BackendError("age encryption stopped before the archive was complete")


def _encryption_failure(exc: BaseException) -> BaseException:
    """The thread's failure as the caller raises it: an OSError (a full disk) as itself."""
    if isinstance(exc, OSError):
        return exc
    return BackendError(f"age encryption failed: {exc}")


@contextlib.contextmanager
def encrypted_to(dest: IO[bytes], to: Sequence[Any]) -> Iterator[IO[bytes]]:
    """:func:`encrypting` when there are recipients, else ``dest`` itself."""
    if not to:
        yield dest
        return
    with encrypting(dest, to) as sink:
        yield sink


def _failure_message(exc: BaseException) -> str:
    if "No matching keys" in str(exc):
        return ("the archive is age-encrypted to other recipients: no --identity matches "
                "it, so nothing in it could be read")
    return (f"the encrypted archive is damaged, cut short or re-ordered (age: {exc}); "
            "it is rejected whole")


class _DecryptedPipe(io.RawIOBase):
    """The read end of a decrypting thread's pipe; at its end, the thread's verdict."""

    def __init__(self, fd: int, thread: threading.Thread, errors: list[BaseException]) -> None:
        self._fd, self._thread, self._errors = fd, thread, errors

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = os.readv(self._fd, [buffer])
        if n == 0:
            self._thread.join()
            if self._errors:
                raise DecryptionFailed(_failure_message(self._errors[0]))
        return n

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)  # a thread still writing gets EPIPE and ends
            self._thread.join()
        super().close()


def open_decrypted(source: IO[bytes], identities: Sequence[Any]) -> IO[bytes]:
    """A buffered stream of the plaintext of the age file ``source`` (closed with it).
    Reading raises :class:`DecryptionFailed` where the ciphertext fails."""
    pyrage = _pyrage()
    read_fd, write_fd = os.pipe()
    errors: list[BaseException] = []

    def pump() -> None:
        try:
            with open(write_fd, "wb") as plain:
                pyrage.decrypt_io(source, plain, list(identities))
        except BrokenPipeError:
            pass  # the reader stopped early
        except BaseException as exc:  # noqa: BLE001 - raised by the reading side
            errors.append(exc)
        finally:
            source.close()

    thread = threading.Thread(target=pump, name="age-decrypt", daemon=True)
    thread.start()
    return io.BufferedReader(_DecryptedPipe(read_fd, thread, errors), 1 << 16)


def open_archive(path: str | os.PathLike[str], identities: Sequence[Any] | None) -> IO[bytes]:
    """``path`` opened for reading: decrypted when it is an age file (``identities`` must
    then be given: :class:`IdentityNeeded` otherwise)."""
    return decrypted_if_age(open(path, "rb"), identities, str(path))


def decrypted_if_age(stream: IO[bytes], identities: Sequence[Any] | None,
                     label: str) -> IO[bytes]:
    """``stream`` (seekable, at its start) as it is, or its plaintext when it is an age
    file; ``stream`` is closed with what is returned."""
    head = stream.read(len(AGE_MAGIC))
    stream.seek(0)
    if not is_encrypted(head):
        return stream
    if not identities:
        stream.close()
        raise IdentityNeeded(f"{label} is age-encrypted: give the key to decrypt it with "
                             "--identity FILE")
    return open_decrypted(stream, identities)


def new_identity() -> tuple[Any, Any]:
    """A throw-away X25519 (identity, recipient), for reading back what we encrypt."""
    identity = _pyrage().x25519.Identity.generate()
    return identity, identity.to_public()
