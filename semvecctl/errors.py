"""Turning failures into one-line messages and exit codes.

Commands end with :meth:`semvecctl.application.Application.abort` for what they detect
themselves (it raises :class:`CliError`, caught only at the error boundary in
``semvecctl.app``); everything else is looked up in the one category table of
``backends.errors`` (its wording) and :data:`semvecctl.exit_codes.EXIT_CODES` (its exit
code), so every command maps errors the same way.
"""

from __future__ import annotations

from semvecctl.exit_codes import ExitCode, exit_code_of


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
    its category: the wording of ``backends.errors.CATEGORIES``, the exit code of
    ``semvecctl.exit_codes.EXIT_CODES``."""
    from backends.errors import category_of, describe

    if isinstance(exc, CliError):
        return exc.code, exc.message
    return exit_code_of(category_of(exc)), describe(exc)
