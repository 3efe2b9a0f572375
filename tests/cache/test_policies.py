"""Every eviction policy: one contract suite over POLICIES.names(), hand-worked victim
orders, and belady's offline bound over the online policies."""

from __future__ import annotations

import random

import pytest
from fakes import lru, pick_session, resident_prefix
from hypothesis import given, settings
from hypothesis import strategies as st
from radix_reference import RadixCache

from prefixsim.analysis.bounds import replay_hit_rate, unbounded_hit_rate
from prefixsim.cache import POLICIES, CacheMode, Page, TTLRule, build_policy
from prefixsim.cache.policy import EvictionPolicy, Policy, overrides
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.engine import replay_cache_only
from prefixsim.trace import Request

ONLINE = [name for name in POLICIES.names() if name != "belady"]


def random_trace(
    seed: int, num_requests: int = 120, page: int = 4, branchy: bool = False
) -> list[Request]:
    """Multi-turn sessions over shared roots; full pages (input = pages * page). `branchy`:
    some requests repeat or cut a session's prefix (leaves get hit, branches appear)."""
    rng = random.Random(seed)
    next_id = 100
    roots = [[i] for i in range(5)]
    sessions: list[list[int]] = []
    requests = []
    t = 0.0
    for i in range(num_requests):
        path = pick_session(rng, sessions, roots, 0.6)
        if branchy and rng.random() < 0.3:
            path = path[:rng.randint(1, len(path))]
            sessions.append(path)
        grow = rng.randint(0 if branchy else 1, 4)
        path.extend(range(next_id, next_id + grow))
        next_id += grow
        t += rng.expovariate(1.0)
        requests.append(Request(i, t, len(path) * page, 1, tuple(path), page))
    return requests


Cache = RadixCache  # set to each cache in turn by the `each_cache` fixture (tests/conftest.py)


def replay(requests, policy, capacity, ttl=None, mode=CacheMode.RADIX):
    cache = Cache(capacity, build_policy(policy, requests), ttl, mode=mode)
    result = replay_cache_only(requests, cache)
    return result, cache


# ----------------------------------------------------------------- contract suite
@pytest.mark.usefixtures("each_cache")
@pytest.mark.parametrize("policy", POLICIES.names())
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mode", list(CacheMode))
def test_contract_capacity_accounting_determinism(policy, seed, mode):
    """Capacity never exceeded (checked after every request), tokens accounted, runs
    bit-identical, and tree invariants hold, with and without a TTL, in both modes, on
    each cache (the segments driven step by step, as a timed replica or a tier drives
    them)."""
    requests = random_trace(seed)
    for ttl in (None, TTLRule(3.0)):
        # Part A step by step, checking the tree after every request
        cache = Cache(40, build_policy(policy, requests), ttl, mode=mode)
        hits = []
        for i, request in enumerate(requests):
            match = cache.match(request.page_ids, request.arrival_s)
            cache.touch(match.pages, request.arrival_s, i)
            tip = match.last
            new = request.page_tokens()[match.num_pages:]
            cache.evict(sum(new), protect=tip)
            cache.insert(tip, request.page_ids[match.num_pages:], new, request.arrival_s, i)
            cache.check_invariants()
            hits.append(match.num_pages)
        c = cache.counters
        assert c.inserted_tokens - c.evicted_tokens - c.expired_tokens == cache.resident_tokens
        first, _ = replay(requests, policy, 40, ttl, mode)
        second, _ = replay(requests, policy, 40, ttl, mode)
        assert first.records == second.records
        assert first.counters == second.counters
        assert [r.cached_tokens for r in first.records] == [
            min(h * 4, r.input_tokens - 1) if h else 0 for h, r in zip(hits, requests, strict=True)
        ]


