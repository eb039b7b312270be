"""The Lua scripts, read once from package data and called by SHA.

EVALSHA saves sending the script body on every call. When the server does not know the
SHA yet (first call, a restart, SCRIPT FLUSH, a failover), the script is loaded once and
the call is repeated: at most one extra round trip per script and server.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Any, Sequence


@dataclass(frozen=True)
class LuaScript:
    name: str
    source: str
    sha: str

    def __call__(self, client: Any, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        from redis.exceptions import NoScriptError

        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)


_cache: dict[str, LuaScript] = {}
_lock = threading.Lock()


def script(name: str) -> LuaScript:
    """The script ``lua/<name>.lua``, read from the package on first use."""
    found = _cache.get(name)
    if found is not None:
        return found
    with _lock:
        found = _cache.get(name)
        if found is None:
            source = resources.files("backends.redis").joinpath("lua", f"{name}.lua").read_text(
                encoding="utf-8"
            )
            found = LuaScript(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())
            _cache[name] = found
        return found
