"""One strict rule for every numeric option: a finite number inside a declared range.

Click's ``FloatRange`` lets NaN through (every comparison with NaN is false), its plain
``INT``/``FLOAT`` have no range at all, and a 23-digit ``-k`` reached the database as a
driver error. :func:`harden` walks the built command tree once and gives every numeric
option a :class:`BoundedNumber`: NaN, infinities, out-of-range values and absurdly long
integers become usage errors (exit 2) that name the option. A bound an option does not
declare gets a generous default, so a newly added option is covered automatically.
"""

from __future__ import annotations

import math
from typing import Any

from typer._click import types as click_types  # typer vendors click
from typer._click.core import Command, Context, Parameter
from typer._click.types import ParamType

#: bounds for options that declare none (no option needs more; all are counts or seconds)
DEFAULT_MIN = 0
DEFAULT_INT_MAX = 2**31 - 1
DEFAULT_FLOAT_MAX = 1e6
#: longer than any in-range integer: refused before int() spends time on it
_MAX_DIGITS = 24


class BoundedNumber(ParamType):
    """An int or float option with a finite range; ``declared`` says which bounds the
    option itself set (the rest are defaults)."""

    def __init__(self, kind: type, lo: float, hi: float, *, lo_open: bool = False,
                 hi_open: bool = False, declared: tuple[bool, bool] = (True, True)) -> None:
        self.kind = kind
        self.name = "integer" if kind is int else "float"
        self.lo, self.hi = lo, hi
        self.lo_open, self.hi_open = lo_open, hi_open
        self.declared = declared

    def describe(self) -> str:
        left = "(" if self.lo_open else "["
        right = ")" if self.hi_open else "]"
        return f"{left}{self.lo:g}, {self.hi:g}{right}" if self.kind is float else \
            f"{left}{self.lo}, {self.hi}{right}"

    def get_metavar(self, param: Parameter, *args: Any, **kwargs: Any) -> str:  # click 8.1 / 8.2+
        return f"{'INTEGER' if self.kind is int else 'FLOAT'} {self.describe()}"

    def convert(self, value: Any, param: Parameter | None, ctx: Context | None) -> Any:
        if value is None:
            return None
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a number", param, ctx)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number: Any = value
            text = repr(value)
        else:
            text = str(value).strip()
            if len(text) > _MAX_DIGITS:
                self.fail(f"{text[:_MAX_DIGITS]}... is out of range {self.describe()}", param, ctx)
            try:
                number = int(text, 10) if self.kind is int else float(text)
            except ValueError:
                what = "a whole number" if self.kind is int else "a number"
                self.fail(f"{text!r} is not {what}", param, ctx)
        if self.kind is float:
            number = float(number)
            if not math.isfinite(number):
                self.fail(f"{text} is not a finite number (range {self.describe()})", param, ctx)
        elif isinstance(number, float):
            if not number.is_integer():
                self.fail(f"{text!r} is not a whole number", param, ctx)
            number = int(number)
        below = number <= self.lo if self.lo_open else number < self.lo
        above = number >= self.hi if self.hi_open else number > self.hi
        if below or above:
            self.fail(f"{text} is out of range {self.describe()}", param, ctx)
        return number

    def __repr__(self) -> str:
        return f"BoundedNumber({self.kind.__name__}, {self.describe()})"


def bounded(param_type: ParamType) -> BoundedNumber | None:
    """The strict replacement for a numeric click type (None: not numeric)."""
    if isinstance(param_type, BoundedNumber):
        return param_type
    if isinstance(param_type, (click_types.IntParamType, click_types.FloatParamType)):
        kind = int if isinstance(param_type, click_types.IntParamType) else float
        lo = getattr(param_type, "min", None)
        hi = getattr(param_type, "max", None)
        default_hi = DEFAULT_INT_MAX if kind is int else DEFAULT_FLOAT_MAX
        return BoundedNumber(
            kind,
            DEFAULT_MIN if lo is None else lo,
            default_hi if hi is None else hi,
            lo_open=bool(getattr(param_type, "min_open", False)),
            hi_open=bool(getattr(param_type, "max_open", False)),
            declared=(lo is not None, hi is not None),
        )
    return None


def harden(command: Command) -> None:
    """Give every numeric parameter under ``command`` a :class:`BoundedNumber`."""
    for param in command.params:
        strict = bounded(param.type)
        if strict is not None:
            param.type = strict
    if isinstance(getattr(command, "commands", None), dict):
        for sub in command.commands.values():
            harden(sub)


def numeric_options(command: Command, path: tuple[str, ...] = ()):
    """(command path, parameter) for every numeric parameter: the tests enumerate these."""
    for param in command.params:
        if isinstance(param.type, BoundedNumber):
            yield path, param
    if isinstance(getattr(command, "commands", None), dict):
        for name, sub in sorted(command.commands.items()):
            yield from numeric_options(sub, path + (name,))
