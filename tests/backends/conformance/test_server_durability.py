"""``durability.server_is_durable`` reads the verdict the backend's health details give
(in-process: adapters whose ``health_details`` return fixed dicts; the real Redis verdicts
are in test_redis.py and test_engine_style.py)."""

from __future__ import annotations

import pytest

from backends.conformance import Status, run_conformance
from backends.memory import MemoryBackendAdapter


def _adapter(details):
    class Adapter(MemoryBackendAdapter):
        def health_details(self, timeout):
            return details

    return Adapter


def _case(details):
    return run_conformance(_adapter(details), only="durability.server_is_durable").cases[0]


def test_a_durable_redis_verdict_passes():
    result = _case({"backend": "redis", "reachable": True, "aof_enabled": True,
                    "durable": True, "reason": "AOF on and no eviction policy can drop keys"})
    assert result.status == Status.PASSED, result.message


def test_a_redis_verdict_of_not_durable_fails_with_its_reason():
    result = _case({"backend": "redis", "reachable": True, "aof_enabled": False,
                    "durable": False, "reason": "AOF is off (appendonly no): lost on restart"})
    assert result.status == Status.FAILED
    assert "AOF is off (appendonly no)" in result.actual
    assert "set appendonly yes and maxmemory-policy noeviction" in result.actual
    assert "appendonly yes" in result.expected


def test_an_unreachable_redis_could_not_be_verified():
    result = _case({"backend": "redis", "reachable": False, "durable": False,
                    "reason": "unreachable: connection refused"})
    assert result.status == Status.FAILED
    assert "could not be verified (unreachable: connection refused)" in result.actual


@pytest.mark.parametrize("details", [
    {"backend": "mongo", "reachable": True, "durable": False,
     "durability_reason": "standalone server"},
    {"backend": "postgres", "reachable": True, "durable": False,
     "durability_reason": "fsync=off"},
    {"backend": "x"},
    "not a dict",
])
def test_other_backends_verdicts_are_not_judged(details):
    result = _case(details)
    assert result.status == Status.NOT_APPLICABLE
    assert "no verdict on the server's own durability" in result.message


def test_health_details_that_raise_fail_the_case_naming_the_call():
    class Adapter(MemoryBackendAdapter):
        def health_details(self, timeout):
            raise RuntimeError("boom")

    result = run_conformance(Adapter, only="durability.server_is_durable").cases[0]
    assert result.status == Status.FAILED
    assert "health_details()" in result.message and "boom" in result.message


def test_memory_without_a_redis_is_not_applicable(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    result = run_conformance(MemoryBackendAdapter, only="durability.server_is_durable").cases[0]
    assert result.status == Status.NOT_APPLICABLE
