"""``semvecctl doctor`` picks a backend's own audit from its ``BackendInfo.audit`` (said once,
beside the backend's other facts) and falls back to the generic audit for an adapter that
lists its sessions. No server: the audits are looked up, not run against a store."""

from __future__ import annotations

import importlib
import inspect

import pytest

import backends.info as info_module
from backends.errors import UnsupportedOperation
from backends.info import KNOWN_INFO, BackendInfo
from backends.memory import MemoryBackendAdapter
from backends.ops.doctor import audit

SEEN: list = []


def _own_audit(adapter, **options):
    SEEN.append((adapter, options))
    return iter(())


def test_every_declared_audit_is_a_function_of_the_backends_own_package():
    declared = {info.name: info.audit for info in KNOWN_INFO}
    assert declared["redis"] == "backends.redis.audit:audit"
    assert declared["mongo"] == "backends.mongo.audit:audit"
    assert declared["memory"] is None
    for name, target in declared.items():
        if target is None:
            continue
        module, _, function = target.partition(":")
        assert inspect.isfunction(getattr(importlib.import_module(module), function)), name


def test_dispatch_goes_through_backend_info(monkeypatch):
    class Named:
        name = "acme"

    adapter = Named()
    monkeypatch.setattr(info_module, "known", lambda name: BackendInfo(
        name, "x:Y", audit=f"{__name__}:_own_audit") if name == "acme" else None)
    SEEN.clear()
    assert list(audit(adapter, batch=7)) == []
    assert SEEN == [(adapter, {"batch": 7})]


def test_an_adapter_without_its_own_audit_gets_the_generic_one_or_a_refusal():
    adapter = MemoryBackendAdapter()
    adapter.state_store().save("s1", b"blob", expected_version=None)
    assert list(audit(adapter)) == []  # a readable row: no finding

    class Bare:
        name = "bare"

    with pytest.raises(UnsupportedOperation, match="doctor is not supported by backend 'bare'"):
        audit(Bare())
