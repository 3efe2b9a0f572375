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


def binned(*ages_and_pages: tuple[float, int]) -> AgeHistogram:
    """A histogram counted as the caches count hits and evictions: in its bins only, no
    exact extremes reported (quantiles interpolated inside the bins)."""
    histogram = AgeHistogram()
    for age, pages in ages_and_pages:
        histogram.counts[age_bin(age)] += pages
    return histogram


def test_quantiles_interpolate_inside_the_bin():
    """One page at age 1 s: its bin is [1, 2**0.25); the median is the geometric middle
    2**0.125 = 1.0905, the 0.0 quantile the bin's lower edge. Ten pages at 0 s and ten at
    100 s: the median is the top of the lowest bin, EDGES_S[0] = 2**-10; 0.75 lies in the
    middle of the bin [2**(26/4), 2**(27/4)) that holds 100."""
    one = binned((1.0, 1))
    assert one.quantile(0.5) == pytest.approx(2 ** 0.125)
    assert one.quantile(0.0) == pytest.approx(1.0)
    two = binned((0.0, 10), (100.0, 10))
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
    low = binned((0.0, 4))
    assert low.quantile(0.25) == pytest.approx(2 ** -12)
    edge = binned((2 ** -10, 1))
    assert edge.quantile(0.5) == pytest.approx(2 ** -9.875)
    high = binned((1e9, 1))
    assert high.quantile(0.5) == 2 ** 20 and high.quantile(1.5) == 2 ** 20
    assert low.quantile(1.5) == 2 ** 20
    one = binned((1.0, 1))
    assert one.share_below(0.5) == 0.0 and one.share_below(2.0) == 1.0


def test_histograms_of_different_bins_do_not_add_and_repr_lists_the_nonzero_bins():
    one = binned((1.0, 2))  # 1 s: bin 41 (the edges run 2**-10 ... 2**20 in quarter steps)
    assert repr(one) == "AgeHistogram({41: 2})"
    assert one != AgeHistogram() and one != one.counts and one == AgeHistogram(one.counts)
    with pytest.raises(ValueError, match="zip"):
        one + AgeHistogram([1, 2])
    one.bound(1.0, 1.0, 2)
    assert repr(one) == "AgeHistogram({41: 2}, 1.0..1.0 s over 2 pages)"
    assert one != AgeHistogram(one.counts)  # the same bins, not the same extremes


def test_quantiles_keep_within_the_exact_extremes_every_page_reported():
    """Every page expiring under a TTL of 300 s is unused for 300 s or more; the bin holding
    300 is [256, 304.4), which alone spread them from 256 s (p10 260 s, the median 279 s:
    below the TTL). With the ages reported the quantiles keep within 300..300. A page counted
    without its age (a bin added to directly) lifts the limit; replicas' histograms add
    their extremes."""
    ttl = AgeHistogram()
    ttl.add(300.0, 10)
    assert [ttl.quantile(q) for q in (0.1, 0.5, 0.9)] == [300.0, 300.0, 300.0]
    spread = binned((300.0, 10))
    assert spread.quantile(0.1) == pytest.approx(256 * (2 ** 0.25) ** 0.1)
    spread.add(310.0, 5)  # reported, but not the ten before it
    assert spread.quantile(0.1) < 300.0
    a, b = AgeHistogram(), AgeHistogram()
    a.add(300.0, 3)
    b.add(3000.0)
    b.add(350.0, 2)
    total = a + b
    assert (total.least_s, total.most_s, total.bounded_pages) == (300.0, 3000.0, 6)
    assert total.quantile(0.0) == 300.0 and total.quantile(1.0) == 3000.0
    assert 300.0 < total.quantile(0.5) < 350.0
    with_unknown = total + binned((1.0, 1))
    assert with_unknown.bounded_pages == 6 and with_unknown.quantile(0.0) < 300.0
    nothing = AgeHistogram()
    nothing.bound(1.0, 2.0, 0)
    assert nothing.least_s is None and nothing.bounded_pages == 0


@pytest.mark.parametrize("cache_class", CACHES)
def test_a_ttl_runs_expiry_quantiles_are_never_below_the_ttl(cache_class):
    """Pages 1-3 at t=0 under a sliding TTL of 300 s; page 1 hit at t=100 (deadline 400);
    r2 at t=1000 expires all three, each unused for exactly 300 s: every quantile is 300."""
    cache = cache_class(None, POLICIES.build("lru"), TTLRule(300.0))
    replay_cache_only(requests((0, [1, 2, 3]), (100, [1]), (1000, [9])), cache)
    expired = cache.counters.expired_ages
    assert expired.total == 3 and expired.bounded_pages == 3
    assert [expired.quantile(q) for q in (0.1, 0.5, 0.9)] == [300.0, 300.0, 300.0]


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
