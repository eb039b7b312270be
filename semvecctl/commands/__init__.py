"""The command table: what the operator types, its one line of help, and the module that
runs it — known without importing any command module (pip's command table, click's lazy
group). ``semvecctl --help`` reads only this table; a command's module is imported when
the command runs (or its own ``--help`` is asked for).

Each module named here defines ``app`` (a ``typer.Typer`` for a group, or a plain
function for a single command such as ``health``) and takes its ``HELP`` from this table
(``HELP = help_of(NAME)``), so the line is said once. ``extends`` lists modules that only
add commands to the group (``sessions prune`` lives in ``sessions_prune``); they are
imported, in that order, right after the group's module. The order of the table is the
order of ``semvecctl --help``.
"""

from __future__ import annotations

from typing import NamedTuple


class Entry(NamedTuple):
    module: str
    help: str
    extends: tuple[str, ...] = ()


COMMANDS: dict[str, Entry] = {
    "backends": Entry("backends", "List, show and resolve session backends (shipped and installed)."),
    "health": Entry("health", "Probe a backend (check_health, bounded by a timeout); exit 0/1/3/4 "
                              "for CI gates."),
    "indexes": Entry("indexes", "Plan, ensure (create what is missing) and validate (read-only) a "
                                "backend's indexes."),
    "sessions": Entry("sessions", "List, count, inspect, delete, export, import and copy stored sessions.",
                      extends=("sessions_transfer", "sessions_prune")),
    "migrate": Entry("migrate", "Move a live deployment between backends: plan, run (resumable, "
                                "--follow), status, verify by content, cutover, abort."),
    "shards": Entry("shards", "Change a live SQL deployment's shard list (grow, shrink, reorder): "
                              "plan, run (resumable, --follow), status, verify, cutover, abort."),
    "events": Entry("events", "List, inspect, count and export a user's compliance events."),
    "retrieve": Entry("retrieve", "Rank a session's memory in-process or server-side, and diff "
                                  "the two rankings."),
    "conformance": Entry("conformance", "Certify a backend against the contract: cases per "
                                        "capability, a level, JUnit XML."),
    "load": Entry("load", "Run concurrent writers against a store, then audit that nothing "
                          "acknowledged was lost."),
    "stats": Entry("stats", "Show a store's shape in one streaming pass (owners, blob sizes, idle "
                            "ages, TTL, largest sessions, event logs); --idle-for previews a prune."),
    "doctor": Entry("doctor", "Audit a store for damage (read-only); --fix shows repairs, --fix "
                              "--apply makes the safe ones."),
    "erase": Entry("erase", "Erase a data subject as the engine does: its events, the state and "
                            "item rows of the sessions derived from them (preview, then --apply)."),
    "erasures": Entry("erasures", "List the erasure ledger (keyed hashes, never ids), check "
                                  "whether a subject was erased (exit 0 erased, 1 not), show "
                                  "the store's identity, move a ledger between stores, record "
                                  "the engine's erasures."),
    "archive": Entry("archive", "Verify an archive offline (checksums, trailer, duplicates; "
                                "age-encrypted ones with --identity): exit 0 intact, 1 damaged."),
    "receipts": Entry("receipts", "Verify a receipt's detached Ed25519 signature (RECEIPT.sig, "
                                  "written by --sign-with)."),
    "config": Entry("config", "Show the effective configuration (profiles, selection, "
                              "variables, connection) and edit profiles; secrets redacted."),
    "completions": Entry("completions", "Print or install shell completion scripts (bash, zsh, "
                                        "fish)."),
}


def help_of(name: str) -> str:
    """The one-line help of command ``name`` (a module's ``HELP``)."""
    return COMMANDS[name].help
