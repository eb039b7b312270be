"""Every id ``sessions list`` prints can be typed back: newline, tab, control characters
(no NUL), bidi marks, a literal backslash escape, bytes that are not UTF-8 and a 10,000
character id, each listed as a table on the suite's Redis, then inspected, listed by
events, and deleted with exactly the text the table showed. One rule, and its inverse
(:mod:`backends.contract.session_ids`)."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from backends.contract.session_ids import escape_id, unescape_id
from semvecctl.app import app

ODD = {
    "newline": "a\nb",
    "tab": "a\tb",
    "controls": "c\x01\x07\x1b[31m\x7f\x85d",
    "rtl": "\u200fabc\u202edef\u2066",
    "literal-escape": "lit\\nnot-a-newline\\x41",
    "backslash": "one\\two",
    "separators": "a\u2028b\u00a0c",
    "long": "L" * 10_000,
}


def _run(*args: str):
    return CliRunner().invoke(app, list(args), env={"SEMVEC_SESSION_BACKEND": "", "COLUMNS": "100"})


def test_the_rule_and_its_inverse():
    for text in [*ODD.values(), "\udcff\udc80raw", "plain", "é会话", "\U0001F600"]:
        shown = escape_id(text)
        assert shown.isprintable() and "\n" not in shown, repr(shown)
        assert unescape_id(shown) == text, (text, shown)
    assert escape_id("plain-id") == "plain-id" and escape_id("a\\b") == "a\\b"  # \\b: no escape
    assert escape_id("one\\two") == "one\\\\two"  # \\t would read back as a tab
    assert escape_id("a\nb") == "a\\nb" and escape_id("\u200f") == "\\u200f"


@pytest.mark.parametrize("name", sorted(ODD))
def test_list_then_inspect_events_and_delete_with_what_list_printed(redis_url, name):
    from backends.contract import MemoryEvent
    from backends.redis import RedisBackendAdapter

    tag = uuid.uuid4().hex[:8]
    sid = f"rt-{tag}-{ODD[name]}"
    user = f"u-{tag}"
    adapter = RedisBackendAdapter(uri=redis_url)
    try:
        adapter.commit_turn(sid, b"state", expected_version=None, owner_subject="acme",
                            events=[MemoryEvent(event_id=str(uuid.uuid4()), user_id=user,
                                                content="x", session_id=sid,
                                                owner_subject="acme")])
    finally:
        adapter.close()
    listed = _run("sessions", "list", "--uri", redis_url, "--match", f"rt-{tag}-*")
    assert listed.exit_code == 0, listed.output
    (row,) = listed.stdout.splitlines()[1:]
    printed = row.split("   ")[0]  # the SESSION column, as the table printed it
    assert printed == escape_id(sid) and printed.isprintable()
    as_json = json.loads(_run("sessions", "list", "--uri", redis_url, "--match", f"rt-{tag}-*",
                              "-o", "json").stdout)
    assert [r["session_id"] for r in as_json] == [sid]  # JSON carries the id itself
    inspected = _run("sessions", "inspect", printed, "--uri", redis_url, "-o", "json")
    assert inspected.exit_code == 0, inspected.output
    assert json.loads(inspected.stdout)["session_id"] == sid
    events = _run("events", "list", "--uri", redis_url, "--user", user, "--session", printed,
                  "-o", "json")
    assert events.exit_code == 0 and len(json.loads(events.stdout)) == 1, events.output
    deleted = _run("sessions", "delete", printed, "--uri", redis_url, "--apply", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert _run("sessions", "inspect", printed, "--uri", redis_url).exit_code == 1
