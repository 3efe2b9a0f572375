"""The bracketing-then-bisection search on fake probes (no simulation): it finds a known
threshold, to the stated tolerance, and stops at the knob's limits (capacity/search.py)."""

import pytest

from prefixsim.capacity import SearchSpace, find_threshold


def _rate_space(**changes):
    settings = {"start": 1.0, "passes_below": True, "lowest": 1 / 1024, "highest": 1024.0,
                "tolerance": 0.01, "width": 1}
    return SearchSpace(**{**settings, **changes})


@pytest.mark.parametrize("threshold", [0.003, 0.37, 1.0, 5.2, 700.0])
@pytest.mark.parametrize("width", [1, 3])
def test_rate_threshold_found_within_tolerance(threshold, width):
    """Values up to the threshold pass: good <= threshold < bad, and the final bracket is
    within the relative tolerance of good."""
    result = find_threshold(lambda values: [v <= threshold for v in values],
                            _rate_space(width=width))
    assert result.good <= threshold < result.bad
    assert result.bad - result.good <= 0.01 * result.good


def test_parallel_rounds_ask_several_values_at_once():
    asked = []

    def probe(values):
        asked.append(list(values))
        return [v <= 37.0 for v in values]

    find_threshold(probe, _rate_space(width=4))
    assert asked[0] == [1.0]
    assert asked[1] == [2.0, 4.0, 8.0, 16.0]  # doubling, four at once
    assert all(len(batch) == 4 for batch in asked[2:])


@pytest.mark.parametrize("needed", [1, 2, 3, 5, 17, 64])
@pytest.mark.parametrize("width", [1, 2, 4])
def test_replicas_exact(needed, width):
    """Whole numbers, high values pass: the answer is exactly the fewest that pass."""
    space = SearchSpace(start=1, passes_below=False, lowest=1, highest=4096, integer=True,
                        width=width)
    result = find_threshold(lambda values: [v >= needed for v in values], space)
    assert result.good == needed
    assert result.bad == (None if needed == 1 else needed - 1)
    assert all(float(v).is_integer() for v, _ in result.probes)


def test_limits_end_the_search():
    never = find_threshold(lambda values: [False] * len(values), _rate_space())
    assert never.good is None and never.bad == 1 / 1024
    always = find_threshold(lambda values: [True] * len(values), _rate_space())
    assert always.good == 1024.0 and always.bad is None


def test_each_value_probed_once():
    result = find_threshold(lambda values: [v <= 3 for v in values], _rate_space(width=3))
    values = [v for v, _ in result.probes]
    assert len(values) == len(set(values))