@pytest.mark.usefixtures("each_cache")
@pytest.mark.parametrize("policy", POLICIES.names())
@pytest.mark.parametrize("mode", list(CacheMode))
def test_contract_locked_pages_are_never_evicted(policy, mode):
    requests = [Request(i, float(i), 12, 1, (i * 10, i * 10 + 1, i * 10 + 2), 4)
                for i in range(4)]
    cache = Cache(48, build_policy(policy, requests), None, mode=mode)
    tips = []
    for i, r in enumerate(requests):
        tips.append(cache.insert(None, r.page_ids, r.page_tokens(), r.arrival_s, i)[-1])
    cache.lock(tips[1])
    assert not cache.evict(48)  # cannot free the locked path
    assert {p.page_id for p in cache.pages()} == {10, 11, 12}
    cache.check_invariants()
    cache.unlock(tips[1], 10.0)
    assert cache.evict(48)
    assert cache.num_pages == 0


@pytest.mark.usefixtures("each_cache")
@pytest.mark.parametrize("policy", POLICIES.names())
def test_contract_runs_under_the_cli_name(policy):
    assert POLICIES.check(policy) == policy
    requests = random_trace(5, 30)
    result, cache = replay(requests, policy, 30)
    assert len(result.records) == 30
    cache.check_invariants()


def test_offline_policy_needs_the_trace():
    with pytest.raises(ValueError, match="offline"):
        build_policy("belady")


# ------------------------------------------------------------- known-answer orders
KNOWN_ORDER = {
    "lru": "BDACE",
    "fifo": "ABCDE",
    "lfu": "BDECA",
    "gdsf": "BDECA",
    "s3fifo": "BDECA",
    "workload_aware": "BDEAC",
    "priority": "DAECB",
    "ttl": "DAECB",
    "belady": "EDABC",
}


def victim_order(policy: str, tree: type = RadixCache) -> str:
    """Five one-token root pages A..E in a cache of 5 tokens, TTL rule 100 s (sliding).

    t=0 A (prio 0, ttl 10)   t=1 B (prio 2, ttl 1000)   t=2 C (prio 1, ttl 50)
    t=3 D (prio 0, ttl 5)    t=4 hit A (ttl 10)   t=5 hit A (ttl 10)   t=6 hit C (default)
    t=7 E (prio 0, ttl 20); positions (recency) 0..7. Future, for belady: 8 C, 9 B, 10 A,
    11 D; E is never used again. Then free 1, 2, 3, 4, 5 tokens in turn.

    lru by last access: B(1) D(3) A(5) C(6) E(7). fifo by insertion: A B C D E.
    lfu (L + hits + 1): A=3 B=1 C=2 D=1 E=1 -> B, then L=1: D(1) E(1) by recency, C, A.
    gdsf: every page at position 0 costs 1 per token, so it orders as lfu.
    s3fifo: S's budget is 0.5 token, so each page leaves it (due, before main) once
      inserted, never hit. A hit on a due page moves it to main (as a ghost hit would): A at
      t=4 (frequency 0), A again at t=5 (frequency 1), C at t=6 (main after A). Due B, D, E
      go first in S order; then main: A (frequency 1 -> reinserted behind C, 0), C, A.
    workload_aware: each root is its own category: P(reuse) A=C=2/3, B=D=E=1/3 -> B, D, E
      (L rises to 1/3, equal keys by recency), then A before C by recency.
    priority: class 0 by recency D(3) A(5) E(7), then C (1), B (2).
    ttl: deadlines D 8, A 15, E 27, C max(52, 106) = 106, B 1001.
    belady: E never again, then farthest next use: D 11, A 10, B 9, C 8.
    """
    ids = {name: i + 1 for i, name in enumerate("ABCDE")}
    future = [Request(i, float(i), 1, 1, (ids[n],), 1) for i, n in enumerate("ABCDAACECBAD")]
    cache = tree(5, build_policy(policy, future), TTLRule(100.0))
    for name, t, prio, ttl in (("A", 0, 0, 10), ("B", 1, 2, 1000), ("C", 2, 1, 50),
                               ("D", 3, 0, 5)):
        cache.insert(None, [ids[name]], [1], t, t, ttl_s=ttl, priority=prio)
    for name, t, ttl in (("A", 4, 10), ("A", 5, 10), ("C", 6, None)):
        cache.touch(cache.match([ids[name]], t).pages, t, t, ttl_s=ttl)
    cache.insert(None, [ids["E"]], [1], 7, 7, ttl_s=20, priority=0)
    order = ""
    names = {v: k for k, v in ids.items()}
    for free in range(1, 6):
        before = {p.page_id for p in cache.pages()}
        cache.evict(free)
        (gone,) = before - {p.page_id for p in cache.pages()}
        order += names[gone]
    return order


