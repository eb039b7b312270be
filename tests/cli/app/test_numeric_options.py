"""#15.6: every numeric option has a finite range; NaN, infinities, out-of-range and huge
integers are usage errors (exit 2) naming the option.

The options are enumerated from the built Typer app, so a new option is covered without
touching this file. Parsing goes through click's own context (``make_context``): nothing
connects to a backend.
"""

from __future__ import annotations

import math

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from semvecctl.app import app
from semvecctl.numeric import BoundedNumber, numeric_options

ROOT = typer.main.get_command(app)
OPTIONS = list(numeric_options(ROOT))
IDS = [" ".join(path) + " " + param.opts[0] for path, param in OPTIONS]


def _command(path):
    cmd = ROOT
    for name in path:
        cmd = cmd.commands[name]
    return cmd


def _required(cmd, skip):
    """Dummy values for the other required parameters, so only ``skip`` is under test."""
    args: list[str] = []
    for p in cmd.params:
        if p is skip or not p.required:
            continue
        if p.param_type_name == "argument":
            args.append("x")
        else:
            args += [p.opts[0], "x"]
    return args


def parse(path, param, value: str):
    cmd = _command(path)
    args = _required(cmd, param) + [f"{param.opts[0]}={value}"]
    return cmd.make_context(" ".join(path), args, resilient_parsing=False)


def test_there_are_numeric_options_and_each_has_a_finite_range():
    assert len(OPTIONS) >= 20
    for (_path, param), ident in zip(OPTIONS, IDS):
        t = param.type
        assert isinstance(t, BoundedNumber), ident
        assert math.isfinite(t.lo) and math.isfinite(t.hi) and t.lo <= t.hi, ident
        if param.default is not None:
            assert t.convert(param.default, param, None) == param.default, ident


def test_options_this_cli_owns_declare_both_bounds():
    """Bounds the option itself declares (not the default ceiling); the groups owned
    elsewhere (indexes, conformance) are covered by the default ceiling."""
    for (path, param), ident in zip(OPTIONS, IDS):
        if path[0] in ("indexes", "conformance"):
            continue
        assert param.type.declared == (True, True), ident


NON_FINITE = ["nan", "NaN", "inf", "-inf", "Infinity", "+inf", "1e999"]


@pytest.mark.parametrize("path,param", OPTIONS, ids=IDS)
def test_non_finite_and_huge_values_are_refused_naming_the_option(path, param):
    bad = ["99999999999999999999999", "-99999999999999999999999", "1" * 5000]
    if param.type.kind is float:
        bad += NON_FINITE
    else:
        bad += ["nan", "inf", "1.5", "1e3x"]
    for value in bad:
        with pytest.raises(Exception) as info:
            parse(path, param, value)
        message = info.value.format_message()
        assert param.opts[0] in message or param.name in message, (value, message)


def _outside(t: BoundedNumber):
    if t.kind is int:
        return st.one_of(st.integers(max_value=int(t.lo) - 1),
                         st.integers(min_value=int(t.hi) + 1))
    return st.one_of(st.floats(max_value=t.lo, exclude_max=not t.lo_open, allow_nan=False),
                     st.floats(min_value=t.hi, exclude_min=not t.hi_open, allow_nan=False),
                     st.sampled_from([math.nan, math.inf, -math.inf]))


def _inside(t: BoundedNumber):
    if t.kind is int:
        return st.integers(min_value=int(t.lo), max_value=int(t.hi))
    return st.floats(min_value=t.lo, max_value=t.hi, exclude_min=t.lo_open,
                     exclude_max=t.hi_open, allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize("path,param", OPTIONS, ids=IDS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_value_outside_the_range_is_refused_and_inside_accepted(path, param, data):
    t = param.type
    outside = data.draw(_outside(t), label="outside")
    with pytest.raises(Exception) as info:
        parse(path, param, repr(outside) if t.kind is float else str(outside))
    assert type(info.value).__name__ in ("BadParameter", "UsageError"), info.value
    inside = data.draw(_inside(t), label="inside")
    ctx = parse(path, param, repr(inside) if t.kind is float else str(inside))
    got = ctx.params[param.name]
    assert got == inside or (t.kind is float and math.isclose(got, inside))


@pytest.mark.parametrize("args,option", [
    (["retrieve", "run", "-s", "s", "-k", "99999999999999999999999"], "--top-k"),
    (["health", "--timeout", "nan"], "--timeout"),
    (["health", "--timeout", "inf"], "--timeout"),
    (["load", "run", "--duration", "nan", "--apply", "--yes"], "--duration"),
    (["retrieve", "diff", "s", "--min-rbo", "nan"], "--min-rbo"),
    (["conformance", "run", "--health-timeout", "nan"], "--health-timeout"),
    (["sessions", "list", "--limit", "1e400"], "--limit"),
])
def test_end_to_end_exit_2_one_line_naming_the_option(args, option):
    result = CliRunner().invoke(app, args, env={"SEMVEC_SESSION_BACKEND": ""})
    assert result.exit_code == 2, (args, result.stdout, result.stderr)
    assert option in result.stderr
    assert "unexpected" not in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
