"""Hypothesis state machine: the prefix cache against a brute-force model.

The model is plain dicts and O(n) scans, written from docs/cache-semantics.md Part A / R8-R12
rather than from the tree's heaps: the victim is the minimum over unlocked resident leaves
(excluding the
protected page) of (policy key = recency, recency, -depth, page id); expiry repeatedly removes
unlocked leaves whose deadline is before `now`; a lock counts on the page and every ancestor;
a new page raises every ancestor's deadline to its own. After every step the tree's
invariants are checked and every page's fields and every counter must equal the model's.
It drives the package's cache, `SegmentCache` (each page's fields read from the segment
holding it), and the tests' per-page reference, `RadixCache`.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, SegmentCache, TTLMode, TTLRule

INF = math.inf


class ModelPage:
    def __init__(self, parent, tokens, depth, now, recency, deadline):
        self.parent = parent
        self.tokens = tokens
        self.depth = depth
        self.recency = recency
        self.last = now
        self.deadline = deadline
        self.locks = 0
        self.hits = 0


class CacheMachine(RuleBasedStateMachine):
    """On the per-page reference: a page is its own handle."""

    def __init__(self):
        super().__init__()
        self.cache: RadixCache | None = None

    # ---------------------------------------------------------------- the cache's side
    def make_cache(self, capacity, ttl):
        return RadixCache(capacity, POLICIES.build("lru"), ttl)

    def handle(self, pid):
        """What the cache's `lock`, `unlock`, `insert(parent, ...)` and `evict(protect=)`
        take to name page `pid` (resident)."""
        return self.cache.get(pid)

    def run_ids(self, run) -> list[int]:
        """The page ids of a run of pages the cache returned (a match's, an insert's)."""
        return [p.page_id for p in run]

    def new_page_tokens(self, tokens: list[int]) -> list[int]:
        """The tokens of an insert's new pages, as drawn (any sizes)."""
        return tokens

    def settle(self) -> None:
        """Before a rule picks a page to take a handle of (nothing on the reference)."""

    def page_fields(self) -> dict[int, tuple]:
        """Each resident page's (parent id, tokens, depth, recency, last access, hits,
        locks, deadline, children) as the cache holds them."""
        fields = {}
        for page in self.cache.pages():
            parent_id = None if page.parent is None else page.parent.page_id
            fields[page.page_id] = (parent_id, page.num_tokens, page.depth, page.recency,
                                    page.last_access_s, page.num_hits, page.lock_count,
                                    page.deadline_s, page.num_children)
        return fields

    # ------------------------------------------------------------------ model helpers
    def children(self, pid):
        return [c for c, p in self.model.items() if p.parent == pid]

    def path(self, pid):
        ids = []
        while pid is not None:
            ids.append(pid)
            pid = self.model[pid].parent
        return ids[::-1]

    def model_remove(self, pid):
        assert not self.children(pid) and self.model[pid].locks == 0
        tokens = self.model.pop(pid).tokens
        self.resident -= tokens
        return tokens

    def model_expire(self, now):
        if self.ttl is None:
            return 0
        freed = 0
        while True:
            dead = [
                pid for pid, p in self.model.items()
                if p.deadline < now and p.locks == 0 and not self.children(pid)
            ]
            if not dead:
                return freed
            for pid in dead:
                self.counts["expired_tokens"] += self.model_remove(pid)
                self.counts["expired_pages"] += 1
                freed += 1

    def pick(self, index, leaf=False):
        ids = sorted(self.model)
        if leaf:
            ids = [pid for pid in ids if not self.children(pid)] or ids
        return ids[index % len(ids)]

    def next_recency(self, bump):
        recency = self.recency
        self.recency += self.recency_step(bump)
        return recency

    def recency_step(self, bump):
        """How far the recency moves after a touch or insert (0: the next one shares it)."""
        return bump

    # ----------------------------------------------------------------------- setup
    @initialize(
        capacity=st.one_of(st.none(), st.integers(0, 24), st.integers(8, 40)),
        ttl=st.one_of(st.none(), st.sampled_from([0.0, 1.0, 3.0, 10.0])),
        mode=st.sampled_from(list(TTLMode)),
    )
    def setup(self, capacity, ttl, mode):
        self.capacity = capacity
        self.ttl = None if ttl is None else TTLRule(ttl, mode)
        self.cache = self.make_cache(capacity, self.ttl)
        self.model: dict[int, ModelPage] = {}
        self.resident = 0
        self.held: list[int] = []
        self.now = 0.0
        self.recency = 0
        self.next_id = 1
        self.counts = dict.fromkeys(
            ["evicted_pages", "evicted_tokens", "expired_pages", "expired_tokens",
             "inserted_pages", "inserted_tokens", "peak_tokens"], 0)

    # ----------------------------------------------------------------------- rules
    @rule(
        where=st.integers(0, 10**6),
        from_root=st.booleans(),
        tokens=st.lists(st.integers(1, 4), min_size=0, max_size=4),
        ttl_s=st.one_of(st.none(), st.sampled_from([0.0, 2.0, 20.0])),
        bump=st.sampled_from([1, 1, 1, 0]),
    )
    def insert(self, where, from_root, tokens, ttl_s, bump):
        """Insert fresh pages below a resident page, or its whole path again from the root
        (reusing the resident pages) followed by fresh pages."""
        tokens = self.new_page_tokens(tokens)
        self.settle()
        if self.model and where % 2:
            anchor = self.pick(where)
        else:
            anchor = None
        reused = self.path(anchor) if anchor is not None and from_root else []
        if not reused and not tokens:
            return
        new_ids = list(range(self.next_id, self.next_id + len(tokens)))
        self.next_id += len(tokens)
        recency = self.next_recency(bump)
        parent_obj = None if anchor is None or from_root else self.handle(anchor)
        ids = reused + new_ids
        all_tokens = [self.model[pid].tokens for pid in reused] + tokens
        placed = self.cache.insert(parent_obj, ids, all_tokens, self.now, recency, ttl_s)

        # model
        parent = None if from_root else anchor
        got = []
        first_new = None
        deadline = INF if self.ttl is None else self.now + (
            self.ttl.ttl_s if ttl_s is None else ttl_s)
        for pid, tok in zip(ids, all_tokens, strict=True):
            if pid in self.model:
                assert self.model[pid].parent == parent
                got.append(pid)
                parent = pid
                continue
            if self.capacity is not None and self.resident + tok > self.capacity:
                break
            depth = 0 if parent is None else self.model[parent].depth + 1
            self.model[pid] = ModelPage(parent, tok, depth, self.now, recency, deadline)
            self.resident += tok
            self.counts["inserted_pages"] += 1
            self.counts["inserted_tokens"] += tok
            first_new = first_new or pid
            got.append(pid)
            parent = pid
        if first_new is not None:
            self.counts["peak_tokens"] = max(self.counts["peak_tokens"], self.resident)
            for pid in self.path(first_new)[:-1]:
                self.model[pid].deadline = max(self.model[pid].deadline, deadline)
        assert self.run_ids(placed) == got

    @precondition(lambda self: self.model)
    @rule(
        where=st.integers(0, 10**6),
        shape=st.sampled_from(["leaf", "leaf", "path", "longer", "shorter", "stranger"]),
        touch=st.sampled_from([True, True, True, False]),
        ttl_s=st.one_of(st.none(), st.sampled_from([1.0, 30.0])),
        bump=st.sampled_from([1, 1, 1, 0]),
    )
    def match_and_touch(self, where, shape, touch, ttl_s, bump):
        ids = self.path(self.pick(where, leaf=shape == "leaf"))
        if shape == "longer":
            ids = ids + [10**9]
        elif shape == "shorter":
            ids = ids[:-1]
        elif shape == "stranger":
            ids = [10**9 + 1] + ids
        result = self.cache.match(ids, self.now)

        self.model_expire(self.now)
        expected, parent = [], None
        for pid in ids:
            page = self.model.get(pid)
            if page is None or page.parent != parent:
                break
            expected.append(pid)
            parent = pid
        assert self.run_ids(result.pages) == expected
        if not touch:
            return
        recency = self.next_recency(bump)
        self.cache.touch(result.pages, self.now, recency, ttl_s)
        sliding = self.ttl is not None and self.ttl.mode is TTLMode.SLIDING
        for pid in expected:
            page = self.model[pid]
            page.last, page.recency = self.now, recency
            page.hits += 1
            if sliding:
                d = self.now + (self.ttl.ttl_s if ttl_s is None else ttl_s)
                page.deadline = max(page.deadline, d)

    @precondition(lambda self: self.model)
    @rule(where=st.integers(0, 10**6))
    def lock(self, where):
        self.settle()
        if not self.model:
            return
        pid = self.pick(where)
        self.cache.lock(self.handle(pid))
        for anc in self.path(pid):
            self.model[anc].locks += 1
        self.held.append(pid)

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 10**6))
    def unlock(self, index):
        self.settle()  # (a held page is locked, so it is still resident)
        pid = self.held.pop(index % len(self.held))
        self.cache.unlock(self.handle(pid), self.now)
        for anc in self.path(pid):
            self.model[anc].locks -= 1
        self.model_expire(self.now)

    @rule(
        extra=st.sampled_from([-1, 1, 1, 1, 2, 3, 5, 10]),
        where=st.integers(0, 10**6),
        protect=st.booleans(),
    )
    def evict(self, extra, where, protect):
        """Ask for `extra` tokens beyond the free space (so most calls evict a page or two)."""
        free = 0 if self.capacity is None else self.capacity - self.resident
        num_tokens = max(0, free + extra)
        if protect:
            self.settle()
        protected = self.pick(where) if protect and self.model else None
        ok = self.cache.evict(
            num_tokens, None if protected is None else self.handle(protected))
        if self.capacity is None:
            expected = True
        else:
            need = num_tokens - (self.capacity - self.resident)
            while need > 0:
                leaves = [
                    pid for pid, p in self.model.items()
                    if p.locks == 0 and pid != protected and not self.children(pid)
                ]
                if not leaves:
                    break
                victim = min(leaves, key=lambda pid: (
                    self.model[pid].recency, self.model[pid].recency,
                    -self.model[pid].depth, pid))
                tokens = self.model_remove(victim)
                need -= tokens
                self.counts["evicted_pages"] += 1
                self.counts["evicted_tokens"] += tokens
            expected = need <= 0
        assert ok is expected

    @rule()
    def expire(self):
        assert self.cache.expire(self.now) == self.model_expire(self.now)

    @rule(dt=st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0, 5.0, 11.0]))
    def advance_time(self, dt):
        self.now += dt

    # ------------------------------------------------------------------ invariants
    @invariant()
    def agrees_with_model(self):
        if self.cache is None:
            return
        cache = self.cache
        cache.check_invariants()
        fields = self.page_fields()
        assert set(fields) == set(self.model)
        for pid, m in self.model.items():
            parent_id, tokens, depth, recency, last, hits, locks, deadline, children = (
                fields[pid])
            assert (parent_id, tokens, depth) == (m.parent, m.tokens, m.depth)
            assert (recency, last, hits) == (m.recency, m.last, m.hits)
            assert locks == m.locks, pid
            assert deadline == m.deadline, pid
            assert children == len(self.children(pid))
        assert cache.resident_tokens == self.resident
        assert cache.locked_tokens == sum(p.tokens for p in self.model.values() if p.locks)
        for name, value in self.counts.items():
            assert getattr(cache.counters, name) == value, name


