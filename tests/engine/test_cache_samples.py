"""The cache-only replay's sampling helpers (engine/cache_samples.py): `next_sample` against
a naive walk up the grid, known answers, and the rows `end_of_replay` appends."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache import CacheCounters
from prefixsim.engine.cache_samples import end_of_replay, next_sample, row_of, state_row


def naive_next_sample(now: float, interval_s: float) -> float:
    k = 0
    while k * interval_s < now:
        k += 1
    return k * interval_s


@pytest.mark.parametrize(("now", "interval", "expected"), [
    (0.0, 0.5, 0.0), (-3.0, 0.5, 0.0), (0.5, 0.5, 0.5), (0.6, 0.5, 1.0), (2.0, 1.0, 2.0),
    (0.3, 0.1, 3 * 0.1),  # 0.3 / 0.1 rounds below 3: 3 * 0.1 is 0.30000000000000004
    (3 * 0.1, 0.1, 3 * 0.1),  # a grid point itself, whose quotient rounds above 3
    (63 * 1.1, 1.1, 63 * 1.1),  # the same with a step above 1 s
])
def test_next_sample_by_hand(now, interval, expected):
    assert next_sample(now, interval) == expected


def test_next_sample_beyond_exact_whole_quotients_and_of_no_number():
    """From 2**53 on a quotient is whole already (math.ceil, exact); an infinite or NaN
    time is refused as math.ceil refuses it, on both code paths."""
    assert next_sample(2.0 ** 60, 1.0) == 2.0 ** 60
    assert next_sample(3 * 2.0 ** 54, 0.5) == 3 * 2.0 ** 54
    with pytest.raises(OverflowError):
        next_sample(math.inf, 1.0)
    with pytest.raises(ValueError):
        next_sample(math.nan, 1.0)


# steps below and above 1 s, whose products k * interval round either way
INTERVALS = [0.1, 0.3, 0.7, 1 / 3, 0.05, 1.0, 2.5, 1.1, 3.3, 7.7]


@settings(max_examples=300, deadline=None)
@given(st.integers(-5, 300), st.sampled_from(INTERVALS),
       st.sampled_from([0.0, 1.0, -1.0, 0.5]))
def test_next_sample_equals_the_naive_walk(k, interval, ulps):
    """Times on, next to and between grid points (the grid as the sampler computes it)."""
    point = k * interval
    now = point + ulps * math.ulp(point) if ulps in (1.0, -1.0) else point + ulps * interval
    assert next_sample(now, interval) == naive_next_sample(now, interval)


def counters() -> CacheCounters:
    made = CacheCounters()  # the real class: compiled, a row reads its C fields
    made.evicted_pages, made.expired_pages = 7, 3
    return made


class Cache:
    resident_tokens = 40
    counters = counters()


def test_state_row_and_the_last_row():
    assert state_row(2.5, Cache()) == (2.5, 40, 7, 3)
    heard, states = [], [("earlier",)]
    end_of_replay(Cache(), states, 4.0, heard.append, 9)
    assert heard == [9] and states == [("earlier",), (4.0, 40, 7, 3)]
    end_of_replay(Cache(), None, 5.0, None, 2)  # no sampling, no progress: nothing to do


def test_a_row_from_its_figures_is_the_cache_s_row():
    """row_of (what the chunk replay appends, from its typed cache's fields) gives the row
    state_row reads off the cache."""
    cache = Cache()
    assert row_of(2.5, cache.resident_tokens, cache.counters) == state_row(2.5, cache)
