"""The export's fast paths give exactly what the plain code gives, for arbitrary input.

An archive's lines are digested and verified, so a signed line is compared byte for byte
with the plainly written one (the events made records, the body encoded, its checksum
added, encoded again), and the events' fast spelling with ``canonical`` of their
records; a
damaged event must be reported in the same words, so the embedding check is compared
with the element-by-element loop it short-cuts. Where the plain code raises, the fast one
must raise the same error.
"""

from __future__ import annotations

import hashlib
import json
from unittest import mock
from datetime import timedelta, timezone

from hypothesis import example, given, settings
from hypothesis import strategies as st

from backends.archive.canonical import event_to_record, events_json
from backends.archive.format import _plain_line, canonical, signed_line
from backends.contract import MemoryEvent
from backends.contract import event_fields
from backends.contract.event_fields import _why, embedding_problem, meta_problem

# JSON-ish values, with what canonical JSON refuses or spells with care: NaN and
# infinities, integers beyond 64 bits, non-ASCII text, lone surrogates, non-str keys
_scalars = (st.none() | st.booleans() | st.floats() | st.integers()
            | st.integers(min_value=2**64, max_value=2**200) | st.text()
            | st.sampled_from(["\ud800", "é\udfff", "line_sha256", "0" * 64,
                               '"line_sha256":"' + "0" * 64 + '"']))
_keys = st.text() | st.sampled_from(["line_sha256", "n", "kind", "{", ","])
_values = st.recursive(
    _scalars,
    lambda inner: (st.lists(inner, max_size=5) | st.lists(st.floats(), max_size=6)
                   | st.dictionaries(_keys, inner, max_size=5)
                   | st.dictionaries(st.integers(), inner, max_size=3)),
    max_leaves=20)
_bodies = st.dictionaries(_keys, _values, max_size=8) | st.dictionaries(
    st.integers() | _keys, _values, max_size=4)


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return ("raises", type(exc), str(exc))


_texts = st.text() | st.sampled_from(["\ud800", "é", "line_sha256", "0" * 64, "1" * 64])
_zones = st.none() | st.just(timezone.utc) | st.builds(
    lambda minutes: timezone(timedelta(minutes=minutes)), st.integers(-900, 900))
_events = st.builds(
    MemoryEvent,
    event_id=_texts | st.none() | st.integers(),
    user_id=_texts | st.integers() | st.none(),
    content=_texts | st.none() | st.integers(),
    created_at=st.datetimes(timezones=_zones),
    embedding=(st.lists(st.floats(), max_size=6) | st.tuples(st.floats(allow_nan=False))
               | st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=16,
                          max_size=40)  # long: spelled by orjson
               | st.lists(st.floats(), min_size=16, max_size=20) | st.lists(_scalars, max_size=3)),
    meta=st.dictionaries(_keys, _values, max_size=4) | st.dictionaries(st.integers(), _scalars,
                                                                         max_size=2),
    source_event_id=st.none() | _texts | st.integers(),
    sequence=st.integers() | st.integers(min_value=2**64) | st.booleans(),
    owner_subject=_texts | st.none(),
    session_id=_texts | st.none() | st.integers(),
)


class _OtherEvent(MemoryEvent):
    """Not the usual class: its records are whatever its own to_dict says."""

    def to_dict(self):
        return {**super().to_dict(), "content": "from a subclass"}


def _plain_events(events):
    return canonical([event_to_record(e) for e in events])


@settings(max_examples=600, deadline=None)
@given(st.lists(_events | st.builds(_OtherEvent, event_id=_texts, user_id=_texts,
                                     content=_texts), max_size=4))
def test_the_events_fast_spelling_is_canonical_of_their_records(events):
    assert _outcome(events_json, events) == _outcome(_plain_events, events)


@settings(max_examples=600, deadline=None)
@given(_bodies)
@example({})
@example({"line_sha256": "x", "a": 1})
@example({"a": {"line_sha256": "0" * 64}, "z": 1})
@example({"a": [float("nan")]})
@example({1: "int key", 2: "another"})
def test_a_signed_line_is_the_plainly_written_line(body):
    assert _outcome(signed_line, dict(body)) == _outcome(_plain_line, dict(body), None)


