"""``--metrics-file``: a Prometheus text file (parsed here with prometheus_client's own
parser), replaced atomically, with no secret and no session id in any label."""

from __future__ import annotations

import json
import sys
import threading
import uuid

import pytest
from typer.testing import CliRunner

from semvecctl.app import app
from tests.support.fixtures.redis_server import closed_port

parser = pytest.importorskip("prometheus_client.parser")


def run(*args, env=None):
    return CliRunner().invoke(app, list(args), env=env)


def samples(path) -> dict[tuple[str, tuple], float]:
    """name + sorted labels -> value, from the file as a collector would parse it."""
    text = path.read_text(encoding="utf-8")
    found = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found, name, **labels) -> float:
    matches = [v for (n, ls), v in found.items()
               if n == name and all(dict(ls).get(k) == w for k, w in labels.items())]
    assert len(matches) == 1, (name, labels, sorted(k for k in found if k[0] == name))
    return matches[0]


def test_health_writes_help_type_and_values(tmp_path):
    path = tmp_path / "health.prom"
    result = run("health", "--backend", "memory", "--metrics-file", str(path), "-o", "json")
    assert result.exit_code == 0, result.stderr
    text = path.read_text()
    assert "# HELP semvecctl_backend_up " in text and "# TYPE semvecctl_backend_up gauge" in text
    found = samples(path)
    assert value(found, "semvecctl_backend_up", command="health", backend="memory") == 1
    assert value(found, "semvecctl_backend_healthy", command="health") == 1
    assert value(found, "semvecctl_run_success", command="health") == 1
    assert value(found, "semvecctl_run_exit_code", command="health") == 0
    assert value(found, "semvecctl_run_duration_seconds", command="health") >= 0
    assert value(found, "semvecctl_last_success_timestamp_seconds", command="health") == \
        value(found, "semvecctl_last_run_timestamp_seconds", command="health")
    assert not list(tmp_path.glob("health.prom.*")), "a temp file was left behind"


def test_failed_health_keeps_last_success_and_no_secret(tmp_path):
    path = tmp_path / "health.prom"
    assert run("health", "--backend", "memory", "--metrics-file", str(path)).exit_code == 0
    before = value(samples(path), "semvecctl_last_success_timestamp_seconds", command="health")
    uri = f"redis://admin:hunter2@127.0.0.1:{closed_port()}/0"
    result = run("health", "--uri", uri, "--timeout", "1", "--metrics-file", str(path))
    assert result.exit_code == 4, result.stderr
    text = path.read_text()
    assert "hunter2" not in text and "admin" not in text and "127.0.0.1" not in text
    found = samples(path)
    assert value(found, "semvecctl_backend_up", command="health", backend="redis") == 0
    assert value(found, "semvecctl_run_exit_code", command="health") == 4
    assert value(found, "semvecctl_run_success", command="health") == 0
    assert value(found, "semvecctl_last_success_timestamp_seconds", command="health") == before


def test_bad_path_is_refused_before_any_work(tmp_path):
    result = run("health", "--backend", "memory", "--metrics-file",
                 str(tmp_path / "missing" / "x.prom"))
    assert result.exit_code == 2
    assert "--metrics-file" in result.stderr and "existing directory" in result.stderr
    assert result.stdout == ""
    result = run("health", "--backend", "memory", "--metrics-file", str(tmp_path))
    assert result.exit_code == 2


def test_missing_extra_exits_3_naming_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    result = run("health", "--backend", "memory", "--metrics-file", str(tmp_path / "m.prom"))
    assert result.exit_code == 3
    assert "semvecctl[metrics]" in result.stderr
    assert not (tmp_path / "m.prom").exists()


