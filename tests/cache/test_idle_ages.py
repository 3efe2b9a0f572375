"""Idle ages of pages at hits, evictions and expiries (prefixsim/cache/idle_ages.py), worked by
hand on tiny traces for both cache classes (RadixCache, SegmentCache); the state-machine and
differential suites check the two classes agree on every generated trace."""

from __future__ import annotations

import math
from bisect import bisect_right

import pytest
from hypothesis import given
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, SegmentCache, TTLRule
from prefixsim.cache.idle_ages import EDGES_S, AgeHistogram, age_bin
from prefixsim.engine import replay_cache_only
from prefixsim.trace import Request

CACHES = (RadixCache, SegmentCache)


def requests(*points: tuple[float, list[int]]) -> list[Request]:
    """Requests of 1-token pages at the given times."""
    return [Request(i, t, len(ids), 1, tuple(ids), 1) for i, (t, ids) in enumerate(points)]


def ages(histogram: AgeHistogram) -> dict[float | None, int]:
    """{k: pages} of the non-empty bins, whose lower edge is 2**(k/4) (None: the lowest)."""
    return {(None if i == 0 else round(4 * math.log2(EDGES_S[i - 1])) / 4): c
            for i, c in enumerate(histogram.counts) if c}


@pytest.mark.parametrize("cache_class", CACHES)
def test_hit_and_eviction_ages(cache_class):
    """Capacity 3 tokens, LRU. r0 [1,2] at t=0 inserts pages 1, 2. r1 [1,2,3] at t=10 hits
    1 and 2, each unused for 10 s, and inserts 3 (3 tokens: full). r2 [4,5] at t=15 needs 2
    tokens: the victims are leaf 3 then (now a leaf) 2, both last used at t=10: two pages
    evicted at idle age 5 s. 10 and 5 fall in the bins starting at 2**(13/4) = 9.51 and
    2**(9/4) = 4.76."""
    cache = cache_class(3, POLICIES.build("lru"))
    replay_cache_only(requests((0, [1, 2]), (10, [1, 2, 3]), (15, [4, 5])), cache)
    counters = cache.counters
    assert ages(counters.hit_ages) == {13 / 4: 2}
    assert ages(counters.evicted_ages) == {9 / 4: 2}
    assert counters.expired_ages.total == 0


@pytest.mark.parametrize("cache_class", CACHES)
def test_expiry_ages_are_the_time_unused_before_the_deadline(cache_class):
    """Sliding TTL 4 s, unbounded. r0 [1,2] at t=0: deadlines 4. r1 [1] at t=3 hits page 1
    (idle 3 s), whose deadline becomes 7. r2 [9] at t=10 expires page 2 (deadline 4, last
    used 0: unused 4 s) and page 1 (deadline 7, last used 3: unused 4 s), although they are
    found dead only at t=10. 4 = 2**2 starts its own bin; 3 falls in [2**(6/4), 2**(7/4))."""
    cache = cache_class(None, POLICIES.build("lru"), TTLRule(4.0))
    replay_cache_only(requests((0, [1, 2]), (3, [1]), (10, [9])), cache)
    counters = cache.counters
    assert ages(counters.hit_ages) == {6 / 4: 1}
    assert ages(counters.expired_ages) == {2.0: 2}
    assert counters.evicted_ages.total == 0


def test_quantiles_interpolate_inside_the_bin():
    """One page at age 1 s: its bin is [1, 2**0.25); the median is the geometric middle
    2**0.125 = 1.0905, the 0.0 quantile the bin's lower edge. Ten pages at 0 s and ten at
    100 s: the median is the top of the lowest bin, EDGES_S[0] = 2**-10; 0.75 lies in the
    middle of the bin [2**(26/4), 2**(27/4)) that holds 100."""
    one = AgeHistogram()
    one.add(1.0)
    assert one.quantile(0.5) == pytest.approx(2 ** 0.125)
    assert one.quantile(0.0) == pytest.approx(1.0)
    two = AgeHistogram()
    two.add(0.0, 10)
    two.add(100.0, 10)
    assert two.quantile(0.5) == pytest.approx(2 ** -10)
    assert two.quantile(0.75) == pytest.approx(2 ** (26.5 / 4))
    assert two.share_below(50.0) == 0.5 and two.share_below(1000.0) == 1.0
    assert AgeHistogram().quantile(0.5) is None


