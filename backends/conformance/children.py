"""Other processes for the cross-process cases: how a child rebuilds the adapter, and the
parent's handle on the children.

An :class:`AdapterRecipe` is how the run was given the backend, in a form another
process can follow: an importable callable (``module:attr``) and JSON-able keyword
arguments (a registry name and URI for ``--backend``/``--uri``, the ``--adapter`` target
and its URI). A child built from it has its own connections, its own caches and its own
locks, which is the point: an adapter that is only safe inside one process is caught.

The children come from a *zygote*: one ``python -m backends.conformance.zygote`` per
case, which imports the recipe's module once and then forks a worker per request (a
fork of a single-threaded process that holds no connection), so twenty SIGKILLs cost
twenty forks, not twenty interpreter starts. The recipe travels on the zygote's stdin,
never on a command line (a URI may carry a password).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from backends.conformance.model import NotApplicable

#: Seconds the zygote may take to start and import the adapter's module.
_START_TIMEOUT = 60.0


@dataclass(frozen=True)
class AdapterRecipe:
    """``target(**kwargs)`` builds the adapter; ``uri_key`` names the keyword holding its
    URI (the connection-fault cases route that URI through a proxy), None when the
    adapter is not configured by a URI."""

    target: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    uri_key: str | None = None

    @property
    def uri(self) -> str | None:
        value = self.kwargs.get(self.uri_key) if self.uri_key else None
        return value if isinstance(value, str) and value else None

    def with_uri(self, uri: str) -> "AdapterRecipe":
        if not self.uri_key:
            raise ValueError("this recipe takes no URI")
        return AdapterRecipe(self.target, {**self.kwargs, self.uri_key: uri}, self.uri_key)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "kwargs": self.kwargs, "uri_key": self.uri_key}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AdapterRecipe":
        return cls(str(data["target"]), dict(data.get("kwargs") or {}), data.get("uri_key"))

    def prepare(self) -> Any:
        """Import the target (what the zygote does once, before any fork)."""
        from backends.registry import import_object

        return import_object(self.target)

    def build(self) -> Any:
        return self.prepare()(**self.kwargs)


_REGISTRY: list[Any] = []


def registry_adapter(name: str, uri: str | None = None, **options: Any) -> Any:
    """The adapter ``--backend NAME [--uri URI]`` selects (the target of CLI recipes).
    The registry is read once per process (a forked worker inherits it: no entry-point
    scan per child)."""
    from backends.registry import Registry

    if not _REGISTRY:
        _REGISTRY.append(Registry())
    config = dict(options)
    if uri is not None:
        config["uri"] = uri
    return _REGISTRY[0].load_adapter(name, warn=False, **config)


def registry_recipe(name: str, uri: str | None, options: dict[str, Any] | None = None
                    ) -> AdapterRecipe | None:
    """A recipe for a registry backend, or None when its options cannot travel as JSON."""
    kwargs: dict[str, Any] = {"name": name, **(options or {})}
    if uri is not None:
        kwargs["uri"] = uri
    return _checked(AdapterRecipe("backends.conformance.children:registry_adapter", kwargs,
                                  "uri"))


def target_recipe(target: str, kwargs: dict[str, Any] | None = None) -> AdapterRecipe | None:
    """A recipe for ``module:factory`` called with ``kwargs`` (a ``uri`` among them is the
    URI the fault cases may reroute)."""
    kwargs = dict(kwargs or {})
    return _checked(AdapterRecipe(target, kwargs, "uri" if "uri" in kwargs else None))


def _checked(recipe: AdapterRecipe) -> AdapterRecipe | None:
    try:
        json.dumps(recipe.to_dict())
    except (TypeError, ValueError):
        return None
    return recipe


def recipe_of(factory: Any) -> AdapterRecipe | None:
    """The recipe a factory carries (``load_adapter_factory`` and the CLI attach one)."""
    recipe = getattr(factory, "semvec_recipe", None)
    return recipe if isinstance(recipe, AdapterRecipe) else None


# -- what parent and children agree on ----------------------------------------------------


def turn_blob(session_id: str, version: int) -> bytes:
    """The blob written with ``version``: the checks recognise a blob of another version."""
    return f"{session_id} turn {version} \x00\xff".encode("utf-8", "surrogateescape")


def turn_event_id(session_id: str, label: str) -> uuid.UUID:
    """A deterministic event id, so the parent knows (and cleans up) what children wrote."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"semvec-conformance:{session_id}:{label}")


