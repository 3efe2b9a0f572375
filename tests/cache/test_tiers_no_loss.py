"""Cache-only replay with tiers: a run found below HBM that HBM cannot wholly keep goes back
to its tier instead of vanishing (it was taken out before the insert, which places only as
many pages as fit). The whole run found still counts as hits of its tier."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.cache import POLICIES
from prefixsim.cache.tiers import TierSpec, TierStack
from prefixsim.engine import replay_cache_only
from prefixsim.trace import Request

pytestmark = pytest.mark.usefixtures("each_cache")
Cache = RadixCache  # set to each cache in turn by the `each_cache` fixture (tests/conftest.py)


def test_unplaced_part_of_a_host_run_stays_in_host():
    """HBM 10 tokens, P=4. A = [1,2,3] (L=10: 4+4+2) fills HBM. B = [5,6] evicts 3, 2, 1 to
    host. C = [1,2,3] with L=12 (4+4+4): the run 1,2,3 is found in host (11 hit tokens, L - 1
    cap); B's pages are evicted to make room, 1 and 2 fit, page 3 (4 tokens) does not, so it
    must still be in host (the bug left it in no tier)."""
    cache = Cache(10, POLICIES.build("lru"))
    tiers = TierStack(cache, [TierSpec("host", 1000, 50e9)])
    requests = [Request(0, 0.0, 10, 1, (1, 2, 3), 4), Request(1, 1.0, 8, 1, (5, 6), 4),
                Request(2, 2.0, 12, 1, (1, 2, 3), 4)]
    result = replay_cache_only(requests, cache, tiers=tiers)
    last = result.records[-1]
    assert (last.cached_tokens, last.cached_tokens_host) == (11, 11)
    assert sorted(p.page_id for p in cache.pages()) == [1, 2]
    host = tiers.tiers[0]
    assert 3 in host and 5 in host and 6 in host
    assert 1 not in host and 2 not in host
    assert host.resident_tokens == 2 + 4 + 4  # page 3 as it was stored (2), B's 5 and 6


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 1), min_size=1, max_size=3),
                          st.integers(1, 4)), min_size=1, max_size=12),
       st.integers(6, 12))
def test_no_page_is_lost_with_a_large_host(specs, hbm):
    """Property: with a host tier that never fills, every page ever resident in HBM is, at
    the end, in HBM or in host. Prompts of the same pages vary in their last page's size, so
    a run found in host can exceed what HBM can keep."""
    requests = []
    for n, (path, last) in enumerate(specs):
        ids = tuple(hash(tuple(path[:i + 1])) % 10**9 for i in range(len(path)))
        requests.append(Request(n, float(n), 4 * (len(ids) - 1) + last, 1, ids, 4))
    seen: set[int] = set()

    class Recording(Cache):  # a subclass: a compiled cache takes no attributes
        def insert(self, *args, **kwargs):
            placed = super().insert(*args, **kwargs)
            seen.update(page.page_id for page in self.pages())  # every page resident now
            return placed

    cache = Recording(hbm, POLICIES.build("lru"))
    tiers = TierStack(cache, [TierSpec("host", 10**9, 50e9)])
    result = replay_cache_only(requests, cache, tiers=tiers)
    resident = {page.page_id for page in cache.pages()}
    assert seen, "no insert recorded"  # the first request's first page fits, at least
    assert all(pid in resident or pid in tiers.tiers[0] for pid in seen)
    for record in result.records:
        assert record.cached_tokens_host <= record.cached_tokens <= record.input_tokens - 1
