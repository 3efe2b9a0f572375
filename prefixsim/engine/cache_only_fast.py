"""Cache-only replay (docs/cache-semantics.md Part A) through a SegmentCache
(cache/segment_tree.py).

The same steps and records as `replay_cache_only` over a RadixCache, with per-segment rather
than per-page Python work: match (splitting the segment where the match ends), refresh the
path, evict leaf pages while the new pages do not fit (the matched path protected), insert the
rest as one segment. `replay_cache_only` hands a SegmentCache here; no tiers, no rules.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cache.tree import ChainConflict
from prefixsim.engine.cache_samples import next_sample, state_row
from prefixsim.engine.records import CacheOnlyRecord, RecordTable, hit_tokens
from prefixsim.errors import InputError
from prefixsim.trace import Request


def replay_segments(
    requests: Iterable[Request],
    cache: SegmentCache,
    on_progress=None,
    progress_every: int = 2000,
    sample_interval_s: float | None = None,
    states: list[tuple] | None = None,
) -> RecordTable:
    """Replay `requests` (in arrival order; any iterable) through `cache`; one record per
    request, kept by column. With
    `sample_interval_s`, the state rows of the timeseries are appended to `states`
    (engine/cache_samples.py; as `replay_cache_only` records them on a RadixCache)."""
    records = RecordTable(CacheOnlyRecord)
    append = records.append
    access = cache.access
    position = -1
    upcoming = 0.0 if sample_interval_s is not None else math.inf
    for position, request in enumerate(requests):
        now = request.arrival_s
        if now > upcoming:  # the state so far holds from `upcoming` until `now`
            states.append(state_row(upcoming, cache))
            upcoming = next_sample(now, sample_interval_s)
        page_ids = request.page_ids
        length = request.input_tokens
        size = request.page_size_tokens
        try:
            matched = access(page_ids, now, position, size, length)
        except ChainConflict as exc:
            raise InputError(
                f"request {request.request_id}: {exc} (hash ids are not chained)",
                field="hash_ids",
            ) from None
        cached = hit_tokens(request, matched)  # Part A rule 1: L - 1 at most
        append((request.request_id, request.session_id, "completed", now, length,
                request.output_tokens, cached, 0, 0, 0))
        if on_progress is not None and (position + 1) % progress_every == 0:
            on_progress(progress_every)
    if on_progress is not None:
        on_progress((position + 1) % progress_every)
    if sample_interval_s is not None:
        states.append(state_row(upcoming, cache))
    return records
