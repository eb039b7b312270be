"""``--metrics-file PATH``: a Prometheus text file for node_exporter's textfile collector.

Batch jobs (a nightly ``doctor``, ``sessions prune``, ``conformance run``) cannot be
scraped, so the convention is a ``.prom`` file that the job replaces atomically when it
ends. A command asks for a :func:`recorder` when it starts (so a run that fails early
still leaves its exit code) and hands it the object its numbers accumulate in
(:meth:`Recorder.track`); the error boundary writes the file once the exit code is known
(:func:`finish`). ``prometheus_client`` (the ``metrics`` extra) is imported only then, and
only when the flag was given. Labels are the command, the backend's registry name and the
fixed vocabulary of checks, severities, groups and results: never a URI, a secret, an
owner or a session id.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterable

#: every metric starts with this
PREFIX = "semvecctl"
#: the extra that brings prometheus_client
EXTRA = "metrics"


class NullRecorder:
    """What a command gets without ``--metrics-file``: records nothing, imports nothing."""

    def track(self, source: Any, *, backend: str | None = None) -> "NullRecorder":
        return self


class Recorder(NullRecorder):
    """One command run's metrics: the sources it tracks are read when the run ends."""

    def __init__(self, path: str, command: str) -> None:
        self.path = path
        self.command = command
        self.started = time.time()
        self.clock = time.monotonic()
        self.sources: list[Any] = []
        self.backend: str | None = None

    def track(self, source: Any, *, backend: str | None = None) -> "Recorder":
        """Read ``source`` (a report dict, a result object) when the run ends, however it
        ends: counts kept in place are current even after an interruption."""
        self.sources.append(source)
        if backend:
            self.backend = str(backend)
        return self

    def samples(self, exit_code: int) -> list[tuple[str, str, dict[str, str], float]]:
        """(name, help, labels, value) of this run: the run's own, then the command's."""
        base = {"command": self.command}
        if self.backend is None:
            self.backend = next((str(_field(s, "backend", "")) for s in self.sources
                                 if isinstance(_field(s, "backend", None), str)
                                 and _field(s, "backend", "")), None)
        if self.backend:
            base["backend"] = self.backend
        now = time.time()
        ok = int(exit_code) == 0
        rows = [
            ("run_duration_seconds", "Wall time of the last run.", {}, time.monotonic() - self.clock),
            ("run_exit_code", "Exit code of the last run (0 success).", {}, float(exit_code)),
            ("run_success", "1 if the last run exited 0.", {}, float(ok)),
            ("last_run_timestamp_seconds", "When the last run ended (Unix time).", {}, now),
        ]
        last_ok = now if ok else _previous_success(self.path, self.command)
        if last_ok is not None:
            rows.append(("last_success_timestamp_seconds",
                         "When a run last exited 0 (Unix time; kept from the previous file "
                         "when this run failed).", {}, last_ok))
        translate = _TRANSLATORS.get(self.command)
        for source in self.sources:
            if translate is not None:
                rows.extend(translate(source))
        return [(f"{PREFIX}_{name}", text, {**base, **labels}, float(value))
                for name, text, labels, value in rows]

    def write(self, exit_code: int) -> None:
        """Render to the Prometheus text format (HELP and TYPE lines) in a registry of this
        run only, and replace the file atomically (temp file in the same directory, then
        rename: a collector reading in a loop sees the old file or the new one)."""
        from prometheus_client import CollectorRegistry, Gauge

        registry = CollectorRegistry(auto_describe=True)
        gauges: dict[str, Any] = {}
        for name, text, labels, value in self.samples(exit_code):
            names = tuple(sorted(labels))
            gauge = gauges.get(name)
            if gauge is None:
                gauge = gauges[name] = Gauge(name, text, names, registry=registry)
            gauge.labels(**labels).set(value)
        _write_atomically(self.path, registry)