@pytest.mark.parametrize("tree", [RadixCache, SegmentCache])
@pytest.mark.parametrize("policy", POLICIES.names())
def test_known_victim_order(policy, tree):
    """On either tree (every policy runs on the compressed one in radix mode)."""
    assert policy in KNOWN_ORDER, f"add a hand-worked order for new policy {policy!r}"
    assert victim_order(policy, tree) == KNOWN_ORDER[policy]


def test_gdsf_keeps_the_deeper_page_that_costs_more_to_recompute():
    """Leaf 12 (depth 2, older) vs root 20 (newer): LRU drops 12; GDSF drops 20, since a
    token at position 2 costs 1 + 2/26,700 > 1 to recompute, with equal hit counts."""
    for policy, gone in (("lru", 12), ("gdsf", 20)):
        cache = RadixCache(4, POLICIES.build(policy))
        cache.insert(None, [10, 11, 12], [1, 1, 1], 0.0, 0)
        cache.insert(None, [20], [1], 1.0, 1)
        cache.evict(1)
        assert cache.get(gone) is None and cache.num_pages == 3


def test_s3fifo_ghost_hit_enters_main():
    cache = RadixCache(1, POLICIES.build("s3fifo"))
    cache.insert(None, [1], [1], 0.0, 0)
    cache.evict(1)
    cache.insert(None, [1], [1], 1.0, 1)
    assert cache.policy.queue_of(cache.get(1)) == "main"


# ------------------------------------------------------------------- offline bound
@pytest.mark.usefixtures("each_cache")
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("capacity", [16, 40, 100])
def test_belady_beats_every_online_policy(seed, capacity):
    requests = random_trace(seed, 150)
    best, _ = replay(requests, "belady", capacity)
    best_hits = sum(r.cached_tokens for r in best.records)
    for policy in ONLINE:
        result, _ = replay(requests, policy, capacity)
        assert best_hits >= sum(r.cached_tokens for r in result.records), policy


def test_gdsf_prices_recomputation_with_the_cost_model():
    """A fake prefill time n * (1 + c / 1000) s: per token at position c it is 1 + c/1000,
    so with equal hits a page at depth 2 of 1-token pages (position 2) is worth 1.002 and a
    root page 1.0; build_policy binds the function for gdsf and ignores it for others."""
    policy = build_policy("gdsf", None, lambda n, c: n * (1 + c / 1000))
    assert policy.cost_per_token(2) == pytest.approx(1.002)
    cache = RadixCache(4, policy)
    cache.insert(None, [10, 11, 12], [1, 1, 1], 0.0, 0)
    cache.insert(None, [20], [1], 1.0, 1)
    assert cache.policy.key(cache.get(12)) == pytest.approx(1.002)
    cache.evict(1)
    assert cache.get(20) is None
    assert build_policy("lru", None, lambda n, c: 1.0).key(cache.get(12)) == 0


def test_gdsf_prices_a_partial_last_page_at_its_position():
    """P=16: pages 10 (16 tokens), 11 (16) and a 4-token tail 12 at depth 2. The tail starts
    after 32 tokens, so with the fake cost 1 + c/1000 per token it is worth 1.032, not
    1 + 8/1000 (depth x its own 4 tokens) as it once was."""
    policy = build_policy("gdsf", None, lambda n, c: n * (1 + c / 1000))
    cache = RadixCache(100, policy)
    cache.insert(None, [10, 11, 12], [16, 16, 4], 0.0, 0)
    assert cache.policy.key(cache.get(12)) == pytest.approx(1.032)


@pytest.mark.parametrize("seed", range(6))
def test_unbounded_fast_path_equals_a_replay(seed):
    requests = random_trace(seed, 200)
    fast = unbounded_hit_rate(requests, lru(None))
    slow = replay_hit_rate(requests, lru(None))
    assert fast == slow > 0
    ttl = lru(None, TTLRule(2.0))
    assert unbounded_hit_rate(requests, ttl) < fast  # TTL path replays (and expires pages)


