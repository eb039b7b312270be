"""#15.7: table output escapes control characters and measures wide characters; JSON and
YAML carry the values unchanged. Through the real CLI on the suite's Redis, and on the
renderer itself."""

from __future__ import annotations

import json

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
