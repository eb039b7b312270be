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

import re
from typing import Sequence

import orjson

# A value orjson may spell differently from repr: anything in exponent notation, and
# positional values below 1e-4 (four zeros after the point), which repr writes as 1e-05;
# whole tokens only (right after '[' or ','), never the tail of 10.000000000000002.
_NOTATION_MAY_DIFFER = re.compile(rb"(?<=[\[,])-?(?:0\.0000[0-9]*|[0-9.]+e[-+]?[0-9]+)")


def _as_repr(match: re.Match[bytes]) -> bytes:
    return repr(float(match.group())).encode("ascii")


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
        raw = _NOTATION_MAY_DIFFER.sub(_as_repr, raw)
    return raw
