"""Shell completion of values: backend names, profile names, session ids.

Called by click's completion protocol (``_SEMVECCTL_COMPLETE``), never during a normal
run. Each completer is bounded (session ids: at most :data:`MAX_SESSION_IDS`, read
within :data:`SESSION_ID_TIMEOUT_S` seconds, or ``$SEMVECCTL_COMPLETION_TIMEOUT_S``) and
never raises: whatever goes wrong (no
store named, a store that does not answer, a broken config file) completes nothing
rather than print an error into the shell.
"""

from __future__ import annotations

from typing import Any, Optional

#: the most session ids offered for one word
MAX_SESSION_IDS = 100
#: how long reading them may take (connecting included), unless
#: ``$SEMVECCTL_COMPLETION_TIMEOUT_S`` says otherwise
SESSION_ID_TIMEOUT_S = 2.0
#: the variable that sets that budget (seconds, a positive number)
TIMEOUT_VARIABLE = "SEMVECCTL_COMPLETION_TIMEOUT_S"


def session_id_budget(environ: Any = None) -> float:
    """Seconds the session-id completer may spend: ``$SEMVECCTL_COMPLETION_TIMEOUT_S`` when
    it is a positive finite number, else :data:`SESSION_ID_TIMEOUT_S` (completion never
    errors, so a bad value falls back rather than stops)."""
    import math
    import os

    raw = (os.environ if environ is None else environ).get(TIMEOUT_VARIABLE, "")
    try:
        value = float(raw)
    except ValueError:
        return SESSION_ID_TIMEOUT_S
    return value if math.isfinite(value) and value > 0 else SESSION_ID_TIMEOUT_S


def _quietly(produce: Any) -> list[str]:
    try:
        return list(produce())
    except BaseException:  # noqa: BLE001 - completion never errors into the shell
        return []


def complete_backend(incomplete: str) -> list[str]:
    """Every backend name the registry knows (shipped and installed)."""
    def names() -> list[str]:
        from backends.registry import Registry

        return [n for n in Registry().known_names() if n.startswith(incomplete)]

    return _quietly(names)


def _root_settings(ctx: Any) -> tuple[str | None, str | None]:
    root = ctx.find_root() if ctx is not None else None
    params = getattr(root, "params", None) or {}
    return params.get("config"), params.get("profile")


def complete_profile(ctx: Any, incomplete: str) -> list[str]:
    """The profile names of the config file in use (``--config`` if already typed)."""
    def names() -> list[str]:
        from semvecctl import application
        from semvecctl.config import load_config

        config_path, _profile = _root_settings(ctx)
        application.start(config_path=config_path)
        return [n for n in load_config(config_path).profiles if n.startswith(incomplete)]

    return _quietly(names)


def complete_session_id(ctx: Any, incomplete: str) -> list[str]:
    """Session ids from the store the words typed so far select (``--backend``/``--uri``/
    ``--adapter``, environment, profile), as ``sessions list`` shows them."""
    def ids() -> list[str]:
        import itertools

        from backends.contract import Capability, offers
        from backends.probe import call_with_timeout
        from backends.contract.session_ids import escape_id

        from semvecctl import application
        from semvecctl.connection import Connection

        config_path, profile = _root_settings(ctx)
        application.start(config_path=config_path, profile=profile)
        params = getattr(ctx, "params", None) or {}

        def read() -> list[str]:
            conn = Connection(params.get("backend"), params.get("uri"), params.get("adapter"))
            with conn.open() as adapter:
                if not offers(adapter, Capability.SESSIONS):
                    return []
                from backends.ops.inventory import sessions_in_id_order

                glob = "".join("[" + c + "]" if c in "*?[]" else c for c in incomplete) + "*"
                # the first ids in id order, as sessions list shows them
                summaries = sessions_in_id_order(adapter, match=glob, batch_size=MAX_SESSION_IDS)
                return [escape_id(s.session_id)
                        for s in itertools.islice(summaries, MAX_SESSION_IDS)]

        got = call_with_timeout(read, session_id_budget())
        return got.value if isinstance(got.value, list) else []

    return _quietly(ids)


#: the variable click's completion scripts set when the shell asks us to complete a word
COMPLETE_VAR = "_SEMVECCTL_COMPLETE"


def enable_runtime_completion() -> None:
    """Register Typer's completion classes when a shell asks us to complete a word (here,
    not in the ``completions`` command, so that every invocation does not import it)."""
    import os

    if os.environ.get(COMPLETE_VAR):
        from typer._completion_classes import completion_init

        completion_init()


def typed_session_id(value: Optional[str]) -> Optional[str]:
    """An id option's value read with the one escaping rule (``\\n``, ``\\xHH``...: what
    ``sessions list`` shows), as ``sessions inspect`` reads its argument."""
    if value is None or "\\" not in value:
        return value
    from backends.contract.session_ids import unescape_id

    return unescape_id(value)
