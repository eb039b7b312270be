"""Each backend's settings, declared once: a table of :class:`Setting` rows (option name,
environment variable, type, default, validator, secret or not, one-line help).

The backend's resolver reads its values through the table (an explicit option beats the
variable, which beats the default), ``semvecctl config view`` lists the variables and
hides the secret ones, and ``semvecctl config settings`` renders the table (its Markdown
is what the docs show). Variables that are backend facts (URI, TTL) come from
:mod:`backends.info`, so each is still said once. A backend names its table in
``BackendInfo.settings`` (``module:object``), loaded only when asked for.

Imports nothing of ``backends`` but its errors, so listing settings loads no driver.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from backends.errors import BackendConfigError

#: the spellings of a boolean flag (the engine's)
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


def parse_flag(name: str, value: Any) -> bool:
    """A boolean variable: 1/0, true/false, yes/no, on/off (empty: false)."""
    text = ("" if value is None else str(value)).strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise BackendConfigError(f"{name} must be one of 1/0, true/false, yes/no, on/off")


@dataclass(frozen=True)
class Setting:
    """One setting of a backend. ``env`` is None for an option alone; ``check`` turns a
    given value into the one in force (raising BackendConfigError naming ``label``)."""

    name: str
    env: str | None
    type: str
    default: Any
    help: str
    secret: bool = False
    check: Callable[[str, Any], Any] | None = None
    #: variables read when ``env`` is unset, in order (the engine's own, after ours)
    fallback_env: tuple[str, ...] = ()
    #: an adapter keyword option (False: the URI argument, or a variable alone)
    option: bool = True

    @property
    def variables(self) -> tuple[str, ...]:
        """Every variable this setting reads, first hit wins."""
        return ((self.env,) if self.env else ()) + self.fallback_env

    def from_env(self, environ: Mapping[str, str]) -> tuple[str, str] | None:
        """(variable, value) of the first of :attr:`variables` that is set, or None."""
        for variable in self.variables:
            if environ.get(variable):
                return variable, environ[variable]
        return None


def setting(table: Sequence[Setting], name: str) -> Setting:
    """The row ``name`` of ``table`` (a KeyError for a name it does not declare)."""
    for row in table:
        if row.name == name:
            return row
    raise KeyError(name)


def variables(table: Sequence[Setting]) -> tuple[str, ...]:
    """Every variable the table reads, in table order."""
    return tuple(dict.fromkeys(v for row in table for v in row.variables))


def secret_variables(table: Sequence[Setting]) -> tuple[str, ...]:
    """The variables whose values are never printed."""
    return tuple(dict.fromkeys(v for row in table if row.secret for v in row.variables))


def option_names(table: Sequence[Setting]) -> tuple[str, ...]:
    """The adapter keyword options the table declares."""
    return tuple(row.name for row in table if row.option)


def settings_of(backend: str) -> tuple[Setting, ...]:
    """The table a declared backend names in ``BackendInfo.settings`` (() when none)."""
    from backends.info import known

    info = known(backend)
    if info is None or not info.settings:
        return ()
    module, _, name = info.settings.partition(":")
    return tuple(getattr(importlib.import_module(module), name))


def declared_settings() -> dict[str, tuple[Setting, ...]]:
    """backend -> its table, for every declared backend that has one."""
    from backends.info import KNOWN_INFO

    return {info.name: settings_of(info.name) for info in KNOWN_INFO if info.settings}


def _cell(value: Any) -> str:
    text = "-" if value is None or value == "" else str(value)
    return text.replace("|", "\\|")


def markdown(table: Sequence[Setting]) -> str:
    """The table as Markdown (name | variable | type | default | meaning), for the docs."""
    lines = ["| name | variable | type | default | meaning |", "|---|---|---|---|---|"]
    for row in table:
        variable = ", else ".join(f"`{v}`" for v in row.variables) or "-"
        default = "-" if row.default is None else f"`{_cell(row.default)}`"
        meaning = row.help + (" (secret: never printed)" if row.secret else "")
        lines.append(f"| `{row.name}` | {variable} | {_cell(row.type)} | {default} "
                     f"| {_cell(meaning)} |")
    return "\n".join(lines) + "\n"
