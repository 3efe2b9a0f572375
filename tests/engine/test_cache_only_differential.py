"""Differential test: the cache-only replay against a naive reference of docs/cache-semantics.md
Part A.

The reference keeps resident pages in a plain list and does every step with linear scans,
straight from the spec's wording: drop dead pages, match the longest chain, sum its tokens
(capped at L - 1), refresh the path, evict the least-recently-used leaf outside the matched
path one page at a time, insert the rest in order while it fits. Traces are random trees of
prefixes (chained ids, partial last pages, many equal timestamps) from hypothesis; capacities
are unbounded or tiny; TTLs sliding or fixed.
"""

from __future__ import annotations

from fakes import draw_arrival_and_base, lru
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache import TTLMode, TTLRule
from prefixsim.engine import replay_cache_only
from prefixsim.trace import Request


@st.composite
def chained_traces(draw):
    """Requests over a random tree of prefixes: each prompt takes a prefix of an earlier
    prompt (or nothing) and appends fresh pages. Only a prompt's last page may be partial,
    and a partial page is never extended (its id names a prefix that ends there)."""
    page = draw(st.sampled_from([1, 2, 4]))
    num_requests = draw(st.integers(1, 30))
    prompts: list[tuple[int, ...]] = []
    page_tokens: dict[int, int] = {}
    next_id, now = 1, 0.0
    requests = []
    for position in range(num_requests):
        now, base = draw_arrival_and_base(draw, now, prompts)
        num_new = draw(st.integers(0, 3))
        if num_new and base and page_tokens[base[-1]] < page:
            base = base[:-1]
        if not base:
            num_new = max(num_new, 1)
        new = []
        for k in range(num_new):
            last = k == num_new - 1
            page_tokens[next_id] = draw(st.integers(1, page)) if last else page
            new.append(next_id)
            next_id += 1
        ids = base + tuple(new)
        prompts.append(ids)
        length = (len(ids) - 1) * page + page_tokens[ids[-1]]
        requests.append(Request(position, now, length, 1, ids, page))
    return requests


def reference_replay(requests, capacity, ttl_s, mode):
    """Part A by the letter, O(n) per lookup. Returns (hits, evictions, expirations, ids)."""
    pages: list[dict] = []  # id, parent, tokens, recency, deadline
    hits, evictions, expirations = [], 0, 0

    def held():
        return sum(p["tokens"] for p in pages)

    def has_child(p):
        return any(c["parent"] == p["id"] for c in pages)

    for position, request in enumerate(requests):
        now = request.arrival_s
        if ttl_s is not None:  # alive through deadline, gone after
            dead = [p for p in pages if p["deadline"] < now]
            expirations += len(dead)
            pages = [p for p in pages if p["deadline"] >= now]
        matched, parent = [], None
        for page_id in request.page_ids:
            found = [p for p in pages if p["id"] == page_id and p["parent"] == parent]
            if not found:
                break
            matched.append(found[0])
            parent = page_id
        hit = sum(p["tokens"] for p in matched)
        hits.append(min(hit, request.input_tokens - 1) if matched else 0)
        for p in matched:
            p["recency"] = position
            if ttl_s is not None and mode is TTLMode.SLIDING:
                p["deadline"] = now + ttl_s
        tip = matched[-1] if matched else None
        size = request.page_size_tokens
        new_ids = request.page_ids[len(matched):]
        new_tokens = [size] * len(new_ids)
        if new_ids:
            new_tokens[-1] = request.input_tokens - size * (request.num_pages - 1)
        if capacity is not None:
            need = sum(new_tokens) - (capacity - held())
            while need > 0:
                leaves = [p for p in pages if p is not tip and not has_child(p)]
                if not leaves:
                    break
                oldest = min(p["recency"] for p in leaves)
                (victim,) = [p for p in leaves if p["recency"] == oldest]  # no ties (Part A 3)
                pages.remove(victim)
                evictions += 1
                need -= victim["tokens"]
        deadline = float("inf") if ttl_s is None else now + ttl_s
        for page_id, tokens in zip(new_ids, new_tokens, strict=True):
            if capacity is not None and held() + tokens > capacity:
                break
            pages.append({"id": page_id, "parent": parent, "tokens": tokens,
                          "recency": position, "deadline": deadline})
            # a parent lives as long as its newest child (R12, Part C 11); a no-op when
            # sliding, where the matched path was just refreshed to the same deadline
            node = parent
            while node is not None:
                ancestor = next(p for p in pages if p["id"] == node)
                ancestor["deadline"] = max(ancestor["deadline"], deadline)
                node = ancestor["parent"]
            parent = page_id
    return hits, evictions, expirations, {p["id"] for p in pages}


def prefixsim_replay(requests, capacity, ttl_s, mode):
    ttl = None if ttl_s is None else TTLRule(ttl_s, mode)
    cache = lru(capacity, ttl)
    result = replay_cache_only(requests, cache)
    cache.check_invariants()
    hits = [r.cached_tokens for r in result.records]
    counters = result.counters
    ids = {p.page_id for p in cache.pages()}
    return hits, counters.evicted_pages, counters.expired_pages, ids


@settings(max_examples=400, deadline=None)
@given(
    requests=chained_traces(),
    capacity=st.one_of(st.none(), st.integers(0, 40)),
    ttl_s=st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0])),
    mode=st.sampled_from(list(TTLMode)),
)
def test_replay_matches_naive_reference(requests, capacity, ttl_s, mode):
    assert prefixsim_replay(requests, capacity, ttl_s, mode) == reference_replay(
        requests, capacity, ttl_s, mode
    )


@settings(max_examples=100, deadline=None)
@given(requests=chained_traces(), capacity=st.integers(0, 40))
def test_bounded_cache_hits_never_exceed_unbounded(requests, capacity):
    """An unbounded cache without TTL holds every page any earlier request named, a superset
    of what a bounded cache holds, so no request hits more in the bounded one."""
    bounded = prefixsim_replay(requests, capacity, None, TTLMode.SLIDING)[0]
    unbounded = prefixsim_replay(requests, None, None, TTLMode.SLIDING)[0]
    assert all(b <= u for b, u in zip(bounded, unbounded, strict=True))
