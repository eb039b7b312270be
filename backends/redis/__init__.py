"""The shipped ``redis`` backend (see :mod:`backends.redis.adapter`).

Importing this package is cheap: redis-py is imported when an adapter is constructed.
"""

from backends.redis.adapter import RedisBackendAdapter

__all__ = ["RedisBackendAdapter"]
