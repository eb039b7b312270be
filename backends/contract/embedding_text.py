"""The JSON text of an event's embedding, byte for byte what the engine writes.

The engine stores an embedding as ``json.dumps(list_of_floats)``: ``", "`` between
values, each value in Python's shortest ``repr``. Stores compare and diff these bytes
(golden fixtures, copies between backends), so ours must be the same bytes, yet
``json.dumps`` spends most of a Redis turn on 384 float reprs.

orjson writes the same shortest round-trip digits about 20 times faster; only its
*notation* differs, and only for values under 1e-4 (``0.00001`` / ``1e-7`` where Python
writes ``1e-05`` / ``1e-07``). Those rare tokens are rewritten through ``repr``, every
separator gets Python's space, and the result equals ``json.dumps`` (pinned against it by
a property test over the whole float range).
"""

from __future__ import annotations

from typing import Sequence

import orjson

# orjson spells a value differently from repr only in exponent notation (an ``e``) and for
# positional values below 1e-4 (four zeros after the point), which repr writes as 1e-05:
# the whole token is then rewritten through repr, never the tail of 10.000000000000002.
_MAY_DIFFER = (b"e", b"0.0000")


def _respelled(raw: bytes) -> bytes:
    """``raw`` (orjson's flat array of finite floats) with each token that orjson may
    spell differently from ``repr`` rewritten through ``repr``. Such tokens are rare, so
    they are found with ``bytes.find`` (a regular expression over every token was most of
    the time of a 384-value embedding)."""
    spans = set()
    for needle in _MAY_DIFFER:
        at = raw.find(needle)
        while at >= 0:
            start = max(raw.rfind(b",", 0, at), raw.rfind(b"[", 0, at)) + 1
            end = raw.find(b",", at)
            end = raw.find(b"]", at) if end < 0 else end
            token = raw[start:end]
            if needle == b"e" or token.lstrip(b"-").startswith(needle):
                spans.add((start, end))
            at = raw.find(needle, end)
    pieces, done = [], 0
    for start, end in sorted(spans):
        pieces += [raw[done:start], repr(float(raw[start:end])).encode("ascii")]
        done = end
    return b"".join(pieces) + raw[done:]


def embedding_json(values: Sequence[float]) -> str:
    """``json.dumps(list(values))`` for finite floats, fast. Raises ValueError on a
    non-finite value (orjson would write it as ``null``; the engine cannot read that
    back as a float)."""
    return embedding_json_bytes(values).decode("ascii")


def embedding_json_bytes(values: Sequence[float]) -> bytes:
    """:func:`embedding_json` as ASCII bytes, for a wire that sends bytes (Redis)."""
    return compact_embedding_json(values).replace(b",", b", ")


def compact_embedding_json(values: Sequence[float]) -> bytes:
    """``json.dumps(list(values), separators=(",", ":"))`` for finite floats, as ASCII
    bytes: the spelling without spaces (an archive's canonical JSON). ValueError on a
    non-finite value, as :func:`embedding_json`."""
    raw = orjson.dumps(values if isinstance(values, (list, tuple)) else list(values))
    if b"n" in raw:  # only ``null`` has an n: orjson's spelling of NaN and infinity
        raise ValueError("embedding has a non-finite value (NaN or infinity)")
    if b"e" in raw or b"0.0000" in raw:
        raw = _respelled(raw)
    return raw
