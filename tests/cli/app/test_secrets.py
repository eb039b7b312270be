"""No command ever shows a password: every command, every way of passing credentials.

Credentials arrive in the URI flag, in environment variables (REDIS_URL, MONGODB_URI,
SEMVEC_PGVECTOR_URL) and in a profile (``--config FILE -P name``). Targets: a DEDICATED
redis-server with a real ``requirepass`` (never the suite's shared server) reached with
the right password and with a wrong one, and unreachable PostgreSQL and MongoDB URIs with
fake passwords. Every command runs in every output format across the matrix, failures
also with ``--verbose`` (tracebacks included); the passwords, raw or percent-decoded,
must appear nowhere: stdout, stderr, log records, JUnit reports, exported archives.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.dedicated_redis import DedicatedRedis
from tests.support.fixtures.redis_server import closed_port

TAG = uuid.uuid4().hex[:8]
REAL_PW = f"Rp-{TAG}/q@z"            # needs percent-encoding in a URI
WRONG_PW = f"Wp-{TAG}-wrong"
PG_PW = f"Gp-{TAG}-fake"
PG_QUERY_PW = f"Gq-{TAG}-query"
MONGO_PW = f"Mp-{TAG}-fake"
SECRETS = [REAL_PW, WRONG_PW, PG_PW, PG_QUERY_PW, MONGO_PW]
FORMATS = ["table", "json", "yaml"]
SESSION = f"sec-{TAG}"


@pytest.fixture(scope="module")
def secured_redis(tmp_path_factory):
    server = DedicatedRedis(tmp_path_factory.mktemp("secured-redis"))
    server.start()
    with server.client() as client:
        client.config_set("requirepass", REAL_PW)
    server.password = REAL_PW
    yield server
    server.kill()


@pytest.fixture(scope="module")
def targets(secured_redis) -> dict[str, tuple[str, str]]:
    """name -> (backend, uri carrying a credential)."""
    port = closed_port()
    real = f"redis://default:{quote(REAL_PW, safe='')}@127.0.0.1:{secured_redis.port}/0"
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(real) as adapter:  # something to inspect, export, copy
        store = adapter.state_store()
        if store.load(SESSION) is None:
            store.save(SESSION, b"blob", expected_version=None, owner_subject="tenant")
    return {
        "redis": ("redis", real),
        "redis-wrong-password": (
            "redis", f"redis://:{WRONG_PW}@127.0.0.1:{secured_redis.port}/0"),
        "pgvector": ("pgvector", f"postgresql://semvec:{PG_PW}@127.0.0.1:{port}/semvec"
                                 f"?password={PG_QUERY_PW}&connect_timeout=1"),
        "mongo": ("mongo", f"mongodb://semvec:{MONGO_PW}@127.0.0.1:{port}/"
                           "?serverSelectionTimeoutMS=150&connectTimeoutMS=150"),
    }


ENV_OF = {"redis": "REDIS_URL", "pgvector": "SEMVEC_PGVECTOR_URL", "mongo": "MONGODB_URI"}


def commands(work: Path, fmt: str) -> list[list[str]]:
    """Every command; connection flags are added per delivery. ``{conn}`` marks where."""
    archive = work / f"export-{uuid.uuid4().hex[:6]}.jsonl"
    junit = work / f"junit-{uuid.uuid4().hex[:6]}.xml"
    stream_fmt = "jsonl" if fmt == "json" else fmt
    return [
        ["backends", "list", "-o", fmt],
        ["backends", "show", "redis", "-o", fmt],
        ["backends", "resolve", "redis", "-o", fmt],
        ["health", "{conn}", "-o", fmt, "--timeout", "2"],
        ["config", "view", "{conn}", "-o", fmt],
        ["sessions", "list", "{conn}", "-o", stream_fmt],
        ["sessions", "inspect", SESSION, "{conn}", "-o", fmt],
        ["sessions", "export", "{conn}", "--out", str(archive), "--yes"],
        ["sessions", "import", str(archive), "{conn}", "--apply", "--yes", "--on-conflict", "skip",
         "-o", fmt],
        ["sessions", "delete", f"nothing-{TAG}", "{conn}", "--apply", "--yes"],
        ["indexes", "plan", "{conn}", "-o", fmt],
        ["indexes", "ensure", "{conn}", "--apply", "--yes", "-o", fmt],
        ["indexes", "validate", "{conn}", "-o", fmt],
        ["retrieve", "run", "--session", SESSION, "--query", "hello", "{conn}", "-o", fmt],
        ["retrieve", "diff", "--session", SESSION, "--query", "hello", "{conn}", "-o", fmt],
        ["conformance", "run", "{conn}", "--only", "contract", "--junit", str(junit),
         "-o", fmt],
        ["load", "run", "{conn}", "--duration", "0.2", "--writers", "2", "--apply", "--yes", "-o", fmt],
    ]


def copy_commands(source_uri: str, fmt: str) -> list[list[str]]:
    return [["sessions", "copy", "--from", source_uri, "--to", "memory://", "--apply", "--yes",
             "-o", fmt],
            ["sessions", "copy", "--from", "memory://", "--to", source_uri, "-o", fmt]]


def with_delivery(argv: list[str], delivery: str, backend: str, uri: str,
                  config: Path) -> tuple[list[str], dict[str, str]]:
    env: dict[str, str] = {}
    if "{conn}" not in argv:
        conn: list[str] = []
        if delivery == "env":
            env[ENV_OF[backend]] = uri
        elif delivery == "profile":
            conn = ["--config", str(config), "-P", backend]
    elif delivery == "uri":
        conn = ["--uri", uri]
    elif delivery == "env":
        conn = ["--backend", backend]
        env[ENV_OF[backend]] = uri
    else:
        conn = ["--config", str(config), "-P", backend]
    out: list[str] = []
    for part in argv:
        out.extend(conn if part == "{conn}" else [part])
    if "{conn}" not in argv:
        out = conn + out
    return out, env


def leaked(text: str) -> list[str]:
    forms = set()
    for secret in SECRETS:
        forms |= {secret, quote(secret, safe=""), quote(secret)}
    return sorted(form for form in forms if form in text)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    for var in ("REDIS_URL", "MONGODB_URI", "SEMVEC_PGVECTOR_URL", "SEMVEC_SESSION_BACKEND",
                "SEMVECCTL_CONFIG", "DATABASE_URL", "SEMVEC_MONGO_DB"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


#: pymongo waits for server selection however dead the host, and the Mongo adapter's
#: health probe allows 2 s: the profile carries short timeouts, and the URI and
#: environment deliveries run a representative subset (delivery is backend-independent
#: code; the subset still proves MONGODB_URI and --uri are scrubbed)
MONGO_FAST_OPTIONS = ("    options: {server_selection_timeout_ms: 50, connect_timeout_ms: 50, "
                      "health_timeout_s: 0.2}\n")
MONGO_SUBSET = {("backends", "list"), ("config", "view"), ("sessions", "list"),
                ("sessions", "inspect"), ("sessions", "copy")}


def write_profiles(path: Path, targets: dict[str, tuple[str, str]], name: str) -> Path:
    backend, uri = targets[name]
    extra = MONGO_FAST_OPTIONS if backend == "mongo" else ""
    others = "".join(f"  {b}:\n    uri: '{u}'\n" for n, (b, u) in targets.items()
                     if b != backend and n != "redis-wrong-password")
    path.write_text(f"profiles:\n  {backend}:\n    uri: '{uri}'\n{extra}{others}",
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["redis", "redis-wrong-password", "pgvector", "mongo"])
def test_no_command_shows_a_password(name, targets, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    backend, uri = targets[name]
    assert leaked(uri), "control: the detector must see the password in the raw URI"
    config = write_profiles(tmp_path / "config.yaml", targets, name)
    runner = CliRunner()
    formats = itertools.cycle(FORMATS)
    runs = failures = verbose_failures = 0
    codes: set[int] = set()
    problems: list[str] = []
    for delivery in ("uri", "env", "profile"):
        for fmt in FORMATS if name == "redis" else [next(formats)]:
            argvs = commands(tmp_path, fmt) + (copy_commands(uri, fmt) if delivery == "uri" else [])
            if backend == "mongo" and delivery != "profile":
                argvs = [a for a in argvs if tuple(a[:2]) in MONGO_SUBSET]
            for argv in argvs:
                full, env = with_delivery(argv, delivery, backend, uri, config)
                mongo_rerun = backend != "mongo" or tuple(argv[:2]) in MONGO_SUBSET
                for verbose in (False, True) if mongo_rerun else (False,):
                    line = (["--verbose"] if verbose else []) + full
                    result = runner.invoke(app, line, env=env)
                    runs += 1
                    codes.add(result.exit_code)
                    if result.exit_code != 0:
                        failures += 1
                        verbose_failures += verbose
                    found = leaked(result.stdout) + leaked(result.stderr)
                    if result.exception is not None and not isinstance(result.exception,
                                                                       SystemExit):
                        found += leaked(repr(result.exception))
                    if found:
                        problems.append(f"{name}/{delivery}: {' '.join(line)} -> "
                                        f"exit {result.exit_code}: {found}\n"
                                        f"{result.stderr[-1500:]}")
                    if result.exit_code == 0:
                        break  # a success needs no --verbose rerun
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix in (".xml", ".jsonl", ".gz")]
    for path in files:
        found = leaked(path.read_bytes().decode("utf-8", errors="replace"))
        if found:
            problems.append(f"file {path.name}: {found}")
    found = leaked(caplog.text)
    if found:
        problems.append(f"log records: {found}")
    assert not problems, "\n\n".join(problems[:10])
    # the matrix really ran, with failures (and their --verbose tracebacks)
    assert runs > 30 and failures > 10 and verbose_failures > 5, (runs, failures)
    if name == "redis":  # successes too, with a JUnit report and an archive to inspect
        assert 0 in codes
        assert any(p.suffix == ".xml" for p in files)
        assert any(p.suffix == ".jsonl" and SESSION in p.read_text(errors="replace")
                   for p in files)
    else:
        assert codes & {3, 4}, codes


def test_auth_failure_says_credentials_not_the_password(targets):
    backend, uri = targets["redis-wrong-password"]
    result = CliRunner().invoke(app, ["-v", "sessions", "list", "--uri", uri])
    assert result.exit_code == 3
    assert "credentials" in result.stderr and not leaked(result.stderr)


def test_percent_encoded_password_works_and_stays_hidden(targets):
    backend, uri = targets["redis"]
    result = CliRunner().invoke(app, ["sessions", "inspect", SESSION, "--uri", uri, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert SESSION in result.stdout and not leaked(result.stdout + result.stderr)


@pytest.mark.parametrize("name", ["redis-wrong-password", "pgvector", "mongo"])
def test_adapter_errors_carry_no_password_without_the_cli(name, targets):
    """Library users get no scrubber: the adapters' own messages must be clean."""
    from backends.registry import Registry

    backend, uri = targets[name]
    options = {"server_selection_timeout_ms": 50} if backend == "mongo" else {}
    adapter = Registry().load_adapter(backend, warn=False, uri=uri, **options)
    try:
        texts = [repr(adapter)]
        with pytest.raises(Exception) as failed:
            adapter.state_store().load(SESSION)
        exc: BaseException | None = failed.value
        while exc is not None:  # the whole chain, as a traceback would show it
            texts += [str(exc), repr(exc)]
            exc = exc.__cause__ or exc.__context__
        details = getattr(adapter, "health_details", None)
        if details is not None:
            texts.append(repr(details(1.0)))
        texts.append(repr(adapter.check_health()))
    finally:
        adapter.close()
    found = leaked("\n".join(texts))
    assert not found, "\n".join(texts)
