"""What a stored session blob is, without ever relying on it for storage.

The blob is opaque to every store; operators inspecting a session still want to know
whether they are looking at JSON, the engine's native snapshot (magic ``SVB``) or bytes
we cannot name. Detection is read-only and tolerant of anything.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

NATIVE_MAGIC = b"SVB"

#: how many top-level keys of a JSON object are reported (blobs can be large)
MAX_KEYS = 20
PREVIEW_BYTES = 16


@dataclass(frozen=True)
class BlobInfo:
    kind: str  # 'json' | 'native' | 'unknown' | 'empty'
    size: int
    sha256: str
    detail: str = ""
    facts: dict[str, Any] = field(default_factory=dict)


def describe_blob(blob: bytes) -> BlobInfo:
    """Classify a blob and collect a few facts that help an operator recognise it."""
    data = bytes(blob)
    size, digest = len(data), hashlib.sha256(data).hexdigest()
    if not data:
        return BlobInfo("empty", 0, digest, "no bytes")
    if data.startswith(NATIVE_MAGIC):
        return BlobInfo("native", size, digest, "semvec native snapshot (SVB)",
                        {"header_hex": data[:8].hex()})
    parsed = _json(data)
    if parsed is not _NOT_JSON:
        facts: dict[str, Any] = {"json_type": _JSON_TYPES.get(type(parsed), "value")}
        if isinstance(parsed, dict):
            keys = list(parsed)
            facts["top_level_keys"] = [str(k) for k in keys[:MAX_KEYS]]
            if len(keys) > MAX_KEYS:
                facts["more_keys"] = len(keys) - MAX_KEYS
            detail = f"JSON object with {len(keys)} top-level key(s)"
        elif isinstance(parsed, list):
            facts["length"] = len(parsed)
            detail = f"JSON array of {len(parsed)} item(s)"
        else:
            detail = f"JSON {facts['json_type']}"
        return BlobInfo("json", size, digest, detail, facts)
    return BlobInfo("unknown", size, digest, "unrecognised bytes",
                    {"head_hex": data[:PREVIEW_BYTES].hex()})


_NOT_JSON = object()
_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number",
               bool: "boolean", type(None): "null"}


def _json(data: bytes) -> Any:
    stripped = data.lstrip()
    if not stripped or stripped[:1] not in b'{["0123456789-tfn':
        return _NOT_JSON
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return _NOT_JSON