def _write_atomically(path: str, registry: Any) -> None:
    """``prometheus_client.write_to_textfile`` writes ``PATH.<pid>.<thread>`` in the same
    directory and renames it over ``PATH`` (rename(2) is atomic; the collector reads only
    ``*.prom``, never the temp file), and removes the temp file when writing fails."""
    from prometheus_client import write_to_textfile

    write_to_textfile(path, registry)


def _previous_success(path: str, command: str) -> float | None:
    """The last-success timestamp of the file being replaced (a failed run keeps it)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        from prometheus_client.parser import text_string_to_metric_families

        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if (sample.name == f"{PREFIX}_last_success_timestamp_seconds"
                        and sample.labels.get("command") == command):
                    return float(sample.value)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return None


# --- per-command translators: a source object -> (name, help, labels, value) rows -------

Row = tuple[str, str, dict[str, str], float]


def _field(source: Any, name: str, default: Any = 0) -> Any:
    if isinstance(source, dict):
        return source.get(name, default)
    return getattr(source, name, default)


def _health(report: Any) -> Iterable[Row]:
    if not isinstance(report, dict):
        return
    yield ("backend_up", "1 if the backend answered its health probe as healthy.", {},
           float(bool(report.get("healthy"))))
    gates = report.get("gates") or []
    yield ("backend_healthy", "1 if the backend is healthy and every requested gate passed.", {},
           float(bool(report.get("healthy")) and all(g.get("passed") for g in gates)))
    if report.get("latency_ms") is not None:
        yield ("health_probe_seconds", "Time the health probe took.", {},
               float(report["latency_ms"]) / 1000.0)
    for gate in gates:
        yield ("health_gate_passed", "1 if the gate passed.", {"gate": str(gate.get("gate"))},
               float(bool(gate.get("passed"))))


def _doctor(counts: Any) -> Iterable[Row]:
    """``counts``: severity -> number (and repaired/blocking), kept by the command; or
    (check, severity) -> number."""
    if isinstance(counts, dict) and any(isinstance(k, tuple) for k in counts):
        for (check, severity), number in sorted(counts.items()):
            yield ("doctor_findings_by_check", "Findings of the audit by check and severity.",
                   {"check": str(check), "severity": str(severity)}, float(number))
    elif isinstance(counts, dict):
        for severity in ("error", "warning", "info"):
            yield ("doctor_findings", "Findings of the audit by severity.",
                   {"severity": severity}, float(counts.get(severity, 0)))
        yield ("doctor_repaired", "Findings repaired by --fix --apply.", {},
               float(counts.get("repaired", 0)))
        yield ("doctor_blocking", "Findings at error severity that remain.", {},
               float(counts.get("blocking", 0)))


def _conformance(report: Any) -> Iterable[Row]:
    """``report``: a ConformanceReport (its cases carry group and status)."""
    by: dict[tuple[str, str], int] = {}
    for case in _field(report, "cases", None) or []:
        key = (str(_field(case, "group", "")), str(_field(case, "status", "")))
        by[key] = by.get(key, 0) + 1
    for (group, result), number in sorted(by.items()):
        yield ("conformance_cases", "Conformance cases by group and result.",
               {"group": group, "result": result}, float(number))
    ok = _field(report, "ok", None)
    if isinstance(ok, bool):
        yield "conformance_passed", "1 if every required case passed.", {}, float(ok)


def _counts(*fields: tuple[str, str, str]) -> Callable[[Any], Iterable[Row]]:
    """A translator reading numeric fields (field, metric, help) of a result object, a
    report dict, or the ``result`` an object holds (an importer interrupted midway)."""
    def translate(source: Any) -> Iterable[Row]:
        inner = _field(source, "result", None)
        if inner is not None and not isinstance(source, dict):
            source = inner
        for name, metric, text in fields:
            value = _field(source, name, None)
            if isinstance(value, (list, tuple, set, dict)):
                value = len(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                yield metric, text, {}, float(value)
    return translate


_PRUNE = _counts(
    ("examined", "sessions_examined", "Sessions the prune examined."),
    ("idle", "sessions_idle", "Sessions found idle (what a preview would delete)."),
    ("deleted", "sessions_pruned", "Sessions the prune deleted."),
    ("kept", "sessions_kept", "Idle sessions written meanwhile and kept."),
    ("archived", "sessions_archived", "Sessions written to the prune's archive."),
    ("unknown", "sessions_unknown_write_time", "Sessions without a known write time (left)."),
)
_EXPORT = _counts(
    ("count", "sessions_read", "Sessions read from the store (exported)."),
    ("events", "events_read", "Events read from the store (exported)."),
    ("items", "items_read", "Memory items read from the store (exported)."),
    ("damaged", "sessions_damaged", "Damaged sessions left out."),
)
_IMPORT = _counts(
    ("created", "sessions_written", "Sessions written to the target."),
    ("skipped", "sessions_skipped", "Sessions already on the target, left unchanged."),
    ("expired", "sessions_expired", "Sessions expired since the export, not written."),
    ("events_restored", "events_written", "Events written to the target."),
    ("events_skipped", "events_skipped", "Events already on the target."),
    ("items_synced", "items_written", "Memory items written to the target."),
)
_ERASE = _counts(
    ("events_deleted", "events_erased", "Events of the subject erased."),
    ("states_deleted", "sessions_erased", "Session states of the subject erased."),
    ("materialized_deleted", "items_erased", "Memory item rows of the subject erased."),
)
_LOAD = _counts(
    ("sessions", "load_sessions", "Sessions the load run wrote."),
    ("commits", "load_commits", "Turns committed by the load run (sessions written)."),
    ("conflicts", "load_conflicts", "Version conflicts the writers met (expected under load)."),
)

_TRANSLATORS: dict[str, Callable[[Any], Iterable[Row]]] = {
    "health": _health,
    "doctor": _doctor,
    "conformance run": _conformance,
    "sessions prune": _PRUNE,
    "sessions export": _EXPORT,
    "sessions import": _IMPORT,
    "sessions copy": _IMPORT,
    "migrate run": _counts(
        ("copied", "sessions_written", "Sessions copied to the target."),
        ("deleted", "sessions_deleted", "Target sessions deleted because the source deleted them."),
        ("events", "events_written", "Events copied to the target."),
        ("conflicts", "migration_conflicts", "Target writes by someone else, reported and kept."),
        ("passes", "migration_passes", "Passes run (bulk, catch-up)."),
    ),
    "erase": _ERASE,
    "load run": _LOAD,
}


#: the recorder of the running command, written by :func:`finish`
_active: Recorder | None = None


def recorder(path: str | None, command: str) -> NullRecorder:
    """The command's recorder: a :class:`NullRecorder` without ``--metrics-file``.
    With it, refuse before any work a path that cannot be written (exit 2) and a missing
    extra (exit 3), so a nightly job never runs without leaving its file."""
    global _active
    if path is None:
        return NullRecorder()
    from semvecctl.application import current
    from semvecctl.exit_codes import ExitCode

    directory = os.path.dirname(os.path.abspath(path))
    if not path.strip() or os.path.isdir(path) or not os.path.isdir(directory):
        current().abort(f"--metrics-file {path}: not a file in an existing directory",
                        ExitCode.USAGE)
    if not os.access(directory, os.W_OK):
        current().abort(f"--metrics-file {path}: its directory is not writable", ExitCode.USAGE)
    try:
        import prometheus_client  # noqa: F401 - asked for: the flag was given
    except ImportError:
        current().abort("--metrics-file needs prometheus_client: pip install "
                        f"'semvecctl[{EXTRA}]'", ExitCode.ENVIRONMENT, cause=None)
    _active = Recorder(path, command)
    return _active


def finish(exit_code: int) -> None:
    """Write the running command's file (called once by the error boundary)."""
    global _active
    active, _active = _active, None
    if active is not None:
        active.write(exit_code)
