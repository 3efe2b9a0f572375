"""Cache-only replay: docs/cache-semantics.md Part A, exactly, with no timing model.

Requests are processed one at a time in arrival order; for each, at `now` = its arrival:
match the longest alive resident prefix (hits capped at L - 1), refresh the matched path,
evict least-valuable leaves while the new pages do not fit (the matched path protected),
then insert the remaining pages in order, as many as fit. Scheduling, batching and time
costs belong to the timed engine, not here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prefixsim.cache import CacheCounters, ChainConflict
from prefixsim.cache.classes import DEFAULT_RULE, CacheRules
from prefixsim.cache.pool import SharedPool, page_sizes
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cache.tiers import LowerHit, TierStack
from prefixsim.engine.cache_only_fast import replay_segments
from prefixsim.engine.cache_samples import end_of_replay, gap_rows
from prefixsim.engine.records import CacheOnlyRecord, RecordTable, hit_tokens
from prefixsim.errors import InputError
from prefixsim.trace import Request

ProgressCallback = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class CacheOnlyResult:
    """Per-request records, the cache's counters after the replay and, when sampled, the
    cache's state rows (engine/cache_samples.py)."""

    records: RecordTable  # of CacheOnlyRecord
    counters: CacheCounters
    states: list[tuple] | None = None


def replay_cache_only(
    requests: Iterable[Request],
    cache: SegmentCache,
    on_progress: ProgressCallback | None = None,
    progress_every: int = 2000,
    tiers: TierStack | None = None,
    rules: CacheRules | None = None,
    sample_interval_s: float | None = None,
    pool: SharedPool | None = None,
    records: RecordTable | None = None,
) -> CacheOnlyResult:
    """Replay `requests` (already in arrival order) through `cache`.

    With `tiers` (lower tiers under `cache`, R15), the match continues below HBM: pages
    found there are hits of their tier, loaded back and inserted into HBM like new pages.
    The whole run found below counts as hits of its tiers even when HBM keeps only part of
    it (as many pages as fit, like any insert): the request read those tokens from the tier
    rather than recomputing them. The pages HBM could not keep go back to the tier they came
    from, so a page is never lost from every tier by being loaded.
    With `rules` (cache/classes.py), each request's class sets its TTL and priority, and a
    prompt below the minimum cacheable length bypasses the cache.
    With `pool` (a shared KV pool, cache/pool.py, R18) the match continues in the pool after
    HBM: the pool's run beyond HBM's is a hit of the pool, inserted into HBM like new pages;
    HBM's evictions are written to the pool (or, write-through, every insert).
    Replayed by engine/cache_only_fast.py, or with `rules`, `tiers` or `pool` by the loop
    here (the cache's per-request steps: match, touch, insert, evict, expire; the loop
    also drives the test suite's per-page reference cache, which answers the same calls).
    With `sample_interval_s`, the result's `states` are the rows the timeseries is sampled
    from (engine/cache_samples.py): one per arrival that crosses a multiple of the interval.
    `records` (empty) is the table the records go in: a streaming caller drains it between
    chunks (RecordTable.drain), so the result's table holds the records not yet drained.
    """
    # Pages only point at their parents, so the loop makes no reference cycles: a caller
    # runs it with the cyclic collector paused (engine/gc_pause.py), as the pipeline does.
    states = None if sample_interval_s is None else []
    if isinstance(cache, SegmentCache) and rules is None and tiers is None and pool is None:
        records = replay_segments(requests, cache, on_progress, progress_every,
                                  sample_interval_s, states, records)
        return CacheOnlyResult(records=records, counters=cache.counters, states=states)
    return _replay(requests, cache, on_progress, progress_every, tiers, rules,
                   sample_interval_s, states, pool,
                   RecordTable(CacheOnlyRecord) if records is None else records)


