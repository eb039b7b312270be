"""Session ids that are not valid UTF-8: held exactly, shown escaped, typed back.

Redis keys are bytes, so a foreign writer can leave ``semvec:state:<bytes>`` whose id is
not UTF-8. Such an id is held in Python as the key's bytes decoded with
``surrogateescape`` (PEP 383: each byte that is not UTF-8 becomes one lone surrogate,
which no valid UTF-8 text contains), so it can be read, deleted and reported without
losing a byte.

Shown to an operator it is escaped, one reversible rule: a byte that is not UTF-8 is
``\\xHH`` (two lower-case hex digits, 80-ff), and a backslash is doubled (``\\\\``).
An id that is valid UTF-8 is shown as it is, unless reading it back would change it
(it contains ``\\\\`` or ``\\x80``-``\\xff`` literally): then it is shown escaped too.

Typed as a command argument, an id is read with the same rule: ``\\\\`` is one
backslash, ``\\xHH`` (80-ff) is that byte, and any other backslash is itself. So every
shown id can be typed back as shown, and an ordinary id with a lone backslash (``a\\b``)
still means itself.
"""

from __future__ import annotations

import re

from backends.errors import CorruptState

_TOKEN = re.compile(r"\\(\\|x[89a-fA-F][0-9a-fA-F])")


_LONE_SURROGATE = re.compile("[\udc80-\udcff]")


def has_undecodable(session_id: str) -> bool:
    """True when the id holds bytes that are not UTF-8 (surrogate-escaped)."""
    return not session_id.isascii() and _LONE_SURROGATE.search(session_id) is not None


def _canonical(session_id: str) -> str:
    """Bytes that form valid UTF-8 read as text (``\\xc3\\xa9`` is ``é``)."""
    raw = session_id.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "surrogateescape")


def unescape_id(text: str) -> str:
    """A typed id (see the module docstring) as the id it names."""
    if "\\" not in text:
        return text

    def token(match: re.Match[str]) -> str:
        body = match.group(1)
        return "\\" if body == "\\" else chr(0xDC00 + int(body[1:], 16))

    return _canonical(_TOKEN.sub(token, text))


def escape_id(session_id: str) -> str:
    """The id as shown (see the module docstring); ``unescape_id`` reverses it."""
    if not has_undecodable(session_id) and unescape_id(session_id) == session_id:
        return session_id
    out = []
    for ch in session_id:
        if "\udc80" <= ch <= "\udcff":
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


def from_key(raw: bytes) -> str:
    """The id held in a key's bytes (after its prefix), every byte kept."""
    return raw.decode("utf-8", "surrogateescape")


def to_key(session_id: str) -> bytes:
    """The bytes of an id, surrogate-escaped bytes restored."""
    return session_id.encode("utf-8", "surrogateescape")


NOT_UTF8 = "is not valid UTF-8 (shown escaped: \\xHH for each byte that is not)"


def shown(session_id: str) -> str:
    """The id quoted for a message: ``repr`` for an ordinary id; an escaped one in single
    quotes as it is (``repr`` would double the escape's backslash, and that form would
    name another id), unless it holds other unprintable characters."""
    escaped = escape_id(session_id)
    if escaped == session_id or not escaped.isprintable():
        return repr(escaped)
    return f"'{escaped}'"


class UndecodableId(CorruptState):
    """A session whose id is not valid UTF-8: the damaged-row error every strict read
    raises for it. ``session_id`` holds the escaped form (printable, and what ``sessions
    inspect``/``delete`` take)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(escape_id(session_id), "session_id", NOT_UTF8)
        self.shown = shown(session_id)
        self.args = (f"session {self.shown} is damaged: its id {NOT_UTF8}",)
