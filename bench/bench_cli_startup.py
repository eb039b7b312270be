"""Cold start of `semvecctl --help` and `semvecctl backends list` against the floor of
`python -c "import typer"` (goal: at most 1.3x). Each command runs in a fresh
interpreter, with its stdout on a pipe and, for the cases marked "(tty)", on a
pseudo-terminal (where tables are drawn in colour).

    python bench/bench_cli_startup.py [--runs 15] [--site DIR | --checkout]

By default the packages are installed as a normal (non-editable) install would be: a
fresh virtual environment whose site-packages gets a byte-compiled copy of them (as pip
lays them out) and reaches this interpreter's installed dependencies through a ``.pth``
line, so an editable install's import hook (which costs every interpreter start, the
floor included) is not measured. Commands run from a neutral directory. ``--site DIR``
measures an existing install there (first on PYTHONPATH); ``--checkout`` the source tree.
"""

from __future__ import annotations

import argparse
import compileall
import os
import pty
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("semvecctl", "backends")

CASES = {
    "import typer (floor)": ["-c", "import typer"],
    "semvecctl --help": ["-m", "semvecctl", "--help"],
    "semvecctl backends list": ["-m", "semvecctl", "backends", "list"],
    "semvecctl backends list -o json": ["-m", "semvecctl", "backends", "list", "-o", "json"],
    "semvecctl --help (tty)": ["-m", "semvecctl", "--help"],
    "semvecctl backends list (tty)": ["-m", "semvecctl", "backends", "list"],
}


def install_copy(site: Path) -> None:
    """The packages as pip lays them out: files copied, then byte-compiled."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, site / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        compileall.compile_dir(str(site / package), quiet=1)


def make_venv(where: Path) -> Path:
    """A virtual environment with the packages installed in it and this interpreter's
    dependencies reachable (a .pth line per site directory: their own .pth files, e.g.
    an editable install's hook, are not run). Returns its python."""
    import site
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    deps = [p for p in {sysconfig.get_paths()["purelib"], *site.getsitepackages()} if Path(p).is_dir()]
    (purelib / "_bench_deps.pth").write_text("".join(f"{p}\n" for p in sorted(deps)))
    install_copy(purelib)
    return python


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(cmd: list[str], *, tty: bool, env: dict[str, str], cwd: str) -> None:
    """One run of ``cmd``, its stdout on a pipe or (``tty``) on a pseudo-terminal whose
    output is read until the command closes it."""
    if not tty:
        subprocess.run(cmd, capture_output=True, check=True, env=env, cwd=cwd)
        return
    master, slave = pty.openpty()
    child = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    os.close(slave)
    try:
        while os.read(master, 65536):
            pass
    except OSError:  # EIO: the terminal's last writer has gone
        pass
    finally:
        os.close(master)
    if child.wait():
        raise subprocess.CalledProcessError(child.returncode, cmd)


def measure(cases: dict[str, list[str]], runs: int, env: dict[str, str],
            cwd: str) -> dict[str, tuple[list[float], list[float]]]:
    """(wall seconds, CPU seconds) per run of each case, the cases taken in turn (one run
    of each, ``runs`` times), so a change in the machine's load falls on all of them
    alike. CPU time (user + system of the child) is far less disturbed by other work on
    a shared machine than wall-clock time."""
    for cmd in cases.values():
        subprocess.run(cmd, capture_output=True, check=False, env=env, cwd=cwd)  # warm the page cache
    results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in cases}
    for _ in range(runs):
        for name, cmd in cases.items():
            started, used = time.perf_counter(), _cpu()
            run_once(cmd, tty=name.endswith("(tty)"), env=env, cwd=cwd)
            results[name][0].append(time.perf_counter() - started)
            results[name][1].append(_cpu() - used)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--site", type=Path, help="measure the install in this directory")
    where.add_argument("--checkout", action="store_true", help="measure the source tree")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NO_COLOR")}
    env.setdefault("TERM", "xterm-256color")
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="semvecctl-bench-") as scratch:
        if args.checkout or args.site is not None:
            if args.checkout:
                for package in PACKAGES:
                    compileall.compile_dir(str(ROOT / package), quiet=1)
            site = ROOT if args.checkout else args.site.resolve()
            label = f"checkout {ROOT}" if args.checkout else f"install in {args.site}"
            env["PYTHONPATH"] = str(site)
        else:
            python = str(make_venv(Path(scratch) / "venv"))
            label = "a fresh venv with a byte-compiled copy installed (no editable hook)"
        cwd = scratch  # nothing importable here: the install decides what runs
        results = measure({name: [python, *cmd] for name, cmd in CASES.items()},
                          args.runs, env, cwd)
    floor_wall = statistics.median(results["import typer (floor)"][0])
    floor_cpu = statistics.median(results["import typer (floor)"][1])
    print(f"measuring {label}")
    print(f"{'case':34} {'wall ms':>8} {'x floor':>8} {'cpu ms':>8} {'x floor':>8}")
    for name, (wall, cpu) in results.items():
        med_wall, med_cpu = statistics.median(wall), statistics.median(cpu)
        print(f"{name:34} {med_wall * 1000:8.1f} {med_wall / floor_wall:8.2f} "
              f"{med_cpu * 1000:8.1f} {med_cpu / floor_cpu:8.2f}")
    print("(medians; wall-clock on a shared 2-core machine is noisy, CPU time less so; goal 1.3x)")


if __name__ == "__main__":
    main()
