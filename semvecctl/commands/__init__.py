"""The command table: one module per command group.

Each module here defines ``app`` (a ``typer.Typer`` for a group, or a plain function for a
single command such as ``health``), ``NAME`` (what the operator types) and ``HELP`` (one
line). A module without ``app`` only adds commands to another group when imported.
Modules are found by listing this package, so adding a group touches no shared file;
``ORDER`` only fixes where known groups appear in ``--help``.
"""


import pkgutil

ORDER = ("backends", "health", "indexes", "sessions", "events", "retrieve", "conformance",
         "load", "doctor", "erase", "config", "completions")


def discover() -> list[tuple[str, str, str]]:
    """(module, command name, help) for every command module, in ``ORDER``."""
    names = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(((n, n, "") for n in names), key=lambda t: (rank.get(t[0], len(ORDER)), t[0]))


GROUPS = discover()
