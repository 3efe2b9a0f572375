"""Cache-only replay (cache-spec Part A) through a SegmentCache (cache/segment_tree.py).

The same steps and records as `replay_cache_only` over a RadixCache, with per-segment rather
than per-page Python work: match (splitting the segment where the match ends), refresh the
path, evict leaf pages while the new pages do not fit (the matched path protected), insert the
rest as one segment. `replay_cache_only` hands a SegmentCache here; no tiers, no rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.cache.tree import ChainConflict
from prefixsim.engine.records import CacheOnlyRecord
from prefixsim.errors import InputError
from prefixsim.trace import Request


def replay_segments(
    requests: Sequence[Request],
    cache: SegmentCache,
    on_progress=None,
    progress_every: int = 2000,
) -> list[CacheOnlyRecord]:
    """Replay `requests` (in arrival order) through `cache`; one record per request."""
    records: list[CacheOnlyRecord] = []
    append = records.append
    match, touch, evict, insert = cache.match, cache.touch, cache.evict, cache.insert
    capacity = cache.capacity_tokens
    for position, request in enumerate(requests):
        now = request.arrival_s
        page_ids = request.page_ids
        length = request.input_tokens
        path, matched = match(page_ids, now)
        if path:
            touch(path, now, position)
        num_pages = len(page_ids)
        size = request.page_size_tokens
        if matched < num_pages:
            last = length - size * (num_pages - 1)
            tip = path[-1] if path else None
            new_tokens = size * (num_pages - 1 - matched) + last
            if capacity is not None and new_tokens > capacity - cache.resident_tokens:
                evict(new_tokens, tip)
            try:
                insert(tip, page_ids, matched, size, last, now, position)
            except ChainConflict as exc:
                raise InputError(
                    f"request {request.request_id}: {exc} (hash ids are not chained)",
                    field="hash_ids",
                ) from None
            cached = matched * size if matched else 0
            if cached >= length:
                cached = length - 1
        else:
            cached = length - 1 if matched else 0  # Part A rule 1: L - 1 at most
        append(CacheOnlyRecord(request.request_id, request.session_id, "completed", now,
                               length, request.output_tokens, cached))
        if on_progress is not None and (position + 1) % progress_every == 0:
            on_progress(progress_every)
    if on_progress is not None:
        on_progress(len(requests) % progress_every)
    return records
