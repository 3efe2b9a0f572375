"""The timed engine on the compressed cache (SegmentCache) against the per-page tree
(RadixCache): the same runs give the same records, summaries and timeseries
(docs/architecture.md "One prefix cache"), and a prefix index follows a SegmentCache by runs
of pages as it follows a RadixCache page by page (router/index.py).
"""

from __future__ import annotations

import json

import pytest
from fakes import prefix_traces, without_segment_cache
from hypothesis import event, given, settings
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, TTLMode, TTLRule
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.config import RunConfig
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate
from prefixsim.pipeline.build import build
from prefixsim.router.index import PrefixIndex
from prefixsim.trace import Request
from prefixsim.trace.chains import requests_chained
from prefixsim.trace.columns import as_columns


def outcome(config: RunConfig, requests: list[Request]):
    """A run's records, summary (less its wall time) and timeseries, or its input error."""
    try:
        result = simulate(config, requests)
    except InputError as exc:
        return str(exc)
    summary = {key: value for key, value in result.summary.items()
               if "wall" not in key}  # the speed figures (wall_time_s, simulated_s_per_wall_s)
    return result.requests, json.dumps(summary, sort_keys=True), result.timeseries


def same(first, second) -> None:
    if isinstance(first, str) or isinstance(second, str):
        assert first == second
        return
    assert first[0].equals(second[0])
    assert first[1] == second[1]
    assert first[2].equals(second[2])


ROUTERS = [{"name": "prefix_aware"}, {"name": "prefix_aware", "params": {"event_delay_s": 0.5}},
           {"name": "prefix_aware", "params": {"staleness_s": 1.0}}, {"name": "least_loaded"},
           {"name": "round_robin"}, {"name": "session_affinity"}]


@settings(max_examples=150, deadline=None)
@given(requests=prefix_traces(chained=False) | prefix_traces(),
       replicas=st.integers(1, 3), router=st.sampled_from(ROUTERS),
       capacity=st.sampled_from([64, 160, 600]),
       policy=st.sampled_from(["lru", "fifo", "lfu", "gdsf", "priority", "belady",
                               "s3fifo", "workload_aware"]),
       ttl=st.sampled_from([None, 0.5, 3.0]), mode=st.sampled_from(["sliding", "fixed"]),
       lower=st.sampled_from([{}, {"host_capacity_tokens": 200},
                              {"host_capacity_tokens": 100, "disk_capacity_tokens": 300},
                              {"pool": {"capacity_tokens": 400, "write": "back"}},
                              {"pool": {"capacity_tokens": 400}},
                              {"pool": {"capacity_tokens": 150, "write": "back",
                                        "policy": "fifo", "ttl_s": 2.0, "replicas": 2}},
                              {"pool": {"capacity_tokens": 100, "policy": "lfu",
                                        "ttl_s": 1.0}},
                              {"pool": {"capacity_tokens": 150, "policy": "belady",
                                        "write": "back"}},
                              {"pool": {"capacity_tokens": 120, "policy": "workload_aware",
                                        "ttl_s": 2.0}},
                              {"pool": {"capacity_tokens": 120, "policy": "s3fifo",
                                        "write": "back"}}]))
def test_timed_runs_on_segments_equal_the_per_page_tree(requests, replicas, router, capacity,
                                                        policy, ttl, mode, lower):
    """Random prefix trees (chained or not), fleets, routers (live index, delayed events,
    stale snapshots, live reads), tight capacities, node-uniform policies, belady (its
    keys read from each segment's last access), workload-aware (its keys set per page
    as a request touches them) and S3-FIFO (a state per page), TTLs, lower tiers and a
    shared pool (its own tree on segments too: node-uniform policies, belady,
    workload-aware or S3-FIFO, a TTL, two holders a page), every step's accounting
    checked: identical runs."""
    config = RunConfig.model_validate({
        "cache": {"capacity_tokens": capacity, "policy": policy, "ttl_s": ttl,
                  "ttl_mode": mode, **lower},
        "engine": {"replicas": replicas, "check_invariants": True}, "router": router})
    parts = build(config, requests)
    assert all(type(cache) is SegmentCache for cache in parts.caches)
    assert parts.shared_pool is None or type(parts.shared_pool.cache) is SegmentCache
    segments = outcome(config, requests)
    with pytest.MonkeyPatch.context() as patch:
        without_segment_cache(patch)
        parts = build(config, requests)
        assert all(type(cache) is RadixCache for cache in parts.caches)
        assert parts.shared_pool is None or type(parts.shared_pool.cache) is RadixCache
        pages = outcome(config, requests)
    event("an input error" if isinstance(segments, str) else "a run")
    same(segments, pages)


