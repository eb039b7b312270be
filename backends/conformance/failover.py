"""What the ``failover`` group is given: a replicated deployment it may break.

A :class:`FailoverTopology` says how the suite fails the primary, how it promotes a
replica, and where the store is afterwards; optionally how it stalls replication (the
suite's fault proxy between primary and replica, so that the lag window is real even on
loopback). A test builds one around the servers it started; the CLI reads one from a
file (``conformance run --failover FILE``, YAML or JSON)::

    replica: postgresql://standby:5432/semvec    # the server to promote
    fail: [systemctl, kill, -s, KILL, postgresql] # argv that fails the primary (required)
    promote: [pg_ctl, promote, -D, /srv/standby]  # default: the backend's own promotion
    after: postgresql://standby:5432/semvec       # default: replica (a Sentinel URI: itself)
    synchronous: true                             # default: health's replicated verdict

One scenario per file: ``fail`` (``failover.acknowledged_turns``: the primary dies), or
``switchover`` (``failover.switchover``: a planned promotion with clients connected; an
argv, or ``true`` for the backend's own promotion), or ``isolate`` (``failover.
isolated_primary``: an argv that cuts the primary off from its replicas and watchers while
clients still reach it, then ``promote``; ``heal`` optionally ends the cut).

``replica`` may be left out when the run's URI finds the primary (``redis+sentinel://``):
the sentinels then promote and the same URI follows. The default promotion is the
backend's declared one (``BackendInfo.promotion``: ``SENTINEL FAILOVER``, ``REPLICAOF NO
ONE``, ``pg_promote()``).
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from typing import Any, Callable

#: Seconds a ``fail`` or ``promote`` command may take.
COMMAND_TIMEOUT_S = 60.0
#: Seconds the default promotion may take.
PROMOTION_TIMEOUT_S = 30.0

_KEYS = {"replica", "fail", "promote", "after", "synchronous", "switchover", "isolate", "heal"}
#: the keys that each name one scenario (a file names exactly one)
_SCENARIOS = ("fail", "switchover", "isolate")


class TopologyError(ValueError):
    """The topology file is unusable (the message names the key and what to write)."""


@dataclass
class FailoverTopology:
    """A deployment the suite may fail over (see the module docstring). Each case runs
    where its scenario is given: ``fail_primary`` (``acknowledged_turns``),
    ``switchover`` or ``isolate_primary``; give one, since each breaks the deployment."""

    #: fails the primary (SIGKILL of a process the caller started, or a command)
    fail_primary: Callable[[], None] | None
    #: promotes the replica, returns once it takes writes
    promote: Callable[[], None]
    #: the URI the store is found at after the promotion
    after_uri: str
    #: stalls replication until the primary has failed (None: the deployment's own lag)
    stall_replication: Callable[[], None] | None = None
    #: whether the deployment promises synchronous replication (None: ask health)
    synchronous: bool | None = None
    #: a planned promotion with the writers connected (``SENTINEL FAILOVER``; PostgreSQL:
    #: the old primary stopped, then ``pg_promote()``); returns once the new one takes writes
    switchover: Callable[[], None] | None = None
    #: cuts the primary off from its replicas and watchers while clients still reach it
    #: (then ``promote`` runs: it may wait for the watchers' own promotion)
    isolate_primary: Callable[[], None] | None = None
    #: ends the cut of ``isolate_primary`` (None: it stays cut)
    heal: Callable[[], None] | None = None
    #: whether the old primary refuses writes now (demoted, stopped): the case measures
    #: the window from the promotion to it (None: not measured)
    demoted: Callable[[], bool] | None = None


def run_command(argv: list[str], what: str) -> None:
    """Run one of the file's commands; a failure is a RuntimeError naming it (its last
    stderr line, never its arguments: they may hold a password)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"the {what} command {argv[0]!r} could not run: "
                           f"{type(exc).__name__}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1][:200]
        raise RuntimeError(f"the {what} command {argv[0]!r} exited {done.returncode}"
                           + (f": {last}" if last else ""))


def default_promotion(backend: str, uri: str) -> Callable[[], None]:
    """The backend's declared promotion of ``uri`` (TopologyError when it declares none)."""
    from backends.info import known
    from backends.registry import import_object

    info = known(backend)
    if info is None or info.promotion is None:
        raise TopologyError(f"backend {backend!r} declares no way to promote a replica: give "
                            "'promote: [argv...]' in the failover file")
    promote = import_object(info.promotion)
    return lambda: promote(uri, PROMOTION_TIMEOUT_S)


def _argv(data: dict[str, Any], key: str) -> list[str] | None:
    value = data.get(key)
    if value is None:
        return None
    argv = shlex.split(value) if isinstance(value, str) else value
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise TopologyError(f"'{key}' must be a command: a list of strings or one string")
    return argv


def _uri(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and (not isinstance(value, str) or "://" not in value):
        raise TopologyError(f"'{key}' must be a URI (scheme://...)")
    return value


def topology_from(data: Any, *, backend: str, run_uri: str | None) -> FailoverTopology:
    """A topology from the parsed file (a mapping; TopologyError naming what is wrong)."""
    from backends.info import known

    if not isinstance(data, dict):
        raise TopologyError("the failover file must hold a mapping (replica:, fail:, ...)")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise TopologyError(f"unknown key(s) {', '.join(unknown)} (known: "
                            f"{', '.join(sorted(_KEYS))})")
    given_scenarios = [key for key in _SCENARIOS if data.get(key) not in (None, False)]
    if len(given_scenarios) > 1:
        raise TopologyError(f"one scenario per file: {' and '.join(given_scenarios)} were "
                            "both given (each breaks the deployment)")
    switch_default = data.get("switchover") is True
    if switch_default:
        data = {k: v for k, v in data.items() if k != "switchover"}
    fail, promote_argv = _argv(data, "fail"), _argv(data, "promote")
    switch_argv, isolate, heal = (_argv(data, "switchover"), _argv(data, "isolate"),
                                  _argv(data, "heal"))
    given, after = _uri(data, "replica"), _uri(data, "after")
    synchronous = data.get("synchronous")
    if synchronous is not None and not isinstance(synchronous, bool):
        raise TopologyError("'synchronous' must be true or false")
    if fail is None and switch_argv is None and isolate is None and not switch_default:
        raise TopologyError("'fail' is required: the command that fails the primary (or "
                            "'switchover:' or 'isolate:' for those cases)")
    info = known(backend)
    locator = bool(run_uri and info and run_uri.split("://", 1)[0].lower()
                   in info.locator_schemes)
    replica = given or (run_uri if locator else None)
    if replica is None:
        raise TopologyError("'replica' is required: the URI of the server to promote")
    promote = (default_promotion(backend, replica) if promote_argv is None
               else lambda: run_command(promote_argv, "promote"))
    return FailoverTopology(
        fail_primary=None if fail is None else lambda: run_command(fail, "fail"),
        promote=promote, after_uri=after or replica, synchronous=synchronous,
        switchover=(promote if switch_default else None if switch_argv is None
                    else lambda: run_command(switch_argv, "switchover")),
        isolate_primary=None if isolate is None else lambda: run_command(isolate, "isolate"),
        heal=None if heal is None else lambda: run_command(heal, "heal"))


def load_topology(path: str, *, backend: str, run_uri: str | None) -> FailoverTopology:
    """Read and check a failover file (TopologyError naming the file's problem)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise TopologyError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path} is not YAML or JSON: {str(exc).splitlines()[0]}") from None
    return topology_from(data, backend=backend, run_uri=run_uri)
