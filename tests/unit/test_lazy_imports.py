"""`semvecctl --help` and `semvecctl backends list` must not import drivers or numpy:
cold start is what an operator feels on every invocation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("redis", "pymongo", "psycopg", "numpy", "bson", "pgvector")

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
                                  ["health"], ["completions", "show", "bash"]])
def test_no_heavy_imports(argv):
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)],
                          capture_output=True, text=True, timeout=60)
    line = [l for l in proc.stderr.splitlines() if l.startswith("HEAVY=")][-1]
    assert json.loads(line[len("HEAVY="):]) == [], proc.stderr
