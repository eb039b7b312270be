"""The "Examples:" of every command's ``--help``, said once, here.

Keyed by command path; :func:`epilog_of` renders them as the command's epilog (the app
attaches it when it builds the command, so no command module repeats it). Every example
is run by ``tests/cli/app/test_help_examples.py`` against the suite's Redis
(``redis://cache:6379/0``) and PostgreSQL (``postgresql://db/semvec``), seeded with the
the manual's session ``chat-42`` (owner ``acme``), user ``u-17`` and the items of session
``s1``; an example ending in ``# exit N ...`` documents, and is checked for, exit N. The
test runs them in this order (``doctor --fix --apply`` removes item rows no session
state owns, so retrieval comes before it).
"""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "backends list": (
        "semvecctl backends list",
        "semvecctl backends list --check -o json",
    ),
    "backends show": ("semvecctl backends show pgvector",),
    "backends resolve": (
        "semvecctl backends resolve",
        "semvecctl backends resolve --uri postgresql://db/semvec",
    ),
    "health": (
        "semvecctl health --uri redis://cache:6379/0 --timeout 2 -o json",
        "semvecctl health --backend memory --require-persistent   # exit 1: a CI gate",
    ),
    "indexes plan": ("semvecctl indexes plan --uri postgresql://db/semvec --dimensions 384",),
    "indexes ensure": (
        "semvecctl indexes ensure --uri postgresql://db/semvec --dimensions 384   # a preview",
        "semvecctl indexes ensure --uri postgresql://db/semvec --dimensions 384 --apply --yes",
    ),
    "indexes validate": (
        "semvecctl indexes validate --uri postgresql://db/semvec -o json",
        "semvecctl indexes validate --uri postgresql://db/semvec --report indexes.md",
    ),
    "sessions list": (
        "semvecctl sessions list --uri redis://cache:6379/0 --owner acme --match 'chat-*'",
        "semvecctl sessions list --uri redis://cache:6379/0 -n 10 -o jsonl",
        "semvecctl sessions list --uri postgresql://db/semvec --sort idle --limit 20",
    ),
    "sessions count": (
        "semvecctl sessions count --uri redis://cache:6379/0",
        "semvecctl sessions count --uri postgresql://db/semvec --owner acme -o json",
    ),
    "sessions seed": (
        "semvecctl sessions seed --uri redis://cache:6379/0   # a preview",
        "semvecctl sessions seed --uri redis://cache:6379/0 --apply --yes",
    ),
    "sessions inspect": ("semvecctl sessions inspect chat-42 --uri redis://cache:6379/0",),
    "sessions delete": (
        "semvecctl sessions delete chat-7 --uri redis://cache:6379/0   # a preview",
        "semvecctl sessions delete chat-7 --uri redis://cache:6379/0 --owner acme --apply --yes",
    ),
    "sessions export": (
        "semvecctl sessions export --uri redis://cache:6379/0 --out backup.jsonl.gz",
        "semvecctl sessions export --uri redis://cache:6379/0 --owner acme --out backup.jsonl.gz --overwrite",
        "semvecctl sessions export --uri postgresql://db/semvec --since 1d --out recent.jsonl.gz",
    ),
    "sessions import": (
        "semvecctl sessions import backup.jsonl.gz --uri postgresql://db/semvec   # a preview",
        "semvecctl sessions import backup.jsonl.gz --uri postgresql://db/semvec --keep-versions --apply --yes",
    ),
    "sessions copy": (
        "semvecctl sessions copy --from redis://cache:6379/0 --to postgresql://db/semvec --with-events --allow-loss --on-conflict skip",
        "semvecctl sessions copy --from redis://cache:6379/0 --to postgresql://db/semvec --with-events --allow-loss --on-conflict skip --apply --yes",
    ),
    "sessions prune": (
        "semvecctl sessions prune --uri postgresql://db/semvec --idle-for 30d",
        "semvecctl sessions prune --uri postgresql://db/semvec --idle-for 30d --archive idle.jsonl.gz --apply --yes",
    ),
    "events list": ("semvecctl events list --uri redis://cache:6379/0 --user u-17 --limit 20 -o jsonl",),
    "events inspect": (
        "semvecctl events inspect 7f0c6a52-8a3e-4d7e-9b0e-2f7d7f3c1a10 --uri redis://cache:6379/0",
    ),
    "events count": ("semvecctl events count --uri redis://cache:6379/0 --user u-17 --owner acme",),
    "events export": ("semvecctl events export --uri redis://cache:6379/0 --user u-17 --out u-17.jsonl.gz",),
    "retrieve run": (
        "semvecctl retrieve run --uri postgresql://db/semvec --session s1 --like item-7 --side server",
    ),
    "retrieve diff": (
        "semvecctl retrieve diff --uri postgresql://db/semvec --session s1 --query 'refund policy' --query-vector q.json",
        "semvecctl retrieve diff --uri postgresql://db/semvec --session s1 --queries golden.jsonl --report diff.md",
    ),
    "erase": (
        "semvecctl erase --uri redis://cache:6379/0 --user u-17 --owner acme   # a preview",
        "semvecctl erase --uri redis://cache:6379/0 --user u-17 --owner acme --apply --yes --receipt u-17.json",
    ),
    "erasures list": (
        "semvecctl erasures list --uri redis://cache:6379/0",
        "semvecctl erasures list --uri redis://cache:6379/0 -o json",
    ),
    "erasures check": (
        "semvecctl erasures check --uri redis://cache:6379/0 --user u-99 --owner acme   # exit 1: not erased",
        "semvecctl erasures check --uri redis://cache:6379/0 --user u-99 -o json   # exit 1",
    ),
    "erasures identity": (
        "semvecctl erasures identity --uri redis://cache:6379/0",
        "semvecctl erasures identity --uri redis://cache:6379/0 -o json",
    ),
    "erasures export": (
        "semvecctl erasures export ledger.json --uri redis://cache:6379/0",
        "semvecctl erasures export ledger.json --uri redis://cache:6379/0 --overwrite -o json",
    ),
    "erasures import": (
        "semvecctl erasures import ledger.json --uri redis://cache:6379/0",
        "semvecctl erasures import ledger.json --uri redis://cache:6379/0 --verify-with ledger.pub   # exit 1: unsigned",
    ),
    "erasures record": (
        "semvecctl erasures record --certificate forget-u-17.json --owner acme --uri redis://cache:6379/0   # exit 2: no such file here",
        "semvecctl erasures record --certificate forget-u-17.json --owner acme --verify-with compliance.pub --uri redis://cache:6379/0 -o json   # exit 2",
    ),
    "archive verify": (
        "semvecctl archive verify backup.jsonl.gz",
        "semvecctl archive verify backup.jsonl.gz -o json",
    ),
    "receipts verify": (
        "semvecctl receipts verify u-17.json --key receipts.pub   # exit 1: unsigned (erased without --sign-with)",
        "semvecctl receipts verify u-17.json --key receipts.pub -o json   # exit 1",
    ),
    "doctor": (
        "semvecctl doctor --uri postgresql://db/semvec -o jsonl",
        "semvecctl doctor --uri postgresql://db/semvec --fix --apply --yes",
    ),
    "conformance list": ("semvecctl conformance list",),
    "conformance run": (
        "semvecctl conformance run --backend memory --only state",
        "semvecctl conformance run --uri redis://cache:6379/0 --only state --junit conformance.xml",
    ),
    "stats": (
        "semvecctl stats --uri redis://cache:6379/0",
        "semvecctl stats --uri postgresql://db/semvec --idle-for 30d --report stats.html -o json",
    ),
    "migrate plan": ("semvecctl migrate plan --from redis://cache:6379/0 --to postgresql://db/semvec",),
    "migrate run": (
        "semvecctl migrate run --from redis://cache:6379/0 --to postgresql://db/semvec --state move.state --allow-loss   # a preview",
        "semvecctl migrate run --from redis://cache:6379/0 --to postgresql://db/semvec --state move.state --allow-loss --follow --max-passes 2 --apply --yes",
    ),
    "migrate status": ("semvecctl migrate status --state move.state -o json",),
    "migrate verify": ("semvecctl migrate verify --from redis://cache:6379/0 --to postgresql://db/semvec --state move.state --sample 100",),
    "migrate cutover": (
        "semvecctl migrate cutover --from redis://cache:6379/0 --to postgresql://db/semvec --state move.state --quiet-window 0.5   # a preview",
    ),
    "migrate abort": ("semvecctl migrate abort --to postgresql://db/semvec --state move.state   # a preview",),
    "shards plan": ("semvecctl shards plan --uri postgresql://db/semvec --to-shards postgresql://db/semvec -o json",),
    "shards run": (
        "semvecctl shards run --uri postgresql://db/semvec --to-shards postgresql://db/semvec --state grow.state   # a preview",
        "semvecctl shards run --uri postgresql://db/semvec --to-shards postgresql://db/semvec --state grow.state --batch-size 500 --apply --yes",
    ),
    "shards status": ("semvecctl shards status --state grow.state -o json",),
    "shards verify": ("semvecctl shards verify --uri postgresql://db/semvec --to-shards postgresql://db/semvec --state grow.state",),
    "shards cutover": (
        "semvecctl shards cutover --uri postgresql://db/semvec --to-shards postgresql://db/semvec --state grow.state --quiet-window 0.5   # a preview",
    ),
    "shards abort": ("semvecctl shards abort --uri postgresql://db/semvec --to-shards postgresql://db/semvec --state grow.state   # a preview",),
    "load run": (
        "semvecctl load run --uri redis://cache:6379/0 --duration 1   # a preview",
        "semvecctl load run --uri redis://cache:6379/0 --writers 4 --duration 1 --apply --yes",
    ),
    "load cleanup": (
        "semvecctl load cleanup --prefix semvec-load-0123abcd- --uri redis://cache:6379/0 --apply --yes",
    ),
    "config view": ("semvecctl config view -o json",),
    "config settings": ("semvecctl config settings redis", "semvecctl config settings -o markdown"),
    "config set-profile": ("semvecctl config set-profile staging --uri redis://cache:6379/0",),
    "config get-profiles": ("semvecctl config get-profiles",),
    "config use-profile": ("semvecctl config use-profile staging",),
    "completions show": ('eval "$(semvecctl completions show bash)"',),
    "completions install": ("semvecctl completions install zsh",),
}


def examples_of(path: str) -> tuple[str, ...]:
    return EXAMPLES.get(path, ())


def epilog_of(path: str) -> str | None:
    """The ``Examples:`` block of command ``path`` (click keeps ``\\b`` paragraphs as
    they are written), or None."""
    lines = examples_of(path)
    if not lines:
        return None
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)
