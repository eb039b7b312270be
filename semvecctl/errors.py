"""Turning failures into one-line messages and exit codes.

Commands end with :meth:`semvecctl.application.Application.abort` for what they detect
themselves (it raises :class:`CliError`, caught only at the error boundary in
``semvecctl.app``); everything else is looked up in the one category table of
``backends.errors``, so every command maps errors the same way.
"""

from __future__ import annotations

from semvecctl.exit_codes import ExitCode


class CliError(Exception):
    """A failure the command already explained: message plus exit code. An empty message
    ends the command with ``code`` and says nothing more (what went wrong was already
    shown, e.g. as the rows of a check). Raised by :meth:`Application.abort`."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def classify(exc: BaseException) -> tuple[ExitCode, str]:
    """The exit code and one-line message of any failure: an abort's own, else the row of
    its category in the one table (``backends.errors.CATEGORIES``)."""
    from backends.errors import describe, rule_of

    if isinstance(exc, CliError):
        return exc.code, exc.message
    return ExitCode(rule_of(exc).exit_code), describe(exc)
