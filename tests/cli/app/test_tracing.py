"""Tracing with the ``otel`` extra: the OpenTelemetry SDK's in-memory exporter shows one
span per command and the instrumentations' database client spans with the stable
``db.*`` names; off, nothing of OpenTelemetry is imported (tests/architecture/test_lazy_imports.py)."""

from __future__ import annotations

import uuid

import pytest
from typer.testing import CliRunner

from semvecctl.app import app

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.instrumentation.redis")
pytest.importorskip("opentelemetry.instrumentation.psycopg")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans(monkeypatch):
    """The process's tracer provider (set once: OpenTelemetry allows one per process)
    records into memory; the variables say traces are wanted."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "database")
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def run(*args):
    return CliRunner().invoke(app, list(args))


def _command_span(finished, name):
    commands = [s for s in finished if s.name == name]
    assert len(commands) == 1, [s.name for s in finished]
    return commands[0]


def _clients(finished, command):
    return [s for s in finished if s.kind == trace.SpanKind.CLIENT
            and s.parent is not None and s.parent.span_id == command.context.span_id]


@pytest.mark.redis
def test_redis_command_span_and_client_spans(spans, redis_url):
    from backends.redis import RedisBackendAdapter

    tag = uuid.uuid4().hex[:12]
    with RedisBackendAdapter(redis_url) as adapter:
        adapter.state_store().save(f"{tag}-a", b"{}", expected_version=None)
    spans.clear()
    result = run("sessions", "list", "--uri", redis_url, "--match", f"{tag}-*", "-o", "json")
    assert result.exit_code == 0, result.stderr
    finished = spans.get_finished_spans()
    command = _command_span(finished, "semvecctl sessions list")
    assert command.attributes["semvecctl.command"] == "sessions list"
    assert command.attributes["process.exit.code"] == 0
    clients = _clients(finished, command)
    assert clients, [s.name for s in finished]
    for span in clients:
        assert span.attributes["db.system.name"] == "redis"
        assert "db.system" not in span.attributes  # the stable names only
        # the query, sanitized by the instrumentation: the command name, then "?" per argument
        assert span.name.startswith(span.attributes["db.query.text"].split()[0])
        assert tag not in str(dict(span.attributes)), "a session id reached a span"
    names = {s.name for s in clients}
    assert names & {"SCAN", "HGETALL", "HMGET", "EVALSHA", "EVAL", "HGET"}, names
    for span in finished:
        assert redis_url not in str(dict(span.attributes))


@pytest.mark.postgres
def test_postgres_command_span_and_client_spans(spans, pgvector_url):
    result = run("health", "--uri", pgvector_url, "-o", "json")
    assert result.exit_code == 0, result.stderr
    finished = spans.get_finished_spans()
    command = _command_span(finished, "semvecctl health")
    clients = [s for s in finished if s.kind == trace.SpanKind.CLIENT
               and s.context.trace_id == command.context.trace_id]
    assert clients, [s.name for s in finished]
    for span in clients:
        assert span.attributes["db.system.name"] == "postgresql"
        assert "db.system" not in span.attributes
        assert span.attributes.get("db.namespace")
    assert any(s.attributes.get("db.query.text") for s in clients)
    secret = pgvector_url.split("@")[0]
    for span in finished:
        assert secret not in str(dict(span.attributes))


def test_a_failing_command_span_says_its_exit_code(spans):
    result = run("health", "--uri", "redis://127.0.0.1:1/0", "--timeout", "0.5")
    assert result.exit_code == 4
    command = _command_span(spans.get_finished_spans(), "semvecctl health")
    assert command.attributes["process.exit.code"] == 4
    assert command.status.status_code.name == "ERROR"


def test_off_without_variables(monkeypatch):
    from semvecctl import tracing

    for name in (*tracing.TRIGGERS, "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    assert not tracing.wanted()
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert not tracing.wanted({"OTEL_TRACES_EXPORTER": "none"})
    assert not tracing.wanted({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"})
