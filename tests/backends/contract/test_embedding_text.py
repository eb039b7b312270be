"""The fast embedding encoder writes exactly the engine's bytes: ``json.dumps(list)``.

Stores hold these bytes and the golden fixtures pin them, so "equal as floats" is not
enough: every case compares text.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.contract.embedding_text import compact_embedding_json, embedding_json


@settings(max_examples=400, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=40))
def test_any_finite_floats_encode_as_json_dumps(values):
    assert embedding_json(values) == json.dumps(values)
    assert embedding_json(tuple(values)) == json.dumps(values)
    assert compact_embedding_json(values) == json.dumps(values, separators=(",", ":")).encode()


def test_every_decade_and_its_neighbours():
    """Notation switches (1e-4 and 1e16), subnormals, the largest double, and values whose
    positional tail looks like a small number (10.000000000000002)."""
    values = []
    for exponent in range(-324, 309):
        for mantissa in (1.0, 1.5, 9.87654321, 1.0000000000000002, 0.9999999999999999):
            try:
                x = mantissa * 10.0 ** exponent
            except OverflowError:
                continue
            if math.isfinite(x):
                values += [x, -x, math.nextafter(x, 0.0), math.nextafter(x, math.inf)]
    values += [0.0, -0.0, 5e-324, 1.7976931348623157e308]
    values = [v for v in values if math.isfinite(v)]
    assert embedding_json(values) == json.dumps(values)


def test_random_bit_patterns_and_float32_embeddings():
    rng = np.random.default_rng(18)
    doubles = rng.integers(0, 2**64, size=200_000, dtype=np.uint64).view(np.float64)
    doubles = doubles[np.isfinite(doubles)]
    for chunk in np.array_split(doubles, 200):
        values = chunk.tolist()
        assert embedding_json(values) == json.dumps(values)
    for scale in (1e-6, 1e-4, 0.05, 1.0):  # what real models emit: float32, widened
        values = (rng.standard_normal(384).astype(np.float32) * scale).astype(np.float64).tolist()
        assert embedding_json(values) == json.dumps(values)


def test_empty_embedding_is_an_empty_array():
    assert embedding_json(()) == "[]"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_refused_not_written_as_null(bad):
    with pytest.raises(ValueError, match="non-finite"):
        embedding_json([0.5, bad])
