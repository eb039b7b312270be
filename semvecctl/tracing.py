"""OpenTelemetry tracing, on only when the standard ``OTEL_*`` variables ask for it.

With the ``otel`` extra installed and ``OTEL_TRACES_EXPORTER`` (not ``none``) or an OTLP
endpoint variable set, each command is one span (``semvecctl <command path>``) and the
OpenTelemetry instrumentations of redis-py, pymongo and psycopg make every database call
a client span. Their stable database attributes (``db.system.name``,
``db.operation.name``, ``db.collection.name``, ``db.namespace``) are chosen by
``OTEL_SEMCONV_STABILITY_OPT_IN=database``, set here unless the operator already opted in.
The command span carries the command path and exit code, never an argument (URIs and
session ids stay out; the redis instrumentation sends commands as ``NAME ? ?``).

Off (no variable, ``OTEL_SDK_DISABLED=true``, or the extra missing), :func:`start` reads
the environment and returns: nothing is imported. The boundary in :mod:`semvecctl.app`
calls :func:`start` before the command and :func:`finish` after it.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

#: the variables that say traces are wanted (the OpenTelemetry SDK's own names)
TRIGGERS = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
#: the instrumentations, by the driver module they patch
INSTRUMENTORS = (
    ("redis", "opentelemetry.instrumentation.redis", "RedisInstrumentor"),
    ("pymongo", "opentelemetry.instrumentation.pymongo", "PymongoInstrumentor"),
    ("psycopg", "opentelemetry.instrumentation.psycopg", "PsycopgInstrumentor"),
)


def wanted(environ: Any = None) -> bool:
    """Whether the environment asks for traces (a pure read of variables)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return any(env.get(name, "").strip() for name in TRIGGERS)


class _Run:
    """One traced command: its span, the provider it made (if any) and the instrumentors
    it turned on (turned off again by :func:`finish`)."""

    def __init__(self, span: Any, scope: Any, provider: Any, instrumented: list[Any]) -> None:
        self.span, self.scope, self.provider, self.instrumented = span, scope, provider, instrumented


_run: _Run | None = None


def start(command_path: Sequence[str]) -> None:
    """Open the command's span and instrument the drivers, when tracing is wanted."""
    global _run
    if _run is not None or not wanted():
        return
    try:
        from opentelemetry import trace
    except ImportError:  # the extra is not installed: tracing stays off
        return
    _opt_in_stable_database_names()
    provider = _provider(trace)
    if provider is None:
        return
    instrumented = _instrument(provider)
    tracer = trace.get_tracer("semvecctl", tracer_provider=provider)
    name = " ".join(["semvecctl", *command_path])
    span = tracer.start_span(name, kind=trace.SpanKind.INTERNAL,
                             attributes={"semvecctl.command": " ".join(command_path) or "semvecctl"})
    scope = trace.use_span(span, end_on_exit=False)
    scope.__enter__()
    _run = _Run(span, scope, provider, instrumented)


def finish(exit_code: int) -> None:
    """End the command's span with its exit code, flush, and undo the instrumentation."""
    global _run
    run, _run = _run, None
    if run is None:
        return
    from opentelemetry.trace import Status, StatusCode

    run.span.set_attribute("process.exit.code", int(exit_code))
    if int(exit_code) != 0:
        run.span.set_status(Status(StatusCode.ERROR, f"exit {int(exit_code)}"))
    run.scope.__exit__(None, None, None)
    run.span.end()
    for instrumentor in run.instrumented:
        instrumentor.uninstrument()
    flush = getattr(run.provider, "force_flush", None)
    if callable(flush):
        flush()


def _opt_in_stable_database_names() -> None:
    tokens = [t.strip() for t in os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "").split(",")
              if t.strip()]
    if not any(t.startswith("database") for t in tokens):
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = ",".join([*tokens, "database"])


def _provider(trace: Any) -> Any:
    """The tracer provider: the one the host process set up (``opentelemetry-instrument``,
    a test), else one of our own with the exporters ``OTEL_TRACES_EXPORTER`` names."""
    current = trace.get_tracer_provider()
    if type(current).__name__ not in ("ProxyTracerProvider", "NoOpTracerProvider"):
        return current
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        return None
    provider = TracerProvider(resource=Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "semvecctl"}))
    for exporter in _exporters():
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    import atexit

    atexit.register(provider.shutdown)  # the last batch leaves before the process does
    return provider


def _exporters() -> list[Any]:
    """The span exporters named by ``OTEL_TRACES_EXPORTER`` (default ``otlp``), found
    through the ``opentelemetry_traces_exporter`` entry points as the SDK does; ``otlp``
    is the OTLP exporter installed (the extra brings the HTTP one; gRPC when
    ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc`` and it is installed). A name nothing provides is
    said once on stderr rather than dropped in silence."""
    from importlib.metadata import entry_points

    names = [n.strip().lower() for n in
             (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").split(",") if n.strip()]
    grpc = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip().lower() == "grpc"
    found = []
    for name in names:
        if name == "none":
            continue
        candidates = [name]
        if name == "otlp":
            candidates += ["otlp_proto_grpc", "otlp_proto_http"] if grpc else ["otlp_proto_http", "otlp_proto_grpc"]
        point = next((p for c in candidates
                      for p in entry_points(group="opentelemetry_traces_exporter", name=c)), None)
        if point is None:
            from semvecctl.application import current

            current().output.warn(f"OTEL_TRACES_EXPORTER names {name!r}, which no installed "
                                  "package provides: its spans are not exported")
            continue
        exporter = point.load()
        if name == "console":  # stdout is the command's data: spans go to stderr
            import sys

            found.append(exporter(out=sys.stderr))
        else:
            found.append(exporter())
    return found


def _instrument(provider: Any) -> list[Any]:
    """Turn on the instrumentation of each driver installed (and not already on)."""
    import importlib
    import importlib.util

    done = []
    for driver, module_name, class_name in INSTRUMENTORS:
        if importlib.util.find_spec(driver) is None:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        instrumentor = getattr(module, class_name)()
        if instrumentor.is_instrumented_by_opentelemetry:
            continue
        instrumentor.instrument(tracer_provider=provider)
        done.append(instrumentor)
    return done


def command_path(root: Any, args: Sequence[str], global_flags: dict[str, bool]) -> list[str]:
    """The subcommand names at the front of ``args`` (global flags skipped: name -> takes
    a value), e.g. ``["sessions", "export"]``; names of the command tree, never an argument."""
    names: list[str] = []
    group = root
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        if arg.startswith("-"):
            flag, eq, _ = arg.partition("=")
            i += 2 if global_flags.get(flag) and not eq else 1
            continue
        commands = getattr(group, "commands", None)
        if not commands or arg not in commands:
            break
        names.append(arg)
        try:
            group = commands[arg]
        except KeyError:
            break
        i += 1
    return names
