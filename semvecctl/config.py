"""The YAML configuration file and its named profiles.

Location: ``--config FILE``, else ``$SEMVECCTL_CONFIG``, else
``$XDG_CONFIG_HOME/semvecctl/config.yaml`` (``~/.config/...``). Shape::

    current-profile: staging          # optional default profile
    profiles:
      staging:
        backend: redis                # optional when uri implies it
        uri: redis://:secret@cache.internal:6379/0
        options: {ttl_seconds: 86400} # passed to the adapter
      atlas:
        uri: mongodb+srv://user:pw@cluster0.example.net/
        database: semvec              # same as SEMVEC_MONGO_DB

Profiles are the lowest layer: flags beat environment variables, which beat the profile.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from backends.info import declared_ttl_env
from semvecctl import application
from semvecctl.exit_codes import ExitCode



@dataclass(frozen=True)
class Profile:
    name: str
    backend: str | None = None
    uri: str | None = None
    database: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    path: Path | None
    profiles: Mapping[str, Profile]
    current_profile: str | None = None


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("SEMVECCTL_CONFIG"):
        return Path(env["SEMVECCTL_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "semvecctl" / "config.yaml"


def load_config(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read the config file; a missing default file is an empty config, a missing
    explicit one is an error. Malformed content is an error naming the file."""
    explicit = path is not None or bool((os.environ if environ is None else environ).get("SEMVECCTL_CONFIG"))
    cfg_path = Path(path).expanduser() if path is not None else default_config_path(environ)
    if not cfg_path.exists():
        if explicit:
            application.current().abort(f"config file {cfg_path} does not exist", ExitCode.ENVIRONMENT)
        return Config(None, {})
    import yaml

    try:
        raw = yaml.safe_load(cfg_path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError) as exc:
        application.current().abort(f"cannot read config file {cfg_path}: {exc}", ExitCode.ENVIRONMENT, cause=None)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        application.current().abort(f"config file {cfg_path} is not valid YAML{where}", ExitCode.ENVIRONMENT, cause=None)
    if not isinstance(raw, dict):
        application.current().abort(f"config file {cfg_path} must be a mapping with a 'profiles' key", ExitCode.ENVIRONMENT)
    profiles_raw = raw.get("profiles") or {}
    if not isinstance(profiles_raw, dict):
        application.current().abort(f"config file {cfg_path}: 'profiles' must be a mapping of names", ExitCode.ENVIRONMENT)
    profiles: dict[str, Profile] = {}
    for name, body in profiles_raw.items():
        body = body or {}
        if not isinstance(body, dict):
            application.current().abort(f"config file {cfg_path}: profile {name!r} must be a mapping", ExitCode.ENVIRONMENT)
        unknown = set(body) - {"backend", "uri", "database", "options"}
        if unknown:
            application.current().abort(
                f"config file {cfg_path}: profile {name!r} has unknown keys "
                f"{', '.join(sorted(unknown))} (allowed: backend, uri, database, options)", ExitCode.ENVIRONMENT
            )
        options = body.get("options") or {}
        if not isinstance(options, dict):
            application.current().abort(f"config file {cfg_path}: profile {name!r} options must be a mapping", ExitCode.ENVIRONMENT)
        profiles[str(name)] = Profile(
            name=str(name),
            backend=body.get("backend"),
            uri=body.get("uri"),
            database=body.get("database"),
            options=options,
        )
    current = raw.get("current-profile")
    if current is not None and str(current) not in profiles:
        application.current().abort(
            f"config file {cfg_path}: current-profile {current!r} is not defined under profiles", ExitCode.ENVIRONMENT
        )
    return Config(cfg_path, profiles, str(current) if current is not None else None)


def profile_choice(config: Config, name: str | None,
                   environ: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """Which profile is selected and by what: ``--profile`` beats ``$SEMVECCTL_PROFILE``
    beats ``current-profile``."""
    env = os.environ if environ is None else environ
    if name:
        return name, "--profile flag"
    if env.get("SEMVECCTL_PROFILE"):
        return env["SEMVECCTL_PROFILE"], "$SEMVECCTL_PROFILE"
    if config.current_profile:
        return config.current_profile, "current-profile in the config file"
    return None, "none selected"


def select_profile(config: Config, name: str | None,
                   environ: Mapping[str, str] | None = None) -> Profile | None:
    """The selected profile (see :func:`profile_choice`); an unknown name is an error."""
    chosen, _ = profile_choice(config, name, environ)
    if not chosen:
        return None
    if chosen not in config.profiles:
        known = ", ".join(sorted(config.profiles)) or "none defined"
        where = f" in {config.path}" if config.path else " (no config file found)"
        application.current().abort(f"profile {chosen!r} not found{where}; known profiles: {known}", ExitCode.ENVIRONMENT)
    return config.profiles[chosen]


#: every variable that changes what a command does besides the backends' own settings,
#: and what it changes (``config view`` shows each, after every variable of the
#: backends' settings tables, :mod:`backends.settings`; a test fails when the source
#: reads a SEMVEC*/SEMVECCTL* variable neither lists).
BEHAVIOUR_VARIABLES: dict[str, str] = {
    "SEMVEC_SESSION_BACKEND": "backend name, when no flag names one (a -P profile beats it)",
    declared_ttl_env("postgres"): "SQL: the engine's session TTL sweep (doctor reports it)",
    "SEMVEC_RRF_K": "retrieval: the RRF constant (default 60)",
    "SEMVEC_RRF_WEIGHTS": "retrieval: the RRF weights (default 1.0 each)",
    "SEMVECCTL_CONFIG": "the config file",
    "SEMVECCTL_PROFILE": "the profile, when -P names none (environment: below the variables)",
    "SEMVECCTL_COMPLETION_TIMEOUT_S": "shell completion: seconds to read session ids (default 2)",
    "NO_COLOR": "no colour in output",
}


def config_write_path(path: str | Path | None, environ: Mapping[str, str] | None = None) -> Path:
    """The file ``config use-profile``/``set-profile`` edit: ``--config``, else the default."""
    return Path(path).expanduser() if path is not None else default_config_path(environ)


def read_raw(path: Path) -> dict[str, Any]:
    """The file's YAML as a mapping (empty when the file does not exist yet); validated
    the way every command reads it first, so an edit never starts from a broken file."""
    if not path.exists():
        return {}
    load_config(path)
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def write_raw(path: Path, raw: Mapping[str, Any]) -> None:
    """Replace the config file atomically (temp file, fsync, rename), mode 0600: it may
    hold credentials."""
    import yaml

    from backends.archive import atomic_output

    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(dict(raw), sort_keys=False, default_flow_style=False)
    with atomic_output(path) as stream:
        stream.write(text.encode("utf-8"))
