"""Option declarations shared by every command, so flags look and behave the same."""


from typing import Annotated, Any, Optional

import typer

from semvecctl.output import OutputFormat, StreamFormat

Output = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", help="Output format.", case_sensitive=False),
]
StreamOutput = Annotated[
    StreamFormat,
    typer.Option("--output", "-o", help="Output format (jsonl streams one object per line).",
                 case_sensitive=False),
]
Backend = Annotated[
    Optional[str],
    typer.Option("--backend", "-b", help="Backend name (default: $SEMVEC_SESSION_BACKEND, then the profile; naming none is a "
                              "usage error where a store is read or written: --backend memory for the in-memory one).",
                 show_default=False),
]
#: for commands that never pick a backend for you (conformance certifies what it is told)
NamedBackend = Annotated[
    Optional[str],
    typer.Option("--backend", "-b", help="Backend name to certify (or name it with --uri / --adapter); "
                                         "there is no default: an unnamed backend is never certified as memory.",
                 show_default=False),
]
Uri = Annotated[
    Optional[str],
    typer.Option("--uri", "-u", help="Connection URI; its scheme implies the backend (redis://, mongodb://, postgresql://, memory://).",
                 show_default=False),
]
AdapterFactory = Annotated[
    Optional[str],
    typer.Option("--adapter", help="Load the adapter from Python code instead of the registry: module:factory.",
                 show_default=False, rich_help_panel="Backend authors"),
]
Yes = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Do not ask for confirmation (required without a TTY)."),
]
Timeout = Annotated[
    float,
    typer.Option("--timeout", "-t", min=0.01, max=3600.0, help="Seconds before giving up."),
]


def owner_filter(owner: Optional[str], unowned: bool) -> Any:
    """The three-state owner filter from ``--owner`` / ``--unowned``: neither = every owner
    (``UNSCOPED``), ``--unowned`` = only rows without an owner (``None``), ``--owner`` = exact."""
    from backends.contract import UNSCOPED

    from semvecctl.application import current
    from semvecctl.exit_codes import ExitCode

    if owner is not None and unowned:
        current().abort("--owner and --unowned exclude each other", ExitCode.USAGE)
    if unowned:
        return None
    if owner is not None:
        if not owner.strip():
            current().abort("--owner needs a non-empty owner (use --unowned for rows without one)", ExitCode.USAGE)
        return owner
    return UNSCOPED
