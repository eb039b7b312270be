"""Strict reads of an event's JSON fields, shared by every event decoder and by doctor.

An event's ``embedding`` is stored as JSON text (a JSON array of finite numbers) and its
``meta`` as a JSON object. A stored value that is not exactly that (``'{bad'``, ``[NaN]``,
``["a"]``, a number too large for a float) is damage: the decoders raise
:class:`~backends.errors.CorruptEvent` naming the event and the field, and doctor reports
the same words, so an operator sees one diagnosis wherever the row is met.

The older encodings this project once wrote stay readable: an empty or ``null``
embedding reads as no embedding, an empty or missing meta as ``{}``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

from backends.errors import CorruptEvent

_ONLY_FLOATS = {float}
#: 19 digits in a row: perhaps an integer beyond 64 bits, which orjson reads as a float
_LONG_DIGIT_RUN = re.compile(r"[0-9]{19}")


def _loads(text: str) -> Any:
    """``json.loads``, through orjson where it parses the text the same way (the common,
    sound case: several times faster); anything orjson refuses (NaN, Infinity, a lone
    surrogate, malformed text) and any text with a digit run long enough for an integer
    beyond 64 bits (which orjson would read as a float) is parsed by ``json.loads``
    itself, so every value and every error message is the standard library's."""
    if _LONG_DIGIT_RUN.search(text) is None:
        try:
            return orjson.loads(text)
        except ValueError:
            pass
    return json.loads(text)


def _why(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg.lower()} at character {exc.pos + 1}"
    return str(exc).splitlines()[0][:80]


def _text(raw: Any) -> str | None:
    if isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return raw


def _sound_floats(value: Any) -> tuple[float, ...] | None:
    """``value`` as a tuple when it is a list of finite floats only, checked in C (a NaN or
    an infinity anywhere makes the sum non-finite; finite values that overflow it are left
    to the element-by-element check, which says which one is wrong), else None."""
    if type(value) is list and (not value or (set(map(type, value)) == _ONLY_FLOATS
                                              and math.isfinite(sum(value)))):
        return tuple(value)
    return None


def embedding_problem(raw: Any, *, text: bool = True) -> tuple[tuple[float, ...], str]:
    """``(values, '')`` for a sound embedding, ``((), problem)`` otherwise. ``raw`` is the
    stored JSON text (str or bytes) or an already decoded list (a JSON column, Mongo);
    ``text=False`` (a document store) refuses text where an array belongs."""
    if text and type(raw) is str and raw:  # the usual stored text, parsed once
        try:  # orjson even where an integer is wide: floats are wanted, rounded the same
            sound = _sound_floats(orjson.loads(raw))
        except ValueError:  # the path below parses it again, for its words
            sound = None
        if sound is not None:
            return sound, ""
    if raw is None or raw == "" or raw == b"":
        return (), ""
    if not text and not isinstance(raw, (list, tuple)):
        return (), f"is not an array (a {type(raw).__name__})"
    if isinstance(raw, (list, tuple)):
        value: Any = list(raw)
    else:
        decoded = _text(raw)
        if decoded is None:
            return (), "is not UTF-8 text"
        if decoded.strip() == "null":
            return (), ""
        try:  # NaN and Infinity parse here and are refused below, by position
            value = _loads(decoded)
        except ValueError as exc:
            return (), f"is not valid JSON ({_why(exc)})"
    if not isinstance(value, list):
        return (), f"is not a JSON array (a {type(value).__name__})"
    sound = _sound_floats(value)
    if sound is not None:
        return sound, ""
    out = []
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return (), f"holds a non-number at position {i} ({x!r:.30})"
        f = float(x)
        if not math.isfinite(f):
            return (), f"holds a non-finite number at position {i} ({x!r})"
        out.append(f)
    return tuple(out), ""


def meta_problem(raw: Any, *, text: bool = True) -> tuple[dict[str, Any], str]:
    """``(meta, '')`` for a sound meta, ``({}, problem)`` otherwise; ``text=False`` (a
    document store) refuses text where a document belongs."""
    if text and type(raw) is str and raw:  # the usual stored text, parsed once
        try:
            parsed = _loads(raw)
        except ValueError:  # the path below parses it again, for its words
            parsed = None
        if type(parsed) is dict:
            return parsed, ""
    if raw is None or (text and (raw == "" or raw == b"")):
        return {}, ""
    if not text and not isinstance(raw, dict):
        return {}, f"is not a document (a {type(raw).__name__})"
    if isinstance(raw, dict):
        value: Any = raw
    else:
        decoded = _text(raw)
        if decoded is None:
            return {}, "is not UTF-8 text"
        try:  # NaN in meta is what the engine's json.loads reads too: not refused
            value = _loads(decoded)
        except ValueError as exc:
            return {}, f"is not valid JSON ({_why(exc)})"
    if not isinstance(value, dict):
        return {}, f"is not a JSON object (a {type(value).__name__})"
    return value, ""


def strict_embedding(raw: Any, event_id: str, user_id: str | None = None, *,
                     text: bool = True) -> tuple[float, ...]:
    values, problem = embedding_problem(raw, text=text)
    if problem:
        raise CorruptEvent(event_id, "embedding", problem, user_id=user_id)
    return values


def strict_meta(raw: Any, event_id: str, user_id: str | None = None, *,
                text: bool = True) -> dict[str, Any]:
    meta, problem = meta_problem(raw, text=text)
    if problem:
        raise CorruptEvent(event_id, "meta", problem, user_id=user_id)
    return meta