TestRadixCacheStateMachine = CacheMachine.TestCase
TestRadixCacheStateMachine.settings = settings(
    max_examples=200,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class SegmentCacheMachine(CacheMachine):
    """On the package's cache: a page's handle is the segment ending at it, as a match of
    its path leaves it (splitting the segment there), taken after an expiry the model
    mirrors (a match drops expired pages first; after the expiry every resident page is
    alive, so the match reaches the page). Every touch and insert takes a recency of its
    own, as every caller gives it (a request's position, a replica's count of its calls):
    the segment cache relies on two leaves never sharing one (cache/segment_tree.py)."""

    def make_cache(self, capacity, ttl):
        return SegmentCache(capacity, POLICIES.build("lru"), ttl)

    def new_page_tokens(self, tokens: list[int]) -> list[int]:
        """Full pages of 4 tokens (the segment cache takes one page size per insert, but a
        shorter last page, which a later insert would then continue past)."""
        return [4] * len(tokens)

    def settle(self) -> None:
        assert self.cache.expire(self.now) == self.model_expire(self.now)

    def recency_step(self, bump):
        return 1

    def handle(self, pid):
        path = self.path(pid)
        run = self.cache.match(path, self.now)
        assert len(run.pages) == len(path)
        return run.pages[-1]

    def run_ids(self, run) -> list[int]:
        return [page_id for page_id, _ in run.page_sizes()] if len(run) else []

    def page_fields(self) -> dict[int, tuple]:
        fields = {}
        for page in self.cache.pages():
            node, i = page._node, page._index
            if i:
                parent_id = node.ids[i - 1]
            else:
                parent_id = None if node.parent is None else node.parent.ids[-1]
            last = i == len(node.ids) - 1
            children = len(node.children or ()) if last else 1
            fields[page.page_id] = (parent_id, page.num_tokens, node.depth + i, node.recency,
                                    node.last_access_s, node.num_hits, node.lock_count,
                                    node.deadline_s, children)
        return fields


TestSegmentCacheStateMachine = SegmentCacheMachine.TestCase
TestSegmentCacheStateMachine.settings = TestRadixCacheStateMachine.settings
