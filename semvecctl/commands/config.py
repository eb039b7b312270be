"""``semvecctl config view|settings|get-profiles|use-profile|set-profile``: the
configuration, kubectl style, with every secret redacted.

``view`` answers "which store will a command talk to, and why": the config file in use,
the selected profile and what selected it, every profile, every variable that changes
what a command does, and the connection that flags, environment and profile resolve to.
``settings`` renders each backend's settings table (:mod:`backends.settings`; its
Markdown is what the docs show). ``use-profile`` and ``set-profile`` edit the config file atomically (temp file and
rename, mode 0600). URIs are redacted and option values whose name suggests a secret are
masked; nothing here ever prints a credential.
"""


import os
from typing import Any, Optional

import typer

from semvecctl.application import current
from semvecctl.commands import help_of
from semvecctl.completers import complete_profile
from semvecctl.connection import Connection, URI_ENV
from semvecctl.exit_codes import ExitCode
from semvecctl.options import (AdapterFactory, Backend, DocFormat, DocOutput, Output,
                               ProfileBackend, ProfileUri, Uri)
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
    from semvecctl.config import default_config_path, load_config, profile_choice, select_profile

    app = current()
    out = app.output
    config = load_config(app.config_path)
    path = config.path or (app.config_path and os.path.expanduser(app.config_path)) or default_config_path()
    selected, why = profile_choice(config, app.profile)
    select_profile(config, app.profile)  # an unknown profile fails here, as it would anywhere
    conn = Connection(backend, uri, adapter)
    spec = conn.spec
    document = {
        "config_file": str(path),
        "config_file_exists": config.path is not None,
        "config_file_from": _config_source(app),
        "profile": selected,
        "profile_from": why,
        "profiles": _view_profiles(config, selected),
        "environment": _environment(app),
        "connection": _connection_facts(spec),
    }
    out.emit(document, output, table=lambda: _render_view(out, document, spec))


def _environment(app: Any) -> dict[str, Any]:
    """Every variable ``view`` shows and its value, URIs redacted and secrets masked whole:
    the variables that change what a command does are part of the answer."""
    from backends.registry import ENV_VAR
    from backends.redaction import redact_uri

    environment = {ENV_VAR: os.environ.get(ENV_VAR) or None}
    secret = _secret_variables()
    for var in _variables():
        value = os.environ.get(var)
        if value and var in secret and "://" not in value:
            app.remember_secret_value(value)  # a secret without a URI's shape: masked whole
        environment[var] = app.scrub(redact_uri(value) if value and "://" in value else value) \
            if value else None
    return environment


def _view_profiles(config: Any, selected: str | None) -> list[dict[str, Any]]:
    """Every profile as ``view`` reports it (options too, secrets masked): unlike
    ``get-profiles``, view shows everything a profile sets."""
    from backends.redaction import redact_uri

    return [{"name": p.name, "backend": p.backend, "uri": redact_uri(p.uri) if p.uri else None,
             "database": p.database, "options": _redact_options(dict(p.options)),
             "selected": p.name == selected}
            for p in config.profiles.values()]


def _connection_facts(spec: Any) -> dict[str, Any]:
    """The connection flags, environment and profile resolve to, URI redacted and secret
    options masked: what a command would talk to."""
    from backends.redaction import redact_uri

    return {
        "backend": spec.backend,
        "uri": redact_uri(spec.uri) if spec.uri else None,
        "from": spec.origin,
        "adapter_factory": spec.adapter_factory,
        "options": _redact_options(dict(spec.options)),
    }


def _render_view(out: Any, document: dict[str, Any], spec: Any) -> None:
    """The table form of ``view``: the settings, then the profiles (* marks the selected
    one), drawn from the same document JSON and YAML give."""
    facts = [
        ("config file", f"{document['config_file']}"
                        + ("" if document["config_file_exists"] else " (not found)")),
        ("config file from", document["config_file_from"]),
        ("profile", f"{document['profile'] or '-'} ({document['profile_from']})"),
        ("backend", f"{spec.backend} (from {spec.origin})"),
        ("uri", document["connection"]["uri"] or "-"),
    ]
    if spec.adapter_factory:
        facts.append(("adapter factory", spec.adapter_factory))
    if spec.options:
        facts.append(("options", ", ".join(f"{k}={v}" for k, v in document["connection"]["options"].items())))
    facts += [(f"${k}", v or "-") for k, v in document["environment"].items()]
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


def _variables() -> list[str]:
    """Every variable ``view`` shows: each backend's URI variables, every variable of the
    backends' settings tables, then :data:`semvecctl.config.BEHAVIOUR_VARIABLES`."""
    from backends.info import KNOWN_INFO
    from backends.settings import declared_settings, variables

    from semvecctl.config import BEHAVIOUR_VARIABLES

    uri_vars = sorted({var for info in KNOWN_INFO for var in info.uri_env} | set(URI_ENV.values()))
    table_vars = [v for table in declared_settings().values() for v in variables(table)]
    return list(dict.fromkeys(uri_vars + table_vars + list(BEHAVIOUR_VARIABLES)))


def _secret_variables() -> set[str]:
    """Variables whose values ``view`` never prints: the backends' declared secrets and
    every table's secret settings."""
    from backends.info import KNOWN_INFO
    from backends.settings import declared_settings, secret_variables

    return ({v for info in KNOWN_INFO for v in info.secret_variables}
            | {v for table in declared_settings().values() for v in secret_variables(table)})


