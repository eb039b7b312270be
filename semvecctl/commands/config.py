"""``semvecctl config view``: the effective configuration, with every secret redacted.

Answers "which store will a command talk to, and why": the config file in use, the
selected profile and what selected it, every profile, and the connection that flags,
environment and profile resolve to. URIs are redacted and option values whose name
suggests a secret are masked; nothing here ever prints a credential.
"""


import os
from typing import Any

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.connection import Connection, URI_ENV
from semvecctl.options import AdapterFactory, Backend, Output, Uri
from semvecctl.output import Column, OutputFormat

NAME = "config"
HELP = help_of(NAME)
app = typer.Typer(no_args_is_help=True, help=HELP)

def _redact_options(options: Any) -> Any:
    """Mask values under secret-looking keys and redact URIs (backends.redaction says which)."""
    from backends.redaction import redact_settings

    return redact_settings(options)


def _config_source(app: Any) -> str:
    if app.config_path:
        return "--config flag"
    if os.environ.get("SEMVECCTL_CONFIG"):
        return "$SEMVECCTL_CONFIG"
    return "default location"


@app.command("view")
def view(
    backend: Backend = None,
    uri: Uri = None,
    adapter: AdapterFactory = None,
    output: Output = OutputFormat.table,
) -> None:
    """Config file, selected profile (and what selected it), every profile and the
    effective connection; URIs redacted, secret options masked."""
    from backends.registry import ENV_VAR
    from backends.redaction import redact_uri

    from semvecctl.config import default_config_path, load_config, profile_choice, select_profile

    app = current()
    out = app.output
    config = load_config(app.config_path)
    path = config.path or (app.config_path and os.path.expanduser(app.config_path)) or default_config_path()
    selected, why = profile_choice(config, app.profile)
    select_profile(config, app.profile)  # an unknown profile fails here, as it would anywhere
    conn = Connection(backend, uri, adapter)
    spec = conn.spec

    environment = {ENV_VAR: os.environ.get(ENV_VAR) or None}
    for var in sorted(set(URI_ENV.values())) + ["SEMVEC_MONGO_DB"]:
        value = os.environ.get(var)
        environment[var] = redact_uri(value) if value and "://" in value else (value or None)
    document = {
        "config_file": str(path),
        "config_file_exists": config.path is not None,
        "config_file_from": _config_source(app),
        "profile": selected,
        "profile_from": why,
        "profiles": [
            {"name": p.name, "backend": p.backend, "uri": redact_uri(p.uri) if p.uri else None,
             "database": p.database, "options": _redact_options(dict(p.options)),
             "selected": p.name == selected}
            for p in config.profiles.values()
        ],
        "environment": environment,
        "connection": {
            "backend": spec.backend,
            "uri": redact_uri(spec.uri) if spec.uri else None,
            "from": spec.origin,
            "adapter_factory": spec.adapter_factory,
            "options": _redact_options(dict(spec.options)),
        },
    }

    def table() -> None:
        facts = [
            ("config file", f"{document['config_file']}"
                            + ("" if document["config_file_exists"] else " (not found)")),
            ("config file from", document["config_file_from"]),
            ("profile", f"{selected or '-'} ({why})"),
            ("backend", f"{spec.backend} (from {spec.origin})"),
            ("uri", document["connection"]["uri"] or "-"),
        ]
        if spec.adapter_factory:
            facts.append(("adapter factory", spec.adapter_factory))
        if spec.options:
            facts.append(("options", ", ".join(f"{k}={v}" for k, v in document["connection"]["options"].items())))
        facts += [(f"${k}", v or "-") for k, v in environment.items()]
        out.table([Column("SETTING", 0, style="bold"), Column("VALUE", 1)],
                  [dict(enumerate(f)) for f in facts])
        if document["profiles"]:
            out.write("")
            out.table(
                [Column("PROFILE", lambda r: ("* " if r["selected"] else "  ") + r["name"]),
                 Column("BACKEND", "backend"), Column("URI", "uri"), Column("DATABASE", "database"),
                 Column("OPTIONS", lambda r: ", ".join(f"{k}={v}" for k, v in r["options"].items()) or None)],
                document["profiles"],
            )

    out.emit(document, output, table=table)
