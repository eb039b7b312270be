"""Turning failures into one-line messages and exit codes.

Commands raise :class:`CliError` for what they detect themselves; everything the backend
layer raises is classified here, in one table, so every command maps errors the same way.
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


def usage_error(message: str) -> CliError:
    return CliError(message, ExitCode.USAGE)


def environment_error(message: str) -> CliError:
    return CliError(message, ExitCode.ENVIRONMENT)


def classify(exc: BaseException) -> tuple[ExitCode, str]:
    """Map an exception from the backend layer to an exit code and a one-line message."""
    from backends import errors as be
    from backends.selection import InvalidURI

    if isinstance(exc, CliError):
        return exc.code, exc.message
    if isinstance(exc, InvalidURI):
        return ExitCode.USAGE, str(exc)
    if isinstance(exc, be.BackendError):
        found = _classify_library(exc)
        if found is not None:
            return found
    if isinstance(exc, be.BackendTransient):
        return ExitCode.UNREACHABLE, (f"backend temporarily unavailable (transient: a failover "
                                      f"or a timeout that should pass): {exc}; retry the command")
    if isinstance(exc, be.BackendUnreachable):
        return ExitCode.UNREACHABLE, f"backend unreachable: {exc}"
    if isinstance(exc, be.BackendAuthError):
        return ExitCode.ENVIRONMENT, f"backend refused our credentials: {exc}"
    if isinstance(exc, (be.MissingDriver, be.ContestedBackend, be.ContractError,
                        be.BackendConfigError, be.UnsupportedOperation)):
        return ExitCode.ENVIRONMENT, str(exc)
    if isinstance(exc, be.CorruptState):
        return ExitCode.CHECK_FAILED, (f"damaged data: {exc} (nothing was written; the row "
                                       "is left as it is)")
    if isinstance(exc, be.InjectedFault):
        return ExitCode.CHECK_FAILED, (f"injected fault (the adapter's conformance fault seam "
                                       f"is active): {exc}")
    if isinstance(exc, be.IntegrityError):
        return ExitCode.CHECK_FAILED, f"integrity check failed: {exc}"
    if be.is_state_version_conflict(exc):
        return ExitCode.CHECK_FAILED, f"conflict: {exc}"
    if isinstance(exc, be.InvalidEvent):
        return ExitCode.ENVIRONMENT, f"invalid event: {exc}"
    if isinstance(exc, be.BackendError):
        return ExitCode.ENVIRONMENT, f"backend error: {exc}"
    if isinstance(exc, ImportError):
        return ExitCode.ENVIRONMENT, str(exc)
    if isinstance(exc, LookupError) and type(exc).__name__ == "TargetNotFound":
        return ExitCode.ENVIRONMENT, str(exc)
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return ExitCode.UNREACHABLE, f"backend unreachable: {type(exc).__name__}: {exc}"
    if isinstance(exc, PermissionError):
        return ExitCode.ENVIRONMENT, f"permission denied: {exc}"
    if isinstance(exc, FileNotFoundError):
        return ExitCode.USAGE, f"no such file: {exc.filename}"
    if isinstance(exc, OSError):
        return ExitCode.ENVIRONMENT, f"{type(exc).__name__}: {exc}"
    return ExitCode.ENVIRONMENT, f"unexpected {type(exc).__name__}: {exc} (rerun with --verbose for details)"


def _classify_library(exc: BaseException) -> tuple[ExitCode, str] | None:
    """The archive and migration refusals: damaged or lossy = 1, unsupported = 3.
    (Imported here, on the failure path, so a command that never reads an archive
    never loads these modules.)"""
    from backends.archive.errors import ArchiveDamaged, ArchiveError
    from backends.migrate.errors import LossyTransfer

    if isinstance(exc, LossyTransfer):
        return ExitCode.CHECK_FAILED, str(exc)
    if isinstance(exc, ArchiveDamaged):
        return ExitCode.CHECK_FAILED, f"archive check failed: {exc}"
    if isinstance(exc, ArchiveError):  # ArchiveUnsupported: another format or version
        return ExitCode.ENVIRONMENT, str(exc)
    return None
