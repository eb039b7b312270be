"""Tables on a real pseudo-terminal 80 and 100 columns wide, stdout and stderr on one
screen as an operator has them: no line runs past the right edge (long cells wrap inside
their column), every row is there, and no progress line is left in front of a table."""

from __future__ import annotations

import pytest

from tests.support.terminal import run_on_terminal

LONG = "acme-tenant-with-a-rather-long-name/agent-" + "x" * 40


def _seed(redis_url: str, *, damaged: bool = False) -> None:
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(uri=redis_url)
    try:
        store = adapter.state_store()
        for i in range(3):
            store.save(f"term-session-{i}-" + "y" * 30, b"blob" * (i + 1), expected_version=None,
                       owner_subject=LONG, pending_message="a pending message " * 4)
        store.save("term-short", b"x", expected_version=None)
    finally:
        adapter.close()
    if not damaged:
        return
    import redis

    client = redis.Redis.from_url(redis_url)
    try:  # a session hash the engine cannot read: doctor reports it in a long row
        client.hset("semvec:state:term-damaged-" + "z" * 50, mapping={"version": "oops"})
    finally:
        client.close()


def _rows(lines: list[str], header: str, key: str, until: str) -> list[dict[str, str]]:
    """The table under ``header`` read back: each column's pieces joined (white space
    dropped, as a wrap drops it), a row starting where column ``key`` has a value; the
    table ends at the stderr summary line matching ``until``."""
    import re

    top = next(i for i, line in enumerate(lines) if line.startswith(header))
    names = re.findall(r"\S+", lines[top])
    starts = [lines[top].index(name) for name in names] + [10**6]
    rows: list[dict[str, str]] = []
    for line in lines[top + 1:]:
        if re.match(until, line):
            break
        cells = {n: line[starts[i]:starts[i + 1]].strip() for i, n in enumerate(names)}
        if cells[key]:
            rows.append({n: "" for n in names})
        elif not rows:
            continue
        for n, v in cells.items():
            rows[-1][n] += "".join(v.split())
    return rows


def _check(screen, header: str) -> list[str]:
    lines = screen.text()
    assert not screen.overflows, screen.overflows
    assert max(len(line) for line in lines) <= screen.columns
    tops = [i for i, line in enumerate(lines) if line.startswith(header)]
    assert tops, lines
    assert all("auditing" not in line and "━" not in line for line in lines), lines
    return lines


@pytest.mark.parametrize("columns", [80, 100])
def test_sessions_list_fits_and_shows_every_row(redis_url, columns):
    _seed(redis_url)
    code, screen, raw = run_on_terminal(["sessions", "list", "--uri", redis_url], columns=columns)
    assert code == 0, raw
    lines = _check(screen, "SESSION")
    rows = _rows(lines, "SESSION", "VERSION", r"\d+ session\(s\)")
    assert sorted(r["SESSION"] for r in rows) == sorted(
        [f"term-session-{i}-" + "y" * 30 for i in range(3)] + ["term-short"]), lines
    assert sorted(r["OWNER"] for r in rows) == sorted([LONG] * 3 + ["-"]), lines


@pytest.mark.parametrize("columns", [80, 100])
def test_doctor_leaves_no_progress_line_before_its_table(redis_url, columns):
    _seed(redis_url, damaged=True)
    code, screen, raw = run_on_terminal(["doctor", "--uri", redis_url], columns=columns)
    assert code in (0, 1), raw
    lines = _check(screen, "SEVERITY")
    assert lines[0].startswith("SEVERITY"), lines  # nothing in front of the table
    rows = _rows(lines, "SEVERITY", "SEVERITY", r"\d+ error\(s\)")
    assert any("term-damaged-" + "z" * 50 in r["WHERE"] for r in rows), lines


@pytest.mark.parametrize("columns", [80, 100])
def test_health_and_an_erase_preview_fit(redis_url, columns):
    _seed(redis_url)
    code, screen, raw = run_on_terminal(["health", "--uri", redis_url], columns=columns)
    assert code in (0, 1), raw
    assert not screen.overflows, screen.overflows
    code, screen, raw = run_on_terminal(["erase", "--uri", redis_url, "--user", "u-term", "--owner", LONG],
                                        columns=columns)
    assert code == 0, raw
    assert not screen.overflows, screen.overflows
    flat = "".join("".join(screen.text()).split())
    assert screen.text()[0].split() == ["PLACE", "COUNT", "DETAIL"], screen.text()
    assert "kept,astheenginekeepsit:theuser'snexteventcontinuesthesequence" in flat


def test_with_stderr_on_a_terminal_and_stdout_on_a_pipe_the_table_stays_on_stdout(redis_url):
    """The live progress display on stderr no longer takes stdout over: doctor's table (the
    data) goes to the pipe, unwrapped, and nothing of it to the terminal."""
    _seed(redis_url, damaged=True)
    piped: list[bytes] = []
    _, terminal, _ = run_on_terminal(["doctor", "--uri", redis_url], columns=80, piped=piped)
    out = piped[0].decode()
    assert out.startswith("SEVERITY") and "term-damaged-" + "z" * 50 in out, out
    assert not any("SEVERITY" in line for line in terminal.text()), terminal.text()
