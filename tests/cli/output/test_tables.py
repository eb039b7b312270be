"""#15.7: table output escapes control characters and measures wide characters; JSON and
YAML carry the values unchanged. Through the real CLI on the suite's Redis, and on the
renderer itself."""

from __future__ import annotations

import io
import json
import re
import sys

import yaml
from typer.testing import CliRunner

from semvecctl.app import app
from semvecctl.output import Column, Output, display_width, escape_cell

HOSTILE = ["line\nbreak", "tab\there", "esc\x1b[31mred", "bidi\u202eevil", "nul\x00x",
           "bell\x07", "cr\rover"]


def test_escape_cell_keeps_one_line_and_no_raw_controls():
    for text in HOSTILE:
        cell = escape_cell(text)
        assert "\n" not in cell and "\r" not in cell and "\t" not in cell
        assert all(ch.isprintable() for ch in cell), repr(cell)
    assert escape_cell("a\nb") == "a\\nb" and escape_cell("a\tb") == "a\\tb"
    assert escape_cell("a\\nb") == "a\\nb"  # printable text is left alone
    assert escape_cell("x\\\n") == "x\\\\\\n"  # with an escape beside it, \ is doubled
    assert escape_cell("会话 ok") == "会话 ok"


def test_display_width_counts_wide_characters_twice():
    assert display_width("abc") == 3
    assert display_width("会话") == 4
    assert display_width("ｆｕｌｌ") == 8
    assert display_width("e\u0301") == 1  # combining accent


def _render(capsys, rows):
    Output(no_color=True).table([Column("ID", "id"), Column("NEXT", "next")], rows)
    return capsys.readouterr().out.splitlines()


def test_columns_align_by_display_width(capsys):
    lines = _render(capsys, [{"id": "会话-一", "next": "x"}, {"id": "ascii-id", "next": "y"},
                             {"id": "a\nb", "next": "z"}])
    assert len(lines) == 4  # header + 3 rows: the newline did not split a row
    starts = [display_width(line[: line.rindex(" ") + 1]) for line in lines]
    assert len(set(starts)) == 1, lines


def test_sessions_list_table_vs_json_on_redis(redis_url):
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(uri=redis_url)
    try:
        store = adapter.state_store()
        store.save("tbl\nsplit", b"x", expected_version=None, owner_subject="t\tone",
                   pending_message="hello\nworld")
        store.save("会话-1", b"y", expected_version=None, owner_subject="租户")
    finally:
        adapter.close()
    env = {"SEMVEC_SESSION_BACKEND": ""}
    table = CliRunner().invoke(app, ["sessions", "list", "--uri", redis_url], env=env)
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert len(lines) == 3, lines
    assert any("tbl\\nsplit" in ln and "t\\tone" in ln and "hello\\nworld" in ln for ln in lines)
    import re

    version_col = [display_width(ln[: re.search(r"\S {2,}(\S)", ln).start(1)]) for ln in lines]
    assert len(set(version_col)) == 1, lines
    data = json.loads(CliRunner().invoke(app, ["sessions", "list", "--uri", redis_url, "-o", "json"],
                                         env=env).stdout)
    by_id = {r["session_id"]: r for r in data}
    assert by_id["tbl\nsplit"]["pending_message"] == "hello\nworld"
    assert by_id["会话-1"]["owner_subject"] == "租户"
    inspected = CliRunner().invoke(app, ["sessions", "inspect", "tbl\nsplit", "--uri", redis_url,
                                         "-o", "yaml"], env=env)
    assert yaml.safe_load(inspected.stdout)["owner_subject"] == "t\tone"


CELLS = ["", "a", "会话-一", "ｆｕｌｌ", "e\u0301", "a\\nb", "[bold]x[/]", "x" * 30, "  lead", "mid  "]


