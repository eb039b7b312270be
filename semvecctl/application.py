"""The one application object of an invocation: global flags, output, secrets to scrub.

The root callback builds it; commands reach it with :func:`current`. Keeping it in one
place is what lets every command render, confirm and redact the same way.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from backends.info import SECRET_ENV_VARS

from semvecctl.output import Output


#: abort() without ``cause``: chain whatever exception is being handled
_CHAINED = object()


class Application:
    """One command's run: its global options, the secrets to scrub from what it prints,
    and its output."""

    def __init__(self, verbose: bool = False, no_color: bool = False,
                 config_path: str | None = None, profile: str | None = None,
                 shards: str | None = None) -> None:
        self.verbose = verbose
        self.no_color = no_color
        self.config_path = config_path
        self.profile = profile
        #: ``--shards``: a SQL deployment's shard list (None: not given on the command line)
        self.shards = shards
        self.secrets: set[str] = set()
        self.secret_values: set[str] = set()
        for var in SECRET_ENV_VARS:
            if os.environ.get(var):
                self.secrets.add(os.environ[var])
                # a list of DSNs (the engine's shard list): each one's credentials too
                self.secrets.update(part.strip() for part in os.environ[var].split(",")
                                    if "://" in part)
        if self.shards:
            self.secrets.update(part.strip() for part in self.shards.split(",") if part.strip())
        self.output = Output(no_color=self.no_color, verbose=self.verbose, scrubber=self.scrub)

    def confirm(self, question: str, *, yes: bool) -> None:
        """Ask before writing (the one vocabulary: the manual (docs/cli.md) "Previews, --apply, --yes,
        --overwrite"). ``--yes`` answers; without it and without a terminal to ask on,
        exit 2; "n" or end of input at the prompt, exit 2 with nothing changed. Here, not
        on Output, because it ends the command through :meth:`abort`."""
        from semvecctl.exit_codes import ExitCode

        if yes:
            return
        if not self.output.can_prompt():
            self.abort(f"refusing to {question} without confirmation: no terminal to ask on; "
                       "pass --yes to proceed (nothing was changed)", ExitCode.USAGE)
        sys.stderr.write(self.scrub(f"{question[0].upper()}{question[1:]}? [y/N]: "))
        sys.stderr.flush()
        answer = sys.stdin.readline()  # "" at end of input: the same as no
        if answer.strip().lower() not in ("y", "yes"):
            if not answer:
                sys.stderr.write("\n")
            self.abort("not confirmed: nothing was changed", ExitCode.USAGE)

    def wants_apply(self, *, apply: bool, yes: bool, option: str = "--apply") -> bool:
        """Whether to write: ``apply``. ``--yes`` without it is a usage error (exit 2),
        so a script that meant to write never gets a preview that exits 0; ``--apply``
        without ``--yes`` and no terminal is refused here, before any work."""
        from semvecctl.exit_codes import ExitCode

        if yes and not apply:
            self.abort(f"--yes answers the confirmation of {option}: add {option} to write, "
                       "or leave --yes out to preview (nothing was changed)", ExitCode.USAGE)
        if apply and not yes and not self.output.can_prompt():  # refuse before any work
            self.abort(f"refusing {option} without confirmation: no terminal to ask on; pass "
                       "--yes to proceed (nothing was changed)", ExitCode.USAGE)
        return apply

    def may_replace(self, path: "str | os.PathLike[str] | None", *, overwrite: bool,
                    option: str) -> None:
        """Refuse (exit 2) to replace an existing file ``path`` unless ``--overwrite``."""
        from semvecctl.exit_codes import ExitCode

        if path is not None and os.path.lexists(path) and not overwrite:
            self.abort(f"{option} {os.fspath(path)} already exists: pass --overwrite to replace "
                       "it, or name another file (nothing was changed)", ExitCode.USAGE)

    def evidence_file(self, path: str | None, *, option: str, overwrite: bool) -> None:
        """Refuse (exit 2) an evidence file (``--archive``, ``--receipt``) that is not a file
        in an existing directory, and ``--overwrite`` without one."""
        from semvecctl.exit_codes import ExitCode

        if path is not None:
            directory = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(directory) or os.path.isdir(path):
                self.abort(f"{option} {path}: not a file in an existing directory", ExitCode.USAGE)
        elif overwrite:
            self.abort(f"--overwrite only applies to {option} FILE", ExitCode.USAGE)

    def abort(self, message: str = "", code: int = 1, *,
              cause: BaseException | None | object = _CHAINED) -> NoReturn:
        """End the command: ``message`` (scrubbed, one line on stderr) and ``code``
        (an :class:`~semvecctl.exit_codes.ExitCode`). The one way out of a command: the
        error boundary in semvecctl.app reports it like every other failure. An empty
        message ends with ``code`` and says nothing more (the rows already said it).
        ``cause`` is what ``raise ... from cause`` would name (``None``: no chained
        exception in ``--verbose`` tracebacks); by default the one being handled."""
        from semvecctl.errors import CliError
        from semvecctl.exit_codes import ExitCode

        error = CliError(message, ExitCode(code))
        if cause is _CHAINED:
            raise error
        raise error from cause  # type: ignore[misc]

    def remember_secret(self, uri: str | None) -> None:
        """Register a URI whose credentials must be scrubbed from anything we print."""
        if uri:
            self.secrets.add(uri)

    def remember_secret_value(self, value: str | None) -> None:
        """Register a secret that is not (only) a URI, e.g. a token variable a plugin
        declares: the whole value is scrubbed, and any credential it holds as a URI."""
        if value:
            self.secret_values.add(value)
            self.secrets.add(value)

    def scrub(self, text: str) -> str:
        from backends.redaction import REDACTED, scrub

        for value in sorted(self.secret_values, key=len, reverse=True):
            text = text.replace(value, REDACTED)
        return scrub(text, *self.secrets)


_current: Application | None = None


def start(**settings) -> Application:
    global _current
    _current = Application(**settings)
    return _current


def current() -> Application:
    """The running invocation's application (a default one outside the CLI)."""
    global _current
    if _current is None:
        _current = Application()
    return _current
