"""Rendering: data on stdout (table, json, yaml, jsonl), everything else on stderr.

Colour only when the stream is a TTY and neither ``NO_COLOR`` nor ``--no-color`` is set;
progress bars only on a TTY. Tables are borderless, like ``kubectl get``: rich draws them
where there is colour, and a pipe gets the same text, without escapes, from
:func:`plain_lines` (no rich import: cold start, and a listing of millions of rows).
Every line written passes through the secret scrubber, so a credential that slipped into
a message or a value still never reaches the terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys
from datetime import datetime
from enum import Enum
from typing import Any, Callable, Iterable, Iterator, Sequence


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"


class StreamFormat(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"
    jsonl = "jsonl"


def to_plain(value: Any) -> Any:
    """Dataclasses, enums, datetimes, bytes and sets as JSON/YAML-safe values."""
    if hasattr(type(value), "__dataclass_fields__"):  # a dataclass instance
        from dataclasses import asdict

        return {k: to_plain(v) for k, v in asdict(value).items()}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [to_plain(v) for v in items]
    return value


def escape_cell(text: str) -> str:
    """A table cell on one line: control and invisible format characters (newlines, tabs,
    ESC, bidi overrides) shown as escapes, so a hostile id cannot split a row, hide text
    or move the cursor. The rule is the session ids' (:mod:`backends.contract.session_ids`):
    an id a table shows can be typed back. JSON and YAML carry the value unchanged."""
    if text.isprintable():  # backslashes are doubled only when escapes appear beside them
        return text
    from backends.contract.session_ids import escape_text

    return escape_text(text)


def display_width(text: str) -> int:
    """Terminal cells ``text`` takes: wide (CJK, fullwidth) characters take two, combining
    marks none."""
    import unicodedata

    if text.isascii():
        return len(text)
    width = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


class Column:
    """A table column: header, how to get the cell from a row, and its style on a colour
    terminal (``"bold"``). ``justify`` and ``max_width`` say how a column's values read;
    the table aligns every column left, as ``kubectl get`` does, so a pipe's columns
    start under their headers. A pipe never cuts or wraps a cell; a terminal wraps a long
    cell inside its column, so no line is wider than the terminal."""

    def __init__(self, header: str, key: str | Callable[[Any], Any], *, style: str | None = None,
                 justify: str = "left", max_width: int | None = None) -> None:
        self.header = header
        self.key = key
        self.style = style
        self.justify = justify
        self.max_width = max_width

    def cell(self, row: Any) -> str:
        value = self.key(row) if callable(self.key) else (
            row.get(self.key) if isinstance(row, dict) else getattr(row, self.key, None)
        )
        if value is None:
            return "-"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.4g}"
        if isinstance(value, (list, tuple, set, frozenset)):
            return escape_cell(", ".join(str(v) for v in value)) or "-"
        if isinstance(value, dict):  # a mapping as JSON, never a Python repr
            import json

            return escape_cell(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))
        return escape_cell(str(value))


#: spaces between two columns of a table (``kubectl get``'s tabwriter padding)
COLUMN_GAP = 3
#: the width tables are laid out at: wide enough that no cell is wrapped or cut to fit
#: a terminal (a row stays one line, whole)
_UNBOUNDED = 1 << 20
#: a streamed table's columns: at least this wide, and (but the last) at most this wide
#: unless a cell is wider (that row alone is pushed out of line, never cut)
_STREAM_MIN, _STREAM_MAX = 12, 60


def kube_table(columns: Sequence[Column], rows: Iterable[Sequence[str]] = (), *,
               min_widths: Sequence[int] = (), show_header: bool = True,
               widths: Sequence[int] = ()) -> Any:
    """A borderless rich table laid out like ``kubectl get``: a header row, every column
    left-aligned, ``COLUMN_GAP`` from the next and at least ``min_widths[i]`` wide (exactly
    ``widths[i]`` when given). Laid out wider than the console, rich shrinks the widest
    column first and wraps a cell inside its column (a word too long is folded); at the
    unbounded width of :func:`rich_lines` nothing wraps. The bold header and the columns'
    styles show only on a console with colour. ``rows`` are cell strings, added as plain
    text (a ``[`` is never markup)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=show_header, header_style="bold", show_edge=False,
                  pad_edge=False, padding=(0, COLUMN_GAP, 0, 0))
    for i, column in enumerate(columns):
        table.add_column(column.header, style=column.style, no_wrap=False, overflow="fold",
                         min_width=min_widths[i] if i < len(min_widths) else None,
                         width=widths[i] if i < len(widths) else None)
    for row in rows:
        table.add_row(*(Text(value) for value in row))
    return table