def test_a_pipe_gets_the_text_rich_draws_without_colour():
    """The plain twin (no rich import on a pipe) draws what rich draws for the same table
    on a console without colour: same widths, gaps and rows, markup left as text."""
    import io
    import random

    from rich.console import Console

    from semvecctl.output import kube_table, plain_lines, rich_lines

    console = Console(file=io.StringIO(), color_system=None, width=40)
    columns = [Column("ID", "id"), Column("NEXT", "next", style="bold"), Column("LAST", "last")]
    pick = random.Random(7)
    for _ in range(60):
        rows = [[pick.choice(CELLS) for _ in columns] for _ in range(pick.randrange(0, 5))]
        widths = [pick.randrange(0, 14) for _ in columns] if pick.random() < 0.5 else []
        header = pick.random() < 0.8
        drawn = rich_lines(console, [kube_table(columns, rows, min_widths=widths,
                                                show_header=header)])
        assert [line.plain for line in drawn] == plain_lines(
            columns, rows, min_widths=widths, show_header=header), (rows, widths, header)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _drawn(monkeypatch, stdout, **kwargs) -> str:
    monkeypatch.setattr(sys, "stdout", stdout)
    Output(**kwargs).table([Column("ID", "id", style="bold"), Column("NEXT", "next")],
                           [{"id": "a", "next": "x"}, {"id": "longer-id", "next": "[red]y"}])
    return stdout.getvalue()


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "80")  # wide enough: the terminal draws the pipe's text
    plain = _drawn(monkeypatch, io.StringIO())
    assert plain == "ID          NEXT\na           x\nlonger-id   [red]y\n"
    coloured = _drawn(monkeypatch, _Terminal())
    assert "\x1b[1m" in coloured and "\x1b[31m" not in coloured  # bold; markup stays text
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    assert _drawn(monkeypatch, _Terminal(), no_color=True) == plain
    monkeypatch.setenv("NO_COLOR", "1")
    assert _drawn(monkeypatch, _Terminal()) == plain


def test_a_narrow_terminal_wraps_cells_inside_their_columns_and_a_pipe_never(monkeypatch):
    """Narrower than the table: on a terminal every line fits and every character is still
    there (wrapped inside its column, the widest column shrunk first); a pipe's rows are
    never wrapped or cut, whatever COLUMNS says."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "12")
    assert _drawn(monkeypatch, io.StringIO()) == "ID          NEXT\na           x\nlonger-id   [red]y\n"
    for kwargs in ({}, {"no_color": True}):
        drawn = re.sub(r"\x1b\[[0-9;]*m", "", _drawn(monkeypatch, _Terminal(), **kwargs))
        lines = drawn.splitlines()
        assert max(display_width(ln) for ln in lines) <= 12, lines
        assert sorted("".join(drawn.split())) == sorted("IDNEXTaxlonger-id[red]y"), lines


def test_a_streamed_table_keeps_the_first_chunks_widths_and_never_cuts_a_cell(monkeypatch):
    """Columns at least 12 wide and (but the last) at most 60 unless a cell is wider:
    then that row alone is pushed out of line; later chunks line up under the header."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    rows = [{"id": f"s{i}", "v": i} for i in range(499)] + [{"id": "w" * 70, "v": 1}]
    rows += [{"id": "later-" + "z" * 20, "v": 2}, {"id": "y" * 61, "v": 3}, {"id": "s", "v": 4}]
    assert Output().stream(iter(rows), "table", [Column("ID", "id"), Column("V", "v")]) == 503
    lines = out.getvalue().splitlines()
    assert lines[0] == "ID" + " " * 61 + "V" and lines[1] == "s0" + " " * 61 + "0"  # 60 wide
    assert lines[500] == "w" * 70 + "   1"  # whole, pushed out alone
    assert lines[502] == "y" * 61 + "   3"
    assert {ln.rindex(" ") + 1 for ln in lines if ln[0] not in "wy"} == {63}
    assert len(lines) == 504
    short = io.StringIO()
    monkeypatch.setattr(sys, "stdout", short)
    Output().stream(iter([{"id": "a", "v": 1}]), "table", [Column("ID", "id"), Column("V", "v")])
    assert short.getvalue() == "ID" + " " * 13 + "V\na" + " " * 14 + "1\n"  # at least 12
