"""``semvecctl stats`` against a Redis store seeded with known distributions: owners,
blob sizes, TTLs, idle ages (from an assumed TTL, prune's rule), event logs per user and
per day; the reclaim preview agrees with ``sessions prune``; the HTML report is parsed
(headless Chromium is not on this machine, so it was not opened in a browser)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from semvecctl.app import app

pytestmark = pytest.mark.redis

ROOT = Path(__file__).resolve().parents[3]
SIZES = [100] * 10 + [1000] * 20 + [10000] * 10
OWNERS = ["acme"] * 25 + ["globex"] * 10 + [None] * 5
#: TTL left of each session (None: no expiry); with --assume-ttl 1h: idle = 3600 - TTL
TTLS = [3500] * 20 + [600] * 10 + [None] * 10
DAYS = {"u-long": ["2026-11-01"] * 3 + ["2026-11-02"] * 2, "u-short": ["2026-11-02", "2026-11-03"]}


def run(*args):
    return CliRunner().invoke(app, list(args))


def within(value, expected, share=0.125):
    return abs(value - expected) <= share * expected


@pytest.fixture
def seeded(redis_url, redis_server):
    from backends.contract import MemoryEvent
    from backends.redis import RedisBackendAdapter

    tag = uuid.uuid4().hex[:8]
    with RedisBackendAdapter(redis_url) as adapter:
        store = adapter.state_store()
        for i, (size, owner, ttl) in enumerate(zip(SIZES, OWNERS, TTLS)):
            sid = f"{tag}-{i:02d}"
            store.save(sid, b"x" * size, expected_version=None, owner_subject=owner)
            if ttl is not None:
                redis_server.run_cli("EXPIRE", f"semvec:state:{sid}", str(ttl))
        events = adapter.event_store()
        for user, days in DAYS.items():
            for n, day in enumerate(days):
                events.append(MemoryEvent(
                    event_id=str(uuid.uuid4()), user_id=user, content=f"said {n}",
                    created_at=datetime.fromisoformat(day).replace(hour=12, tzinfo=timezone.utc),
                    embedding=(0.1, 0.2), meta={}, owner_subject="", session_id=f"{tag}-00"))
    return tag


def test_stats_reports_the_seeded_shape(redis_url, seeded):
    result = run("stats", "--uri", redis_url, "--match", f"{seeded}-*", "--assume-ttl", "1h",
                 "-o", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["sessions"] == 40 and data["damaged"] == 0
    assert data["owners"]["distinct"] == 3 and not data["owners"]["approximate"]
    assert [(o["owner"], o["sessions"]) for o in data["owners"]["top"]] == [
        ("acme", 25), ("globex", 10), ("(no owner)", 5)]
    blob = data["blob_bytes"]
    assert (blob["count"], blob["sum"], blob["min"], blob["max"]) == (40, sum(SIZES), 100, 10000)
    assert within(blob["p50"], 1000) and within(blob["p90"], 10000) and within(blob["p99"], 10000)
    assert sum(b["count"] for b in blob["histogram"]) == 40
    assert {(b["low"], b["count"]) for b in blob["histogram"]} == {(64, 10), (512, 20), (8192, 10)}
    assert data["no_expiry"] == 10
    ttl = data["ttl_seconds"]
    assert ttl["count"] == 30 and within(ttl["p50"], 3500) and within(ttl["min"], 600, 0.01)
    idle = data["idle_seconds"]  # 3600 - TTL left; no expiry: no write time
    assert idle["count"] == 30 and data["idle_unknown"] == 10
    assert within(idle["p50"], 100, 0.1) and within(idle["max"], 3000, 0.01)
    assert [s["bytes"] for s in data["largest"]] == [10000] * 10
    assert all(s["session_id"].startswith(seeded) for s in data["largest"])
    events = data["events"]
    assert (events["users"], events["events"]) == (2, 7)
    assert events["longest_logs"] == [{"user_id": "u-long", "events": 5},
                                      {"user_id": "u-short", "events": 2}]
    assert events["per_day"] == {"2026-11-01": 3, "2026-11-02": 3, "2026-11-03": 1}


def test_idle_for_previews_what_prune_would_delete(redis_url, seeded):
    result = run("stats", "--uri", redis_url, "--match", f"{seeded}-*", "--assume-ttl", "1h",
                 "--idle-for", "1000s", "--no-events", "-o", "json")
    assert result.exit_code == 0, result.stderr
    preview = json.loads(result.stdout)["prune_preview"]
    assert preview == {"idle_for_s": 1000, "sessions": 10, "bytes": 10 * 1000}
    prune = run("sessions", "prune", "--uri", redis_url, "--match", f"{seeded}-*",
                "--assume-ttl", "1h", "--idle-for", "1000s", "-o", "json")
    assert prune.exit_code == 0, prune.stderr
    assert len(json.loads(prune.stdout)) == preview["sessions"]
    assert "10 idle" in prune.stderr


def test_idle_for_without_a_write_time_is_refused_like_prune(redis_url, seeded):
    result = run("stats", "--uri", redis_url, "--match", f"{seeded}-*", "--idle-for", "1d")
    assert result.exit_code == 3
    assert "--assume-ttl" in result.stderr and "nothing was deleted" not in result.stderr


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_html_and_markdown_reports_draw_the_distributions(redis_url, seeded, tmp_path):
    page = tmp_path / "shape.html"
    result = run("stats", "--uri", redis_url, "--match", f"{seeded}-*", "--assume-ttl", "1h",
                 "--report", str(page), "-o", "json")
    assert result.exit_code == 0, result.stderr
    parsed = _Page()
    parsed.feed(page.read_text(encoding="utf-8"))
    assert "script" not in parsed.tags
    for _tag, attrs in parsed.attrs:  # self-contained: nothing fetched
        assert not attrs.get("src") and not str(attrs.get("href", "")).startswith("http")
    charts = [a for t, a in parsed.attrs if t == "svg" and a.get("class") == "histogram"]
    assert len(charts) == 4  # blob sizes, idle ages, TTL left, events per day
    bars = [a for t, a in parsed.attrs if t == "rect" and a.get("class") == "bar"]
    assert len(bars) == 3 + 2 + 2 + 3  # bins of each chart
    text = " ".join(parsed.text)
    assert "acme" in text and "u-long" in text and "Blob sizes" in text
    md = tmp_path / "shape.md"
    assert run("stats", "--uri", redis_url, "--match", f"{seeded}-*", "--report", str(md)).exit_code == 0
    body = md.read_text(encoding="utf-8")
    assert body.startswith("## ✅ STATS") and "### Blob sizes" in body and "█" in body


def test_table_output_names_each_figure(redis_url, seeded):
    result = run("stats", "--uri", redis_url, "--match", f"{seeded}-*")
    assert result.exit_code == 0, result.stderr
    for figure in ("sessions", "top owners", "blob bytes", "TTL left", "without expiry",
                   "largest", "longest logs", "events per day"):
        assert figure in result.stdout


def test_watch_prints_a_line_per_refresh_and_ctrl_c_exits_130(redis_url, seeded):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "semvecctl", "stats", "--uri", redis_url, "--match",
         f"{seeded}-*", "--watch", "0.2", "--sample", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    lines = [proc.stdout.readline() for _ in range(2)]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert all("sampled 5 session(s)" in line for line in lines), lines
    assert "interrupted by SIGINT" in err and "Traceback" not in err


@pytest.mark.postgres
def test_stats_on_postgres_reads_write_times_and_event_logs(postgres_adapter_factory, pgvector_url):
    """The SQL layout stores a write time (idle ages without --assume-ttl) and lists its
    users' logs a page at a time (iter_log_shapes)."""
    from backends.contract import MemoryEvent

    adapter = postgres_adapter_factory()
    for i in range(6):
        events = [MemoryEvent(event_id=str(uuid.uuid4()), user_id=f"user-{i % 2}",
                              content="hi", created_at=datetime(2026, 10, 1 + n, 9, tzinfo=timezone.utc),
                              embedding=(0.1, 0.2), meta={}, owner_subject="acme",
                              session_id=f"s-{i}") for n in range(i + 1)]
        adapter.commit_turn(f"s-{i}", b"y" * (100 * (i + 1)), expected_version=None,
                            owner_subject="acme", events=events)
    result = run("stats", "--backend", "postgres", "--uri", pgvector_url, "--idle-for", "1s",
                 "--batch-size", "1", "-o", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["sessions"] == 6 and data["blob_bytes"]["sum"] == 100 * 21
    assert data["idle_seconds"]["count"] == 6 and data["idle_unknown"] == 0
    assert data["prune_preview"]["idle_for_s"] == 1
    events = data["events"]
    assert (events["users"], events["events"]) == (2, 21)  # user-0: 1+3+5, user-1: 2+4+6
    assert events["longest_logs"] == [{"user_id": "user-1", "events": 12},
                                      {"user_id": "user-0", "events": 9}]
    assert events["per_day"]["2026-10-01"] == 6 and events["per_day"]["2026-10-06"] == 1


def _chromium() -> str | None:
    import shutil

    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))
                 if p), None)


