"""Host/disk tiers (docs/cache-semantics.md R15): HBM evictions demote, lower-tier hits load
back."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache import POLICIES, SegmentCache
from prefixsim.cache.tiers import TierSpec, TierStack
from prefixsim.config import load_config
from prefixsim.engine import replay_cache_only
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate
from prefixsim.trace import Request

# each test runs on the package's cache and on the per-page reference (conftest: each_cache)
pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache


KV_BYTES = 131_072  # Llama-3.1-8B bf16, per token


def req(i: int, ids: tuple[int, ...], tokens: int | None = None) -> Request:
    return Request(i, float(i), tokens or len(ids), 1, ids, 1)


TRACE = [req(0, (1, 2)), req(1, (3, 4)), req(2, (1, 2, 5))]


def run(host_tokens: int | None, disk_tokens: int | None = None, min_load: int = 0):
    """P=1, HBM of 2 tokens. r0 [1,2] fills HBM; r1 [3,4] evicts 2 then 1 (demoted to
    host); r2 [1,2,5]: HBM misses, host holds 1 and 2 -> 2 host hit tokens (cap L-1 = 2)."""
    cache = Cache(2, POLICIES.build("lru"))
    specs = []
    if host_tokens is not None:
        specs.append(TierSpec("host", host_tokens, 50e9))
    if disk_tokens is not None:
        specs.append(TierSpec("disk", disk_tokens, 5e9))
    tiers = TierStack(cache, specs, min_load) if specs else None
    result = replay_cache_only(TRACE, cache, tiers=tiers)
    cache.check_invariants()
    return result, tiers


def test_host_tier_turns_hbm_misses_into_host_hits():
    plain, _ = run(None)
    assert [r.cached_tokens for r in plain.records] == [0, 0, 0]
    tiered, tiers = run(10)
    last = tiered.records[-1]
    assert (last.cached_tokens, last.cached_tokens_host, last.cached_tokens_disk) == (2, 2, 0)
    # 1 and 2 were taken back out of host; 3 and 4 were demoted by r2's inserts
    assert 1 not in tiers.tiers[0] and 3 in tiers.tiers[0] and 4 in tiers.tiers[0]


def test_a_run_too_short_to_load_is_recomputed():
    """The host run of r2 holds 2 tokens: with a 3-token minimum it is not loaded (no hit,
    and pages 1 and 2 stay in host); with a 2-token minimum it is."""
    short, tiers = run(10, min_load=3)
    assert short.records[-1].cached_tokens == 0
    assert 1 in tiers.tiers[0] and 2 in tiers.tiers[0]
    loaded, _ = run(10, min_load=2)
    assert loaded.records[-1].cached_tokens_host == 2


def test_full_host_pushes_pages_down_to_disk():
    """Host of 1 token: 2 (evicted first) is pushed to disk by 1; r2 finds 1 in host and 2
    on disk."""
    tiered, _ = run(1, 10)
    last = tiered.records[-1]
    assert (last.cached_tokens_host, last.cached_tokens_disk) == (1, 1)


def test_a_run_below_hbm_stops_at_an_id_it_found_already():
    """Ids that are not chained may repeat in a request: the host holds page 2 once, so a
    run [2, 2, 1] loads it once (taking it twice failed with a KeyError in timed runs);
    HBM's insert then reports the conflict as the input error."""
    cache = Cache(2, POLICIES.build("lru"))
    tiers = TierStack(cache, [TierSpec("host", 10, 50e9)])
    tiers.tiers[0].put(2, 1)
    tiers.tiers[0].put(1, 1)
    hit = tiers.peek_run([2, 2, 1])
    assert hit.page_ids == (2,) and hit.tokens == (1,)
    tiers.take(hit)
    assert 2 not in tiers.tiers[0] and 1 in tiers.tiers[0]


