"""`ItlSegments` (engine/itl.py) reads as the list of (gap, tokens) tuples it was given:
a hypothesis comparison with a plain list, and the numpy views by hand."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.engine.itl import ItlSegments

PAIRS = st.lists(st.tuples(st.floats(0.0, 1e3, allow_nan=False), st.integers(0, 10**12)),
                 max_size=20)


@settings(max_examples=80, deadline=None)
@given(PAIRS, PAIRS, st.integers(-25, 25), st.integers(-25, 25), st.integers(-3, 3))
def test_reads_as_the_list_of_pairs(first, second, start, stop, step):
    segments = ItlSegments(first)
    for pair in second:
        segments.append(pair)
    reference = first + second
    assert len(segments) == len(reference)
    assert list(segments) == reference
    assert segments == reference and segments == tuple(reference)
    assert [segments[i] for i in range(-len(reference), len(reference))] == \
        [reference[i] for i in range(-len(reference), len(reference))]
    if step != 0:
        assert segments[start:stop:step] == reference[start:stop:step]
    joined = ItlSegments(first)
    joined.extend(ItlSegments(second))
    assert joined == segments and list(joined) == reference


def test_equality_and_hash():
    segments = ItlSegments([(0.5, 2), (0.25, 1)])
    assert segments == [(0.5, 2), (0.25, 1)]
    assert segments != [(0.5, 2)]  # shorter
    assert segments != [(0.5, 2), (0.25, 3)]
    assert segments != [(0.5, 2), (0.25, 1), (0.1, 1)]  # longer
    assert ItlSegments() == []
    assert segments.__eq__("ab") is NotImplemented
    assert segments.__eq__(3) is NotImplemented
    assert segments.__eq__(b"ab") is not NotImplemented  # bytes are a Sequence
    with pytest.raises(TypeError, match="unhashable"):
        hash(segments)


def test_arrays_are_typed_views():
    gaps, tokens = ItlSegments().arrays()
    assert gaps.dtype == np.float64 and tokens.dtype == np.int64
    assert gaps.shape == (0,) and tokens.shape == (0,)
    segments = ItlSegments([(0.5, 2), (1.5, 3 * 2**40)])
    gaps, tokens = segments.arrays()
    assert gaps.dtype == np.float64 and tokens.dtype == np.int64
    assert gaps.tolist() == [0.5, 1.5] and tokens.tolist() == [2, 3 * 2**40]
    assert not gaps.flags.owndata and not tokens.flags.owndata  # views of the arrays
