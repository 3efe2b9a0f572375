"""The lower tiers' own contract worked by hand (prefixsim/cache/tiers.py,
docs/cache-semantics.md R15): a FlatTier's LRU order, token counts and observer calls, a
TierStack putting pages back into the tier they came from, its load time per tier, and
what `build_tier_stack` builds. Replays with tiers are in tests/cache/test_tiers.py."""

from __future__ import annotations

import pytest

from prefixsim.cache import POLICIES, SegmentCache
from prefixsim.cache.tiers import FlatTier, LowerHit, TierSpec, TierStack, build_tier_stack

# each test runs on the package's cache and on the per-page reference (conftest: each_cache)
pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache



class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def added(self, page_id: int) -> None:
        self.events.append(("added", page_id))

    def removed(self, page_id: int) -> None:
        self.events.append(("removed", page_id))


def test_a_flat_tier_is_lru_and_counts_every_token_put():
    """Capacity 10: put 1 (3 tokens) and 2 (4); put 1 again refreshes it (7 resident, 2
    now the oldest); put 3 (4) pushes out 2, the least recent. Demoted tokens count every
    put: 3 + 4 + 3 + 4 = 14. The observer hears each page added and removed, in order."""
    tier = FlatTier(TierSpec("host", 10, 1e9))
    assert tier.demoted_tokens == 0
    tier.observer = recorder = Recorder()
    assert tier.put(1, 3) == [] and tier.put(2, 4) == []
    assert tier.put(1, 3) == [] and tier.resident_tokens == 7
    assert tier.put(3, 4) == [(2, 4)]
    assert (tier.resident_tokens, tier.demoted_tokens) == (7, 14)
    assert 2 not in tier and tier.tokens_of(1) == 3
    assert tier.take(1) == 3 and tier.resident_tokens == 4
    assert recorder.events == [("added", 1), ("added", 2), ("added", 1), ("removed", 2),
                               ("added", 3), ("removed", 1)]


def test_a_page_larger_than_the_tier_passes_through():
    tier = FlatTier(TierSpec("host", 4, 0.5))  # any bandwidth above 0 is a bandwidth
    assert tier.put(1, 5) == [(1, 5)] and tier.resident_tokens == 0


def stack(min_load_tokens: int | None = None) -> TierStack:
    hbm = Cache(8, POLICIES.build("lru"))
    specs = [TierSpec("host", 8, 1e9), TierSpec("disk", 8, 4e9)]
    if min_load_tokens is None:
        return TierStack(hbm, specs)
    return TierStack(hbm, specs, min_load_tokens)


def test_a_tier_stack_loads_any_run_by_default_and_refuses_a_negative_minimum():
    """A run shorter than the minimum is an empty hit (and changes nothing)."""
    made = stack()
    assert made.min_load_tokens == 0 and made.names == ["host", "disk"]
    short = stack(8)
    short.tiers[0].put(5, 4)
    assert short.take_run([5]) == LowerHit((), (), ()) and 5 in short.tiers[0]
    with pytest.raises(ValueError, match="min_load_tokens must be >= 0, got -1"):
        stack(-1)


def test_hbm_evictions_demote_to_the_first_tier():
    made = stack()
    assert made.hbm.capacity_tokens == 8
    made.hbm.insert(None, [1, 2], [4, 4], 0.0, 0)
    assert made.hbm.evict(4)
    assert 2 in made.tiers[0] and 2 not in made.tiers[1]


def test_put_back_returns_each_page_to_the_tier_it_was_taken_from():
    """Page 5 on disk (tier 1), page 6 in host (tier 0): taken, then put back from page 0:
    each goes home, not to the host."""
    made = stack()
    made.tiers[1].put(5, 4)
    made.tiers[0].put(6, 4)
    hit = made.take_run([5, 6])
    assert hit == LowerHit((1, 0), (4, 4), (5, 6))
    assert 5 not in made.tiers[1]
    made.put_back(hit, 0)
    assert 5 in made.tiers[1] and 5 not in made.tiers[0] and 6 in made.tiers[0]


def test_a_hit_whose_fields_disagree_in_length_is_refused():
    made = stack()
    made.tiers[0].put(5, 4)
    with pytest.raises(ValueError, match="zip"):
        made.take(LowerHit((0, 1), (4, 4), (5,)))
    bad = LowerHit((0, 1), (4,), (5, 6))
    with pytest.raises(ValueError, match="zip"):
        made.put_back(bad, 0)
    with pytest.raises(ValueError, match="zip"):
        made.load_time_s(bad, 1)


def test_load_time_is_each_tiers_tokens_over_its_own_link():
    """Host 1 GB/s, disk 4 GB/s, 1,000 bytes a token: 4 host tokens take 4 us, 4 + 2 disk
    tokens 1.5 us."""
    made = stack()
    hit = LowerHit((0, 1, 1), (4, 4, 2), (1, 2, 3))
    assert made.load_time_s(hit, 1000) == pytest.approx(4e-6 + 1.5e-6)


def test_build_tier_stack_names_and_prices_each_tier():
    """Host 8 GB/s; disk at its default 5 GB/s; the minimum load passed through; no
    capacity given, no stack."""
    hbm = Cache(8, POLICIES.build("lru"))
    built = build_tier_stack(hbm, 100, 8.0, 200, min_load_tokens=16)
    assert built is not None and built.names == ["host", "disk"]
    assert [t.spec.bandwidth_bytes_s for t in built.tiers] == [8e9, 5e9]
    assert [t.spec.capacity_tokens for t in built.tiers] == [100, 200]
    assert built.min_load_tokens == 16
    default = build_tier_stack(Cache(8, POLICIES.build("lru")), 100, 8.0)
    assert default is not None and default.min_load_tokens == 0 and default.names == ["host"]
    assert build_tier_stack(Cache(8, POLICIES.build("lru")), None, 8.0) is None