def test_a_timed_run_with_repeated_ids_below_hbm_is_an_input_error():
    """A timed replica with a host tier and ids that repeat inside a request (not chained)
    stops with the input error naming the request, not a KeyError (hypothesis found it)."""
    trace = [Request(0, 0.0, 17, 1, (2, 1), 16), Request(1, 0.0, 33, 1, (3, 1, 1), 16),
             Request(2, 0.0, 17, 1, (2, 1), 16), *[Request(i, 0.0, 1, 1, (1,), 16)
                                                  for i in range(3, 7)],
             Request(7, 0.0, 17, 1, (1, 1), 16), Request(8, 0.0, 33, 1, (2, 2, 1), 16),
             *[Request(i, 0.0, 1, 1, (1,), 16) for i in range(9, 13)]]
    config = load_config(overrides={"cache.capacity_tokens": 64,
                                    "cache.host_capacity_tokens": 200,
                                    "engine.check_invariants": True,
                                    "router.name": "prefix_aware"})
    with pytest.raises(InputError, match="request 8: page id 2 .*not chained"):
        simulate(config, trace)


def test_load_time_is_bytes_over_bandwidth():
    cache = Cache(2, POLICIES.build("lru"))
    tiers = TierStack(cache, [TierSpec("host", 1024, 50e9), TierSpec("disk", 1024, 5e9)])
    tiers.tiers[0].put(7, 512)
    tiers.tiers[1].put(8, 512)
    hit = tiers.take_run([7, 8, 9])
    assert hit.tiers == (0, 1) and hit.tokens == (512, 512)
    expected = 512 * KV_BYTES / 50e9 + 512 * KV_BYTES / 5e9
    assert tiers.load_time_s(hit, KV_BYTES) == pytest.approx(expected)


def test_bad_tier_spec():
    with pytest.raises(ValueError, match="host capacity must be >= 0, got -1"):
        TierSpec("host", -1, 1.0)
    with pytest.raises(ValueError, match="host bandwidth must be > 0, got 0.0"):
        TierSpec("host", 1, 0.0)


def test_simulate_reports_tier_hits_and_rising_hit_rate():
    trace = [req(i, ids) for i, ids in enumerate([(1, 2), (3, 4), (1, 2, 5), (3, 4, 6)])]
    base = load_config(overrides={"cache_only": True, "cache.capacity_tokens": 2})
    plain = simulate(base, trace).summary
    tiered = simulate(load_config(overrides={
        "cache_only": True, "cache.capacity_tokens": 2, "cache.host_capacity_tokens": 8,
    }), trace).summary
    assert plain["cache_hit_tokens_host"] == 0
    assert tiered["cache_hit_tokens_host"] > 0
    assert tiered["cache_token_hit_rate"] > plain["cache_token_hit_rate"]
    assert tiered["cache_hit_tokens"] == (tiered["cache_hit_tokens_hbm"]
                                          + tiered["cache_hit_tokens_host"]
                                          + tiered["cache_hit_tokens_disk"])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), hbm=st.integers(0, 60), host=st.integers(0, 80),
       disk=st.one_of(st.none(), st.integers(0, 80)), policy=st.sampled_from(["lru", "fifo"]))
def test_tiers_never_change_hbm_and_only_add_hits(seed, hbm, host, disk, policy):
    """Loaded pages are inserted into HBM exactly like recomputed ones, so per request the
    HBM hits with tiers equal the hits without them; tiers only add host/disk hits, and no
    tier ever holds more than its capacity."""
    rng = random.Random(seed)
    trace, sessions, next_id = [], [], 100
    for i in range(60):
        if sessions and rng.random() < 0.6:
            path = rng.choice(sessions)
        else:
            path = [rng.randrange(3)]
            sessions.append(path)
        path.extend(range(next_id, next_id + rng.randint(1, 3)))
        next_id += 4
        trace.append(Request(i, float(i), len(path) * 2 - 1, 1, tuple(path), 2))
    plain = replay_cache_only(trace, Cache(hbm, POLICIES.build(policy))).records
    cache = Cache(hbm, POLICIES.build(policy))
    specs = [TierSpec("host", host, 1e9)] + ([] if disk is None else [TierSpec("disk", disk, 1e9)])
    tiers = TierStack(cache, specs)
    tiered = replay_cache_only(trace, cache, tiers=tiers).records
    for a, b in zip(plain, tiered, strict=True):
        assert b.cached_tokens - b.cached_tokens_host - b.cached_tokens_disk == a.cached_tokens
        assert b.cached_tokens >= a.cached_tokens
    for tier in tiers.tiers:
        assert tier.resident_tokens <= tier.spec.capacity_tokens
