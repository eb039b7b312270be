"""Export cost of age encryption: N sessions of 1 KiB from the memory backend, written
plain (``.jsonl.gz``) and encrypted (``.jsonl.gz.age``, one X25519 recipient).

    python bench/bench_export_age.py [--sessions 100000]

Each mode runs in a fresh process (``--only plain|age``) that seeds its own store, so
each peak RSS (``resource.getrusage``, the kernel's high-water mark) is that mode's
alone; the seeded store's RSS before the export is printed beside it, the difference is
what the export itself held. Goal: the encrypted export's extra memory flat (a pipe and
age's 64 KiB chunks), its time within a small factor of the plain one. Figures on a
shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.memory import MemoryBackendAdapter  # noqa: E402
from backends.transfer import export_to_path  # noqa: E402

BLOB_SIZE = 1024


def _rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def one(mode: str, sessions: int) -> dict:
    """Seed, export once in ``mode``, report seconds and memory (KiB)."""
    adapter = MemoryBackendAdapter()
    store = adapter.state_store()
    for i in range(sessions):
        store.save(f"session-{i:07d}", os.urandom(BLOB_SIZE // 2).hex().encode(),
                   expected_version=None, owner_subject="tenant/agent" if i % 3 else None)
    recipients = []
    if mode == "age":
        import pyrage

        recipients = [pyrage.x25519.Identity.generate().to_public()]
    before = _rss_kib()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / ("x.jsonl.gz.age" if mode == "age" else "x.jsonl.gz")
        started = time.perf_counter()
        result = export_to_path(adapter, out, recipients=recipients, source_uri="memory://bench")
        elapsed = time.perf_counter() - started
        size = out.stat().st_size
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"mode": mode, "sessions": result.count, "seconds": elapsed, "bytes": size,
            "rss_before_kib": before, "peak_rss_kib": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--only", choices=("plain", "age"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(one(args.only, args.sessions)))
        return
    runs = {}
    for mode in ("plain", "age"):
        proc = subprocess.run([sys.executable, __file__, "--sessions", str(args.sessions),
                               "--only", mode], capture_output=True, text=True, check=True)
        runs[mode] = json.loads(proc.stdout.splitlines()[-1])
    for mode, r in runs.items():
        print(f"{mode:5s}: {r['sessions']} sessions in {r['seconds']:.2f}s, {r['bytes'] / 1e6:.1f} MB; "
              f"RSS {r['rss_before_kib'] / 1024:.0f} MiB before, peak {r['peak_rss_kib'] / 1024:.0f} MiB "
              f"(+{(r['peak_rss_kib'] - r['rss_before_kib']) / 1024:.1f} MiB)")
    print(f"ratio age/plain: {runs['age']['seconds'] / runs['plain']['seconds']:.2f}x time, "
          f"{runs['age']['peak_rss_kib'] / runs['plain']['peak_rss_kib']:.2f}x peak RSS")


if __name__ == "__main__":
    main()
