"""What an adapter can do is said once (``backends.contract.CAPABILITIES``) and detected
by one function; the registry reads the contract, never the other way round."""

from __future__ import annotations

import subprocess
import sys

from backends.contract import (CAPABILITIES, FAULT_POINTS, Capability, adapter_defaults,
                               capabilities_of, event_defaults, fault_points_of, offers,
                               state_defaults)
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
    assert {Capability.PURGE_USER, Capability.DRIFT_EXEMPT, Capability.FAULTS,
            Capability.CLOSE} <= found
    assert fault_points_of(_Adapter()) == FAULT_POINTS


def test_declarations_are_read_with_the_bases_defaults():
    """A declaration is a class attribute, on the base or on any object (a store that
    inherits nothing is seen through a view that keeps what it declares)."""
    assert event_defaults(object()).assigns_sequences is True  # absent: a store assigns them
    assert event_defaults(_Events()).assigns_sequences is False  # declared False
    assert state_defaults(object()).idempotent_retries is False  # absent: not promised
    assert state_defaults(_Store()).idempotent_retries is True
    truthy = type("S", (), {"idempotent_retries": 1})()
    assert state_defaults(truthy).idempotent_retries is False  # only a real True counts
    assert adapter_defaults(_Adapter()).keeps_session_ttl is True
    assert adapter_defaults(object()).keeps_session_ttl is False
    assert event_defaults(None) is None
    assert not offers(None, Capability.PURGE_USER)
    assert fault_points_of(object()) == frozenset()


def test_shortcuts_default_to_the_slow_correct_way_and_keep_a_stores_own():
    """A store that inherits no base gets the shortcuts' defaults over the required
    contract, and keeps a shortcut it has of its own; a shipped store is itself."""
    from backends.contract import LoadedState, StateStoreDefaults

    class Plain:
        def load_full(self, sid, *, owner_subject=None):
            return None if sid == "nope" else LoadedState(sid.encode(), 1, None, None)

    class Own(Plain):
        def count_sessions(self, *, owner_subject=None, match=None):
            return 7

    plain = state_defaults(Plain())
    assert [s and s.blob for s in plain.load_full_many(["a", "nope"])] == [b"a", None]
    assert plain.count_sessions() is None
    assert state_defaults(Own()).count_sessions() == 7
    store = MemoryBackendAdapter().state_store()
    assert isinstance(store, StateStoreDefaults) and state_defaults(store) is store


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
