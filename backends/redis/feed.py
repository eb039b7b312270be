"""A change feed for live migrations: Redis keyspace notifications, when the server
has them on.

Redis publishes ``__keyspace@<db>__:<key>`` messages for the event classes in its
``notify-keyspace-events`` setting. With keyspace messages (``K``) for hash writes,
generic commands, expiries and string writes (``A``, or ``h``, ``g``, ``x`` and ``$``)
on, every session write, delete or expiry names its state key, and every event append
names the user's counter key. The feed subscribes to both patterns and, when drained,
hands back the session ids and user ids touched since the previous drain.

Pub/sub delivers at most once: a dropped connection (network, the server's output
buffer limit for slow subscribers) loses messages, and redis-py's silent reconnection
hides it. The feed notices both (an error, or a reconnect callback), answers None ("do
a full scan") and subscribes again, so a caller never trusts a feed with a gap. The
server's setting is read, never changed (``CONFIG SET`` is the operator's call; a
server that refuses ``CONFIG GET``, as some managed ones do, has the feed off).
"""

from __future__ import annotations

from typing import Any

from backends.redis import schema
from backends.contract.session_ids import from_key

#: the event classes that cover every write a session store sees
NEEDED = ("h", "g", "x", "$")


def notifications_on(flags: str) -> bool:
    """Whether ``notify-keyspace-events`` (e.g. ``"KA"``, ``"Khgx$"``) covers the feed."""
    return "K" in flags and ("A" in flags or all(c in flags for c in NEEDED))


class KeyspaceFeed:
    """Subscribed on construction (before the caller's full scan, so nothing falls
    between the scan and the feed)."""

    method = "keyspace notifications"

    def __init__(self, client: Any, db: int) -> None:
        self._client = client
        self._db = db
        self._pubsub: Any = None
        self._connection: Any = None
        self._gap = False
        self._subscribe()

    def _patterns(self) -> list[str]:
        prefix = f"__keyspace@{self._db}__:"
        return [prefix + schema.escape_glob(schema.STATE_PREFIX) + "*",
                prefix + schema.escape_glob(schema.USER_COUNTER_PREFIX) + "*"]

    def _subscribe(self) -> None:
        # subscribe confirmations are kept (and skipped below): with redis-py ignoring
        # them, get_message answers None for one, which would end a drain early
        self._pubsub = self._client.pubsub()
        self._pubsub.psubscribe(*self._patterns())
        # redis-py reconnects a dropped subscription on its own and subscribes again,
        # silently: whatever was published in between is lost, so a reconnect is a gap
        self._connection = getattr(self._pubsub, "connection", None)
        register = getattr(self._connection, "register_connect_callback", None)
        if register is not None:
            register(self._reconnected)
        self._gap = False  # connecting for this subscription is no gap

    def _reconnected(self, _connection: Any) -> None:
        self._gap = True

    def drain(self) -> tuple[set[str], set[str]] | None:
        """(session ids, user ids) touched since the last drain, or None when messages
        may have been lost (then resubscribed: the caller scans in full once)."""
        sessions: set[str] = set()
        users: set[str] = set()
        state_prefix = f"__keyspace@{self._db}__:{schema.STATE_PREFIX}".encode()
        user_prefix = f"__keyspace@{self._db}__:{schema.USER_COUNTER_PREFIX}".encode()
        try:
            while True:
                message = self._pubsub.get_message(timeout=0.0)
                if message is None:
                    break
                if message.get("type") != "pmessage":
                    continue
                channel = message.get("channel") or b""
                if isinstance(channel, str):
                    channel = channel.encode("utf-8", "surrogateescape")
                if channel.startswith(state_prefix):
                    sessions.add(from_key(channel[len(state_prefix):]))
                elif channel.startswith(user_prefix):
                    users.add(from_key(channel[len(user_prefix):]))
            if self._gap:
                raise ConnectionError("the subscription was re-established")
        except Exception:  # noqa: BLE001 - any failure may have lost messages
            self.close()
            try:
                self._subscribe()
            except Exception:  # noqa: BLE001 - the next drain tries again
                self._pubsub = _Broken()
            return None
        return sessions, users

    def close(self) -> None:
        deregister = getattr(self._connection, "deregister_connect_callback", None)
        if deregister is not None:  # the pool hands the connection out again
            try:
                deregister(self._reconnected)
            except Exception:  # noqa: BLE001
                pass
        try:
            self._pubsub.close()
        except Exception:  # noqa: BLE001 - closing must not fail
            pass


class _Broken:
    def get_message(self, timeout: float = 0.0) -> Any:
        raise ConnectionError("not subscribed")

    def close(self) -> None:
        pass


def keyspace_feed(client: Any, db: int) -> KeyspaceFeed | None:
    """The feed when the server's setting covers it, else None."""
    try:
        flags = client.config_get("notify-keyspace-events").get("notify-keyspace-events", "")
    except Exception:  # noqa: BLE001 - CONFIG refused (managed servers): the feed is off
        return None
    if isinstance(flags, bytes):
        flags = flags.decode()
    if not notifications_on(str(flags)):
        return None
    return KeyspaceFeed(client, db)
