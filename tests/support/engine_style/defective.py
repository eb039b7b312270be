"""Copies of the engine-style adapter with the engine's two known Redis defects
(ENGINE-WIRE §7), each rebuilt from the correct script's parts with one thing wrong."""

from __future__ import annotations

from tests.support.engine_style.adapter import (
    CHECK_EVENT_KEYS,
    CHECK_OWNER,
    CHECK_VERSION,
    RETURN_VERSION,
    WRITE_EVENTS,
    WRITE_STATE,
    EngineStyleAdapter,
)


class NoOwnerCheckTurnAdapter(EngineStyleAdapter):
    """commit_turn skips the owner check that save performs: another tenant's scoped
    turn succeeds and takes the session over."""

    turn_parts = (CHECK_VERSION, CHECK_EVENT_KEYS, WRITE_STATE, WRITE_EVENTS, RETURN_VERSION)


class NonAtomicTurnAdapter(EngineStyleAdapter):
    """commit_turn writes the state, then the events, without first checking the keys it
    will write: a server-side error mid-script (a wrong-typed index key) leaves the state
    advanced and part of the events stored."""

    turn_parts = (CHECK_VERSION, CHECK_OWNER, WRITE_STATE, WRITE_EVENTS, RETURN_VERSION)


def NoOwnerCheckFactory() -> NoOwnerCheckTurnAdapter:  # noqa: N802
    return NoOwnerCheckTurnAdapter()


def NonAtomicTurnFactory() -> NonAtomicTurnAdapter:  # noqa: N802
    return NonAtomicTurnAdapter()
