"""The Typer application: the lazy command group, global flags and the single error boundary.

Commands come from the table in :mod:`semvecctl.commands`: ``semvecctl --help`` is drawn
from it without importing a command module, and a command's module is imported only when
that command is looked up (:class:`LazyCommands`). Global flags (``--verbose``,
``--no-color``, ``--config``, ``--profile``, ``--shards``) work anywhere on the line, like
kubectl's.
Every failure leaves through :meth:`RootGroup.main`: one line on stderr, the exit code of
:class:`ExitCode`, a traceback only with ``--verbose``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from typing import Any, Optional, Sequence

import typer
from typer.core import TyperGroup
from typer.exceptions import Abort, Exit, TyperException

from semvecctl import application
from semvecctl.completers import complete_profile, enable_runtime_completion
from semvecctl.errors import CliError, classify
from semvecctl.exit_codes import ExitCode

#: global flags that may appear after the subcommand; value = takes an argument
GLOBAL_FLAGS: dict[str, bool] = {
    "--verbose": False,
    "-v": False,
    "--no-color": False,
    "--config": True,
    "--profile": True,
    "-P": True,
    "--shards": True,
}


def hoist_global_flags(args: Sequence[str]) -> list[str]:
    """Move global flags found after a subcommand to the front (stops at ``--``)."""
    front: list[str] = []
    rest: list[str] = []
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        if arg == "--":
            rest.extend(items[i:])
            break
        name, eq, _ = arg.partition("=")
        if name in GLOBAL_FLAGS:
            if GLOBAL_FLAGS[name] and not eq:
                front.extend(items[i:i + 2])
                i += 2
                continue
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


class RootGroup(TyperGroup):
    """Root command group: hoists global flags and owns the error boundary."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from semvecctl.numeric import harden

        harden(self)  # every numeric option: finite and in range, or exit 2 (the
        # commands' own are hardened as LazyCommands loads them)
        self.commands = LazyCommands(self.commands)

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        args = hoist_global_flags(args)
        if "--watch" in args:  # its value may be left out (semvecctl.watch fills it in)
            from semvecctl.watch import optional_values

            args = optional_values(args)
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(self.commands)  # the names only: TyperGroup's .items() would load each

    def format_commands(self, ctx: typer.Context, formatter: Any) -> None:
        """The command list of ``--help`` from the table: no command module imported."""
        from typer._click.utils import make_default_short_help  # typer vendors click

        commands = self.commands
        assert isinstance(commands, LazyCommands)
        names = [n for n in self.list_commands(ctx)
                 if not (commands.is_loaded(n) and commands[n].hidden)]
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = [(n, commands[n].get_short_help_str(limit) if commands.is_loaded(n)
                 else make_default_short_help(commands.help_of(n), limit)) for n in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args: Optional[Sequence[str]] = None, prog_name: Optional[str] = None,
             complete_var: Optional[str] = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        code = self._run(args, prog_name or "semvecctl", complete_var, **extra)
        code = self._observed(code)
        if standalone_mode:
            sys.exit(int(code))
        return int(code)

    def _observed(self, code: int) -> int:
        """After the command: its ``--metrics-file`` written and its trace span ended,
        both with the exit code (a metrics file that cannot be written fails a run that
        would have passed: the job's monitoring depends on it)."""
        # a module never imported holds nothing to finish: only a command that takes
        # --metrics-file imports semvecctl.metrics, and only OTEL_* variables semvecctl.tracing
        metrics, tracing = sys.modules.get("semvecctl.metrics"), sys.modules.get("semvecctl.tracing")
        try:
            if metrics is not None:
                metrics.finish(code)
        except OSError as exc:
            if code:  # the run already failed with its own one-line error: this is secondary
                application.current().output.warn(f"--metrics-file could not be written: {exc}")
            else:
                _report(f"--metrics-file could not be written: {exc}", exc)
                code = ExitCode.ENVIRONMENT
        if tracing is not None:
            tracing.finish(code)
        return code

    def _run(self, args, prog_name, complete_var, **extra) -> int:
        from semvecctl.interrupts import Interrupted, interruption_of, signals_raise

        enable_runtime_completion()
        if any(name.startswith("OTEL_") for name in os.environ):  # traces need one of them
            from semvecctl import tracing

            if tracing.wanted():  # reads variables only: nothing is imported when it is off
                argv = sys.argv[1:] if args is None else list(args)
                tracing.start(tracing.command_path(self, hoist_global_flags(argv), GLOBAL_FLAGS))
        try:
            with signals_raise():
                rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                                  standalone_mode=False, **extra)
        except Interrupted as exc:
            _report(f"{exc}: stopped", None)
            return exc.exit_code
        except TyperException as exc:  # click's usage errors, vendored by typer
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError":
                sys.stderr.write((ctx.get_help() + "\n") if ctx is not None else "")
                return ExitCode.USAGE
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            _report(f"{exc.format_message()}{hint}", None)
            code = getattr(exc, "exit_code", ExitCode.USAGE)
            return code if code not in (None, 0, 1) else ExitCode.USAGE
        except Abort as exc:
            signalled = interruption_of(exc)
            if signalled is not None:
                _report(f"{signalled}: stopped", None)
                return signalled.exit_code
            _report("aborted, nothing more was done", None)
            return ExitCode.INTERRUPTED
        except Exit as exc:
            return exc.exit_code
        except Exception as exc:  # noqa: BLE001 - the single error boundary
            code, message = classify(exc)
            if message or not isinstance(exc, CliError):  # an empty abort was already said
                _report(message, exc)
            return code
        if isinstance(rv, int) and not isinstance(rv, bool):
            return rv
        return ExitCode.OK


