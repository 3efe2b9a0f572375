"""Block mode (docs/cache-semantics.md R3, vLLM): any unlocked page is a victim; orphans stay
charged
but unreachable until their parent comes back."""

from __future__ import annotations

import random

from fakes import resident_prefix
from hypothesis import given, settings
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, CacheMode
from prefixsim.config import load_config
from prefixsim.pipeline import simulate
from prefixsim.trace import Request


def fifo(mode: CacheMode) -> RadixCache:
    """P=1, capacity 4, FIFO: insert [1,2] then [3]; free 2 tokens (1 is free already)."""
    cache = RadixCache(4, POLICIES.build("fifo"), None, mode)
    cache.insert(None, [1, 2], [1, 1], 0.0, 0)
    cache.insert(None, [3], [1], 1.0, 1)
    cache.evict(2)
    cache.check_invariants()
    return cache


def test_block_mode_evicts_a_parent_and_orphans_its_child():
    """Radix: only leaves 2 and 3 are victims; FIFO takes 2, so [1,2] still matches 1 page.
    Block: page 1 (first in) goes although it has a child; 2 stays charged, unreachable."""
    radix = fifo(CacheMode.RADIX)
    assert {p.page_id for p in radix.pages()} == {1, 3}
    assert radix.match([1, 2], 2.0).num_pages == 1
    block = fifo(CacheMode.BLOCK)
    assert {p.page_id for p in block.pages()} == {2, 3}
    assert block.resident_tokens == 2
    assert block.orphan_tokens() == 1 and radix.orphan_tokens() == 0
    assert block.match([1, 2], 2.0).num_pages == 0


def test_block_mode_readopts_the_orphan_when_its_parent_returns():
    block = fifo(CacheMode.BLOCK)
    placed = block.insert(None, [1, 2], [1, 1], 2.0, 2)
    assert [p.page_id for p in placed] == [1, 2]
    assert block.counters.inserted_tokens == 4  # 1, 2, 3, then 1 again: 2 was reused
    assert block.orphan_tokens() == 0
    block.check_invariants()
    assert block.match([1, 2], 3.0).num_pages == 2


def test_block_mode_protects_the_whole_matched_path():
    """LRU block cache of 3 holding [1,2] (older) and [5]: a request matching [1,2] needs
    one token for page 4; the matched path is protected, so 5 goes, not 1 or 2."""
    cache = RadixCache(3, POLICIES.build("fifo"), None, CacheMode.BLOCK)
    cache.insert(None, [1, 2], [1, 1], 0.0, 0)
    cache.insert(None, [5], [1], 1.0, 1)
    match = cache.match([1, 2, 4], 2.0)
    cache.touch(match.pages, 2.0, 2)
    assert cache.evict(1, protect=match.last)
    assert {p.page_id for p in cache.pages()} == {1, 2}


def test_cli_mode_key_runs_every_policy():
    trace = [Request(i, float(i), 8, 1, (i % 3, 100 + 10 * (i % 3) + i % 5, 1000 + i), 3)
             for i in range(40)]
    for policy in POLICIES.names():
        config = load_config(overrides={"cache_only": True, "cache.mode": "block",
                                        "cache.capacity_tokens": 12, "cache.policy": policy})
        summary = simulate(config, trace).summary
        assert summary["completed"] == 40


class NaiveBlockCache:
    """Brute-force block-mode cache for the differential test: pages by id; a page matches
    when it and every page before it in the request are resident; a victim is the resident
    unprotected page with the least (key, recency, -depth, id), key = recency (lru) or
    insertion order (fifo); Part A steps as in the replay."""

    def __init__(self, capacity: int, policy: str) -> None:
        self.capacity, self.policy = capacity, policy
        self.pages: dict[int, dict] = {}
        self.seq = 0

    def used(self) -> int:
        return sum(p["tokens"] for p in self.pages.values())

    def request(self, position: int, request: Request) -> int:
        ids, tokens = request.page_ids, request.page_tokens()
        matched = resident_prefix(ids, self.pages)
        for page_id in ids[:matched]:
            self.pages[page_id]["recency"] = position
        need = sum(tokens[matched:]) - (self.capacity - self.used())
        protected = set(ids[:matched])
        while need > 0:
            candidates = [(p["seq"] if self.policy == "fifo" else p["recency"], p["recency"],
                           -p["depth"], pid) for pid, p in self.pages.items()
                          if pid not in protected]
            if not candidates:
                break
            victim = min(candidates)[-1]
            need -= self.pages.pop(victim)["tokens"]
        for depth in range(matched, len(ids)):
            if ids[depth] in self.pages:
                continue  # a resident orphan is re-adopted
            if self.used() + tokens[depth] > self.capacity:
                break
            self.pages[ids[depth]] = {"tokens": tokens[depth], "recency": position,
                                      "depth": depth, "seq": self.seq}
            self.seq += 1
        return matched


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), capacity=st.integers(0, 30),
       policy=st.sampled_from(["lru", "fifo"]))
def test_block_mode_matches_a_brute_force_reference(seed, capacity, policy):
    rng = random.Random(seed)
    trace, sessions, next_id = [], [], 100
    for i in range(50):
        if sessions and rng.random() < 0.7:
            path = rng.choice(sessions)
            if rng.random() < 0.3:  # a shorter prefix of the session
                path = path[:rng.randint(1, len(path))]
                sessions.append(path)
        else:
            path = [rng.randrange(3)]
            sessions.append(path)
        path.extend(range(next_id, next_id + rng.randint(0, 2)))
        next_id += 3
        trace.append(Request(i, float(i), len(path) * 2, 1, tuple(path), 2))
    cache = RadixCache(capacity, POLICIES.build(policy), None, CacheMode.BLOCK)
    naive = NaiveBlockCache(capacity, policy)
    for position, request in enumerate(trace):
        match = cache.match(request.page_ids, request.arrival_s)
        cache.touch(match.pages, request.arrival_s, position)
        new = request.page_tokens()[match.num_pages:]
        cache.evict(sum(new), protect=match.last)
        cache.insert(match.last, request.page_ids[match.num_pages:], new,
                     request.arrival_s, position)
        cache.check_invariants()
        assert match.num_pages == naive.request(position, request), position
        assert {p.page_id for p in cache.pages()} == set(naive.pages), position
