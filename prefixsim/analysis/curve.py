"""Capacity curves: token hit rate against cache capacity, in one pass for LRU.

Exact LRU (`lru_curve`). Under Part A, LRU victim order is one total order over all pages
ever seen: (recency, -depth, page id), because a hit refreshes a whole root-to-leaf path, so
a parent is never older than its child and the least recent page is always a leaf. The
resident set at capacity C is therefore the longest top segment of that "stack" whose
tokens fit in C (eviction takes pages off the bottom one at a time; a chain too large to
fit is inserted as far as it fits, which is again a top segment). A page hits at C iff its
stack distance D (tokens of the pages above it, plus its own) is <= C, and D grows along a
prompt, so the hit count is the number of its pages with D <= C, capped at L - 1 as usual.

D is computed per request from groups: the pages whose last access was request q form the
deepest part of q's path, so D = (tokens of all groups newer than q) + (this prompt's
tokens from the group's first page to this one). A Fenwick tree over request indices holds
group sizes: a few operations per (request, group) run instead of per page.

Exact when (checked, reported as `exact`): no TTL, and every page id always has the same
token count (Part A charges a re-inserted page the size the inserting request gives it; if
one id is the partial last page of one prompt and a full page of another, the one-pass
figure uses the size from the id's first appearance and can differ from a replay).

Sampled (`lru_curve_sampled`, SHARDS, Waldspurger et al. FAST'15): keep the page ids whose
hash falls under `rate`, compute their stack distances over the sample only and scale them
by the rate the hash actually gave; misses are estimated from the sample and hits are the
query less them, so hot shared pages (always hits) do not swing the estimate. Approximate
by design; its docstring says when it is reliable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from prefixsim.cache import build_policy, replay_cache
from prefixsim.engine import hit_tokens, replay_cache_only
from prefixsim.errors import InputError
from prefixsim.trace import Request
from prefixsim.trace.chains import requests_chained

INF = float("inf")


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """Hit figures of one capacity."""

    capacity_tokens: int
    hit_tokens: int
    query_tokens: int

    @property
    def token_hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0


@dataclass(frozen=True)
class StackDistances:
    """Per page access, in replay order: its LRU stack distance in tokens (inf = first use)."""

    distances: np.ndarray  # float64, one per page of every request, request by request
    starts: np.ndarray  # index of each request's first page in `distances`
    num_pages: np.ndarray
    input_tokens: np.ndarray
    page_size_tokens: np.ndarray
    exact: bool  # every page id had one token count


class _Fenwick:
    """Prefix sums over 0..n-1 with point updates."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.tree = [0] * (size + 1)

    def add(self, index: int, delta: int) -> None:
        index += 1
        tree, size = self.tree, self.size
        while index <= size:
            tree[index] += delta
            index += index & -index

    def prefix(self, index: int) -> int:
        """Sum of entries 0..index (inclusive)."""
        index += 1
        tree = self.tree
        total = 0
        while index > 0:
            total += tree[index]
            index -= index & -index
        return total


def stack_distances(requests: Sequence[Request],
                    on_progress: Callable[[int], None] | None = None) -> StackDistances:
    """One pass over the trace: every page access's LRU stack distance (module docstring);
    `on_progress(n)` is told of every n requests done."""
    num_requests = len(requests)
    size_of: dict[int, int] = {}
    last_request: dict[int, int] = {}
    exact = True
    fenwick = _Fenwick(max(num_requests, 1))
    total = 0
    run_base: list[float] = []
    run_length: list[int] = []
    all_sizes: list[int] = []
    num_pages = np.zeros(num_requests, dtype=np.int64)
    for r, request in enumerate(requests):
        if on_progress is not None and r and r % 10000 == 0:
            on_progress(10000)
        tokens = request.page_tokens()
        num_pages[r] = len(tokens)
        sizes = []
        for page_id, size in zip(request.page_ids, tokens, strict=True):
            known = size_of.setdefault(page_id, size)
            if known != size:
                exact = False
            sizes.append(known)
        all_sizes.extend(sizes)
        # runs of equal last request, shallow pages first (their groups are newer)
        cum = 0
        i = 0
        n = len(sizes)
        get = last_request.get
        removed = 0
        while i < n:
            q = get(request.page_ids[i])  # None: first use
            start_cum = cum
            j = i
            while j < n and get(request.page_ids[j]) == q:
                cum += sizes[j]
                j += 1
            if q is None:
                run_base.append(INF)
            else:
                newer = total - fenwick.prefix(q)
                run_base.append(newer - start_cum)
                fenwick.add(q, start_cum - cum)
                removed += cum - start_cum
            run_length.append(j - i)
            i = j
        for page_id in request.page_ids:
            last_request[page_id] = r
        fenwick.add(r, cum)
        total += cum - removed
    sizes_array = np.asarray(all_sizes, dtype=np.int64)
    starts = np.zeros(num_requests, dtype=np.int64)
    if num_requests:
        starts[1:] = np.cumsum(num_pages)[:-1]
    cum_in_request = np.cumsum(sizes_array) - np.repeat(
        np.cumsum(sizes_array)[starts - 1] * (starts > 0) if len(sizes_array) else starts,
        num_pages,
    )
    base = np.repeat(np.asarray(run_base, dtype=np.float64), run_length)
    return StackDistances(
        distances=base + cum_in_request,
        starts=starts,
        num_pages=num_pages,
        input_tokens=np.array([r.input_tokens for r in requests], dtype=np.int64),
        page_size_tokens=np.array([r.page_size_tokens for r in requests], dtype=np.int64),
        exact=exact,
    )


