"""Duplicate detection in constant memory: a fixed-size Bloom filter plus a short list of
suspects that a second pass settles exactly.

A set of every session id would grow with the store (about 100 bytes per id); the filter
is one megabyte whatever the count. A hit only makes an id a *suspect* (false positives
are about 1e-8 per id at 100,000 sessions and about 2% at a million); the caller then
counts the suspects' occurrences in one more pass over the archive it already has on disk.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

_BITS = 1 << 23  # 1 MiB
_HASHES = 7


class SeenFilter:
    def __init__(self) -> None:
        self._bits = bytearray(_BITS // 8)
        self.suspects: set[str] = set()

    def _positions(self, key: str) -> list[int]:
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        h1 = int.from_bytes(digest[:8], "little")
        h2 = int.from_bytes(digest[8:], "little") | 1
        return [(h1 + i * h2) % _BITS for i in range(_HASHES)]

    def add(self, key: str) -> bool:
        """Record ``key``; True when it may have been seen before (it becomes a suspect)."""
        bits = self._bits
        maybe_seen = True
        for pos in self._positions(key):
            byte, mask = pos >> 3, 1 << (pos & 7)
            if not bits[byte] & mask:
                maybe_seen = False
                bits[byte] |= mask
        if maybe_seen:
            self.suspects.add(key)
        return maybe_seen


def confirmed_duplicates(keys: Iterable[str], suspects: set[str]) -> set[str]:
    """The suspects that really occur more than once in ``keys`` (one pass)."""
    if not suspects:
        return set()
    counts = dict.fromkeys(suspects, 0)
    for key in keys:
        if key in counts:
            counts[key] += 1
    return {key for key, n in counts.items() if n > 1}
