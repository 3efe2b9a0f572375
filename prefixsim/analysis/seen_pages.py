"""The unbounded cache without a TTL, in bounded memory: a request hits exactly its leading
pages whose chained ids were seen before, so the bound needs only the set of ids seen, not a
cache.

`SeenPages` keeps that set as a table of each id's first request (small ids) or one sorted
int64 array (8 bytes per distinct page, where a Python set takes about 70) and answers a
chunk of requests at once with numpy: a page counts as seen when an earlier request named it;
each request's hit is its leading run of seen pages, capped at L - 1 as Part A caps hits
(docs/cache-semantics.md); then the chunk's ids join the array (one merge per chunk). Same
answers as replaying an unbounded cache, request by request (tested). Not here: TTLs and
request classes (those need the cache replay).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

import numpy as np

from prefixsim.engine.records import hit_token_array
from prefixsim.trace import Request
from prefixsim.trace.columns import RequestColumns

UNSET = np.iinfo(np.int32).max  # table slot of an id no request has named yet
TABLE_IDS = 1 << 28  # ids below this (and >= 0) go in a direct int32 table: 1 GiB at most
TABLE_REQUESTS = UNSET - 1  # requests a table can number (then the sorted array)


class SeenPages:
    """The page ids seen so far, fed chunk by chunk.

    Small non-negative ids (traces number their pages densely) are kept in a direct table,
    first[id] = the first request that named it, filled with one numpy minimum.at a chunk
    (4 bytes per id value, no sort); the first id out of that range moves them to the
    sorted array (8 bytes per distinct id, a merge per chunk)."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, dtype=np.int64)  # sorted mode
        self.first: np.ndarray | None = np.zeros(0, dtype=np.int32)  # table mode
        self.fed = 0  # requests fed so far

    def __len__(self) -> int:
        """Distinct ids seen."""
        if self.first is not None:
            return int(np.count_nonzero(self.first != UNSET))
        return len(self.ids)

    def hit_tokens(self, chunk: Sequence[Request]) -> np.ndarray:
        """Hit tokens of each request of `chunk` (in order), then remember its pages."""
        counts = np.fromiter((len(r.page_ids) for r in chunk), dtype=np.int64,
                             count=len(chunk))
        ids = np.fromiter(chain.from_iterable(r.page_ids for r in chunk), dtype=np.int64,
                          count=int(counts.sum()))
        inputs = np.fromiter((r.input_tokens for r in chunk), dtype=np.int64, count=len(chunk))
        sizes = np.fromiter((r.page_size_tokens for r in chunk), dtype=np.int64,
                            count=len(chunk))
        return self.hit_arrays(ids, counts, inputs, sizes)

    def hit_arrays(self, ids: np.ndarray, counts: np.ndarray, inputs: np.ndarray,
                   sizes: np.ndarray) -> np.ndarray:
        """`hit_tokens` of a chunk given as arrays: its page ids in order, pages, prompt
        tokens and page size of each request."""
        if len(counts) == 0:
            return np.zeros(0, dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        if self.first is not None and len(ids) and (
                int(ids.min()) < 0 or int(ids.max()) >= TABLE_IDS
                or self.fed + len(counts) > TABLE_REQUESTS):
            self.ids = np.flatnonzero(self.first != UNSET).astype(np.int64)
            self.first = None
        if self.first is not None:
            seen = self._seen_table(ids, owner)
        else:
            seen = self._seen_sorted(ids, owner)
        self.fed += len(counts)
        # each request's leading run of seen pages: its first unseen position, or its length
        local = np.arange(len(ids)) - starts[owner]
        unseen_at = np.where(seen, np.iinfo(np.int64).max, local)
        matched = np.full(len(counts), 0, dtype=np.int64)
        nonempty = counts > 0
        if nonempty.any():
            firsts = np.minimum.reduceat(unseen_at, starts[nonempty])
            matched[nonempty] = np.minimum(firsts, counts[nonempty])
        return hit_token_array(inputs, sizes, matched, counts)

    def _seen_table(self, ids: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """Whether an earlier request (of any chunk) named each page."""
        if not len(ids):
            return np.zeros(0, dtype=bool)
        top = int(ids.max()) + 1
        if top > len(self.first):  # grown by half: the table is most of the memory
            grown = np.full(max(top, len(self.first) + len(self.first) // 2), UNSET,
                            dtype=np.int32)
            grown[:len(self.first)] = self.first
            self.first = grown
        named_by = (owner + self.fed).astype(np.int32)
        np.minimum.at(self.first, ids, named_by)
        return self.first[ids] < named_by

    def _seen_sorted(self, ids: np.ndarray, owner: np.ndarray) -> np.ndarray:
        known = _member(self.ids, ids)
        # within the chunk: an id counts from the request after the one that first names it
        unique, first = np.unique(ids, return_index=True)
        first_owner = owner[first][np.searchsorted(unique, ids)]
        new = unique[~_member(self.ids, unique)]  # two sorted runs: a stable sort merges
        self.ids = np.sort(np.concatenate([self.ids, new]), kind="stable")
        return known | (first_owner < owner)


def _member(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    if len(sorted_ids) == 0:
        return np.zeros(len(ids), dtype=bool)
    at = np.searchsorted(sorted_ids, ids)
    at[at == len(sorted_ids)] = 0
    return sorted_ids[at] == ids


def unbounded_hit_tokens(chunks: Iterable[Sequence[Request]]) -> tuple[int, int]:
    """(hit tokens, prompt tokens) of an unbounded cache without a TTL over `chunks`."""
    seen = SeenPages()
    hits = query = 0
    for chunk in chunks:
        hits += int(seen.hit_tokens(chunk).sum())
        query += sum(r.input_tokens for r in chunk)
    return hits, query


def unbounded_hit_tokens_columns(columns: RequestColumns, chunk: int) -> tuple[int, int]:
    """`unbounded_hit_tokens` of columns, `chunk` requests at a time, straight from their
    arrays (no Request built)."""
    seen = SeenPages()
    hits = 0
    starts = columns.page_start
    for first in range(0, len(columns), chunk):
        last = min(first + chunk, len(columns))
        counts = np.diff(starts[first:last + 1])
        ids = columns.page_ids[starts[first]:starts[last]]
        hits += int(seen.hit_arrays(ids, counts, columns.input_tokens[first:last],
                                    columns.page_size_tokens[first:last]).sum())
    return hits, int(columns.input_tokens.sum())