def test_histograms_add_up_like_the_replicas_counters():
    """`+` adds bin by bin, so summing counters field by field (metrics/serving.py) works."""
    a, b = AgeHistogram(), AgeHistogram()
    a.add(1.0, 2)
    b.add(1.0, 3)
    b.add(1e9)
    total = a + b
    assert total.total == 6 and total.counts[-1] == 1 and ages(total)[0.0] == 5


def test_quantiles_in_the_lowest_and_highest_bins():
    """Four pages at 0 s: the lowest bin [0, 2**-10) is interpolated linearly, so 0.25 of
    them lie below 2**-12 (a quarter of the edge). One page at age 2**-10 sits in the bin
    [2**-10, 2**-9.75): its 0.5 quantile is the geometric middle 2**-9.875. Ages of 2**20 s
    and more share the top bin, whose quantiles are its lower edge 2**20; so is a share
    over 1. One page: share_below is 0 or 1."""
    low = AgeHistogram()
    low.add(0.0, 4)
    assert low.quantile(0.25) == pytest.approx(2 ** -12)
    edge = AgeHistogram()
    edge.add(2 ** -10)
    assert edge.quantile(0.5) == pytest.approx(2 ** -9.875)
    high = AgeHistogram()
    high.add(1e9)
    assert high.quantile(0.5) == 2 ** 20 and high.quantile(1.5) == 2 ** 20
    assert low.quantile(1.5) == 2 ** 20
    one = AgeHistogram()
    one.add(1.0)
    assert one.share_below(0.5) == 0.0 and one.share_below(2.0) == 1.0


def test_histograms_of_different_bins_do_not_add_and_repr_lists_the_nonzero_bins():
    one = AgeHistogram()
    one.add(1.0, 2)  # 1 s: bin 41 (the edges run 2**-10 ... 2**20 in quarter steps)
    assert repr(one) == "AgeHistogram({41: 2})"
    assert one != AgeHistogram() and one != one.counts and one == AgeHistogram(one.counts)
    with pytest.raises(ValueError, match="zip"):
        one + AgeHistogram([1, 2])


def _near_edges() -> list[float]:
    """Every edge, the floats on either side of it, the powers of two around the range and
    the floats just below them, and what lies outside (zero, negatives, infinities, NaN)."""
    points = [0.0, -0.0, -1.0, 5e-324, 1e300, math.inf, -math.inf, math.nan]
    for edge in EDGES_S:
        points += [edge, math.nextafter(edge, 0.0), math.nextafter(edge, math.inf)]
    for k in range(-14, 24):
        points += [2.0 ** k, math.nextafter(2.0 ** k, 0.0), 1.5 * 2.0 ** k]
    return points


@pytest.mark.parametrize("age", _near_edges())
def test_age_bin_is_bisection_at_the_edges(age):
    """`age_bin` finds the bin from the exponent; it answers as `bisect_right` over the edges
    does, on each edge and the floats next to it (where a wrong octave or an off-by-one
    comparison would show)."""
    assert age_bin(age) == bisect_right(EDGES_S, age)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_age_bin_is_bisection_for_any_float(age):
    assert age_bin(age) == bisect_right(EDGES_S, age)


@given(st.floats(min_value=2.0 ** -11, max_value=2.0 ** 21))
def test_age_bin_is_bisection_within_the_range(age):
    assert age_bin(age) == bisect_right(EDGES_S, age)
