"""One failure path: every library error has an exit code and a one-line message,
``Application.abort`` leaves through the same boundary, and every console the CLI draws
on passes the scrubber."""

from __future__ import annotations

import io
import signal

import pytest

from backends import errors as be
from backends.archive.errors import ArchiveDamaged, ArchiveError, ArchiveUnsupported
from backends.transfer.errors import ImportConflict, LossyTransfer
from backends.selection import InvalidURI
from semvecctl.application import Application
from semvecctl.errors import CliError, classify
from semvecctl.exit_codes import ExitCode
from semvecctl.interrupts import Interrupted

LIBRARY_ERRORS = [
    (be.BackendError("boom"), ExitCode.ENVIRONMENT),
    (be.InvalidEvent("bad"), ExitCode.ENVIRONMENT),
    (be.BackendUnreachable("down"), ExitCode.UNREACHABLE),
    (be.BackendAuthError("no"), ExitCode.ENVIRONMENT),
    (be.BackendConfigError("cfg"), ExitCode.ENVIRONMENT),
    (be.UnsupportedOperation("nope"), ExitCode.ENVIRONMENT),
    (be.BackendTransient("later"), ExitCode.UNREACHABLE),
    (be.IntegrityError("odd"), ExitCode.CHECK_FAILED),
    (be.CorruptState("s", "version", "is missing"), ExitCode.CHECK_FAILED),
    (be.InjectedFault("planted"), ExitCode.CHECK_FAILED),
    (be.MissingDriver("redis", "redis", "redis"), ExitCode.ENVIRONMENT),
    (be.ContestedBackend("x", ["a==1", "b==2"]), ExitCode.ENVIRONMENT),
    (be.ContractError("t", ["missing name"]), ExitCode.ENVIRONMENT),
    (be.StateVersionConflict("moved"), ExitCode.CHECK_FAILED),
    (ImportConflict("exists"), ExitCode.CHECK_FAILED),
    (LossyTransfer("would lose events"), ExitCode.CHECK_FAILED),
    (ArchiveDamaged("line 3: truncated"), ExitCode.CHECK_FAILED),
    (ArchiveUnsupported("format 9"), ExitCode.ENVIRONMENT),
    (ArchiveError("refused"), ExitCode.ENVIRONMENT),
    (InvalidURI("bad uri"), ExitCode.USAGE),
]


@pytest.mark.parametrize("exc,code", LIBRARY_ERRORS, ids=lambda v: type(v).__name__)
def test_every_library_error_has_its_code_and_one_line(exc, code):
    got, message = classify(exc)
    assert got == code
    assert message and "\n" not in message
    assert "unexpected" not in message  # none of them falls through to the catch-all


def test_archive_refusals_keep_their_wording():
    assert classify(ArchiveDamaged("line 3: truncated"))[1] == "archive check failed: line 3: truncated"
    assert classify(LossyTransfer("would lose events"))[1] == "would lose events"


def test_abort_is_a_cli_error_with_the_code():
    with pytest.raises(CliError) as caught:
        Application().abort("gate failed", ExitCode.CHECK_FAILED)
    assert classify(caught.value) == (ExitCode.CHECK_FAILED, "gate failed")


def test_signal_exit_codes_are_named():
    assert Interrupted(signal.SIGINT).exit_code == ExitCode.INTERRUPTED == 130
    assert Interrupted(signal.SIGTERM).exit_code == ExitCode.TERMINATED == 143


def test_a_rich_console_from_output_is_scrubbed():
    app = Application()
    app.remember_secret("redis://ops:hunter2-secret@db:6379/0")
    app.remember_secret_value("tok-abcdef123456")
    stream = io.StringIO()
    console = app.output.console(stream)
    console.print("cannot reach redis://ops:hunter2-secret@db:6379/0 with tok-abcdef123456")
    text = stream.getvalue()
    assert "hunter2-secret" not in text and "tok-abcdef123456" not in text
    assert "***" in text