def turn_event(user_id: str, session_id: str, owner: str | None, label: str) -> Any:
    from datetime import datetime, timezone

    from backends.conformance.drive import WireEvent

    return WireEvent(event_id=turn_event_id(session_id, label), user_id=user_id,
                     content=label, created_at=datetime.now(timezone.utc).replace(microsecond=0),
                     embedding=[0.5, -0.25, 1.0], owner_subject=owner or "",
                     session_id=session_id)


def turn_labels(version: int, per_turn: int) -> list[str]:
    return [f"turn {version} event {i}" for i in range(per_turn)]


# -- the parent's handle -------------------------------------------------------------------


def require_children(ctx: Any) -> AdapterRecipe:
    """The recipe for children of this case, or NotApplicable with the reason."""
    if ctx.adapter.is_persistent is not True:
        raise NotApplicable("is_persistent is not True: another process would see none of "
                            "this adapter's sessions, so there is nothing to race or to kill")
    recipe = getattr(ctx, "recipe", None)
    if recipe is None:
        raise NotApplicable("the suite cannot rebuild this adapter in a child process (it "
                            "was given an adapter or a factory, not how to build one: use "
                            "--uri, --backend or --adapter module:factory, or pass "
                            "recipe=AdapterRecipe(...) to run_conformance)")
    if not hasattr(os, "fork"):
        raise NotApplicable("this platform has no fork(): no zygote for child processes")
    # what children wrote is removed through an adapter built afresh in the parent: the
    # run's own may share a pool with what the children left behind
    ctx.cleanup_fresh = True
    return recipe


class Zygote:
    """A child interpreter that forks workers on request (see the module docstring)."""

    def __init__(self, recipe: AdapterRecipe) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "backends.conformance.zygote"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1,
            start_new_session=True)
        self._live: set[int] = set()
        reply = self._ask({"recipe": recipe.to_dict()}, timeout=_START_TIMEOUT)
        if "error" in reply:
            self.close()
            if reply.get("cause") == "shared-connection":
                raise NotApplicable(f"the cross-process cases cannot run: {reply['error']}")
            raise NotApplicable(f"a child process cannot rebuild the adapter: {reply['error']}")

    def _ask(self, request: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
        import selectors

        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise RuntimeError("the conformance zygote process has gone") from None
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise RuntimeError(f"the conformance zygote did not answer within {timeout:g}s")
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the conformance zygote process has gone")
        return json.loads(line)

    def fork(self, job: dict[str, Any]) -> int:
        """Start a worker running ``job``; its pid."""
        reply = self._ask({"op": "fork", "job": job})
        pid = int(reply["pid"])
        self._live.add(pid)
        return pid

    def wait(self, pid: int, timeout: float) -> int | None:
        """The worker's exit status (negative: killed by that signal), None if still alive."""
        reply = self._ask({"op": "wait", "pid": pid, "timeout": timeout}, timeout=timeout + 30)
        status = reply.get("status")
        if status is not None:
            self._live.discard(pid)
        return status

    def kill(self, pid: int) -> int | None:
        import signal

        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.wait(pid, 10.0)

    def close(self) -> None:
        """Kill every worker still alive and end the zygote."""
        for pid in list(self._live):
            try:
                self.kill(pid)
            except Exception:  # noqa: BLE001 - the zygote kills leftovers on EOF anyway
                break
        try:
            if self._proc.stdin:
                self._proc.stdin.close()
            self._proc.wait(10)
        except Exception:  # noqa: BLE001
            self._proc.kill()
            self._proc.wait(10)
        finally:
            if self._proc.stdout:
                self._proc.stdout.close()

    def __enter__(self) -> "Zygote":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def wait_for(predicate: Any, timeout: float, interval: float = 0.002) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