@settings(max_examples=150, deadline=None)
@given(requests=prefix_traces(chained=False) | prefix_traces(),
       replicas=st.integers(1, 3), router=st.sampled_from(ROUTERS),
       capacity=st.sampled_from([32, 64, 160, 600]),
       policy=st.sampled_from(["belady", "fifo", "gdsf", "lfu", "lru", "priority", "s3fifo",
                               "ttl", "workload_aware"]),
       ttl=st.sampled_from([None, 0.5, 3.0]), mode=st.sampled_from(["sliding", "fixed"]),
       lower=st.sampled_from([{}, {"host_capacity_tokens": 200},
                              {"host_capacity_tokens": 100, "disk_capacity_tokens": 300},
                              {"pool": {"capacity_tokens": 400, "write": "back"}},
                              {"pool": {"capacity_tokens": 400}},
                              {"classes": [{"name": "short", "ttl_s": 1.0, "share": 0.5},
                                           {"name": "long", "ttl_s": 30.0, "priority": 1}]}]))
def test_timed_runs_in_block_mode_on_segments_equal_the_per_page_tree(
        requests, replicas, router, capacity, policy, ttl, mode, lower):
    """Block mode (any unlocked page a victim, orphans kept and re-adopted) in timed
    replicas, whose chunks go in below a locked tip at later steps, so parents are often
    older than their children: every policy that runs block mode on segments, TTLs,
    lower tiers, a pool's write-back of orphans' chains, request classes: identical runs
    on both trees."""
    config = RunConfig.model_validate({
        "cache": {"capacity_tokens": capacity, "policy": policy, "ttl_s": ttl,
                  "ttl_mode": mode, "mode": "block", **lower},
        "engine": {"replicas": replicas, "check_invariants": True}, "router": router})
    parts = build(config, requests)
    assert all(type(cache) is SegmentCache and cache.block for cache in parts.caches)
    segments = outcome(config, requests)
    with pytest.MonkeyPatch.context() as patch:
        without_segment_cache(patch)
        parts = build(config, requests)
        assert all(type(cache) is RadixCache for cache in parts.caches)
        pages = outcome(config, requests)
    event("an input error" if isinstance(segments, str) else "a run")
    same(segments, pages)


SHAPES = [  # how the fleet serves (beside plain replicas)
    {"engine": {"prefill_replicas": 1, "decode_replicas": 2}},
    {"engine": {"prefill_replicas": 2, "decode_replicas": 1,
                "disaggregation": {"local_prefill_max_tokens": 32}}},
    {"load": {"type": "concurrency", "users": 3}},
    {"cache": {"classes": [{"name": "short", "ttl_s": 1.0, "share": 0.5},
                           {"name": "long", "ttl_s": 30.0, "priority": 1}]}},
    {"cache": {"min_cacheable_tokens": 24}},
    {"cache": {"host_capacity_tokens": 200, "tier_load": "blocking"}},
    {"cache": {"prefix_caching": False}},
]


@settings(max_examples=100, deadline=None)
@given(requests=prefix_traces(), shape=st.sampled_from(SHAPES),
       capacity=st.sampled_from([64, 160, 600]), ttl=st.sampled_from([None, 2.0]))
def test_fleet_shapes_on_segments_equal_the_per_page_tree(requests, shape, capacity, ttl):
    """Disaggregated serving (decode replicas pull into their own caches; local prefill),
    a closed loop, request classes, a minimum cacheable prompt, blocking tier loads,
    caching off: identical runs on both trees."""
    config = RunConfig.model_validate({
        **shape, "cache": {"capacity_tokens": capacity, "ttl_s": ttl,
                           **shape.get("cache", {})},
        "engine": {"check_invariants": True, **shape.get("engine", {})}})
    segments = outcome(config, requests)
    with pytest.MonkeyPatch.context() as patch:
        without_segment_cache(patch)
        pages = outcome(config, requests)
    event("an input error" if isinstance(segments, str) else "a run")
    same(segments, pages)


