"""#28 item 1: one confirmation/overwrite vocabulary, checked over the whole app.

The commands are discovered from the click tree the Typer app builds, never listed by
hand: every command with ``--apply`` is run against the suite's real Redis (databases 0
and 1 of the private server, flushed) in each way the vocabulary fixes, and the store is
compared key by key (``DUMP``) before and after. Every command with an output-file option
is run against an existing file. Arguments a command requires come from a table keyed by
the parameter's name (not by the command), so a new command is covered as soon as it
exists; one with a required parameter the table does not know fails here.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest
import typer
from typer.testing import CliRunner

from semvecctl.app import app
from semvecctl.options import Yes

pytestmark = pytest.mark.redis

ROOT = typer.main.get_command(app)

#: options that name a file the command writes (replaced only with --overwrite)
FILE_OPTIONS = ("--out", "--archive", "--receipt", "--report", "--junit")


def leaves(command: Any = ROOT, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(getattr(command, "commands", None), dict):
        for name, sub in sorted(command.commands.items()):
            yield from leaves(sub, path + (name,))
    else:
        yield path, command


def option(command: Any, name: str) -> Any:
    return next((p for p in command.params if name in getattr(p, "opts", ())), None)


COMMANDS = list(leaves())
WRITERS = [(path, cmd) for path, cmd in COMMANDS if option(cmd, "--apply") is not None]
FILE_WRITERS = [(path, cmd, opt) for path, cmd in COMMANDS for opt in FILE_OPTIONS
                if option(cmd, opt) is not None]
ids = [" ".join(p) for p, _ in WRITERS]
file_ids = [" ".join(p) + " " + o for p, _, o in FILE_WRITERS]


def test_the_tree_has_writers_and_file_writers():
    assert len(WRITERS) >= 8 and len(FILE_WRITERS) >= 6, (ids, file_ids)


@pytest.mark.parametrize("path,cmd", WRITERS, ids=ids)
def test_every_apply_has_the_one_yes(path, cmd):
    yes = option(cmd, "--yes")
    assert yes is not None and not yes.hidden, f"{' '.join(path)}: --apply without --yes"
    assert yes.opts == ["--yes", "-y"]
    expected = Yes.__metadata__[0].help
    assert yes.help == expected, f"{' '.join(path)}: its own --yes wording"


def test_a_visible_yes_only_goes_with_apply():
    for path, cmd in COMMANDS:
        yes = option(cmd, "--yes")
        if yes is not None and not yes.hidden:
            assert option(cmd, "--apply") is not None, " ".join(path)


@pytest.mark.parametrize("path,cmd,opt", FILE_WRITERS, ids=file_ids)
def test_every_file_option_has_overwrite(path, cmd, opt):
    assert option(cmd, "--overwrite") is not None, f"{' '.join(path)} {opt}: no --overwrite"


# -- against a real store ------------------------------------------------------------------


@pytest.fixture
def durable(redis_server):
    """The private server made durable for the test (doctor's verdict on the store is its
    exit status: an AOF-less server is an error it reports), restored afterwards."""
    if not redis_server.managed:
        pytest.skip("needs the suite's private Redis (databases 1 and 2 are flushed)")
    with redis_server.client() as client:
        saved = {k: client.config_get(k)[k] for k in ("appendonly", "maxmemory-policy")}
        client.config_set("appendonly", "yes")
        client.config_set("maxmemory-policy", "noeviction")
    yield
    with redis_server.client() as client:
        for key, value in saved.items():
            client.config_set(key, value)


@pytest.fixture
def stores(redis_server, redis_url, tmp_path, durable, request):
    """Database 0 seeded (a session of owner acme with one event of user u-voc), database
    1 holding only what a migration from database 2 copied (its state file is the one
    ``migrate`` commands continue), and an archive of one session database 0 does not hold."""
    from backends.contract import MemoryEvent
    from backends.redis import RedisBackendAdapter

    base = redis_url.rsplit("/", 1)[0]
    urls = {n: f"{base}/{n}" for n in (0, 1, 2)}
    for n in (1, 2):
        with redis_server.client() as client:
            client.execute_command("SELECT", n)
            client.flushdb()
    with RedisBackendAdapter(uri=urls[0]) as adapter:
        adapter.state_store().save("voc-1", b'{"a": 1}', expected_version=None, owner_subject="acme")
        adapter.event_store().append(MemoryEvent(event_id=str(uuid.uuid4()), user_id="u-voc",
                                                 content="hello", session_id="voc-1",
                                                 owner_subject="acme"))
    with RedisBackendAdapter(uri=urls[2]) as adapter:
        adapter.state_store().save("voc-archived", b"{}", expected_version=None,
                                   owner_subject="acme")
    archive = tmp_path / "in.jsonl"
    exported = CliRunner().invoke(app, ["sessions", "export", "--uri", urls[2], "--out", str(archive)])
    assert exported.exit_code == 0, exported.output
    state = tmp_path / "move.state"
    migrated = CliRunner().invoke(app, ["migrate", "run", "--from", urls[2], "--to", urls[1],
                                        "--state", str(state), "--owner", "acme", "--apply",
                                        "--yes"])
    assert migrated.exit_code == 0, migrated.output
    return {"urls": urls, "archive": archive, "tmp": tmp_path, "state": state, "request": request}


def sql_deployment(stores: dict) -> dict:
    """For ``shards`` (a SQL deployment's shard list): a PostgreSQL database of the test's
    own, and a reshard state file of it (onto the same list: nothing moves), made once."""
    if "sql" not in stores:
        url = stores["request"].getfixturevalue("pgvector_url")
        state = stores["tmp"] / "reshard.state"
        made = CliRunner().invoke(app, ["shards", "run", "--uri", url, "--to-shards", url,
                                        "--state", str(state), "--apply", "--yes"])
        assert made.exit_code == 0, made.output
        stores["sql"] = {"url": url, "state": state}
    return stores["sql"]


def snapshot(redis_server) -> dict:
    """Every key of databases 0 and 1, with its serialized value."""
    import redis

    seen = {}
    for n in (0, 1):
        client = redis.Redis(host="127.0.0.1", port=redis_server.port, db=n)
        try:
            for key in client.scan_iter(count=500):
                seen[(n, key)] = client.dump(key)
        finally:
            client.close()
    return seen


#: a value for each parameter a command may require or the vocabulary needs, by name
def arguments(cmd: Any, stores: dict) -> list[str]:
    urls, tmp = stores["urls"], stores["tmp"]
    values = {
        "session_id": "voc-1", "archive": str(stores["archive"]), "shell": "bash",
        "user": "u-voc", "idle_for": "1s", "prefix": "semvec-load-0123abcd-",
        "session": "voc-1", "event_id": "x", "state_file": str(stores["state"]),
    }
    names = {o for p in cmd.params for o in getattr(p, "opts", ())}
    #: ``shards``: a required new shard list (migrate's and copy's --to-shards are optional)
    resharding = any(p.name == "to_shards" and p.required for p in cmd.params)
    if resharding:  # the deployment is SQL: its own database, its own state file
        sql = sql_deployment(stores)
        values.update(to_shards=sql["url"], state_file=str(sql["state"]))
        if cmd.name == "run":  # a fresh reshard: previews and refusals write nothing
            values["state_file"] = str(tmp / "fresh-reshard.state")
    args: list[str] = []
    for p in cmd.params:
        if p.param_type_name == "argument":
            args.append(values[p.name])
        elif p.required:
            args += [p.opts[0], values[p.name]]
    if resharding:
        args += ["--uri", values["to_shards"]]
    elif "--uri" in names:
        args += ["--uri", urls[0]]
    if "--state" in names and not resharding:  # a migration's state is bound to its pair: the fixture's
        args += (["--from", urls[2]] if "--from" in names else []) + ["--to", urls[1]]
    elif "--from" in names:
        args += ["--from", urls[0], "--to", urls[1]]
    if "--with-events" in names:
        args.append("--with-events")
    if "--owner" in names:
        args += ["--owner", "acme"]
    if "--fix" in names:
        args.append("--fix")
    if "--receipt" in names:
        args += ["--receipt", str(tmp / "receipt.json")]
    if "--assume-ttl" in names:
        args += ["--assume-ttl", "1d"]
    if "--duration" in names:
        args += ["--duration", "0.1"]
    return args


def invoke(args: list[str], **kwargs):
    return CliRunner().invoke(app, args, **kwargs)


@pytest.mark.parametrize("path,cmd", WRITERS, ids=ids)
def test_without_apply_nothing_is_written_and_exit_0(path, cmd, stores, redis_server):
    before = snapshot(redis_server)
    result = invoke([*path, *arguments(cmd, stores)])
    assert result.exit_code == 0, result.output
    assert snapshot(redis_server) == before
    assert "Traceback" not in result.output


@pytest.mark.parametrize("path,cmd", WRITERS, ids=ids)
def test_apply_without_yes_on_a_pipe_is_exit_2_and_writes_nothing(path, cmd, stores, redis_server):
    before = snapshot(redis_server)
    result = invoke([*path, *arguments(cmd, stores), "--apply"])
    assert result.exit_code == 2, result.output
    assert "--yes" in result.stderr and "nothing was changed" in result.stderr
    assert snapshot(redis_server) == before


@pytest.mark.parametrize("path,cmd", WRITERS, ids=ids)
def test_yes_without_apply_is_exit_2(path, cmd, stores, redis_server):
    before = snapshot(redis_server)
    result = invoke([*path, *arguments(cmd, stores), "--yes"])
    assert result.exit_code == 2, result.output
    assert "--apply" in result.stderr
    assert snapshot(redis_server) == before


@pytest.mark.parametrize("answer", ["n\n", "", "maybe\n"], ids=["n", "eof", "other"])
@pytest.mark.parametrize("path,cmd", WRITERS, ids=ids)
def test_declining_at_the_prompt_is_exit_2_nothing_changed(path, cmd, answer, stores,
                                                          redis_server, monkeypatch):
    from semvecctl.output import Output

    monkeypatch.setattr(Output, "can_prompt", lambda self: True)
    before = snapshot(redis_server)
    result = invoke([*path, *arguments(cmd, stores), "--apply"], input=answer)
    if "nothing to provision" in result.stderr:  # Redis has no indexes: nothing to ask
        assert result.exit_code == 0 and snapshot(redis_server) == before
        pytest.skip("nothing to write here: the prompt is checked on PostgreSQL below")
    assert result.exit_code == 2, result.output
    assert "nothing was changed" in result.stderr
    assert "[y/N]" in result.stderr  # it did ask
    assert snapshot(redis_server) == before


def test_answering_y_at_the_prompt_writes(stores, redis_server, monkeypatch):
    from semvecctl.output import Output

    monkeypatch.setattr(Output, "can_prompt", lambda self: True)
    result = invoke(["sessions", "delete", "voc-1", "--uri", stores["urls"][0], "--apply"],
                    input="y\n")
    assert result.exit_code == 0, result.output
    from backends.redis import RedisBackendAdapter

    with RedisBackendAdapter(uri=stores["urls"][0]) as adapter:
        assert adapter.state_store().load("voc-1") is None


@pytest.mark.parametrize("path,cmd,opt", FILE_WRITERS, ids=file_ids)
def test_an_existing_file_is_replaced_only_with_overwrite(path, cmd, opt, stores, redis_server,
                                                          tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    target = tmp_path / ("existing.md" if opt == "--report" else "existing.json")
    target.write_text("keep me\n")
    args = [a for a in arguments(cmd, stores)]
    if "--receipt" in args and opt != "--receipt":
        i = args.index("--receipt")
        del args[i:i + 2]
    if opt == "--receipt":
        i = args.index("--receipt")
        del args[i:i + 2]
    args += [opt, str(target)]
    if option(cmd, "--apply") is not None:
        args.append("--apply")
    if option(cmd, "--yes") is not None:
        args.append("--yes")  # --yes never replaces a file
    before = snapshot(redis_server)
    refused = invoke([*path, *args])
    assert refused.exit_code == 2, refused.output
    assert "already exists" in refused.stderr and "--overwrite" in refused.stderr
    assert target.read_text() == "keep me\n"
    assert snapshot(redis_server) == before
    replaced = invoke([*path, *args, "--overwrite"])
    assert "already exists" not in replaced.stderr, replaced.output


def test_completions_install_replaces_a_different_script_only_with_overwrite(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    first = invoke(["completions", "install", "bash"])
    assert first.exit_code == 0, first.output
    (installed,) = (tmp_path / "data").rglob("semvecctl")
    assert invoke(["completions", "install", "bash"]).exit_code == 0  # the same script: fine
    installed.write_text("# my own\n")
    refused = invoke(["completions", "install", "bash"])
    assert refused.exit_code == 2 and installed.read_text() == "# my own\n"
    assert invoke(["completions", "install", "bash", "--overwrite"]).exit_code == 0
    assert installed.read_text() != "# my own\n"


def test_the_vocabulary_is_documented_once_in_the_manual_and_in_root_help():
    from pathlib import Path

    manual = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text(encoding="utf-8")
    assert manual.count("## Previews, --apply, --yes, --overwrite") == 1
    text = invoke(["--help"]).stdout
    assert "--apply" in text and "--overwrite" in text and "exit 2" in text


@pytest.mark.postgres
@pytest.mark.parametrize("answer", ["n\n", ""], ids=["n", "eof"])
def test_declining_index_changes_on_postgresql_leaves_the_indexes(answer, pgvector_url,
                                                                  monkeypatch):
    """indexes ensure where there is something to create: it asks, and "n" or EOF creates
    nothing (validate still finds the indexes missing)."""
    from semvecctl.output import Output

    monkeypatch.setattr(Output, "can_prompt", lambda self: True)
    base = ["--uri", pgvector_url, "--dimensions", "8"]
    before = invoke(["indexes", "validate", *base, "-o", "json"]).stdout
    result = invoke(["indexes", "ensure", *base, "--apply"], input=answer)
    assert result.exit_code == 2 and "nothing was changed" in result.stderr, result.output
    assert "[y/N]" in result.stderr
    assert invoke(["indexes", "validate", *base, "-o", "json"]).stdout == before
    applied = invoke(["indexes", "ensure", *base, "--apply"], input="y\n")
    assert applied.exit_code == 0, applied.output
    assert invoke(["indexes", "validate", *base]).exit_code == 0


def _on_a_pty(args: list[str], keys: bytes) -> tuple[int, str]:
    """Run semvecctl on a real pseudo-terminal (stdin and stderr), type ``keys`` once it
    asks, and return its exit code and what the terminal showed."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    main, child = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(root), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "semvecctl", *args], stdin=child,
                            stdout=subprocess.DEVNULL, stderr=child, env=env, cwd=root)
    os.close(child)
    seen = b""
    typed = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.2)
        if ready:
            try:
                data = os.read(main, 65536)
            except OSError:
                break
            if not data:
                break
            seen += data
        if not typed and b"[y/N]" in seen:
            os.write(main, keys)
            typed = True
        if proc.poll() is not None and not ready:
            break
    proc.wait(timeout=30)
    os.close(main)
    return proc.returncode, seen.decode("utf-8", "replace")


@pytest.mark.parametrize("keys", [b"n\r", b"\x04"], ids=["n", "ctrl-d"])
def test_a_real_terminal_prompt_declined_or_closed_is_exit_2(keys, stores, redis_server):
    """No monkeypatching: a pseudo-terminal, "n" or end of input (Ctrl-D) at load run's
    prompt (it used to exit 130 on EOF) and at sessions delete's."""
    url = stores["urls"][0]
    before = snapshot(redis_server)
    for args in (["load", "run", "--uri", url, "--duration", "0.2", "--apply"],
                 ["sessions", "delete", "voc-1", "--uri", url, "--apply"]):
        code, shown = _on_a_pty(args, keys)
        assert code == 2, shown
        assert "[y/N]" in shown and "nothing was changed" in shown
    assert snapshot(redis_server) == before
