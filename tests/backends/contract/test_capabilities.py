"""What an adapter can do is said once (``backends.contract.CAPABILITIES``) and detected
by one function; the registry reads the contract, never the other way round."""

from __future__ import annotations

import subprocess
import sys

from backends.contract import (CAPABILITIES, FAULT_POINTS, Capability, capabilities_of,
                               fault_points_of, offers)
from backends.memory import MemoryBackendAdapter


def test_every_capability_names_its_holder_protocol_and_members():
    assert set(CAPABILITIES) == set(Capability)
    for cap, spec in CAPABILITIES.items():
        assert spec.holder in ("adapter", "state_store", "event_store"), cap
        assert spec.methods or spec.flag, cap
        for member in spec.methods:
            assert hasattr(spec.protocol, member), (cap, member)


def test_a_class_is_judged_by_its_own_members_without_building_it():
    found = capabilities_of(MemoryBackendAdapter)
    assert {Capability.SESSIONS, Capability.RESTORE} <= set(found)
    assert Capability.INDEXES not in found and Capability.PURGE_USER not in found


class _Events:
    assigns_sequences = False

    def purge_user(self, user_id):
        return 0


class _Store:
    idempotent_retries = True

    def set_drift_exempt(self, session_id, exempt):
        pass


class _Adapter:
    fault_points = FAULT_POINTS
    keeps_session_ttl = True

    def state_store(self):
        return _Store()

    def event_store(self):
        return _Events()

    def inject_fault(self, point):
        raise NotImplementedError

    def restore_session(self, *args, **kwargs):
        pass

    def close(self):
        pass


def test_an_instance_is_asked_through_its_stores():
    found = set(capabilities_of(_Adapter()))
    assert {Capability.PURGE_USER, Capability.IDEMPOTENT_RETRIES, Capability.DRIFT_EXEMPT,
            Capability.FAULTS, Capability.CLOSE, Capability.KEEPS_SESSION_TTL} <= found
    assert Capability.ASSIGNS_SEQUENCES not in found  # declared False
    assert fault_points_of(_Adapter()) == FAULT_POINTS


def test_declarations_keep_their_defaults():
    assert offers(object(), Capability.ASSIGNS_SEQUENCES)  # absent: a store assigns them
    assert not offers(object(), Capability.IDEMPOTENT_RETRIES)  # absent: not promised
    truthy = type("S", (), {"idempotent_retries": 1})()
    assert not offers(truthy, Capability.IDEMPOTENT_RETRIES)  # only a real True counts
    assert not offers(None, Capability.PURGE_USER)
    assert fault_points_of(object()) == frozenset()


def test_a_store_that_cannot_be_built_offers_nothing_and_nothing_raises():
    class Broken(_Adapter):
        def event_store(self):
            raise RuntimeError("down")

    found = capabilities_of(Broken())
    assert Capability.PURGE_USER not in found and Capability.CLOSE in found


def test_the_registry_does_not_import_the_contract():
    code = ("import sys, backends.registry; "
            "assert 'backends.contract' not in sys.modules, 'contract imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
