"""#15.10: every command example in README.md runs, as written, against the suite's real
Redis and PostgreSQL (or memory), in a fresh working directory and HOME.

What is substituted, and nothing else: the example hosts (``redis://cache…`` → the suite's
Redis, ``postgresql://db/semvec`` → a fresh PostgreSQL database), and ``load run``'s
``--duration`` (30 s → 1 s). What is not run, by name: installing (``pip``), the test suite
itself, the benchmark and the MongoDB server recipes (no MongoDB can run here). A new
example line that fits neither list is run; one that cannot be classified fails the test.
The YAML config example is loaded with the real config parser; the Python example is
collected and run by pytest.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text(encoding="utf-8")

pytestmark = pytest.mark.postgres

SKIP_PREFIXES = ("pip install", "python -m pytest", "python bench/", "mongod ", "mongosh ",
                 "SEMVEC_TEST_MONGODB_URI=")

#: examples whose documented outcome on the suite's servers is not 0
EXPECTED = {
    # the suite's Redis runs without AOF: the --require-durable gate fails, as documented
    "--require-persistent --require-durable": {1},
    # ... and doctor reports that as an engine requirement at error severity
    "doctor --uri redis://": {1},
    # ... and the conformance suite does not certify it (durability.server_is_durable)
    "conformance run --uri redis://": {1},
    # a CI gate over recency-weighted server rankings may miss; both outcomes are the gate working
    "--min-rbo 0.6": {0, 1},
}


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def shell_examples() -> list[str]:
    lines: list[str] = []
    for block in blocks("sh"):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            lines.append(line)
    return lines


def test_quick_start_has_exactly_two_commands():
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [ln for b in re.findall(r"```sh\n(.*?)```", section, flags=re.S)
                for ln in b.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(commands) == 2, commands


def test_readme_has_the_placeholder_heading_and_no_unpublished_install():
    assert "\n## Working with a semvec deployment\n" in README
    before_note = README.split("(where an error message says", 1)[0]
    assert "pip install 'semvecctl[" not in before_note
    assert "from a checkout: `pip install '.[redis]'`" in README
    assert "also installs a console\nscript called `semvecctl`" in README


def test_yaml_config_example_parses(tmp_path):
    from semvecctl.config import load_config

    (yaml_block,) = blocks("yaml")
    path = tmp_path / "config.yaml"
    path.write_text(yaml_block)
    config = load_config(path)
    assert config.current_profile == "staging" and set(config.profiles) == {"staging", "atlas"}


def test_python_plugin_example_runs_under_pytest(tmp_path):
    (python_block,) = blocks("python")
    source = ("from backends.memory import MemoryBackendAdapter\n"
              "class MyStoreAdapter(MemoryBackendAdapter):\n"
              "    name = 'mystore'\n"
              "    def __init__(self, uri=None):\n"
              "        super().__init__()\n"
              "import pytest\n"
              "class _Server:\n    url = 'memory://'\n"
              "@pytest.fixture\ndef my_server():\n    return _Server()\n" + python_block)
    (tmp_path / "test_mystore.py").write_text(source)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                             "test_mystore.py"], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


def _seed(redis_url: str, pg_url: str, workdir: Path) -> None:
    from backends.contract import MemoryItem
    from backends.pgvector import PgVectorAdapter
    from backends.redis import RedisBackendAdapter

    redis = RedisBackendAdapter(uri=redis_url)
    try:
        store = redis.state_store()
        version = None
        for n in range(3):  # chat-42 at version 3, owned by acme
            version = store.save("chat-42", json.dumps({"turn": n}).encode(),
                                 expected_version=version, owner_subject="acme")
        store.save("chat-7", b"{}", expected_version=None, owner_subject="acme")
        store.save("other-1", b"{}", expected_version=None)
        from backends.contract import MemoryEvent  # the event the `events` examples show

        redis.event_store().append(MemoryEvent(
            event_id="7f0c6a52-8a3e-4d7e-9b0e-2f7d7f3c1a10", user_id="u-17", content="hello",
            embedding=[0.5] * 4, owner_subject="acme", session_id="chat-42"))
    finally:
        redis.close()
    rng = random.Random(7)
    pg = PgVectorAdapter(pg_url, dimensions=384)
    try:
        items = [MemoryItem(item_id=f"item-{k}", text=f"refund policy note {k}" if k % 2 else f"shipping note {k}",
                            embedding=tuple(rng.uniform(-1, 1) for _ in range(384)))
                 for k in range(10)]
        pg.sync_items("s1", items)
    finally:
        pg.close()
    (workdir / "q.json").write_text(json.dumps([rng.uniform(-1, 1) for _ in range(384)]))
    (workdir / "golden.jsonl").write_text("\n".join(
        json.dumps({"id": f"g{k}", "like": f"item-{k}"}) for k in (1, 4, 7)) + "\n")
    pkg = workdir / "my_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "adapter.py").write_text(
        "from backends.memory import MemoryBackendAdapter\n"
        "class MyStore(MemoryBackendAdapter):\n    name = 'mystore'\n"
        "def make_adapter(uri=None):\n    return MyStore()\n")
    # the --known-failures example's list (an empty list: nothing is known to fail)
    (workdir / "known.yaml").write_text("known_failures: []\n")
    home = workdir / "home"
    (home / ".local/share/bash-completion/completions").mkdir(parents=True)


def _substitute(line: str, redis_url: str, pg_url: str, shards: list[str] = ()) -> str:
    line = re.sub(r"redis://cache(:6379)?/0", redis_url, line)
    line = line.replace("postgresql://db/semvec", pg_url)
    for n, shard in enumerate(shards):  # the "Sharded deployments" examples' shard databases
        line = line.replace(f"postgresql://db/shard{n}", shard)
    if " load run " in f" {line} ":
        line = re.sub(r"--duration \d+", "--duration 1", line)
    return line


def test_every_shell_example_runs(redis_url, pgvector_url, sharded_sql, tmp_path):
    _seed(redis_url, pgvector_url, tmp_path)
    shards = [*sharded_sql.shards, *sharded_sql.make(1).shards]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SEMVEC_", "REDIS_URL", "MONGODB_URI", "SEMVECCTL_"))}
    env.update(HOME=str(tmp_path / "home"), PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               NO_COLOR="1", XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"))
    ran, skipped, failures = [], [], []
    for original in shell_examples():
        line = original
        if line.startswith("pip install") and "&& semvecctl" in line:
            line = line.split("&& ", 1)[1]
        if line.startswith(SKIP_PREFIXES):
            skipped.append(line)
            continue
        assert line.startswith(("semvecctl ", "python -c ")), f"unclassified README example: {line}"
        command = _substitute(line, redis_url, pgvector_url, shards)
        assert "postgresql://db/shard" not in command, f"a shard the test does not make: {line}"
        expected = next((codes for key, codes in EXPECTED.items() if key in line), {0})
        result = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=300)
        if result.returncode not in expected or "Traceback" in result.stderr:
            failures.append(f"{original}\n exit {result.returncode}\n{result.stdout[-800:]}\n"
                            f"{result.stderr[-800:]}")
        ran.append(line)
    assert not failures, "\n\n".join(failures)
    # every example either ran or was skipped by name, and the parser found them all
    assert len(ran) + len(skipped) == len(list(shell_examples())) and len(ran) >= 25, ran
    assert (tmp_path / "backup.jsonl.gz").exists()
    assert (tmp_path / "conformance.xml").exists()
    for report in ("conformance.md", "indexes.md", "diff.html"):
        assert (tmp_path / report).stat().st_size > 0, report
    assert (tmp_path / "home/.local/share/bash-completion/completions/semvecctl").stat().st_size > 0
    assert all(s.startswith(SKIP_PREFIXES) for s in skipped)


def test_percent_encoding_example_prints_the_encoded_password():
    (line,) = [ln for ln in shell_examples() if ln.startswith("python -c")]
    result = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30,
                            env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    assert result.stdout.strip() == "p%40ss%2Fw%3Ard"


def test_output_flag_claim_matches_the_app():
    """README names the commands that do not take -o; check that list against every
    command of the built app, so a new command without -o must be documented."""
    import typer

    from semvecctl.app import app

    def walk(cmd, path=()):
        subs = getattr(cmd, "commands", None)
        if isinstance(subs, dict) and subs:
            for name, sub in subs.items():
                yield from walk(sub, path + (name,))
        else:
            yield path, any("--output" in p.opts for p in cmd.params)

    claim = README.split("Commands that print data take", 1)[1].split("Data goes to stdout", 1)[0]
    without = [p for p, takes in walk(typer.main.get_command(app)) if not takes]
    assert without
    for path in without:
        assert f"`{' '.join(path)}`" in claim or f"`{path[0]}`" in claim, path
    for path, takes in walk(typer.main.get_command(app)):
        if takes:
            assert f"`{' '.join(path)}`" not in claim.split("do not:", 1)[-1], path
