"""The ``mongo`` backend: session state, compliance events, an optional item mirror and
explicit index provisioning on MongoDB.

Importing this package is cheap: ``pymongo`` is imported only when an adapter is built,
so the registry can read ``MongoBackendAdapter.is_persistent`` without the driver.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MongoBackendAdapter"]


def __getattr__(name: str) -> Any:
    if name == "MongoBackendAdapter":
        from backends.mongo.adapter import MongoBackendAdapter

        return MongoBackendAdapter
    raise AttributeError(name)
