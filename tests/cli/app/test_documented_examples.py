"""#15.10: every command example of README.md and of the manual (docs/*.md) runs, as
written, against the suite's real Redis and PostgreSQL (or memory), one page at a time, in
a fresh working directory and HOME, seeded the same way for every page.

What is substituted, and nothing else: the example hosts (``redis://cache…`` → the suite's
Redis, ``postgresql://db/semvec`` → a fresh PostgreSQL database, ``postgresql://db/shardN``
→ shard databases), and ``load run``'s ``--duration`` (30 s → 1 s). What is not run, by
name: installing (``pip``), the test suite itself, building the manual (``mkdocs``, the
docs job's), the benchmark and the MongoDB server recipes (no MongoDB can run here). A new
example line that fits neither list is run; one that cannot be classified fails the test.

Examples run in-process (CliRunner on ``semvecctl.app.app``, tests/support/doc_examples.py)
unless they need a shell or a real process. An example in a ``console`` block that shows
output must print exactly that output. YAML, TOML and Python blocks are parsed or run.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from tests.support.doc_examples import Example, Workspace, examples_of, fenced_blocks, forget_modules, run

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
PAGES: dict[str, str] = {"README.md": README, **{
    f"docs/{p.name}": p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md"))}}

pytestmark = pytest.mark.postgres

SKIP_PREFIXES = ("pip install", "python -m pytest", "python bench/", "mongod ", "mongosh ",
                 "SEMVEC_TEST_MONGODB_URI=", "mkdocs ")

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

#: files a page's examples must have made (the examples ran, not just exited 0)
MADE = {
    "docs/sessions.md": ("backup.jsonl.gz", "recent.jsonl.gz", "u-17.jsonl.gz",
                         "backup.jsonl.gz.age"),
    "docs/conformance.md": ("conformance.xml", "conformance.md"),
    "docs/indexes.md": ("indexes.md",),
    "docs/retrieval.md": ("diff.html",),
    "docs/erase-prune.md": ("idle.jsonl.gz", "u-17.json"),
    "docs/configuration.md": ("home/.local/share/bash-completion/completions/semvecctl",
                              "home/.config/semvecctl/config.yaml"),
    "docs/observability.md": ("health.prom", "health.log"),
    "docs/migrate.md": ("move.state", "move-receipt.json"),
    "docs/health.md": ("shape.html",),
    "docs/receipts.md": ("u-17.json", "u-17.json.sig"),
}


def page_examples(source: str) -> list[Example]:
    return examples_of(source, PAGES[source], EXPECTED)


def every_example() -> list[Example]:
    return [e for source in PAGES for e in page_examples(source)]


def runnable(line: str) -> str | None:
    """The line to run, or None for a line skipped by name."""
    if line.startswith("pip install") and "&& semvecctl" in line:
        line = line.split("&& ", 1)[1]
    if line.startswith(SKIP_PREFIXES):
        return None
    assert line.startswith(("semvecctl ", "python -c ", "python -m semvecctl ", "timeout ", 'eval "$(semvecctl ',
                            "ssh-keygen ")), \
        f"unclassified documented example: {line}"
    return line


def blocks(lang: str, text: str = README) -> list[str]:
    return [body for found, body in fenced_blocks(text) if found == lang]


def all_blocks(lang: str) -> list[tuple[str, str]]:
    return [(source, body) for source, text in PAGES.items() for body in blocks(lang, text)]


# --- the README's shape ------------------------------------------------------------------


def test_quick_start_has_exactly_two_commands():
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [ln for b in re.findall(r"```sh\n(.*?)```", section, flags=re.S)
                for ln in b.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert commands == ["pip install . && semvecctl conformance run --backend memory",
                        "pip install '.[test]' && python -m pytest -n 2"], commands


def test_readme_test_command_is_the_one_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "\npip install '.[test]' && python -m pytest -n 2\n" in ci
    assert "```sh\npip install '.[test]' && python -m pytest -n 2\n```" in README


def test_readme_is_short_and_points_to_the_manual():
    assert len(README.splitlines()) <= 300
    assert "](docs/index.md)" in README
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)", README))
    assert linked == {p.name for p in DOCS.glob("*.md")}, "the README's table lists every page"


def test_readme_has_the_placeholder_heading_and_no_unpublished_install():
    assert "\n## Working with a semvec deployment\n" in README
    before_note = README.split("(where an error message says", 1)[0]
    assert "pip install 'semvecctl[" not in before_note
    assert "from a checkout: `pip install '.[redis]'`" in README
    assert "also installs a console\nscript called `semvecctl`" in README


# --- links ---------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """Python-Markdown's toc slug (what mkdocs and, for these headings, GitHub make)."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(text: str) -> set[str]:
    without_code = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return {_slug(h) for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", without_code, flags=re.M)}


@pytest.mark.parametrize("source", sorted(PAGES))
def test_every_relative_link_and_anchor_resolves(source):
    """README → docs/*.md and the pages between themselves; mkdocs --strict checks the
    same in the docs job, this keeps it checked in the main suite."""
    base = (ROOT / source).parent
    text = re.sub(r"^```.*?^```", "", PAGES[source], flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # an external address: not checked (no network)
        path, _, anchor = target.partition("#")
        file = (base / path).resolve() if path else ROOT / source
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text(encoding="utf-8")):
            broken.append(target)
    assert not broken, broken


# --- the non-shell blocks ------------------------------------------------------------------


def test_yaml_examples_parse_as_what_they_show(tmp_path):
    from backends.conformance.known import load_known_failures
    from semvecctl.config import load_config

    found = all_blocks("yaml")
    assert len(found) >= 2
    for n, (_source, body) in enumerate(found):
        path = tmp_path / f"example-{n}.yaml"
        path.write_text(body)
        if "known_failures:" in body:
            load_known_failures(path)  # the case ids are checked against the catalogue
        elif body.lstrip().startswith("replica:"):
            from backends.conformance.failover import load_topology

            topology = load_topology(str(path), backend="postgres", run_uri=None)
            assert topology.synchronous is True and topology.after_uri.startswith("postgresql://")
        else:
            config = load_config(path)
            assert config.current_profile == "staging" and set(config.profiles) == {"staging", "atlas"}


def test_toml_example_is_the_entry_point_group():
    tomllib = pytest.importorskip("tomllib")
    (found,) = all_blocks("toml")
    data = tomllib.loads(found[1])
    assert data["project"]["entry-points"]["semvec.backends"] == {"mystore": "my_pkg.adapter:MyStoreAdapter"}
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "semvec.backends" in ours["project"]["entry-points"]


def test_python_plugin_example_runs_under_pytest(tmp_path):
    ((_, python_block),) = [b for b in all_blocks("python") if b[0] == "docs/plugins.md"]
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


def test_every_python_block_is_run_somewhere():
    """A Python block of the manual is either the plugin example or the Try it page's."""
    assert sorted({source for source, _ in all_blocks("python")}) == ["docs/plugins.md",
                                                                     "docs/try-it.md"]


def test_try_it_python_example_writes_a_turn_on_redis(redis_url):
    """The Try it page's Python block, run as written against the suite's Redis (its URL in
    place of redis://cache:6379/0): what it prints is what its comments say."""
    ((_, block),) = [b for b in all_blocks("python") if b[0] == "docs/try-it.md"]
    assert "redis://cache:6379/0" in block
    result = subprocess.run([sys.executable, "-c", block.replace("redis://cache:6379/0", redis_url)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
    said = [line.split("# ", 1)[1] for line in block.splitlines() if "print(" in line]
    assert result.stdout.splitlines() == said


# --- the shell examples ----------------------------------------------------------------------


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


def _shown(text: str) -> list[str]:
    """Output as a page shows it: a table's padding at the end of a line is not visible."""
    return [line.rstrip() for line in text.rstrip("\n").splitlines()]


def test_every_documented_example_is_classified():
    """The parser finds the examples, and each one either runs or is skipped by name."""
    examples = every_example()
    ran = [e for e in examples if runnable(e.line) is not None]
    assert len(ran) >= 60, [e.line for e in ran]
    assert sum(e.output is not None for e in examples) >= 2  # some show their output
    assert {e.source for e in ran} >= {"README.md", "docs/sessions.md", "docs/health.md"}


@pytest.mark.redis
@pytest.mark.parametrize("source", [s for s in PAGES if any(runnable(e.line) for e in page_examples(s))])
def test_every_shell_example_runs(source, redis_url, pgvector_url, request, tmp_path):
    """A page's examples in their order, on a store seeded as every page's is (the pages
    are independent: each has its own Redis database flush, PostgreSQL database and
    working directory)."""
    examples = page_examples(source)
    shards: list[str] = []
    if any("postgresql://db/shard" in e.line for e in examples):
        sharded = request.getfixturevalue("sharded_sql")
        shards = [*sharded.shards, *sharded.make(1).shards]
    _seed(redis_url, pgvector_url, tmp_path)
    workspace = Workspace(tmp_path)
    failures, ran = [], 0
    try:
        for example in examples:
            line = runnable(example.line)
            if line is None:
                continue
            command = _substitute(line, redis_url, pgvector_url, shards)
            assert "postgresql://db/shard" not in command, f"a shard the test does not make: {line}"
            outcome = run(command, workspace)
            ran += 1
            wrong_output = example.output is not None and _shown(outcome.stdout) != _shown(example.output)
            if outcome.exit_code not in example.codes or outcome.crashed or wrong_output:
                failures.append(f"{example.line}\n exit {outcome.exit_code} (expected "
                                f"{sorted(example.codes)}; in-process: {outcome.in_process})\n"
                                f"{outcome.stdout[-800:]}\n{outcome.stderr[-800:]}\n{outcome.crashed}"
                                + (f"\n shown in {source}:\n{example.output}" if wrong_output else ""))
    finally:
        forget_modules("my_pkg")
    assert not failures, "\n\n".join(failures)
    assert ran
    for made in MADE.get(source, ()):
        assert (tmp_path / made).exists() and (tmp_path / made).stat().st_size > 0, made


def test_output_flag_claim_matches_the_app():
    """The manual names the commands that do not take -o; check that list against every
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

    page = PAGES["docs/cli.md"]
    claim = page.split("Commands that print data take", 1)[1].split("- **Tables**", 1)[0]
    without = [p for p, takes in walk(typer.main.get_command(app)) if not takes]
    assert without
    for path in without:
        assert f"`{' '.join(path)}`" in claim or f"`{path[0]}`" in claim, path
    for path, takes in walk(typer.main.get_command(app)):
        if takes:
            assert f"`{' '.join(path)}`" not in claim.split("do not take `-o`:", 1)[-1], path