def rich_lines(console: Any, tables: Iterable[Any], width: int | None = None) -> list[Any]:
    """The lines (rich ``Text``) ``console`` draws for ``tables`` at ``width`` (default
    unbounded: nothing wraps), trailing blanks stripped."""
    from rich.text import Text

    options = console.options.update(width=width or _UNBOUNDED)
    lines = []
    for table in tables:
        for segments in console.render_lines(table, options, pad=False):
            line = Text.assemble(*((segment.text, segment.style) for segment in segments))
            line.rstrip()
            lines.append(line)
    return lines


def plain_lines(columns: Sequence[Column], rows: Sequence[Sequence[str]], *,
                min_widths: Sequence[int] = (), show_header: bool = True) -> list[str]:
    """What :func:`rich_lines` draws for ``kube_table(columns, rows, ...)`` on a console
    without colour, without importing rich: a pipe's table costs no cold start and keeps
    pace with a listing of millions of rows (tests/unit/test_table_output.py holds the
    two to the same text)."""
    lines = ([[c.header for c in columns]] if show_header else []) + [list(r) for r in rows]
    widths = [max([min_widths[i] if i < len(min_widths) else 0,
                   *(display_width(line[i]) for line in lines)]) for i in range(len(columns))]
    gap = " " * COLUMN_GAP
    return [gap.join(value + " " * (widths[i] - display_width(value))
                     for i, value in enumerate(line)).rstrip() for line in lines]

def fit_widths(widths: Sequence[int], available: int, *, floor: int = 4) -> list[int]:
    """Column widths (gaps apart) that fit ``available`` cells: the widest column gives up
    a cell first, then the widest again, never below ``floor`` (or its own width)."""
    fitted = list(widths)
    excess = sum(fitted) + COLUMN_GAP * max(len(fitted) - 1, 0) - available
    while excess > 0:
        i = max(range(len(fitted)), key=lambda k: fitted[k])
        if fitted[i] <= floor:
            break
        others = sorted(fitted, reverse=True)
        step = max(min(fitted[i] - max(others[1] if len(others) > 1 else 0, floor), excess), 1)
        fitted[i] -= step
        excess -= step
    return fitted