@pytest.mark.parametrize("policy", ["lfu", "gdsf", "workload_aware"])
def test_greedydual_clock_rises_on_eviction_not_on_expiry(policy):
    """A page hit 3 times (key L + 4 for lfu) expires: the clock stays 0; an eviction of a
    never-hit page raises it to that page's key."""
    cache = RadixCache(2, POLICIES.build(policy), TTLRule(10.0))
    cache.insert(None, [1], [1], 0.0, 0)
    for t in (1.0, 2.0, 3.0):
        cache.touch([cache.get(1)], t, int(t))
    cache.expire(20.0)
    assert cache.get(1) is None and cache.policy.clock == 0.0
    cache.insert(None, [2], [1], 21.0, 4)
    cache.insert(None, [3], [1], 22.0, 5)
    key = cache.policy.key(cache.get(2))
    cache.evict(1)
    assert cache.get(2) is None and cache.policy.clock == key > 0
    cache.check_invariants()


class NaiveRadixCache:
    """Brute-force Part A cache with linear scans, for lru, fifo, lfu, gdsf (and ttl and
    priority, which order as lru without TTL or classes). Keys straight from each policy's
    definition: lru = recency; fifo = insertion order; lfu/gdsf = GreedyDual H = L + hits+1
    (times 1 + position / 26,700 for gdsf) set at insert and hit, L = H of each victim."""

    def __init__(self, capacity: int, policy: str) -> None:
        self.capacity, self.policy = capacity, policy
        self.pages: dict[int, dict] = {}
        self.seq = 0
        self.clock = 0.0

    def _h(self, page: dict) -> float:
        value = page["hits"] + 1.0
        if self.policy == "gdsf":
            value *= 1 + page["depth"] * page["tokens"] / 26_700.0
        return self.clock + value

    def _key(self, page: dict) -> float:
        if self.policy == "fifo":
            return page["seq"]
        if self.policy in ("lfu", "gdsf"):
            return page["h"]
        return page["recency"]

    def request(self, position: int, request: Request) -> int:
        ids, tokens = request.page_ids, request.page_tokens()
        matched = resident_prefix(ids, self.pages)
        for page_id in ids[:matched]:
            page = self.pages[page_id]
            page["recency"] = position
            page["hits"] += 1
            page["h"] = self._h(page)
        need = sum(tokens[matched:]) - (self.capacity - sum(
            p["tokens"] for p in self.pages.values()))
        tip = ids[matched - 1] if matched else None
        while need > 0:
            parents = {p["parent"] for p in self.pages.values()}
            leaves = [(self._key(p), p["recency"], -p["depth"], pid)
                      for pid, p in self.pages.items() if pid not in parents and pid != tip]
            if not leaves:
                break
            victim = self.pages.pop(min(leaves)[-1])
            need -= victim["tokens"]
            self.clock = max(self.clock, victim["h"])
        parent = tip
        for depth in range(matched, len(ids)):
            used = sum(p["tokens"] for p in self.pages.values())
            if used + tokens[depth] > self.capacity:
                break
            page = {"tokens": tokens[depth], "recency": position, "depth": depth,
                    "seq": self.seq, "hits": 0, "parent": parent}
            page["h"] = self._h(page)
            self.pages[ids[depth]] = page
            self.seq += 1
            parent = ids[depth]
        return matched


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), capacity=st.integers(0, 60),
       policy=st.sampled_from(["lru", "fifo", "lfu", "gdsf", "ttl", "priority"]))
def test_radix_replay_matches_a_brute_force_reference(seed, capacity, policy):
    requests = random_trace(seed, 60, page=2, branchy=True)
    result, cache = replay(requests, policy, capacity)
    naive = NaiveRadixCache(capacity, policy)
    for position, (record, request) in enumerate(zip(result.records, requests, strict=True)):
        matched = naive.request(position, request)
        expected = min(matched * 2, request.input_tokens - 1) if matched else 0
        assert record.cached_tokens == expected, position
    assert {p.page_id for p in cache.pages()} == set(naive.pages)


