"""`semvecctl --help` and `semvecctl backends list` must not import drivers or numpy:
cold start is what an operator feels on every invocation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("redis", "pymongo", "psycopg", "numpy", "bson", "pgvector",
         # the metrics and otel extras: imported only when --metrics-file / OTEL_* ask
         "prometheus_client", "opentelemetry",
         # the signing extra: imported only by --sign-with and receipts verify
         "cryptography",
         # the age extra: imported only when an archive is encrypted or decrypted
         "pyrage")

PROBE = """
import json, sys
from semvecctl.__main__ import main
sys.argv = ["semvecctl"] + json.loads(sys.argv[1])
try:
    main()
except SystemExit:
    pass
heavy = [m for m in %r if m in sys.modules]
sys.stderr.write("HEAVY=" + json.dumps(heavy) + "\\n")
""" % (HEAVY,)


@pytest.mark.parametrize("argv", [["--help"], ["backends", "list"], ["backends", "list", "-o", "json"],
                                  ["health"], ["completions", "show", "bash"], ["stats", "--help"]])
def test_no_heavy_imports(argv):
    assert _heavy(argv) == []


def _heavy(argv, env=None):
    import os

    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)],
                          capture_output=True, text=True, timeout=60, env={**clean, **(env or {})})
    line = [l for l in proc.stderr.splitlines() if l.startswith("HEAVY=")][-1]
    return json.loads(line[len("HEAVY="):])


def test_observability_is_imported_only_when_asked(tmp_path):
    """A command without --metrics-file and without OTEL_* variables imports neither
    extra (even installed); each flag brings its own only."""
    assert _heavy(["health", "--backend", "memory"]) == []
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return
    path = tmp_path / "m.prom"
    assert _heavy(["health", "--backend", "memory", "--metrics-file", str(path)]) \
        == ["prometheus_client"]
    assert path.exists()
    assert "opentelemetry" not in _heavy(["health", "--backend", "memory"],
                                         env={"OTEL_TRACES_EXPORTER": "none"})