@pytest.mark.parametrize("cache_only", [False, True])
def test_a_run_over_chained_ids_keeps_no_resident_id_set(cache_only):
    """Ids checked chained before the run (here at once; a stream's chunk by chunk) cannot
    conflict in a cache, so the run's caches keep no set of resident ids; ids that are not
    chained keep it, and a conflict is the input error naming the request."""
    chained = [Request(0, 0.0, 40, 2, (1, 2, 3), 16), Request(1, 0.5, 40, 2, (1, 2, 4), 16)]
    config = RunConfig.model_validate({"cache_only": cache_only, "engine": {"replicas": 2}})
    parts = build(config, chained)
    assert parts.chained and all(cache._ids is None for cache in parts.caches)
    crossed = chained + [Request(2, 1.0, 40, 2, (2, 1, 5), 16)]  # 1 after 2: not chained
    parts = build(config, crossed)
    assert not parts.chained and all(cache._ids == set() for cache in parts.caches)
    with pytest.raises(InputError, match="request 2: .*not chained"):
        simulate(config, crossed)


@pytest.mark.parametrize("block", [1, 2, 1 << 16])
def test_requests_chained_reads_lists_and_columns(block, monkeypatch):
    """Known answers, checked a block of requests at a time (a conflict across blocks
    too)."""
    from prefixsim.trace import chains
    monkeypatch.setattr(chains, "CHECK_BLOCK", block)
    requests = [Request(0, 0.0, 40, 1, (7, 8, 9), 16), Request(1, 1.0, 20, 1, (7, 8), 16),
                Request(2, 2.0, 5, 1, (), 16)]
    assert requests_chained(requests)
    assert requests_chained([])
    columns = as_columns(requests)
    assert requests_chained(columns)
    crossed = requests + [Request(3, 3.0, 20, 1, (8, 7), 16)]
    assert not requests_chained(crossed)
    assert not requests_chained(as_columns(crossed))
    assert not requests_chained([Request(0, 0.0, 16, 1, (7, 7), 16)])  # an id after itself
    assert not requests_chained([Request(0, 0.0, 16, 1, (2**64,), 16)])  # not an int64


class Recorder:
    """page id -> holder, as a prefix index keeps it live (RunFeed)."""

    def __init__(self) -> None:
        self.holders: dict[int, object] = {}

    def added_run(self, ids, start, stop, holder) -> None:
        for i in range(start, stop):
            self.holders[ids[i]] = holder

    moved_run = added_run

    def removed_run(self, ids, start, stop, holder) -> None:
        for i in range(start, stop):
            assert self.holders.pop(ids[i]) is holder, "removed by another holder"


@settings(max_examples=150, deadline=None)
@given(prefix_traces(), st.sampled_from([20, 60, None]), st.sampled_from([None, 1.0]))
def test_the_run_feed_names_every_resident_page_and_its_segment(requests, capacity, ttl):
    """After every step, what the events said equals the cache: each resident page, held by
    the segment holding it now (splits move pages, evictions and expiry remove them)."""
    rule = None if ttl is None else TTLRule(ttl, TTLMode.SLIDING)
    cache = SegmentCache(capacity, POLICIES.build("lru"), rule)
    feed = Recorder()
    cache.observer = feed
    for recency, request in enumerate(requests):
        pages = cache.match(request.page_ids, request.arrival_s).pages
        tip = pages[-1] if pages else None
        cache.touch(pages, request.arrival_s, recency)
        cache.evict(request.input_tokens, tip)  # the path kept, as admission locks it
        if len(pages) < request.num_pages:
            cache.insert(tip, request.page_ids[len(pages):],
                         request.page_tokens()[len(pages):], request.arrival_s, recency)
        held = {page.page_id: page._node for page in cache.pages()}
        assert feed.holders == held


def test_a_split_passes_its_pages_liveness_to_the_new_segment():
    """Known answer: pages 1..4 inserted at 0 s (TTL 10 s), pages 1..2 matched and touched at
    5 s (a split: their segment is new, its deadline 15 s). At 12 s, before anything
    expires them, the live index counts pages 1..2 alive for the prompt 1..4: it reads their
    new segment's deadline, not the old one's (10 s)."""
    now = [0.0]
    index = PrefixIndex(lambda: now[0])
    cache = SegmentCache(None, POLICIES.build("lru"), TTLRule(10.0, TTLMode.SLIDING))
    index.attach(0, cache)
    cache.insert(None, (1, 2, 3, 4), (16, 16, 16, 16), 0.0, 1)
    prompt = Request(0, 12.0, 64, 1, (1, 2, 3, 4), 16)
    assert index.prefix_tokens(prompt, 9.0) == {0: 48}  # R3's cap: the last page never
    matched = cache.match((1, 2), 5.0).pages
    assert len(matched) == 2 and len(cache.segments()) == 2
    cache.touch(matched, 5.0, 2)
    assert index.prefix_tokens(prompt, 12.0) == {0: 32}
    assert index.prefix_tokens(prompt, 16.0) == {}
