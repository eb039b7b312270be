"""``--shred-keys DIR``: the keyring opened (and locked) for a command's duration, its
rules checked before any store is opened (:mod:`backends.archive.shred`)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional


@contextlib.contextmanager
def open_keyring(path: Optional[str], *, create: bool = False) -> Iterator[Any]:
    """The keyring at ``path`` (None when no path is given); ``create`` makes it (0700) as
    an export does. A refused keyring is exit 2, a missing cryptography package exit 3."""
    if path is None:
        yield None
        return
    from backends.archive.shred import Keyring, require_cipher

    require_cipher()
    with Keyring(path, create=create) as ring:
        yield ring