def settings_markdown(backend: str) -> str:
    """The settings of ``backend`` as a Markdown table (name | variable | type | default |
    meaning), as the docs show them; a backend without a table gets an empty one."""
    from backends.settings import markdown, settings_of

    return markdown(settings_of(backend))


@app.command("settings")
def settings(
    backend: Optional[str] = typer.Argument(None, help="The backend whose settings to list "
                                                       "(default: every backend's).",
                                            show_default=False),
    output: DocOutput = DocFormat.table,
) -> None:
    """Each backend's settings, declared once in its config: option, variable, type,
    default and meaning (secret ones are marked; no value is read or printed)."""
    from backends.registry import fold_name
    from backends.settings import declared_settings, markdown

    app_ = current()
    tables = declared_settings()
    if backend is not None:
        name = fold_name(backend)
        if name not in tables:
            app_.abort(f"no settings declared for backend {backend!r}; backends with settings: "
                       f"{', '.join(sorted(tables))}", ExitCode.USAGE)
        tables = {name: tables[name]}
    if output == DocFormat.markdown:
        app_.output.write("\n".join(f"### {name}\n\n{markdown(table)}"
                                     for name, table in tables.items()).rstrip("\n"))
        return
    rows = [{"backend": name, "name": row.name, "variables": list(row.variables),
             "type": row.type, "default": row.default, "secret": row.secret,
             "option": row.option, "meaning": row.help}
            for name, table in tables.items() for row in table]
    app_.output.emit({"settings": rows}, output.value, rows=rows, columns=[
        Column("BACKEND", "backend"), Column("NAME", "name", style="bold"),
        Column("VARIABLE", lambda r: ", ".join(r["variables"]) or None),
        Column("TYPE", "type"), Column("DEFAULT", lambda r: None if r["default"] is None
                                       else str(r["default"])),
        Column("SECRET", lambda r: "yes" if r["secret"] else ""), Column("MEANING", "meaning")])


def _profile_rows(config: Any, selected: str | None) -> list[dict[str, Any]]:
    from backends.redaction import redact_uri

    return [{"name": p.name, "current": p.name == selected, "backend": p.backend,
             "uri": redact_uri(p.uri) if p.uri else None, "database": p.database}
            for p in config.profiles.values()]


@app.command("get-profiles")
def get_profiles(output: Output = OutputFormat.table) -> None:
    """List the profiles of the config file (* marks the selected one); URIs redacted."""
    from semvecctl.config import load_config, profile_choice

    app_ = current()
    config = load_config(app_.config_path)
    selected, _why = profile_choice(config, app_.profile)
    rows = _profile_rows(config, selected)
    app_.output.emit({"profiles": rows}, output, rows=rows, columns=[
        Column("CURRENT", lambda r: "*" if r["current"] else ""), Column("NAME", "name", style="bold"),
        Column("BACKEND", "backend"), Column("URI", "uri"), Column("DATABASE", "database")])
    if not rows:
        app_.output.info("no profiles: add one with 'semvecctl config set-profile NAME --uri URI'")


@app.command("use-profile")
def use_profile(name: str = typer.Argument(..., help="The profile to select by default "
                                                     "(current-profile).",
                                            autocompletion=complete_profile)) -> None:
    """Make NAME the file's current-profile (what commands use when -P names none)."""
    from semvecctl.config import config_write_path, load_config, read_raw, write_raw

    app_ = current()
    path = config_write_path(app_.config_path)
    config = load_config(path) if path.exists() else None
    if config is None or name not in config.profiles:
        known = ", ".join(sorted(config.profiles)) if config and config.profiles else "none defined"
        app_.abort(f"profile {name!r} not found in {path}; known profiles: {known} (add it "
                   "with 'semvecctl config set-profile')", ExitCode.USAGE)
    raw = read_raw(path)
    raw["current-profile"] = name
    write_raw(path, raw)
    app_.output.success(f"current profile is now {name!r} ({path})")


@app.command("set-profile")
def set_profile(
    name: str = typer.Argument(..., help="The profile to create or change."),
    uri: ProfileUri = None,
    backend: ProfileBackend = None,
    database: Optional[str] = typer.Option(None, "--database", show_default=False,
                                           help="MongoDB database (the mongo backend's "
                                                "database setting; see config settings mongo)."),
) -> None:
    """Create a profile or change the fields given (kubectl's set-context); other
    profiles and fields are kept."""
    from backends.redaction import redact_uri
    from backends.selection import InvalidURI, backend_for_uri

    from semvecctl.config import config_write_path, read_raw, write_raw

    app_ = current()
    if not name.strip():
        app_.abort("the profile name is empty", ExitCode.USAGE)
    if uri is None and backend is None and database is None:
        app_.abort("nothing to set: give --uri, --backend and/or --database", ExitCode.USAGE)
    if uri is not None:
        app_.remember_secret(uri)
        try:
            backend_for_uri(uri)
        except InvalidURI as exc:
            app_.abort(str(exc), ExitCode.USAGE, cause=None)
    if backend is not None:
        from semvecctl.connection import require_known_backend

        require_known_backend(backend, "flag")
    path = config_write_path(app_.config_path)
    raw = read_raw(path)
    profiles = raw.setdefault("profiles", {}) or {}
    raw["profiles"] = profiles
    body = dict(profiles.get(name) or {})
    created = name not in profiles
    for key, value in (("backend", backend), ("uri", uri), ("database", database)):
        if value is not None:
            body[key] = value
    profiles[name] = body
    write_raw(path, raw)
    shown = f" uri {redact_uri(body['uri'])}" if body.get("uri") else ""
    app_.output.success(f"{'created' if created else 'updated'} profile {name!r}{shown} ({path})")
