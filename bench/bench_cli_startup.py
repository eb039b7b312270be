"""Cold start of `semvecctl --help` and `semvecctl backends list` against the floor of
`python -c "import typer"` (goal: at most 1.5x). Each command runs in a fresh interpreter.

    python bench/bench_cli_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = {
    "import typer (floor)": [sys.executable, "-c", "import typer"],
    "semvecctl --help": [sys.executable, "-m", "semvecctl", "--help"],
    "semvecctl backends list": [sys.executable, "-m", "semvecctl", "backends", "list"],
    "semvecctl backends list -o json": [sys.executable, "-m", "semvecctl", "backends", "list", "-o", "json"],
}


def measure(cmd: list[str], runs: int) -> list[float]:
    subprocess.run(cmd, capture_output=True, check=False)  # warm the page cache
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    # pip byte-compiles an installed package; do the same for the checkout so that a
    # PYTHONDONTWRITEBYTECODE environment does not make us measure the compiler.
    root = Path(__file__).resolve().parent.parent
    compileall.compile_dir(str(root / "semvecctl"), quiet=1)
    compileall.compile_dir(str(root / "backends"), quiet=1)
    results = {name: measure(cmd, args.runs) for name, cmd in CASES.items()}
    floor = statistics.median(results["import typer (floor)"])
    print(f"{'case':34} {'median ms':>10} {'p90 ms':>8} {'x floor':>8}")
    for name, times in results.items():
        med = statistics.median(times)
        p90 = sorted(times)[int(0.9 * (len(times) - 1))]
        print(f"{name:34} {med * 1000:10.1f} {p90 * 1000:8.1f} {med / floor:8.2f}")
    print("(wall-clock on a shared 2-core machine: expect +-10% noise between runs)")


if __name__ == "__main__":
    main()
