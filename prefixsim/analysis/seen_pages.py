"""The unbounded cache without a TTL, in bounded memory: a request hits exactly its leading
pages whose chained ids were seen before, so the bound needs only the set of ids seen, not a
cache.

`SeenPages` keeps that set as one sorted int64 array (8 bytes per distinct page, where a
Python set takes about 70) and answers a chunk of requests at once with numpy: a page
counts as seen when it is in the array or appears in an earlier request of the same chunk;
each request's hit is its leading run of seen pages, capped at L - 1 as Part A caps hits
(docs/cache-semantics.md); then the chunk's ids join the array (one merge per chunk). Same
answers as replaying an unbounded cache, request by request (tested). Not here: TTLs and
request classes (those need the cache replay).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

import numpy as np

from prefixsim.trace import Request


class SeenPages:
    """The sorted set of page ids seen so far, fed chunk by chunk."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, dtype=np.int64)

    def hit_tokens(self, chunk: Sequence[Request]) -> np.ndarray:
        """Hit tokens of each request of `chunk` (in order), then remember its pages."""
        if not chunk:
            return np.zeros(0, dtype=np.int64)
        counts = np.fromiter((len(r.page_ids) for r in chunk), dtype=np.int64,
                             count=len(chunk))
        ids = np.fromiter(chain.from_iterable(r.page_ids for r in chunk), dtype=np.int64,
                          count=int(counts.sum()))
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        owner = np.repeat(np.arange(len(chunk)), counts)
        known = _member(self.ids, ids)
        # within the chunk: an id counts from the request after the one that first names it
        unique, first = np.unique(ids, return_index=True)
        first_owner = owner[first][np.searchsorted(unique, ids)]
        seen = known | (first_owner < owner)
        # each request's leading run of seen pages: its first unseen position, or its length
        local = np.arange(len(ids)) - starts[owner]
        unseen_at = np.where(seen, np.iinfo(np.int64).max, local)
        matched = np.full(len(chunk), 0, dtype=np.int64)
        nonempty = counts > 0
        if nonempty.any():
            firsts = np.minimum.reduceat(unseen_at, starts[nonempty])
            matched[nonempty] = np.minimum(firsts, counts[nonempty])
        new = unique[~_member(self.ids, unique)]  # two sorted runs: a stable sort merges
        self.ids = np.sort(np.concatenate([self.ids, new]), kind="stable")
        return _capped_tokens(chunk, matched, counts)


def _member(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    if len(sorted_ids) == 0:
        return np.zeros(len(ids), dtype=bool)
    at = np.searchsorted(sorted_ids, ids)
    at[at == len(sorted_ids)] = 0
    return sorted_ids[at] == ids


def _capped_tokens(chunk: Sequence[Request], matched: np.ndarray,
                   counts: np.ndarray) -> np.ndarray:
    """Request.prefix_tokens(matched) capped at L - 1 (engine/records.py's hit_tokens)."""
    inputs = np.fromiter((r.input_tokens for r in chunk), dtype=np.int64, count=len(chunk))
    sizes = np.fromiter((r.page_size_tokens for r in chunk), dtype=np.int64, count=len(chunk))
    prefix = np.where(matched >= counts, inputs, matched * sizes)
    prefix[matched <= 0] = 0
    return np.minimum(prefix, inputs - 1)


def unbounded_hit_tokens(chunks: Iterable[Sequence[Request]]) -> tuple[int, int]:
    """(hit tokens, prompt tokens) of an unbounded cache without a TTL over `chunks`."""
    seen = SeenPages()
    hits = query = 0
    for chunk in chunks:
        hits += int(seen.hit_tokens(chunk).sum())
        query += sum(r.input_tokens for r in chunk)
    return hits, query
