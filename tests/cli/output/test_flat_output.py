"""``-o json`` / ``-o yaml`` of a streamed listing (#28 item 3): one valid document,
written as the rows arrive (the row before is on stdout before the next is read), the
same document the one-shot rendering makes. Memory adapters only (no server)."""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from backends.memory import MemoryBackendAdapter
from semvecctl.app import app
from semvecctl.output import Output

ROWS = [{"id": "a", "text": "two\nlines", "n": [1, 2], "meta": {"x": None}},
        {"id": "b", "text": "ü ✓", "n": [], "meta": {}}]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("rows", [ROWS, []], ids=["rows", "empty"])
def test_stream_is_the_document_emit_makes(monkeypatch, fmt, rows):
    streamed, emitted = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", streamed)
    assert Output().stream(iter(rows), fmt, []) == len(rows)
    monkeypatch.setattr(sys, "stdout", emitted)
    Output().emit(list(rows), fmt)
    load = json.loads if fmt == "json" else yaml.safe_load
    assert load(streamed.getvalue()) == rows == load(emitted.getvalue())
    if fmt == "json":
        assert streamed.getvalue() == emitted.getvalue()


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_each_row_is_written_before_the_next_is_read(monkeypatch, fmt):
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    seen_before: list[str] = []

    def rows():
        for i in range(3):
            seen_before.append(stdout.getvalue())
            yield {"id": f"row-{i}"}

    Output().stream(rows(), fmt, [])
    assert "row-0" not in seen_before[0]
    assert "row-0" in seen_before[1] and "row-1" in seen_before[2] and "row-2" not in seen_before[2]


FILLED: dict[str, MemoryBackendAdapter] = {}


def filled_memory() -> MemoryBackendAdapter:
    return FILLED["adapter"]


def test_sessions_list_json_is_valid_and_matches_jsonl():
    adapter = MemoryBackendAdapter()
    for i in range(1200):  # more than one flush chunk
        adapter.state_store().save(f"s{i:04d}", b"x" * (i % 7), expected_version=None,
                                   owner_subject="acme" if i % 2 else None)
    FILLED["adapter"] = adapter
    base = ["sessions", "list", "--adapter", "tests.cli.output.test_flat_output:filled_memory"]
    as_json = CliRunner().invoke(app, [*base, "-o", "json"])
    as_jsonl = CliRunner().invoke(app, [*base, "-o", "jsonl"])
    assert as_json.exit_code == 0 == as_jsonl.exit_code, as_json.output
    parsed = json.loads(as_json.stdout)
    assert parsed == [json.loads(line) for line in as_jsonl.stdout.splitlines()]
    assert len(parsed) == 1200
    nothing = CliRunner().invoke(app, [*base, "-o", "json", "--match", "nope*"])
    assert nothing.exit_code == 0 and json.loads(nothing.stdout) == []


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("rows", [ROWS, []], ids=["rows", "empty"])
def test_a_streamed_document_is_the_object_with_its_totals_after_the_rows(monkeypatch, fmt, rows):
    """Import/copy previews and doctor reports: head fields, the rows, then totals that
    are only known once the rows are read."""
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    read: list[Any] = []

    def counted():
        for row in rows:
            read.append(row)
            yield row

    count = Output().stream_document({"applied": False, "where": {"uri": "x"}}, "sessions",
                                     counted(), lambda: {"create": len(read)}, fmt)
    assert count == len(rows)
    load = json.loads if fmt == "json" else yaml.safe_load
    assert load(stdout.getvalue()) == {"applied": False, "where": {"uri": "x"},
                                       "sessions": rows, "create": len(rows)}


def test_import_preview_as_json_is_one_valid_document(tmp_path):
    adapter = MemoryBackendAdapter()
    for i in range(700):
        adapter.state_store().save(f"p{i:04d}", b"x", expected_version=None)
    FILLED["adapter"] = adapter
    path = tmp_path / "a.jsonl"
    exported = CliRunner().invoke(app, ["sessions", "export", "--adapter",
                                        "tests.cli.output.test_flat_output:filled_memory",
                                        "--out", str(path)])
    assert exported.exit_code == 0, exported.output
    preview = CliRunner().invoke(app, ["sessions", "import", str(path), "--uri", "memory://",
                                       "-o", "json"])
    assert preview.exit_code == 0, preview.output
    document = json.loads(preview.stdout)
    assert document["applied"] is False and document["create"] == 700
    assert len(document["sessions"]) == 700 and document["conflict"] == 0