def curve_from_distances(sd: StackDistances, capacities: Sequence[int]) -> list[CurvePoint]:
    """Part A hit tokens at each capacity from precomputed stack distances."""
    query = int(sd.input_tokens.sum())
    nonempty = sd.num_pages > 0
    starts = sd.starts[nonempty]
    n = sd.num_pages[nonempty]
    length = sd.input_tokens[nonempty]
    page = sd.page_size_tokens[nonempty]
    points = []
    for capacity in capacities:
        hits = (sd.distances <= capacity).astype(np.int64)
        k = np.add.reduceat(hits, starts) if len(starts) else np.zeros(0, dtype=np.int64)
        tokens = np.where(k >= n, length, k * page)
        tokens = np.where(k > 0, np.minimum(tokens, length - 1), 0)
        points.append(CurvePoint(int(capacity), int(tokens.sum()), query))
    return points


def lru_curve(requests: Sequence[Request], capacities: Sequence[int]) -> list[CurvePoint]:
    """The exact LRU curve in one pass (see the module docstring for when it is exact)."""
    return curve_from_distances(stack_distances(requests), capacities)


def replay_curve(
    requests: Sequence[Request], capacities: Sequence[int], policy: str = "lru",
    on_progress: Callable[[int], None] | None = None,
) -> list[CurvePoint]:
    """The curve by one cache-only replay per capacity (any policy; the reference);
    `on_progress(n)` is told of every n requests replayed, during each replay."""
    query = sum(r.input_tokens for r in requests)
    chained = requests_chained(requests)  # then no resident-id set (cache/segment_tree.py)
    points = []
    for capacity in capacities:
        cache = replay_cache(int(capacity), build_policy(policy, requests), chained=chained)
        records = replay_cache_only(requests, cache, on_progress).records
        points.append(CurvePoint(int(capacity), sum(r.cached_tokens for r in records), query))
    return points


_MASK = 0xFFFFFFFFFFFFFFFF
_GOLDEN = 0x9E3779B97F4A7C15


