"""validate_event's embedding rules, whichever path checks them (a small vector checked
value by value, a large one in one numpy pass): the same values pass, the same are
refused, with an InvalidEvent naming the field."""

import uuid
from decimal import Decimal
from fractions import Fraction

import pytest

from backends.contract import MemoryEvent, validate_event
from backends.errors import InvalidEvent


def _event(embedding):
    return MemoryEvent(event_id=str(uuid.uuid4()), user_id="u", content="c", embedding=embedding)


SIZES = [2, 384]  # below and above the size where numpy does the finite check


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("where", [0, -1])
def test_non_finite_values_are_refused_naming_the_field(size, bad, where):
    values = [0.25] * size
    values[where] = bad
    with pytest.raises(InvalidEvent, match="embedding must not contain NaN or infinity"):
        validate_event(_event(values))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("bad", ["abc", None, [1.0], object(), 1j, 10 ** 400])
def test_values_that_are_not_numbers_are_refused(size, bad):
    values = [0.5] * size
    values[size // 2] = bad
    with pytest.raises(InvalidEvent, match="embedding must be a sequence of numbers"):
        validate_event(_event(values))


@pytest.mark.parametrize("embedding", ["0.5,0.5", b"\x00\x01", 3.0])
def test_an_embedding_that_is_not_a_sequence_is_refused(embedding):
    with pytest.raises(InvalidEvent, match="embedding must be a sequence of numbers"):
        validate_event(_event(embedding))


@pytest.mark.parametrize("size", SIZES)
def test_numbers_of_any_kind_become_a_tuple_of_floats(size):
    kinds = [1, True, Decimal("0.5"), Fraction(1, 4), 2.5]
    values = [kinds[i % len(kinds)] for i in range(size)]
    checked = validate_event(_event(values)).embedding
    assert checked == tuple(float(v) for v in values)
    assert type(checked) is tuple and all(type(v) is float for v in checked)


def test_a_numpy_array_and_a_generator_are_accepted():
    np = pytest.importorskip("numpy")
    array = np.linspace(-1.0, 1.0, 384, dtype=np.float32)
    assert validate_event(_event(array)).embedding == tuple(float(v) for v in array)
    assert validate_event(_event(x / 8 for x in range(8))).embedding == tuple(
        x / 8 for x in range(8))


def test_a_numpy_array_with_nan_is_refused():
    np = pytest.importorskip("numpy")
    array = np.zeros(384)
    array[200] = np.nan
    with pytest.raises(InvalidEvent, match="NaN or infinity"):
        validate_event(_event(array))


def test_an_empty_embedding_stays_empty():
    assert validate_event(_event(())).embedding == ()
    assert validate_event(_event([])).embedding == ()


@pytest.mark.parametrize("size", SIZES)
def test_finite_values_whose_sum_overflows_are_accepted(size):
    values = [1.7e308, 1.7e308] + [-1.7e308] * (size - 2)
    assert validate_event(_event(values)).embedding == tuple(values)


def test_numpy_arrays_of_numbers_pass_and_others_are_refused():
    np = pytest.importorskip("numpy")
    assert validate_event(_event(np.arange(4))).embedding == (0.0, 1.0, 2.0, 3.0)
    assert validate_event(_event(np.array([True, False]))).embedding == (1.0, 0.0)
    for bad in (np.zeros((2, 2)), np.array(["a", "b"]), np.array([None, 1.0], dtype=object)):
        with pytest.raises(InvalidEvent, match="sequence of numbers"):
            validate_event(_event(bad))
    with pytest.raises(InvalidEvent, match=r"value 1 is inf"):
        validate_event(_event(np.array([0.0, np.inf], dtype=np.float32)))
