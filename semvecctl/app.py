"""The Typer application: the command table, global flags and the single error boundary.

Global flags (``--verbose``, ``--no-color``, ``--config``, ``--profile``) work anywhere on
the line, like kubectl's. Every failure leaves through :meth:`RootGroup.main`: one line on
stderr, the exit code of :class:`ExitCode`, a traceback only with ``--verbose``.
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Sequence

import typer
from typer.core import TyperGroup
from typer.exceptions import Abort, Exit, TyperException

from semvecctl import application
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

        harden(self)  # every numeric option: finite and in range, or exit 2

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_flags(args))

    def list_commands(self, ctx: typer.Context) -> list[str]:
        from semvecctl.commands import ORDER

        rank = {name: i for i, name in enumerate(ORDER)}
        return sorted(super().list_commands(ctx), key=lambda n: (rank.get(n, len(ORDER)), n))

    def main(self, args: Optional[Sequence[str]] = None, prog_name: Optional[str] = None,
             complete_var: Optional[str] = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        code = self._run(args, prog_name or "semvecctl", complete_var, **extra)
        if standalone_mode:
            sys.exit(int(code))
        return int(code)

    def _run(self, args, prog_name, complete_var, **extra) -> int:
        from semvecctl.commands.completions import enable_runtime_completion
        from semvecctl.interrupts import Interrupted, interruption_of, signals_raise

        enable_runtime_completion()
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


def _report(message: str, exc: BaseException | None) -> None:
    app = application.current()
    first_line = " ".join(message.split()) if message else "failed"
    if exc is not None and app.verbose:
        import traceback

        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        sys.stderr.write(app.scrub(text))
    app.output.error(first_line)


app = typer.Typer(
    cls=RootGroup,
    name="semvecctl",
    help="Operator toolkit for semvec session backends: see, check, provision, inspect, "
         "compare and certify them.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
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
    profile: Optional[str] = typer.Option(None, "--profile", "-P", help="Named profile from the config file.", show_default=False),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Operator toolkit for semvec session backends."""
    application.start(verbose=verbose, no_color=no_color, config_path=config, profile=profile)


def _register() -> None:
    from semvecctl.commands import GROUPS

    for module_name, _, _ in GROUPS:
        module = __import__(f"semvecctl.commands.{module_name}", fromlist=["app"])
        command = getattr(module, "app", None)
        if command is None:  # a module that only adds commands to another group
            continue
        group_name = getattr(module, "NAME", module_name)
        help_text = getattr(module, "HELP", None)
        if isinstance(command, typer.Typer):
            app.add_typer(command, name=group_name, help=help_text)
        else:
            app.command(name=group_name, help=help_text)(command)


_register()


def run() -> None:
    """Console-script entry point."""
    application.start()
    typer.main.get_command(app).main(prog_name="semvecctl")
