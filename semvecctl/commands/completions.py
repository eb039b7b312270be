"""``semvecctl completions show|install bash|zsh|fish``: shell completion scripts.

The scripts are click's standard ones: they call back into ``semvecctl`` with
``_SEMVECCTL_COMPLETE`` set, so they stay valid as commands are added. Copies are
committed under ``completions/`` for packagers; a test fails when they go stale.
"""


import os
from enum import Enum
from pathlib import Path

import typer

from semvecctl.completers import COMPLETE_VAR
from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.options import Overwrite

NAME = "completions"
HELP = help_of(NAME)

PROG_NAME = "semvecctl"

app = typer.Typer(no_args_is_help=True, help=HELP)


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion_script(shell: str) -> str:
    """The completion script for ``shell``, exactly as committed under completions/."""
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name=PROG_NAME, complete_var=COMPLETE_VAR,
                                 shell=shell).rstrip("\n") + "\n"


def install_path(shell: str) -> Path:
    """Where each shell looks for per-user completions without extra configuration."""
    home = Path.home()
    if shell == "bash":
        data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
        return data / "bash-completion" / "completions" / PROG_NAME
    if shell == "zsh":
        return home / ".zfunc" / f"_{PROG_NAME}"
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return config / "fish" / "completions" / f"{PROG_NAME}.fish"


@app.command("show")
def show(shell: Shell = typer.Argument(..., help="Shell to print the script for.")) -> None:
    """Print the completion script (e.g. eval "$(semvecctl completions show bash)")."""
    current().output.write(completion_script(shell.value).rstrip("\n"))


@app.command("install")
def install(shell: Shell = typer.Argument(..., help="Shell to install the script for."),
            overwrite: Overwrite = False) -> None:
    """Write the script where the shell finds it; says what else (if anything) to do. A
    different file already there is replaced only with --overwrite."""
    out = current().output
    path = install_path(shell.value)
    script = completion_script(shell.value)
    if path.is_file() and path.read_text(encoding="utf-8", errors="replace") == script:
        out.success(f"{shell.value} completion is already installed at {path}")
        return
    current().may_replace(path, overwrite=overwrite, option="the completion script")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(script, encoding="utf-8")
    tmp.replace(path)
    out.success(f"installed {shell.value} completion to {path}")
    if shell is Shell.zsh:
        out.info("add to ~/.zshrc (before compinit): fpath=(~/.zfunc $fpath); autoload -U compinit; compinit")
    else:
        out.info("open a new shell to use it")