class _Scrubbed:
    """A text stream that scrubs what is written to it (everything else is the stream's)."""

    def __init__(self, stream: Any, scrub: Callable[[str], str]) -> None:
        self._stream = stream
        self._scrub_text = scrub

    def write(self, text: str) -> int:
        return self._stream.write(self._scrub_text(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Output:
    """Owns stdout/stderr, colour, confirmation and progress for one invocation."""

    def __init__(self, *, no_color: bool = False, verbose: bool = False,
                 scrubber: Callable[[str], str] | None = None) -> None:
        self.verbose = verbose
        self.no_color = no_color or bool(os.environ.get("NO_COLOR"))
        self._scrub = scrubber or (lambda text: text)
        self.last_progress: ProgressTask | None = None
        #: the live progress displays on a terminal now (paused while a table is drawn)
        self._live: list[Any] = []
        #: every progress display of this invocation by label (a transfer's phases)
        self.progress_tasks: dict[str, ProgressTask] = {}

    # -- streams ----------------------------------------------------------------------

    @staticmethod
    def _isatty(stream: Any) -> bool:
        try:
            return bool(stream.isatty())
        except (AttributeError, ValueError):
            return False

    def console(self, stream: Any = None):
        """A Rich console on ``stream`` (default stderr) whose every write passes the
        scrubber: the only way a command gets one, so nothing drawn escapes redaction."""
        return self._console(sys.stderr if stream is None else stream)

    def _console(self, stream: Any):
        from rich.console import Console

        tty = self._isatty(stream)
        width = None if tty else int(os.environ.get("COLUMNS", "0") or 0) or 200
        return Console(file=_Scrubbed(stream, self._scrub), no_color=self.no_color or not tty,
                       width=width,
                       highlight=False, soft_wrap=False, emoji=False,
                       color_system="auto" if tty and not self.no_color else None)

    def write(self, text: str) -> None:
        """Raw data line(s) on stdout."""
        with self._above_progress():
            sys.stdout.write(self._scrub(text))
            if not text.endswith("\n"):
                sys.stdout.write("\n")
            sys.stdout.flush()

    @contextlib.contextmanager
    def _above_progress(self) -> Iterator[None]:
        """Data for a terminal is written with the live progress displays cleared off it
        and drawn again below: a progress line is never left in front of a table."""
        live = [bar for bar in self._live if bar.live.is_started] \
            if self._live and self._isatty(sys.stdout) else []
        for bar in live:
            bar.stop()  # transient: its lines are erased
        try:
            yield
        finally:
            for bar in live:
                bar.start()

    _STYLES = {"dim": "2", "green": "32", "yellow": "33", "bold red": "1;31"}

    def _message(self, prefix: str, text: str, style: str) -> None:
        line = self._scrub(f"{prefix}{text}")
        if self._isatty(sys.stderr) and not self.no_color:
            line = f"\x1b[{self._STYLES.get(style, '0')}m{line}\x1b[0m"
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def info(self, text: str) -> None:
        self._message("", text, "dim")

    def success(self, text: str) -> None:
        self._message("", text, "green")

    def warn(self, text: str) -> None:
        self._message("warning: ", text, "yellow")

    def error(self, text: str) -> None:
        self._message("error: ", text, "bold red")

    def debug(self, text: str) -> None:
        if self.verbose:
            self._message("debug: ", text, "dim")

    # -- data -------------------------------------------------------------------------

    def emit(self, data: Any, fmt: str | Enum, *, columns: Sequence[Column] | None = None,
             rows: Iterable[Any] | None = None, title: str | None = None,
             table: Callable[[], None] | None = None) -> None:
        """Render ``data`` as json/yaml, or ``rows`` with ``columns`` (or ``table()``) as a table."""
        fmt = fmt.value if isinstance(fmt, Enum) else fmt
        if fmt == "json":
            import json  # here, not at the top: a table never pays for it (cold start)

            self.write(json.dumps(to_plain(data), indent=2, sort_keys=False, default=str))
        elif fmt == "yaml":
            import yaml

            self.write(yaml.safe_dump(to_plain(data), sort_keys=False, allow_unicode=True).rstrip("\n"))
        elif fmt == "jsonl":
            import json

            items = data if isinstance(data, (list, tuple)) else [data]
            for item in items:
                self.write(json.dumps(to_plain(item), default=str))
        elif table is not None:
            table()
        else:
            self.table(columns or [], rows if rows is not None else data, title=title)

    def table(self, columns: Sequence[Column], rows: Iterable[Any], *, title: str | None = None) -> int:
        """``rows`` as a :func:`kube_table` on stdout, ``title`` on a line above it."""
        cells = [[col.cell(row) for col in columns] for row in rows]
        self._draw(columns, [(cells, True)], title=title)
        return len(cells)

    def _draw(self, columns: Sequence[Column], parts: Sequence[tuple[list[list[str]], bool]], *,
              min_widths: Sequence[int] = (), title: str | None = None,
              widths: Sequence[int] = ()) -> None:
        """Tables of ``columns`` one under the other (each part: its rows and whether it
        shows the header). On a terminal rich draws them at its width (colour unless
        ``NO_COLOR``), long cells wrapped inside their columns; a pipe gets the text
        unwrapped, without escapes (:func:`plain_lines`). One write, scrubbed whole."""
        if not self._isatty(sys.stdout):
            lines = [escape_cell(title)] if title else []
            for cells, header in parts:
                lines += plain_lines(columns, cells, min_widths=min_widths, show_header=header)
            self.write("\n".join(lines))
            return
        from rich.text import Text

        console = self._console(sys.stdout)
        heading = [Text(escape_cell(title))] if title else []
        drawn = rich_lines(console, [*heading, *(
            kube_table(columns, cells, min_widths=min_widths, show_header=header, widths=widths)
            for cells, header in parts)], width=console.width)
        with self._above_progress():
            console.print(Text("\n").join(drawn), soft_wrap=True)

    def stream(self, rows: Iterable[Any], fmt: str | Enum, columns: Sequence[Column]) -> int:
        """Render a possibly huge stream: jsonl and table print as rows arrive."""
        fmt = fmt.value if isinstance(fmt, Enum) else fmt
        count = 0
        if fmt == "jsonl":
            import json

            for row in rows:
                self.write(json.dumps(to_plain(row), default=str))
                count += 1
            return count
        if fmt == "json":
            return self._stream_json(rows)
        if fmt == "yaml":
            return self._stream_yaml(rows)
        # table: drawn in chunks so memory stays flat; the first chunk sets the widths
        chunk: list[Any] = []
        widths: list[int] | None = None
        for row in rows:
            chunk.append(row)
            count += 1
            if len(chunk) >= 500:
                widths = self._draw_chunk(columns, chunk, widths)
                chunk = []
        if chunk or widths is None:
            self._draw_chunk(columns, chunk, widths)
        return count

    def _stream_json(self, rows: Iterable[Any]) -> int:
        """One JSON array written as the rows arrive (``[``, the items, ``]``), laid out
        as ``emit`` lays out a list, so memory holds one row, not the listing. A failure
        half-way leaves the array unclosed: a reader sees invalid JSON, never a short list."""
        import json

        count = 0
        for row in rows:
            body = json.dumps(to_plain(row), indent=2, default=str).replace("\n", "\n  ")
            sys.stdout.write(self._scrub(("[\n  " if count == 0 else ",\n  ") + body))
            count += 1
            if count % 500 == 0:
                sys.stdout.flush()
        self.write("[]" if count == 0 else "\n]")
        return count

    def stream_document(self, head: dict[str, Any], key: str, rows: Iterable[Any],
                        tail: Callable[[], dict[str, Any]], fmt: str | Enum) -> int:
        """A json/yaml object ``{**head, key: [rows...], **tail()}`` written as the rows
        arrive (``tail`` is called once they are exhausted: totals known only then), so
        a preview or a report of a huge stream never holds it. Returns the row count."""
        fmt = fmt.value if isinstance(fmt, Enum) else fmt
        if fmt == "json":
            import json

            def member(name: str, value: Any) -> str:
                body = json.dumps(to_plain(value), indent=2, default=str).replace("\n", "\n  ")
                return f"  {json.dumps(name)}: {body}"

            sys.stdout.write(self._scrub("{\n" + "".join(member(k, v) + ",\n"
                                                          for k, v in head.items())))
            sys.stdout.write(self._scrub(f"  {json.dumps(key)}: "))
            count = 0
            for row in rows:
                body = json.dumps(to_plain(row), indent=2, default=str).replace("\n", "\n    ")
                sys.stdout.write(self._scrub(("[\n    " if count == 0 else ",\n    ") + body))
                count += 1
            sys.stdout.write("[]" if count == 0 else "\n  ]")
            rest = tail()
            self.write("".join(",\n" + member(k, v) for k, v in rest.items()) + "\n}")
            return count
        import yaml

        def dump(value: Any) -> str:
            return yaml.safe_dump(to_plain(value), sort_keys=False, allow_unicode=True)

        if head:
            sys.stdout.write(self._scrub(dump(head)))
        count = 0
        for row in rows:
            if count == 0:  # "key:" then the block sequence; no rows: "key: []"
                sys.stdout.write(self._scrub(dump({key: None}).replace(" null\n", "\n")))
            sys.stdout.write(self._scrub(dump([row])))
            count += 1
        if count == 0:
            sys.stdout.write(self._scrub(dump({key: []})))
        rest = tail()
        if rest:
            sys.stdout.write(self._scrub(dump(rest)))
        sys.stdout.flush()
        return count

    def _stream_yaml(self, rows: Iterable[Any]) -> int:
        """A YAML sequence written one entry at a time (each ``- ...`` block is what
        ``safe_dump`` makes of a one-item list, so the whole is the list it would make)."""
        import yaml

        count = 0
        for row in rows:
            sys.stdout.write(self._scrub(yaml.safe_dump([to_plain(row)], sort_keys=False,
                                                        allow_unicode=True)))
            count += 1
            if count % 500 == 0:
                sys.stdout.flush()
        if count == 0:
            self.write("[]")
        sys.stdout.flush()
        return count

    def _draw_chunk(self, columns: Sequence[Column], chunk: list[Any],
                    widths: list[int] | None) -> list[int]:
        """One chunk of a streamed table under the widths the first chunk set (with the
        header): each column as wide as its header or widest cell, within the stream's
        bounds (the last column unbounded). A row with a cell wider than its column is
        drawn alone, so it alone is pushed out of line and its cell is never cut."""
        cells = [[c.cell(r) for c in columns] for r in chunk]
        header = widths is None
        if self._isatty(sys.stdout):  # the terminal's width: long cells wrap in their column
            if widths is None:
                natural = [min(max([display_width(c.header), *(display_width(r[i]) for r in cells)]),
                               _STREAM_MAX) for i, c in enumerate(columns)]
                widths = fit_widths(natural, self._console(sys.stdout).width)
            self._draw(columns, [(cells, header)], widths=widths)
            return widths
        if widths is None:
            widths = [max(display_width(c.header), _STREAM_MIN) for c in columns]
            for row in cells:
                for i, value in enumerate(row[:-1]):
                    widths[i] = min(max(widths[i], display_width(value)), _STREAM_MAX)
        parts: list[tuple[list[list[str]], bool]] = []
        run: list[list[str]] = []
        for row in cells:
            if any(display_width(v) > w for v, w in zip(row[:-1], widths)):
                if run:
                    parts.append((run, header and not parts))
                    run = []
                parts.append(([row], header and not parts))
            else:
                run.append(row)
        if run or not parts:
            parts.append((run, header and not parts))
        self._draw(columns, parts, min_widths=widths)
        return widths

    # -- interaction ------------------------------------------------------------------

    def can_prompt(self) -> bool:
        return self._isatty(sys.stdin) and self._isatty(sys.stderr)

    def progress(self, items: Iterable[Any], *, total: int | None = None,
                 label: str = "working") -> Iterator[Any]:
        """Wrap ``items`` with a live count, rate and ETA on a TTY; a plain passthrough on
        a pipe. ``self.last_progress`` keeps (count, seconds) for the summary line."""
        with self.progress_task(label, total=total) as task:
            for item in items:
                yield item
                task.advance()

    @contextlib.contextmanager
    def phase(self, label: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        """One phase of long work (``backends.transfer.progress``): a display of its own,
        yielding the ``tick(n)`` the phase calls as it works."""
        with self.progress_task(label, total=total) as task:
            yield task.advance

    @contextlib.contextmanager
    def progress_task(self, label: str, *, total: int | None = None,
                      unit: str = "", ends_in: float | None = None) -> Iterator["ProgressTask"]:
        """A progress display the caller advances (or sets) itself; rich on a TTY only.
        ``ends_in`` (seconds) is for work bounded by time rather than by a count: the
        display shows the time left."""
        task = ProgressTask(total)
        self.last_progress = task
        self.progress_tasks[label] = task
        if not self._isatty(sys.stderr):
            try:
                yield task
            finally:
                task.finish()
            return
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        columns = [TextColumn("{task.description}"), BarColumn() if total else TextColumn(""),
                   TextColumn("{task.completed:,.0f}" + (f"/{total:,}" if total else "") + f"{unit}"),
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn()]
        if total:
            columns.append(TimeRemainingColumn())
        if ends_in is not None:
            columns.append(TextColumn("{task.fields[left]}"))

        def left() -> str:
            if ends_in is None:
                return ""
            seconds = max(0, int(ends_in - task.elapsed + 0.999))
            return f"{seconds // 60}:{seconds % 60:02d} left"

        with Progress(*columns, console=self._console(sys.stderr), transient=True,
                      redirect_stdout=False) as bar:  # data stays on stdout
            self._live.append(bar)
            handle = bar.add_task(label, total=total, rate="", left=left())
            task.attach(lambda: bar.update(handle, completed=task.count,
                                           rate=f"{task.rate:,.0f}/s", left=left()))
            try:
                yield task
            finally:
                task.finish()
                self._live.remove(bar)


class ProgressTask:
    """Counts work for a progress display and for the final summary line."""

    def __init__(self, total: int | None = None) -> None:
        import time

        self.total = total
        self.count = 0
        self._clock = time.monotonic
        self.started = self._clock()
        self.elapsed = 0.0
        self._refresh: Callable[[], None] | None = None

    def attach(self, refresh: Callable[[], None]) -> None:
        self._refresh = refresh

    def advance(self, n: int = 1) -> None:
        self.set(self.count + n)

    def set(self, count: int) -> None:
        self.count = count
        self.elapsed = self._clock() - self.started
        if self._refresh is not None:
            self._refresh()

    @property
    def rate(self) -> float:
        return self.count / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def measured_rate(self) -> float | None:
        """The rate, or None when there is none to tell: nothing was counted (a task whose
        work reports no count, e.g. an audit done by the server's own queries, is not
        "0/s") or the time was too short for the clock to measure."""
        if self.count <= 0 or self.elapsed <= 0:
            return None
        return self.count / self.elapsed

    def finish(self) -> None:
        self.elapsed = self._clock() - self.started

    def summary(self) -> str:
        """``in 3.2s (385/s)``: what the final line appends (``in 0.3s`` alone when there
        is no rate to tell: :attr:`measured_rate`)."""
        rate = self.measured_rate
        if rate is None:
            return f"in {self.elapsed:.1f}s"
        return f"in {self.elapsed:.1f}s ({rate:,.0f}/s)" if rate >= 10 else \
            f"in {self.elapsed:.1f}s ({rate:.2g}/s)"
