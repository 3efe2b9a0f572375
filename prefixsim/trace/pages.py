"""Page-size conversion of a chained-id trace.

A coarse page of Q = k*P tokens is a run of k fine pages, and since a chained id names its
whole prefix, the id of the run's last fine page names the coarse page exactly: coarsening is
lossless. The last coarse page holds what is left (it ends with the request's last fine
page). A finer size would need to know where, inside a page, two prompts stop agreeing,
which the ids do not say, so it is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from prefixsim.errors import InputError
from prefixsim.trace.columns import RequestColumns
from prefixsim.trace.record import Request


def distinct_prefix_tokens(requests: Iterable[Request]) -> int:
    """Tokens of the distinct pages of `requests` (each chained id counted once, with the
    most tokens it was seen holding): what an unbounded cache without a TTL holds at the end,
    and the least capacity at which no policy ever evicts. Columns are counted with numpy
    (`_distinct_columns`), the same figure."""
    if isinstance(requests, RequestColumns):
        return _distinct_columns(requests)
    full: dict[int, set[int]] = {}  # page size -> ids seen as a full (not last) page
    last: dict[int, int] = {}  # id of a prompt's last page -> most tokens seen in it
    for request in requests:
        ids = request.page_ids
        if not ids:
            continue
        size = request.page_size_tokens
        if len(ids) > 1:
            full.setdefault(size, set()).update(ids[:-1])
        tokens = request.input_tokens - size * (len(ids) - 1)
        if last.get(ids[-1], 0) < tokens:
            last[ids[-1]] = tokens
    seen: set[int] = set().union(*full.values()) if full else set()
    return (sum(size * len(ids) for size, ids in full.items())
            + sum(tokens for page_id, tokens in last.items() if page_id not in seen))


def _distinct_columns(columns: RequestColumns) -> int:
    counts = np.diff(columns.page_start)
    has = counts > 0
    last_at = columns.page_start[1:][has] - 1
    is_last = np.zeros(columns.num_pages, dtype=bool)
    is_last[last_at] = True
    full_ids = columns.page_ids[~is_last]
    sizes = np.unique(columns.page_size_tokens[counts > 1]).tolist()
    full_sizes = np.repeat(columns.page_size_tokens, counts)[~is_last] if len(sizes) > 1 \
        else None
    total = 0
    seen = np.zeros(0, dtype=np.int64)
    for size in sizes:
        ids = distinct_ids(full_ids if full_sizes is None else full_ids[full_sizes == size])
        total += size * len(ids)
        seen = ids if not len(seen) else np.union1d(seen, ids)
    last_ids = columns.page_ids[last_at]
    tokens = columns.input_tokens[has] - columns.page_size_tokens[has] * (counts[has] - 1)
    ids, tokens = _most_per_id(last_ids, tokens)
    if len(seen):
        at = np.minimum(np.searchsorted(seen, ids), len(seen) - 1)
        tokens = tokens[seen[at] != ids]
    return total + int(tokens.sum())


DISTINCT_TABLE_IDS = 1 << 28  # ids below this (and >= 0): a direct int32 table, 1 GiB at most


class DistinctTokens:
    """`distinct_prefix_tokens` fed chunk by chunk (a streamed trace with one page size).

    Each distinct id's most tokens seen (a page size when it was ever a full page) in a
    direct table most[id] (4 bytes an id value) for small non-negative ids that number the
    pages densely (as traces do), else in sorted
    arrays merged once a chunk; the total is their sum, what `distinct_prefix_tokens` gives
    for the whole trace when every page has the same size (the stream checks that)."""

    def __init__(self) -> None:
        self.most: np.ndarray | None = np.zeros(0, dtype=np.int32)
        self.ids = np.zeros(0, dtype=np.int64)  # sorted mode: ids and their most tokens
        self.tokens = np.zeros(0, dtype=np.int64)
        self.pages = 0  # pages fed so far

    def add(self, columns: RequestColumns) -> None:
        counts = np.diff(columns.page_start)
        if not columns.num_pages:
            return
        tokens = np.repeat(columns.page_size_tokens, counts)
        has = counts > 0
        last_at = columns.page_start[1:][has] - 1
        tokens[last_at] = (columns.input_tokens[has]
                           - columns.page_size_tokens[has] * (counts[has] - 1))
        ids = columns.page_ids
        self.pages += len(ids)
        low, high = int(ids.min()), int(ids.max())
        if self.most is not None and (low < 0 or high >= DISTINCT_TABLE_IDS
                                      or high > 8 * self.pages + (1 << 20)):  # sparse ids
            self.ids = np.flatnonzero(self.most).astype(np.int64)
            self.tokens = self.most[self.ids].astype(np.int64)
            self.most = None
        if self.most is None:
            self._merge(ids, tokens)
            return
        top = high + 1
        if top > len(self.most):  # grown by half: the table is most of the memory
            grown = np.zeros(max(top, len(self.most) + len(self.most) // 2), dtype=np.int32)
            grown[:len(self.most)] = self.most
            self.most = grown
        np.maximum.at(self.most, ids, tokens.astype(np.int32))

    def _merge(self, ids: np.ndarray, tokens: np.ndarray) -> None:
        self.ids, self.tokens = _most_per_id(np.concatenate([self.ids, ids]),
                                             np.concatenate([self.tokens, tokens]))

    @property
    def total(self) -> int:
        if self.most is not None:
            return int(self.most.sum(dtype=np.int64))
        return int(self.tokens.sum())


def _most_per_id(ids: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ids (sorted) and the most tokens each was seen with."""
    order = np.lexsort((tokens, ids))  # by id, then tokens: each id's most is last
    ids, tokens = ids[order], tokens[order]
    most = np.ones(len(ids), dtype=bool)
    most[:-1] = ids[1:] != ids[:-1]
    return ids[most], tokens[most]