@pytest.mark.redis
def test_export_counts_and_labels_hold_no_session_id(tmp_path, redis_url):
    from backends.redis import RedisBackendAdapter

    tag = uuid.uuid4().hex[:12]
    with RedisBackendAdapter(redis_url) as adapter:
        for i in range(3):
            adapter.state_store().save(f"{tag}-s{i}", b"{}", expected_version=None,
                                       owner_subject="tenant-secret-owner")
    path = tmp_path / "export.prom"
    result = run("sessions", "export", "--uri", redis_url, "--match", f"{tag}-*",
                 "--out", str(tmp_path / "a.jsonl"), "--metrics-file", str(path))
    assert result.exit_code == 0, result.stderr
    found = samples(path)
    assert value(found, "semvecctl_sessions_read", command="sessions export", backend="redis") == 3
    for _name, labels in found:
        for key, label in labels:
            assert key in {"command", "backend", "gate", "check", "severity", "group", "result"}
            assert tag not in label and "tenant-secret-owner" not in label
            assert "redis://" not in label


def test_doctor_counts_by_severity(tmp_path):
    path = tmp_path / "doctor.prom"
    result = run("doctor", "--backend", "memory", "--metrics-file", str(path))
    assert result.exit_code == 0, result.stderr
    found = samples(path)
    for severity in ("error", "warning", "info"):
        assert value(found, "semvecctl_doctor_findings", command="doctor", severity=severity) >= 0
    assert value(found, "semvecctl_doctor_blocking", command="doctor") == 0


def test_conformance_run_counts_cases_by_group(tmp_path):
    path = tmp_path / "conf.prom"
    result = run("conformance", "run", "--backend", "memory", "--only", "state",
                 "--metrics-file", str(path), "-o", "json")
    report = json.loads(result.stdout)
    found = samples(path)
    total = sum(v for (n, _), v in found.items() if n == "semvecctl_conformance_cases")
    assert total == len([c for g in report["groups"] for c in g["cases"]]) > 0
    assert value(found, "semvecctl_run_exit_code", command="conformance run") == result.exit_code


def test_a_reader_never_sees_a_partial_file(tmp_path):
    """The file is replaced, never rewritten in place: a reader in a loop always parses a
    whole file (its last sample is there) while runs keep replacing it."""
    from semvecctl.metrics import Recorder

    path = tmp_path / "loop.prom"
    big = {("check-%03d" % i, "warning"): i for i in range(400)}  # ~30 kB per file
    Recorder(str(path), "doctor").track(big).write(0)
    stop = threading.Event()
    seen: list[int] = []
    broken: list[str] = []

    def reader():
        while not stop.is_set():
            text = path.read_text(encoding="utf-8")
            if "semvecctl_last_success_timestamp_seconds{" not in text \
                    or 'check="check-399"' not in text or not text.endswith("\n"):
                broken.append(text[-200:])
            seen.append(len(text))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for code in range(150):
            Recorder(str(path), "doctor").track(big).write(code % 2)
    finally:
        stop.set()
        thread.join()
    assert not broken, broken[:1]
    assert len(seen) > 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop.prom"]


@pytest.mark.redis
def test_prune_counts_what_it_deleted(tmp_path, redis_url, redis_server):
    from backends.redis import RedisBackendAdapter

    tag = uuid.uuid4().hex[:12]
    with RedisBackendAdapter(redis_url) as adapter:
        for i in range(3):
            adapter.state_store().save(f"{tag}-{i}", b"{}", expected_version=None)
            redis_server.run_cli("EXPIRE", f"semvec:state:{tag}-{i}", "100")  # written 3500s ago
    path = tmp_path / "prune.prom"
    result = run("sessions", "prune", "--uri", redis_url, "--match", f"{tag}-*", "--idle-for",
                 "1000s", "--assume-ttl", "1h", "--apply", "--yes", "--metrics-file", str(path))
    assert result.exit_code == 0, result.stderr
    found = samples(path)
    assert value(found, "semvecctl_sessions_examined", command="sessions prune", backend="redis") == 3
    assert value(found, "semvecctl_sessions_pruned", command="sessions prune") == 3
    assert value(found, "semvecctl_run_success", command="sessions prune") == 1


def test_load_run_counts_commits(tmp_path):
    path = tmp_path / "load.prom"
    result = run("load", "run", "--backend", "memory", "--duration", "0.2", "--max-commits", "50",
                 "--apply", "--yes", "--metrics-file", str(path), "-o", "json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    found = samples(path)
    assert value(found, "semvecctl_load_commits", command="load run", backend="memory") \
        == report["commits"] > 0
