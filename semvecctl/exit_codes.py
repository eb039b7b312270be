"""The one exit-status enum every command uses (like httpie's ExitStatus)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    #: a check failed: unhealthy gate, drift, conformance failure, CI gate missed, a
    #: version conflict, damaged (corrupt) stored data
    CHECK_FAILED = 1
    #: bad command line: unknown option, malformed URI, unknown output format; --apply
    #: without --yes and no terminal, a declined confirmation, --yes without --apply, an
    #: existing file without --overwrite (nothing was changed)
    USAGE = 2
    #: environment: driver missing, contested or broken backend, bad configuration
    ENVIRONMENT = 3
    #: the backend could not be reached, or failed transiently (retry)
    UNREACHABLE = 4
    #: stopped by SIGINT (Ctrl-C): 128 + SIGINT, as shells do
    INTERRUPTED = 130
    #: stopped by SIGTERM: 128 + SIGTERM
    TERMINATED = 143
