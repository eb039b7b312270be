"""A command run on a pseudo-terminal of a given width, and what a terminal would show.

The screen is emulated just enough for rich's output (text, CR/LF, cursor up, erase line,
SGR and mode sequences ignored), so a test sees what an operator sees: the lines left on
the screen, and whether any line ran past the right edge (a terminal would have wrapped
it)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


def _cells(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


@dataclass
class Screen:
    columns: int
    lines: list[list[str]] = field(default_factory=lambda: [[]])
    row: int = 0
    col: int = 0
    #: text that reached past the right edge (the terminal wrapped it onto a new line)
    overflows: list[str] = field(default_factory=list)

    def feed(self, text: str) -> None:
        text = _OSC.sub("", text)
        i = 0
        while i < len(text):
            match = _CSI.match(text, i) if text[i] == "\x1b" else None
            if match:
                self._csi(match.group(1), match.group(2))
                i = match.end()
                continue
            self._char(text[i])
            i += 1

    def _line(self) -> list[str]:
        while len(self.lines) <= self.row:
            self.lines.append([])
        return self.lines[self.row]

    def _csi(self, params: str, final: str) -> None:
        n = int(params) if params.isdigit() else None
        if final == "A":
            self.row = max(0, self.row - (n or 1))
        elif final == "B":
            self.row += n or 1
        elif final == "G":
            self.col = (n or 1) - 1
        elif final == "K":
            line = self._line()
            if (n or 0) == 2:
                line[:] = []
            elif (n or 0) == 0:
                del line[self.col:]
        elif final == "J":
            del self.lines[self.row + 1:]
            del self._line()[self.col:]

    def _char(self, ch: str) -> None:
        if ch == "\r":
            self.col = 0
        elif ch == "\n":
            self.row += 1
            self.col = 0
        elif ch == "\b":
            self.col = max(0, self.col - 1)
        elif ch == "\x07" or unicodedata.category(ch) == "Cc":
            return
        else:
            width = _cells(ch)
            if self.col + width > self.columns:  # the terminal wraps: the line was too wide
                self.overflows.append("".join(self._line()))
                self.row += 1
                self.col = 0
            line = self._line()
            while len(line) < self.col:
                line.append(" ")
            line[self.col:self.col + 1] = [ch] + ([""] if width == 2 else [])
            self.col += width

    def text(self) -> list[str]:
        """The screen's lines, trailing blanks stripped, trailing empty lines dropped."""
        lines = ["".join(line).rstrip() for line in self.lines]
        while lines and not lines[-1]:
            lines.pop()
        return lines


def run_on_terminal(args: list[str], *, columns: int, env: dict[str, str] | None = None,
                    timeout: float = 60, piped: list[bytes] | None = None
                    ) -> tuple[int, Screen, str]:
    """``python -m semvecctl ARGS`` with stdin, stdout and stderr on one pseudo-terminal
    ``columns`` wide (as an operator's terminal: both streams on one screen). Returns the
    exit code, the screen and the raw text. With ``piped`` (a list), stdout goes to a pipe
    instead, and what came through it is appended to that list."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    full = {**os.environ, "PYTHONPATH": str(ROOT), "SEMVEC_SESSION_BACKEND": "",
            "COLUMNS": str(columns), "TERM": "xterm-256color", **(env or {})}
    full.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "semvecctl", *args], stdin=child,
                            stdout=subprocess.PIPE if piped is not None else child,
                            stderr=child, env=full, cwd=ROOT)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    if piped is not None:
        piped.append(proc.stdout.read())
    code = proc.wait(timeout=timeout)
    os.close(main)
    raw = b"".join(chunks).decode("utf-8", "replace")
    screen = Screen(columns)
    screen.feed(raw)
    return code, screen, raw
