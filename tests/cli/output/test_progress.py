"""#15.8: progress on long work (count, rate, ETA) only on a TTY, nothing on a pipe, and a
final summary line either way."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from semvecctl.app import app
from semvecctl.output import Output

ROOT = Path(__file__).resolve().parents[3]


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_on_a_tty_shows_count_total_and_rate(monkeypatch):
    stream = FakeTTY()
    monkeypatch.setattr(sys, "stderr", stream)
    out = Output(no_color=True)
    assert list(out.progress(range(50), total=50, label="exporting")) == list(range(50))
    text = stream.getvalue()
    assert "exporting" in text and "50/50" in text and "/s" in text
    assert out.last_progress.count == 50 and "/s)" in out.last_progress.summary()


def test_nothing_on_a_pipe_but_the_summary(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    out = Output(no_color=True)
    assert list(out.progress(range(10), total=10, label="exporting")) == list(range(10))
    assert stream.getvalue() == ""
    assert out.last_progress.count == 10


def _seed(redis_url, n):
    from backends.redis import RedisBackendAdapter

    adapter = RedisBackendAdapter(uri=redis_url)
    try:
        for i in range(n):
            adapter.state_store().save(f"prog-{i}", b"x", expected_version=None)
    finally:
        adapter.close()


def test_export_and_import_on_a_pipe_print_one_summary_line_each(redis_url, tmp_path):
    _seed(redis_url, 30)
    env = {"SEMVEC_SESSION_BACKEND": ""}
    archive = tmp_path / "a.jsonl"
    exported = CliRunner().invoke(app, ["sessions", "export", "--uri", redis_url, "--out",
                                        str(archive)], env=env)
    assert exported.exit_code == 0, exported.stderr
    lines = exported.stderr.strip().splitlines()
    assert len(lines) == 1 and "exported 30 session(s)" in lines[0] and "/s)" in lines[0]
    assert "\r" not in exported.stderr and "\x1b" not in exported.stderr
    imported = CliRunner().invoke(app, ["sessions", "import", str(archive), "--uri", "memory://",
                                        "--apply", "--yes"], env=env)
    assert imported.exit_code == 0, imported.stderr
    assert any("wrote 30 session(s)" in ln and "/s)" in ln for ln in imported.stderr.splitlines())
    assert "\r" not in imported.stderr


def test_load_run_on_a_real_tty_shows_live_progress():
    """A pseudo-terminal: rich draws the live count; the summary line is there too."""
    main, child = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SEMVEC_SESSION_BACKEND": "", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "semvecctl", "load", "run", "--backend", "memory",
                             "--duration", "1.5", "--apply", "--yes"], stdin=child, stdout=subprocess.DEVNULL,
                            stderr=child, env=env, cwd=ROOT)
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
    proc.wait(timeout=30)
    os.close(main)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, text
    import re

    assert re.search(r"load\s+[\d,]+ commits [\d,]+/s", text), text[:500]  # the live line
    assert "nothing lost" in text