class LazyCommands(dict):
    """The root group's commands: the names of :data:`semvecctl.commands.COMMANDS` (then
    any added in code), each command module imported the first time its command is
    looked up, built by Typer exactly as ``app.add_typer``/``app.command`` would, and its
    numeric options hardened. A dict, as click and the tests walking the tree expect;
    iterating names loads nothing, ``items()``/``values()`` load every command."""

    def __init__(self, added: Any = None) -> None:
        super().__init__(added or {})

    @staticmethod
    def _table() -> dict[str, Any]:
        from semvecctl.commands import COMMANDS

        return COMMANDS

    def is_loaded(self, name: str) -> bool:
        return dict.__contains__(self, name)

    def help_of(self, name: str) -> str:
        return self._table()[name].help

    def __getitem__(self, name: str) -> Any:
        if not dict.__contains__(self, name):
            entry = self._table().get(name)
            if entry is None:
                raise KeyError(name)
            dict.__setitem__(self, name, _load_command(name, entry))
        return dict.__getitem__(self, name)

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self._table()

    def __iter__(self) -> Iterator[str]:
        table = self._table()
        yield from table
        yield from (n for n in dict.keys(self) if n not in table)

    def __len__(self) -> int:
        return len(set(self._table()) | set(dict.keys(self)))

    def keys(self) -> list[str]:  # type: ignore[override]
        return list(self)

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        return [(name, self[name]) for name in self]

    def values(self) -> list[Any]:  # type: ignore[override]
        return [self[name] for name in self]


def _load_command(name: str, entry: Any) -> Any:
    """Import the module of ``name`` (and the modules that extend its group) and build
    its click command as the root Typer would have."""
    from semvecctl.numeric import harden

    module = importlib.import_module(f"semvecctl.commands.{entry.module}")
    for extra in entry.extends:
        importlib.import_module(f"semvecctl.commands.{extra}")
    command = module.app
    host = typer.Typer(**_TYPER_SETTINGS)
    host.callback()(_nothing)  # a group even for one command, so the name is kept
    if isinstance(command, typer.Typer):
        host.add_typer(command, name=name, help=entry.help)
    else:
        host.command(name=name, help=entry.help)(command)
    built = typer.main.get_command(host).commands[name]
    harden(built)
    _attach_examples(built, name)
    return built


def _attach_examples(command: Any, path: str) -> None:
    """Each command's ``Examples:`` epilog, from the one table (semvecctl.examples)."""
    from semvecctl.examples import epilog_of

    subs = getattr(command, "commands", None)
    if isinstance(subs, dict) and subs:
        for sub_name, sub in subs.items():
            _attach_examples(sub, f"{path} {sub_name}")
    elif command.epilog is None:
        command.epilog = epilog_of(path)


def _nothing() -> None:
    """The callback of the throwaway host group a command is built in."""


def _report(message: str, exc: BaseException | None) -> None:
    app = application.current()
    first_line = " ".join(message.split()) if message else "failed"
    if exc is not None and app.verbose:
        import traceback

        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        sys.stderr.write(app.scrub(text))
    app.output.error(first_line)


#: what the root Typer and the hosts its commands are built in share
_TYPER_SETTINGS: dict[str, Any] = {"add_completion": False, "pretty_exceptions_enable": False,
                                   "rich_markup_mode": None}

app = typer.Typer(
    cls=RootGroup,
    name="semvecctl",
    help="Operator toolkit for semvec session backends: see, check, provision, inspect, "
         "compare and certify them.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Commands that write preview unless --apply; --apply asks first and -y/--yes "
           "answers (required without a terminal, else exit 2); declining exits 2 with nothing "
           "changed; --yes without --apply is exit 2. An existing file is replaced only with "
           "--overwrite, never because of --yes.",
    **_TYPER_SETTINGS,
)


def _version(value: bool) -> None:
    if value:
        from semvecctl import __version__

        typer.echo(f"semvecctl {__version__}")
        application.current().abort("", ExitCode.OK)  # done: the boundary exits 0


@app.callback()
def root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show debug output and tracebacks."),
    no_color: bool = typer.Option(False, "--no-color", help="Disable colour (NO_COLOR is honoured too)."),
    config: Optional[str] = typer.Option(None, "--config", help="Config file (default: $SEMVECCTL_CONFIG or ~/.config/semvecctl/config.yaml).", show_default=False),
    profile: Optional[str] = typer.Option(None, "--profile", "-P", help="Named profile from the config file (beats the environment; flags beat it).", show_default=False, autocompletion=complete_profile),
    shards: Optional[str] = typer.Option(None, "--shards", help="The SQL deployment's shard list, DSN,DSN,... in the engine's order (as SEMVEC_STATE_DB_SHARDS; beats it); '' for none. The primary is --uri or DATABASE_URL.", show_default=False),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Operator toolkit for semvec session backends."""
    application.start(verbose=verbose, no_color=no_color, config_path=config, profile=profile,
                      shards=shards)


def run() -> None:
    """Console-script entry point."""
    application.start()
    typer.main.get_command(app).main(prog_name="semvecctl")