@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium on this machine")
def test_html_report_renders_in_headless_chromium(redis_url, seeded, tmp_path):
    """The page as a browser draws it: Chromium renders it (no script to run, nothing to
    fetch) to a screenshot that is not blank, and its DOM holds the four charts."""
    page = tmp_path / "shape.html"
    assert run("stats", "--uri", redis_url, "--match", f"{seeded}-*", "--assume-ttl", "1h",
               "--report", str(page)).exit_code == 0
    shot = tmp_path / "shape.png"
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}"]
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1000,2400", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # a drawn page, not a blank one
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert dom.count('class="histogram"') == 4 and "<script" not in dom


@pytest.mark.postgres
def test_stats_reports_the_item_mirror_size(pgvector_adapter_factory, pgvector_url):
    from backends.contract import MemoryItem

    adapter = pgvector_adapter_factory()
    adapter.state_store().save("s-items", b"{}", expected_version=None)
    items = [MemoryItem(item_id=f"m{k}", text=f"memory {k}", embedding=tuple([0.1 * k] * 8),
                        updated_at=datetime(2026, 10, 1, tzinfo=timezone.utc)) for k in range(5)]
    adapter.sync_items("s-items", items)
    adapter.sync_items("s-items", items[:3])  # two evicted (soft)
    result = run("stats", "--uri", pgvector_url, "-o", "json")
    assert result.exit_code == 0, result.stderr
    mirror = json.loads(result.stdout)["item_mirror"]
    assert (mirror["items"], mirror["evicted"]) == (5, 2) and mirror["bytes"] > 5 * 8 * 4