def _hash64(page_id: int, seed: int = 0) -> int:
    """splitmix64 of the id (plus a seeded offset): uniform over 0..2**64-1 for any ids,
    including small consecutive ones and id 0 (a bare multiply would map 0 to 0, so id 0,
    the shared first page of every request in many traces, would be sampled at any rate)."""
    z = (page_id + (seed + 1) * _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _sampled(page_id: int, threshold: int, seed: int = 0) -> bool:
    """Spatial sampling: keep the ids whose hash falls under `threshold`."""
    return _hash64(page_id, seed) < threshold


def lru_curve_sampled(
    requests: Sequence[Request], capacities: Sequence[int], rate: float, seed: int = 0
) -> list[CurvePoint]:
    """A SHARDS estimate of the LRU curve from the page ids sampled at `rate` (0 < rate <= 1).

    Spatial sampling (Waldspurger et al., FAST'15) of page ids by a seeded hash: the sampled
    pages' stack distances are taken over the sample only and scaled up by the sampling
    rate (equivalently, capacity scaled down by it), and a sampled page access hits at
    capacity C iff its scaled distance is <= C. Per page this is the exact Part A rule
    (distances grow along a prompt, so the pages with D <= C are the hit prefix); only the
    distances are estimated. Two adjustments for prefix traces:

    - the rate used for scaling is the one the hash actually gave (sampled tokens of
      distinct ids over all distinct ids' tokens; SHARDS-adj's correction of the sample
      size), not the nominal `rate`;
    - the sample estimates *misses* (scaled by that rate) and hits are the trace's known
      query tokens less them. A few hot shared pages (a system prompt that begins every
      request: id 0 in Mooncake and the generated presets) carry much of the traffic and
      nearly all of it hits; estimating hits directly swings by their whole share with
      whether one of them is sampled (5% sampling read 0.47 for a true 0.045), while each
      is one distinct id, so it barely moves the miss estimate.

    Points carry estimated hit tokens of the whole trace and its exact query tokens; at rate
    1 this is the exact curve (`lru_curve`, when that is exact).

    When it is reliable (bench/capacity_curve.py prints the error against the exact curve;
    mean absolute error of the hit rate over 12 log-spaced capacities from total/1000 to
    total): at rate 0.1 within 0.005 on Mooncake's conversation trace and the chat, agent
    and rag presets (5,000 requests); at rate 0.01 within about 0.03, with larger errors
    (up to 0.1) at the smallest capacities of the agent preset. The sample should hold a
    few thousand distinct ids (rate * distinct ids >= ~2,000) and the capacities of
    interest should be well above page size / rate, where one sampled page is a step.
    """
    if not 0 < rate <= 1:
        raise ValueError(f"sample rate must be in (0, 1], got {rate}")
    threshold = int(rate * 2**64)
    accesses: list[tuple[int, int, int, int]] = []  # (request, page_id, tokens, counted)
    is_sampled: dict[int, bool] = {}
    total_counted = 0  # every page's counted tokens (sampled or not): sum of (L - 1)
    distinct_tokens = sampled_distinct_tokens = 0  # tokens of distinct ids: all, sampled
    for r, request in enumerate(requests):
        tokens = request.page_tokens()
        last = len(tokens) - 1
        if last >= 0:
            total_counted += sum(tokens) - 1
        for depth in range(last, -1, -1):  # deeper pages first: shallower = more recent
            page_id = request.page_ids[depth]
            keep = is_sampled.get(page_id)
            if keep is None:
                keep = is_sampled[page_id] = _sampled(page_id, threshold, seed)
                distinct_tokens += tokens[depth]
                if keep:
                    sampled_distinct_tokens += tokens[depth]
            if keep:
                counted = tokens[depth] - 1 if depth == last else tokens[depth]
                accesses.append((r, page_id, tokens[depth], counted))
    fenwick = _Fenwick(max(len(accesses), 1))
    position: dict[int, int] = {}
    size_of: dict[int, int] = {}
    distances = np.full(len(accesses), INF)
    counted = np.array([a[3] for a in accesses], dtype=np.int64)
    total = 0
    i = 0
    while i < len(accesses):
        j = i
        while j < len(accesses) and accesses[j][0] == accesses[i][0]:
            j += 1
        for k in range(i, j):  # distances before this request's updates
            page_id = accesses[k][1]
            at = position.get(page_id)
            if at is not None:
                distances[k] = total - fenwick.prefix(at - 1) if at > 0 else total
        for k in range(i, j):
            _, page_id, tokens, _ = accesses[k]
            size = size_of.setdefault(page_id, tokens)
            at = position.get(page_id)
            if at is not None:
                fenwick.add(at, -size)
                total -= size
            position[page_id] = k
            fenwick.add(k, size)
            total += size
        i = j
    query = sum(r.input_tokens for r in requests)
    if sampled_distinct_tokens == 0:
        raise InputError(
            f"no page id was sampled at rate {rate} (of {len(is_sampled):,} distinct ids); "
            "raise --sample-rate so rate x distinct ids is in the thousands",
            field="--sample-rate")
    # the rate the hash actually gave (tokens of distinct ids), 1 when every id is kept
    actual = sampled_distinct_tokens / distinct_tokens
    scaled = distances / actual
    points = []
    for capacity in capacities:
        misses = counted[~(scaled <= capacity)].sum() / actual
        hit = min(max(total_counted - misses, 0.0), float(total_counted))
        points.append(CurvePoint(int(capacity), int(round(hit)), query))
    return points


__all__ = [
    "CurvePoint",
    "StackDistances",
    "curve_from_distances",
    "hit_tokens",
    "lru_curve",
    "lru_curve_sampled",
    "replay_curve",
    "stack_distances",
]
