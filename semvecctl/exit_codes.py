"""The one exit-status enum every command uses (like httpie's ExitStatus)."""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    OK = 0
    #: a check failed: unhealthy gate, drift, conformance failure, CI gate missed, a
    #: version conflict, damaged (corrupt) stored data
    CHECK_FAILED = 1
    #: bad command line: unknown option, malformed URI, unknown output format; --apply
    #: without --yes and no terminal, a declined confirmation, --yes without --apply, an
    #: existing file without --overwrite, a request a use case refused before changing
    #: anything (OperationRefused: e.g. an interrupted run's journal) (nothing was changed)
    USAGE = 2
    #: environment: driver missing, contested or broken backend, bad configuration
    ENVIRONMENT = 3
    #: the backend could not be reached, or failed transiently, or a write was not
    #: confirmed by the replicas asked for (retry)
    UNREACHABLE = 4
    #: stopped by SIGINT (Ctrl-C): 128 + SIGINT, as shells do
    INTERRUPTED = 130
    #: stopped by SIGTERM: 128 + SIGTERM
    TERMINATED = 143


def _exit_codes() -> dict[Any, ExitCode]:
    from backends.errors import Category as C  # noqa: N817 - a table of rows

    check, usage = ExitCode.CHECK_FAILED, ExitCode.USAGE
    env, unreachable = ExitCode.ENVIRONMENT, ExitCode.UNREACHABLE
    return {
        C.CONFLICT: check, C.INTEGRITY: check, C.CORRUPT: check, C.INJECTED: check,
        C.ARCHIVE_DAMAGED: check, C.LOSSY: check,
        C.INVALID_URI: usage, C.NO_FILE: usage, C.REFUSED: usage,
        C.UNREACHABLE: unreachable, C.NETWORK: unreachable, C.TRANSIENT: unreachable,
        C.UNREPLICATED: unreachable,
        C.AUTH: env, C.PERMISSION: env, C.TLS: env, C.CONFIG: env, C.UNSUPPORTED: env,
        C.MISSING_DRIVER: env, C.CONTESTED: env, C.CONTRACT: env, C.INVALID_EVENT: env,
        C.ARCHIVE_UNSUPPORTED: env, C.NOT_FOUND: env, C.IMPORT: env, C.OS: env,
        C.BACKEND: env,
        #: not known to pass: permanent (3), like every unclassified failure, in every command
        C.UNKNOWN: env,
    }


#: each failure category of ``backends.errors`` -> the exit code every command gives it
#: (the library names the kind of failure; what it means to a process is said here only)
EXIT_CODES: dict[Any, ExitCode] = _exit_codes()


def exit_code_of(category: Any) -> ExitCode:
    """The exit code of a :class:`backends.errors.Category`."""
    return EXIT_CODES[category]