def _replay(requests, cache, on_progress, progress_every, tiers, rules, interval,
            states, pool, records) -> CacheOnlyResult:
    append = records.append
    upcoming = 0.0 if interval is not None else math.inf
    clock = [0.0]
    if pool is not None:
        pool.clock = lambda: clock[0]
        if not pool.spec.write_through:
            cache.on_demote = pool.write_evicted
    position = -1
    for position, request in enumerate(requests):
        now = clock[0] = request.arrival_s
        if now > upcoming:  # the state so far holds from `upcoming` until `now`, TTL apart
            upcoming = gap_rows(cache, states, upcoming, now, interval)
        rule = DEFAULT_RULE if rules is None else rules.for_request(request)
        page_ids = request.page_ids if rule.cacheable else ()
        match = cache.match(page_ids, now)
        matched = match.pages
        num_matched = len(matched)
        cache.touch(matched, now, position, rule.ttl_s, rule.priority)
        # taken before the evictions below, whose demotions could push these pages out
        lower = tiers.take_run(page_ids[num_matched:]) if tiers is not None else None
        pooled = [] if pool is None else pool.run_after(page_ids, num_matched, now)
        if pooled:
            pool.read(pooled, sum([tokens for _, tokens in page_sizes(pooled)]), now)
        if num_matched < len(page_ids):
            tip = matched[-1] if matched else None
            new_tokens = request.page_tokens()[num_matched:]
            try:  # a conflict in HBM, or in the pool (an eviction's write-back, a write)
                cache.evict(sum(new_tokens), protect=tip)
                placed = cache.insert(tip, page_ids[num_matched:], new_tokens, now, position,
                                      rule.ttl_s, rule.priority)
                if lower and len(placed) < lower.num_pages:  # HBM kept only part of the run
                    tiers.put_back(lower, len(placed))
                if pool is not None and (pool.spec.write_through
                                         or len(placed) < len(new_tokens)):
                    # write-through writes every prefilled page; write-back, those HBM could
                    # not keep (as if inserted and evicted at once)
                    pool.write(page_ids, request.page_tokens())
            except ChainConflict as exc:
                raise InputError(
                    f"request {request.request_id}: {exc} (hash ids are not chained)",
                    field="hash_ids",
                ) from None
        append(_record(request, num_matched, lower, len(pooled)))
        if on_progress is not None and (position + 1) % progress_every == 0:
            on_progress(progress_every)
    end_of_replay(cache, states, upcoming, on_progress, (position + 1) % progress_every)
    return CacheOnlyResult(records=records, counters=cache.counters, states=states)


def lower_tier_tokens(request: Request, num_hbm_pages: int, lower: LowerHit) -> tuple[int, int]:
    """(host, disk) hit tokens of the pages found below HBM, counted with the request's page
    sizes (as `hit_tokens` counts), the L - 1 cap trimming the deepest page."""
    by_tier = [0, 0]
    before = hit_tokens(request, num_hbm_pages)
    for offset, tier in enumerate(lower.tiers, start=num_hbm_pages + 1):
        upto = hit_tokens(request, offset)
        by_tier[min(tier, 1)] += upto - before
        before = upto
    return by_tier[0], by_tier[1]


def _record(request: Request, num_hbm_pages: int, lower: LowerHit | None,
            num_pool_pages: int) -> CacheOnlyRecord:
    """A request's record: its hits in HBM, then below it (tiers or the pool)."""
    host = disk = pool = 0
    total = hit_tokens(request, num_hbm_pages)
    if lower:
        host, disk = lower_tier_tokens(request, num_hbm_pages, lower)
        total = hit_tokens(request, num_hbm_pages + lower.num_pages)
    elif num_pool_pages:
        pool = hit_tokens(request, num_hbm_pages + num_pool_pages) - total
        total += pool
    return CacheOnlyRecord(
        request_id=request.request_id,
        session_id=request.session_id,
        status="completed",
        arrival_s=request.arrival_s,
        input_tokens=request.input_tokens,
        output_tokens=request.output_tokens,
        cached_tokens=total,
        cached_tokens_host=host,
        cached_tokens_disk=disk,
        cached_tokens_pool=pool,
    )