def evict_one(cache: RadixCache, capacity: int) -> int:
    """Asks `cache` (of `capacity` tokens) for one token more than it has free: exactly one
    page must go, and the invariants must still hold; returns that page's id."""
    before = {p.page_id for p in cache.pages()}
    assert cache.evict(capacity - cache.resident_tokens + 1)
    (victim,) = before - {p.page_id for p in cache.pages()}
    cache.check_invariants()
    return victim


def test_s3fifo_small_queue_budget_and_leaf_adaptation():
    """Hand-worked S3-FIFO with the 10% small-queue budget: capacity 10 one-token pages, so S
    holds 1 token within budget and an S page beyond it is due (evicted before M).

    X in S; hit X; Y in S (S over budget: X, hit, moves to M, frequency cleared); Z in S (Y,
    never hit, is due). Free 1: Y (due) is evicted, its id to ghost. Free 1: Z is the S page
    within budget, so M's head X goes although Z is older. Y again: ghost hit ->
    M. Chain P -> Q: P pushes Z out of the budget (due), Q pushes P (due, but not a leaf).
    Free 1: Z (due). Free 1: P is due but has a child, so it keeps its place and M's head Y
    goes. Free 1: only Q is left as a leaf (S within budget: last resort). Free 1: P."""
    cache = RadixCache(10, POLICIES.build("s3fifo"))
    policy = cache.policy
    X, Y, Z, P, Q = 1, 2, 3, 4, 5
    gone = []

    cache.insert(None, [X], [1], 0.0, 0)
    cache.touch([cache.get(X)], 1.0, 1)
    cache.insert(None, [Y], [1], 2.0, 2)
    cache.insert(None, [Z], [1], 3.0, 3)
    gone.append(evict_one(cache, 10))
    assert gone == [Y] and policy.queue_of(cache.get(X)) == "main" and policy.in_ghost(Y)
    gone.append(evict_one(cache, 10))
    assert gone == [Y, X] and policy.queue_of(cache.get(Z)) == "small"
    cache.insert(None, [Y], [1], 4.0, 4)
    assert policy.queue_of(cache.get(Y)) == "main" and not policy.in_ghost(Y)
    cache.insert(None, [P, Q], [1, 1], 5.0, 5)
    for _ in range(4):
        gone.append(evict_one(cache, 10))
    assert gone == [Y, X, Z, Y, Q, P]
    assert cache.num_pages == 0
    # a hit on a due page (past the budget, not yet evicted) moves it to M
    cache.insert(None, [X], [1], 6.0, 6)
    cache.insert(None, [Y], [1], 7.0, 7)
    assert policy.queue_of(cache.get(X)) == "small" and policy.key(cache.get(X)) < policy.key(
        cache.get(Y))
    cache.touch([cache.get(X)], 8.0, 8)
    assert policy.queue_of(cache.get(X)) == "main" and policy.key(cache.get(X)) < policy.key(
        cache.get(Y))  # main (band 1) still before Y, in S within budget (band 2)


def test_requeue_rekeys_an_evictable_leaf_and_ignores_other_pages():
    """A policy bound by `bind_cache` whose key changes without an access: after `requeue`
    the tree evicts by the new key (without it the stale-but-valid entry of A, key 0,
    would go first); requeue of an inner page is a no-op."""

    class Keyed(Policy):
        def __init__(self):
            self.keys = {}
            self.bound = None

        def bind_cache(self, cache):
            self.bound = cache

        def key(self, page):
            return self.keys.get(page.page_id, 0)

    policy = Keyed()
    cache = RadixCache(4, policy)
    assert policy.bound is cache
    policy.keys = {1: 0, 2: 1, 10: 0, 11: 3}
    cache.insert(None, [1], [1], 0.0, 0)
    cache.insert(None, [2], [1], 1.0, 1)
    cache.insert(None, [10, 11], [1, 1], 2.0, 2)
    policy.keys[1] = 5
    cache.requeue(cache.get(1))
    cache.requeue(cache.get(10))  # inner page (child 11): not a victim, no-op
    cache.evict(1)
    assert cache.get(2) is None and cache.get(1) is not None
    cache.evict(2)
    assert cache.get(11) is None and cache.get(10) is not None and cache.get(1) is not None
    cache.check_invariants()