@settings(max_examples=400, deadline=None)
@given(_bodies, st.lists(_events, max_size=3))
@example({"a": {"events": "1" * 64}}, [])
@example({"events": []}, [])
def test_a_signed_line_with_events_is_the_plainly_written_line(body, events):
    assert (_outcome(signed_line, dict(body), events)
            == _outcome(_plain_line, dict(body), events))


def test_a_signed_line_verifies_as_the_reader_checks_it():
    body = {"kind": "session", "n": 1, "blob": "QUJD", "events": [{"meta": {"n": 2}}]}
    record = json.loads(signed_line(dict(body)))
    claimed = record.pop("line_sha256")
    assert hashlib.sha256(canonical(record)).hexdigest() == claimed


def _loop_problem(value):
    """The element-by-element check (the definition the fast path short-cuts): the same
    function with its fast path turned off."""
    with mock.patch.object(event_fields, "_sound_floats", lambda _value: None):
        return embedding_problem(list(value))


_embedding_items = (st.floats() | st.floats(min_value=1e307) | st.integers(-10**30, 10**30)
                    | st.booleans() | st.none() | st.text(max_size=3))


@settings(max_examples=600, deadline=None)
@given(st.lists(st.floats(), max_size=40) | st.lists(_embedding_items, max_size=8))
@example([1e308, 1e308])  # finite values whose sum overflows
@example([float("inf"), float("-inf")])
@example([0.5, float("nan")])
@example([10**400])  # too large for a float: the loop's OverflowError, as ever
def test_the_embedding_check_reports_what_the_loop_reports(values):
    expected = _outcome(_loop_problem, values)
    assert _outcome(embedding_problem, values) == expected
    assert _outcome(lambda v: embedding_problem(v, text=False), tuple(values)) == expected
    try:
        text = json.dumps(values)  # NaN and Infinity as the standard library writes them
    except ValueError:
        return
    assert _outcome(embedding_problem, text) == _outcome(_loop_problem, json.loads(text))


def _meta_by_json_loads(text):
    """What a stored meta reads as: the standard library's value, or its words."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return {}, f"is not valid JSON ({_why(exc)})"
    if not isinstance(value, dict):
        return {}, f"is not a JSON object (a {type(value).__name__})"
    return value, ""


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(st.text(), _values, max_size=5).map(json.dumps)
       | st.text(max_size=12) | _values.map(json.dumps))
@example('{"n": 100000000000000000000}')  # beyond 64 bits: an int, not orjson's float
@example('{"n": -9223372036854775809}')
@example('{"a": NaN}')
@example('{"a": 1')
def test_a_meta_reads_as_json_loads_reads_it(text):
    got = meta_problem(text)
    expected = _meta_by_json_loads(text) if text else ({}, "")
    assert repr(got) == repr(expected)  # repr: 1e+20 is not 100000000000000000000, NaN is NaN


@settings(max_examples=400, deadline=None)
@given(event_id=_texts | st.none() | st.integers() | st.uuids(),
       user_id=_texts | st.none(), content=_texts | st.none(),
       created_at=st.datetimes(timezones=_zones),
       embedding=st.tuples(st.floats()) | st.lists(st.floats(), max_size=3) | st.none(),
       meta=st.dictionaries(st.text(), _scalars, max_size=2),
       source_event_id=st.none() | st.just("") | _texts | st.uuids(),
       owner_subject=_texts | st.none(), session_id=_texts | st.none())
def test_a_decoded_event_is_the_constructed_one(**fields):
    decoded = MemoryEvent.decoded(**fields)
    built = MemoryEvent(**fields)
    assert repr(decoded) == repr(built)
    assert ({k: type(v) for k, v in vars(decoded).items()}
            == {k: type(v) for k, v in vars(built).items()})
    assert list(vars(decoded)) == list(vars(built))