def distinct_ids(ids: np.ndarray) -> np.ndarray:
    """The sorted distinct ids: by a bitmap when they are small and non-negative (as traces
    number their pages), else by sorting."""
    if len(ids) and int(ids.min()) >= 0 and int(ids.max()) < 4 * len(ids) + (1 << 20):
        marks = np.zeros(int(ids.max()) + 1, dtype=bool)
        marks[ids] = True
        return np.flatnonzero(marks).astype(np.int64)
    # a sort and a mask: numpy 2's np.unique(ids) alone takes ~10x longer on 30M ids
    ordered = np.sort(ids)
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def check_page_size(from_tokens: int, to_tokens: int) -> int:
    """The factor k = to/from, or an InputError saying why the conversion is impossible
    (naming `--page-size`, the option of `trace convert` and `trace inspect` that asks)."""
    if to_tokens < 1:
        raise InputError(f"must be >= 1, got {to_tokens}", field="--page-size")
    if to_tokens < from_tokens:
        raise InputError(
            f"cannot convert {from_tokens}-token pages to finer {to_tokens}-token pages: the "
            "ids do not say where inside a page two prompts diverge (only coarser sizes that "
            f"are multiples of {from_tokens} are exact)", field="--page-size")
    if to_tokens % from_tokens:
        raise InputError(
            f"{to_tokens} is not a multiple of the trace's {from_tokens}-token pages, so its "
            "pages would not be runs of whole pages", field="--page-size")
    return to_tokens // from_tokens


def coarsen(request: Request, to_tokens: int) -> Request:
    """`request` with pages of `to_tokens` tokens (a multiple of its page size)."""
    factor = check_page_size(request.page_size_tokens, to_tokens)
    if factor == 1:
        return request
    ids = request.page_ids
    coarse = ids[factor - 1::factor]
    if len(ids) % factor:
        coarse += (ids[-1],)
    return Request(request.request_id, request.arrival_s, request.input_tokens,
                   request.output_tokens, coarse, to_tokens, request.session_id,
                   request.namespace)


def convert_pages(requests: Iterable[Request], to_tokens: int | None) -> Iterator[Request]:
    """Every request with pages of `to_tokens` (unchanged when None)."""
    for request in requests:
        yield request if to_tokens is None else coarsen(request, to_tokens)