def test_s3fifo_inner_main_page_loses_the_laps_it_missed():
    """M's hand passing an inner page (not evictable) counts as a visit, as in a flat
    S3-FIFO where it would have been reinserted with one frequency less.

    Capacity 10 (S budget 1). Chain A -> B and roots C, D, F go through S to the ghost,
    so re-inserted they enter M: A, B, C, D in that order, frequency 0. Hit A -> B, then A:
    A has 2, B 1. Free 1: B (hit) goes to M's back with 0, the hand passes C (evicted);
    free 1: D; free 1: B; A is a leaf now. F enters M. Free 1: A's position is old; the
    hand passed it twice while it was inner (at B's first pass and again at B's
    reinsertion), so its 2 are spent and A goes, not F. A flat S3-FIFO (M = A2 B1 C D)
    evicts C, D, B, then A too."""
    cache = RadixCache(10, POLICIES.build("s3fifo"))
    policy = cache.policy
    A, B, C, D, F = 1, 2, 3, 4, 5
    cache.insert(None, [A, B], [1, 1], 0.0, 0)
    for i, page_id in enumerate((C, D, F)):
        cache.insert(None, [page_id], [1], 0.0, 1 + i)
    assert cache.evict(10) and cache.num_pages == 0
    assert all(policy.in_ghost(p) for p in (A, B, C, D, F))
    cache.insert(None, [A, B], [1, 1], 1.0, 4)
    cache.insert(None, [C], [1], 1.0, 5)
    cache.insert(None, [D], [1], 1.0, 6)
    assert {policy.queue_of(cache.get(p)) for p in (A, B, C, D)} == {"main"}
    cache.touch([cache.get(A), cache.get(B)], 2.0, 7)
    cache.touch([cache.get(A)], 3.0, 8)
    gone = []

    for _ in range(3):
        gone.append(evict_one(cache, 10))
    assert gone == [C, D, B]
    cache.insert(None, [F], [1], 4.0, 9)
    gone.append(evict_one(cache, 10))
    assert gone == [C, D, B, A]
    cache.check_invariants()


def test_belady_reads_the_future_on_the_timed_engines_clock():
    """With --time-scale 0.5 the engine serves a request of arrival_s = 10 at 5 simulated s,
    and stamps the pages it touches with last access 5. Page 7 is named by requests at
    arrival 10 (position 0) and 20 (position 1). Seen at last access 5 with recency 0, its next
    use is position 1 (simulated 10): key -1. Unscaled, (5, 0) would sit before the use at
    (10, 0), which is already past, and the key would wrongly be -0."""
    requests = [Request(0, 10.0, 4, 1, (7,), 4), Request(1, 20.0, 4, 1, (7,), 4)]
    page = Page(7, None, 4, 5.0, 0)
    assert build_policy("belady", requests, time_scale=0.5).key(page) == -1
    assert build_policy("belady", requests).key(page) == 0


@pytest.mark.parametrize("name", POLICIES.names())
def test_every_policy_states_its_hooks_through_the_protocol(name):
    """Each registered policy subclasses Policy, so every hook of the EvictionPolicy
    protocol exists (with a do-nothing default) and only `key` is required."""
    policy = POLICIES.build(name)
    assert isinstance(policy, Policy)
    hooks = [n for n in dir(EvictionPolicy) if not n.startswith("_")]
    assert {"key", "on_insert", "on_access", "on_evict", "on_expire", "reconsider",
            "bind_cache", "bind_prefill_time", "prepare"} <= set(hooks)
    for hook in hooks:
        assert hasattr(policy, hook), hook
    assert policy.offline == (name == "belady")


def test_default_hooks_are_skipped_and_overrides_are_seen():
    assert not overrides(POLICIES.build("lru"), "on_access")
    assert overrides(POLICIES.build("s3fifo"), "reconsider")
    assert overrides(POLICIES.build("lfu"), "on_expire")
    assert not overrides(POLICIES.build("fifo"), "on_expire")
