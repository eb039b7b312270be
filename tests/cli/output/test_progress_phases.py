"""#28 item 2: on a terminal, every phase of a 20k-session import and copy shows its
progress (verifying the archive, checking records, checking conflicts, writing, reading
back; a copy reads the source first), with a count and rate, and a total and ETA where
it is known; on a pipe nothing but the summary lines. The terminal is a real
pseudo-terminal (python's ``pty``); the stores are in-memory (the source of the copy is
built in the child process by ``filled_source``), so no server is needed."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backends.archive import ArchiveHeader, ArchiveWriter, SessionRecord
from backends.memory import MemoryBackendAdapter
from semvecctl.app import app

ROOT = Path(__file__).resolve().parents[3]
SESSIONS = 20_000
IMPORT_PHASES = ["verifying archive", "checking records", "checking conflicts", "writing",
                 "reading back"]
COPY_PHASES = ["reading source", *IMPORT_PHASES]


def filled_source() -> MemoryBackendAdapter:
    """A memory store holding SESSIONS sessions (the copy's source, built in the child)."""
    adapter = MemoryBackendAdapter()
    store = adapter.state_store()
    for i in range(SESSIONS):
        store.save(f"p-{i:05d}", b"blob %d" % i, expected_version=None)
    return adapter


def write_archive(path: Path, sessions: int) -> Path:
    header = ArchiveHeader(source_backend="memory", source_uri="memory://",
                           created_at=ArchiveHeader.now(), tool_version="0.0.test")
    with open(path, "wb") as stream:
        writer = ArchiveWriter(stream, header)
        for i in range(sessions):
            writer.add(SessionRecord(f"p-{i:05d}", 1, None, None, b"blob %d" % i))
        writer.finish()
    return path


@pytest.fixture
def archive(tmp_path) -> Path:
    return write_archive(tmp_path / "20k.jsonl", SESSIONS)


def _yes(*command: str) -> list[str]:
    """``--yes`` where the command takes one (a write that asks on a terminal)."""
    shown = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    return ["--yes"] if "--yes" in shown.stdout else []


def on_a_terminal(*args: str) -> tuple[int, str]:
    """Run semvecctl with stdin and stderr on a pseudo-terminal; (exit code, what the
    terminal received)."""
    main, child = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SEMVEC_SESSION_BACKEND": "", "COLUMNS": "160"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "semvecctl", *args], stdin=child,
                            stdout=subprocess.DEVNULL, stderr=child, env=env, cwd=ROOT)
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
    code = proc.wait(timeout=300)
    os.close(main)
    return code, b"".join(chunks).decode("utf-8", "replace")


def phase_lines(text: str, label: str) -> list[str]:
    """The drawn lines of phase ``label``: its label, then a count and a rate."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    return [line for line in re.split(r"[\r\n]+", plain)
            if re.match(rf"\s*{re.escape(label)}\s.*[\d,]+.*/s", line)]


def test_every_phase_of_an_import_shows_progress_on_a_terminal(archive):
    code, text = on_a_terminal("sessions", "import", str(archive), "--uri", "memory://",
                               "--apply", *_yes("sessions", "import"))
    assert code == 0, text[-2000:]
    for label in IMPORT_PHASES:
        assert phase_lines(text, label), f"no progress drawn for {label!r}:\n{text[-3000:]}"
    # every pass shows a total (and so an ETA): the first one the trailer's claim
    for label in IMPORT_PHASES:
        assert any(f"/{SESSIONS:,}" in line for line in phase_lines(text, label)), label
    assert f"wrote {SESSIONS} session(s)" in text and "(0/s)" not in text


def test_every_phase_of_a_copy_shows_progress_on_a_terminal():
    code, text = on_a_terminal("sessions", "copy", "--from-adapter",
                               "tests.cli.output.test_progress_phases:filled_source",
                               "--to", "memory://", "--apply", *_yes("sessions", "copy"))
    assert code == 0, text[-2000:]
    for label in COPY_PHASES:
        assert phase_lines(text, label), f"no progress drawn for {label!r}:\n{text[-3000:]}"
    # the memory source counts its sessions, so even reading it has a total
    assert any(f"/{SESSIONS:,}" in line for line in phase_lines(text, "reading source"))
    assert f"wrote {SESSIONS} session(s)" in text


def test_an_export_shows_its_total_where_the_store_counts(tmp_path):
    code, text = on_a_terminal("sessions", "export", "--adapter",
                               "tests.cli.output.test_progress_phases:filled_source",
                               "--out", str(tmp_path / "out.jsonl"))
    assert code == 0, text[-2000:]
    assert any(f"/{SESSIONS:,}" in line for line in phase_lines(text, "exporting")), text[-2000:]
    assert f"exported {SESSIONS} session(s)" in text


def test_on_a_pipe_only_the_summary_lines(tmp_path):
    archive = write_archive(tmp_path / "small.jsonl", 300)
    result = CliRunner().invoke(app, ["sessions", "import", str(archive), "--uri", "memory://",
                                      "--apply", *_yes("sessions", "import")],
                                env={"SEMVEC_SESSION_BACKEND": ""})
    assert result.exit_code == 0, result.output
    assert "\r" not in result.stderr and "\x1b" not in result.stderr
    assert not any(phase_lines(result.stderr, label) for label in IMPORT_PHASES)
    assert any("wrote 300 session(s)" in line and "/s)" in line
               for line in result.stderr.splitlines())


def test_a_conflicting_copy_says_so_before_reading_the_whole_source():
    """The first session the target holds stops the copy while the source is read."""
    from backends.transfer import staged_copy
    from backends.transfer.errors import ImportConflict

    source = MemoryBackendAdapter()
    for i in range(5000):
        source.state_store().save(f"c-{i:05d}", b"x", expected_version=None)
    target = MemoryBackendAdapter()
    target.state_store().save("c-00100", b"mine", expected_version=None)
    read: list[str] = []

    def watch(records):
        for record in records:
            read.append(record.session_id)
            yield record

    with pytest.raises(ImportConflict, match="'c-00100' already exists on the target"):
        with staged_copy(source, target, source_uri="memory://", progress=watch,
                         refuse_conflicts_early=True):
            pass
    assert len(read) < 1000  # refused within a few chunks, not after 5000
    assert target.state_store().load("c-00100")[0] == b"mine"
    assert [s.session_id for s in target.iter_sessions()] == ["c-00100"]


def test_copy_cli_refuses_a_conflict_with_nothing_written():
    result = CliRunner().invoke(app, ["sessions", "copy", "--from-adapter",
                                      "tests.cli.output.test_progress_phases:small_source",
                                      "--to-adapter", "tests.cli.output.test_progress_phases:small_target",
                                      "--apply", *_yes("sessions", "copy")])
    assert result.exit_code == 1, result.output
    assert "'s-0003' already exists on the target" in result.stderr
    assert "nothing was written" in result.stderr
    assert [s.session_id for s in SMALL["target"].iter_sessions()] == ["s-0003"]


SMALL: dict[str, MemoryBackendAdapter] = {}


def small_source() -> MemoryBackendAdapter:
    adapter = MemoryBackendAdapter()
    for i in range(10):
        adapter.state_store().save(f"s-{i:04d}", b"x", expected_version=None)
    SMALL["source"] = adapter
    return adapter


def small_target() -> MemoryBackendAdapter:
    adapter = MemoryBackendAdapter()
    adapter.state_store().save("s-0003", b"theirs", expected_version=None)
    SMALL["target"] = adapter
    return adapter
