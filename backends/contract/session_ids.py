"""Session ids that are not valid UTF-8: held exactly, shown escaped, typed back.

Redis keys are bytes, so a foreign writer can leave ``semvec:state:<bytes>`` whose id is
not UTF-8. Such an id is held in Python as the key's bytes decoded with
``surrogateescape`` (PEP 383: each byte that is not UTF-8 becomes one lone surrogate,
which no valid UTF-8 text contains), so it can be read, deleted and reported without
losing a byte.

Shown to an operator it is escaped, one reversible rule (every command that prints an id
prints this form, every command that takes one reads it): a byte that is not UTF-8 is
``\\xHH`` (two hex digits, 80-ff); a newline, tab, carriage return and ESC are ``\\n``,
``\\t``, ``\\r``, ``\\e``; any other character that is not printable (control and
format characters such as bidi marks, separators) is ``\\xHH`` below 0x80, else
``\\uHHHH`` or ``\\UHHHHHHHH`` (its code point); and a backslash is doubled
(``\\\\``). An id that is printable and would read back as itself is shown as it is
(``a\\b`` stays ``a\\b``); one that would not (it contains ``\\n`` literally, say) is
shown escaped too, so no two ids are ever shown alike.

Typed as a command argument, an id is read with the same rule (:func:`unescape_id`):
each escape is the character or byte it names, ``\\\\`` one backslash, and any other
backslash is itself. So every shown id can be typed back as shown (``sessions inspect``,
``delete``, ``events list --session``, ``retrieve --session``).
"""

from __future__ import annotations

import re

from backends.errors import CorruptState

_TOKEN = re.compile(r"\\(\\|[ntre]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})")
#: the named escapes, both ways
_NAMED = {"\n": "n", "\t": "t", "\r": "r", "\x1b": "e"}
_UNNAMED = {v: k for k, v in _NAMED.items()}


_LONE_SURROGATE = re.compile("[\udc80-\udcff]")


def has_undecodable(session_id: str) -> bool:
    """True when the id holds bytes that are not UTF-8 (surrogate-escaped)."""
    return not session_id.isascii() and _LONE_SURROGATE.search(session_id) is not None


def _canonical(session_id: str) -> str:
    """Bytes that form valid UTF-8 read as text (``\\xc3\\xa9`` is ``é``)."""
    try:
        raw = session_id.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no UTF-8 byte stands for: no store holds it
        return session_id
    return raw.decode("utf-8", "surrogateescape")


def unescape_id(text: str) -> str:
    """A typed id (see the module docstring) as the id it names."""
    if "\\" not in text:
        return text

    def token(match: re.Match[str]) -> str:
        body = match.group(1)
        if body == "\\":
            return "\\"
        if body in _UNNAMED:
            return _UNNAMED[body]
        code = int(body[1:], 16)
        if body[0] == "x" and code >= 0x80:
            return chr(0xDC00 + code)  # a byte that is not UTF-8
        return chr(code) if code <= 0x10FFFF else match.group(0)

    return _canonical(_TOKEN.sub(token, text))


def _escape_char(ch: str) -> str:
    if "\udc80" <= ch <= "\udcff":
        return f"\\x{ord(ch) - 0xDC00:02x}"
    if ch == "\\":
        return "\\\\"
    if ch in _NAMED:
        return "\\" + _NAMED[ch]
    if ch.isprintable():
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_text(text: str) -> str:
    """Every character of ``text`` under the rule, whether or not it needs it (a table
    cell that is not printable: :func:`semvecctl.output.escape_cell`)."""
    return "".join(_escape_char(ch) for ch in text)


def escape_id(session_id: str) -> str:
    """The id as shown (see the module docstring); ``unescape_id`` reverses it."""
    if session_id.isprintable() and unescape_id(session_id) == session_id:
        return session_id
    return escape_text(session_id)


def data_id(session_id: str) -> str:
    """The id as JSON and YAML carry it: the text itself, except an id holding bytes that
    are not UTF-8 (no JSON string can), which is given in its shown form."""
    return escape_id(session_id) if has_undecodable(session_id) else session_id


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
