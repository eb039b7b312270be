"""An adapter double for the failover group: the shipped Redis adapter with one change,
its turn is two steps (the state, then, a moment later, the events) instead of one
script. On one server a turn finished before the next starts looks whole; on a replica cut
off mid-stream a turn is torn."""

from __future__ import annotations

import time

from backends.contract import validate_turn_events
from backends.redis import RedisBackendAdapter

#: What runs between the two steps (long enough that a cut mid-turn is near certain).
GAP_S = 0.05


class TwoStepRedisAdapter(RedisBackendAdapter):
    name = "two-step-redis"

    @property
    def fault_points(self) -> frozenset[str]:
        return frozenset()  # its own commit_turn does not honour the seam

    def commit_turn(self, session_id, blob, *, expected_version, owner_subject=None,
                    pending_message=None, events=None):
        checked = validate_turn_events(events)
        version = self.state_store().save(session_id, blob, expected_version=expected_version,
                                          owner_subject=owner_subject,
                                          pending_message=pending_message)
        time.sleep(GAP_S)
        for event in checked:
            self.event_store().append(event)
        return version
