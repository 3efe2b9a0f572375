"""A KV pool shared by every replica (docs/cache-semantics.md R18), as Mooncake's store,
LMCache or Dynamo pool cluster DRAM/SSD.

The pool is one prefix tree of its own (capacity in tokens, eviction policy, TTL rule) that
every replica reads and writes: a `SegmentCache`, as an HBM cache's (pipeline/build.py); a
run of its pages is a `SegmentRun` (the test suite's per-page reference cache, which the
pool also accepts, gives a list of pages). It is inclusive: a page read
into a replica's HBM stays in the pool for the others. Pages enter it as soon as a prefill
inserts them into HBM (`write_through`, the config's default `write: through`) or when a
replica's HBM evicts them (write-back, `PoolSpec`'s default: the evicted page and
whichever of its ancestors the pool lacks, so its chain stays whole). A request's match
continues in the pool after its HBM match: the pool's run from the root, beyond the pages
HBM holds, is a hit of the pool, copied into HBM over the replica's link (only that part
is refreshed; its ancestors take its deadline, R12). Pool pages are never locked (copies
in flight are not modelled, like the tiers').

Each replica reaches the pool over a `PoolLink` (per GPU, as each GPU moves its share of a
token's KV over its own NIC): a read takes latency + bytes / read bandwidth after the link's
earlier reads finish; writes are asynchronous but keep the write direction busy. The links
count bytes and busy seconds. The pool's memory is the replicas' hosts' (as Mooncake Store
pools each node's DRAM): a page is held by the replica that wrote it first and, with
`replicas` > 1, by as many holders in all (the next replicas in index order), each copy
written over the writer's link. A read of a request's pool run takes each page from the copy
whose holder can serve soonest, and each holder's part crosses both the reader's link and
the holder's outbound (`serves`) direction: it starts when both are free, so concurrent
readers of one holder queue behind each other. Every pool query (hit or miss) costs
`lookup_s` (the store's metadata lookup) before any read. Not here: network topology beyond
one link per replica, copies in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prefixsim.cache.cache_types import CacheCounters
from prefixsim.cache.protocol import PrefixCache
from prefixsim.cache.segment_tree import SegmentCache, SegmentPage, SegmentRun

PageRun = SegmentRun | list  # a run of a pool's pages, as its tree gives it


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """The links to the pool and when pages are written (bandwidths in bytes/s per GPU)."""

    read_bytes_s: float
    write_bytes_s: float
    latency_s: float = 0.0
    write_through: bool = False
    replicas: int = 1  # holders of each page
    lookup_s: float = 0.0  # per pool query, hit or miss

    def __post_init__(self) -> None:
        if not self.read_bytes_s > 0 or not self.write_bytes_s > 0:
            raise ValueError("pool bandwidths must be > 0")
        if not 0 <= self.latency_s < float("inf"):
            raise ValueError(f"pool latency must be a finite number >= 0, got {self.latency_s}")
        if not 0 <= self.lookup_s < float("inf"):
            raise ValueError(f"pool lookup must be a finite number >= 0, got {self.lookup_s}")
        if self.replicas < 1:
            raise ValueError(f"pool replicas must be >= 1, got {self.replicas}")


class LinkDirection:
    """One direction of a link: transfers queue one behind another, each taking latency +
    bytes / bandwidth; counts bytes and busy seconds."""

    __slots__ = ("bytes_s", "latency_s", "free_s", "busy_s", "bytes")

    def __init__(self, bytes_s: float, latency_s: float = 0.0) -> None:
        if not bytes_s > 0 or not 0 <= latency_s < float("inf"):
            raise ValueError("a link needs a bandwidth > 0 and a finite latency >= 0")
        self.bytes_s, self.latency_s = bytes_s, latency_s
        self.free_s = self.busy_s = 0.0
        self.bytes = 0

    def book(self, num_bytes: int, now: float,
             transfer_time_s: Callable[[int, float], float] | None = None,
             other: LinkDirection | None = None) -> float:
        """Book a transfer of `num_bytes` starting no earlier than `now`; seconds from
        `now` until it is done (waiting for earlier transfers + latency + the move itself,
        `transfer_time_s(bytes, bandwidth)` when given, else bytes / bandwidth). `other`:
        the far end's direction the transfer also crosses (it starts when both are free
        and keeps both busy; its bytes are counted there too)."""
        move = (num_bytes / self.bytes_s if transfer_time_s is None
                else transfer_time_s(num_bytes, self.bytes_s))
        start = max(now, self.free_s)
        if other is not None and other is not self:
            start = max(start, other.free_s)
            other.free_s = start + self.latency_s + move
            other.busy_s += self.latency_s + move
            other.bytes += num_bytes
        self.free_s = start + self.latency_s + move
        self.busy_s += self.latency_s + move
        self.bytes += num_bytes
        return self.free_s - now


class PoolLink:
    """One replica's link to the pool: reads queue behind reads, writes behind writes, and
    the reads of the pool pages this replica holds behind each other (`serves`)."""

    __slots__ = ("reads", "writes", "serves", "index")

    def __init__(self, spec: PoolSpec, index: int = 0) -> None:
        self.reads = LinkDirection(spec.read_bytes_s, spec.latency_s)
        self.writes = LinkDirection(spec.write_bytes_s, spec.latency_s)
        self.serves = LinkDirection(spec.read_bytes_s, spec.latency_s)
        self.index = index  # the replica's, as a holder of pool pages

    def read(self, num_bytes: int, now: float,
             transfer_time_s: Callable[[int, float], float] | None = None) -> float:
        """Book a read; seconds from `now` until it is done."""
        return self.reads.book(num_bytes, now, transfer_time_s)

    def write(self, num_bytes: int, now: float) -> None:
        """Book an asynchronous write (nothing waits for it)."""
        self.writes.book(num_bytes, now)


class SharedPool:
    """The pool's tree and its writes; `clock()` is the current simulated time. `links`:
    the replicas' links, by replica index (set by the timed engine; their `serves`
    directions are the holders')."""

    def __init__(self, cache: PrefixCache, spec: PoolSpec,
                 clock: Callable[[], float]) -> None:
        self.cache = cache
        self.spec = spec
        self.clock = clock
        self.links: Sequence[PoolLink] = ()
        self.holder: dict[int, int] = {}  # page id -> its first holder (the writer)
        self._recency = 0
        self.read_tokens = 0  # hit tokens read from the pool, all replicas
        self.write_tokens = 0  # tokens written into it

    def run_after(self, page_ids: Sequence[int], num_hbm_pages: int, now: float) -> PageRun:
        """The pages of `page_ids` beyond the first `num_hbm_pages` that the pool's match
        from the root finds (empty when it finds no more than HBM did). Changes no page
        (on a SegmentCache the run starts a segment: one holding pages on both sides of
        `num_hbm_pages` is split there, as a match ending there would split it)."""
        cache = self.cache
        found = cache.match(page_ids, now).pages
        if len(found) <= num_hbm_pages:
            return []
        if isinstance(found, SegmentRun):
            return cache.run_from(found, num_hbm_pages)
        return found[num_hbm_pages:]

    def read(self, pages: PageRun, num_tokens: int, now: float) -> None:
        """Refresh the pages a request read from the pool (a hit of the pool, R5), counting
        the `num_tokens` it read."""
        self._recency += 1
        self.cache.touch(pages, now, self._recency)
        self.read_tokens += num_tokens

    def fetch(self, pages: PageRun, reader: PoolLink, kv_bytes_per_token: int,
              now: float, transfer_time_s: Callable[[int, float], float] | None = None
              ) -> float:
        """Book the read of `pages` (a request's pool run) over `reader`'s link and their
        holders' `serves` directions; seconds from `now` until the last part is in,
        after the lookup. Each page comes from the copy whose holder is free soonest
        (ties: the first copy), a holder's pages in one transfer."""
        links, holder, copies = self.links, self.holder, self.spec.replicas
        num = len(links)
        parts: dict[int, int] = {}
        for page_id, tokens in page_sizes(pages):
            first = holder.get(page_id, reader.index)
            best = first
            for k in range(1, min(copies, num)):
                other = (first + k) % num
                if links[other].serves.free_s < links[best].serves.free_s:
                    best = other
            parts[best] = parts.get(best, 0) + tokens
        lookup = self.spec.lookup_s
        done = lookup
        for index, tokens in parts.items():
            serves = links[index].serves if num else None
            done = max(done, lookup + reader.reads.book(
                tokens * kv_bytes_per_token, now + lookup, transfer_time_s, serves))
        return done

    def write(self, page_ids: Sequence[int], page_tokens: Sequence[int],
              holder: int = 0) -> int:
        """Write the chain `page_ids` (from the root) into the pool, now, held by replica
        `holder` (and the next ones, `spec.replicas` copies); returns the tokens it did not
        hold already (one copy's: what crosses the link is that times the copies). Evicts
        by the pool's policy. The pages go in as one insert, or, where a page shorter than
        the first ends the chain before its end (a prompt's partial last page that later
        prompts named as a page of theirs), as one insert per such stretch, each below the
        last: the pages a SegmentCache holds together share a size but the last."""
        cache, now = self.cache, self.clock()
        if (isinstance(cache, SegmentCache)
                and cache.matched_pages(page_ids, now) == len(page_ids)):
            return 0  # held whole: no segment split where the chain ends
        have = cache.match(page_ids, now).pages
        if len(have) == len(page_ids):
            return 0
        rest_ids, rest_tokens = page_ids[len(have):], page_tokens[len(have):]
        tip = have[-1] if have else None
        cache.evict(sum(rest_tokens), protect=tip)  # the chain written onto stays
        self._recency += 1
        written = start = 0
        while start < len(rest_ids):
            stop = _stretch_end(rest_tokens, start)
            placed = cache.insert(tip, rest_ids[start:stop], rest_tokens[start:stop], now,
                                  self._recency)
            written += sum(rest_tokens[start:start + len(placed)])  # new pages, in order
            if len(placed) < stop - start:  # the pool is full: the rest stays out
                break
            tip = placed[-1]
            start = stop
        if self.links:  # timed: who holds each page (a cache-only run times no read)
            owners = self.holder
            for page_id in rest_ids:
                owners[page_id] = holder
        self.write_tokens += written
        return written

    def write_evicted(self, page: SegmentPage, holder: int = 0) -> int:
        """Write an evicted HBM page with the ancestors its pointers still name (`chain`)."""
        ids, tokens = page.chain()
        return self.write(ids, tokens, holder)


def page_sizes(pages: PageRun) -> list[tuple[int, int]]:
    """(page id, tokens) of each page of a run a pool's tree gave (a SegmentRun's
    segments are whole: a match, an insert and `run_from` start and end runs on a
    segment's bounds)."""
    if isinstance(pages, SegmentRun):
        return pages.page_sizes()
    return [(page.page_id, page.num_tokens) for page in pages]


def _stretch_end(page_tokens: Sequence[int], start: int) -> int:
    """The end of the stretch of `page_tokens` from `start` whose pages share the first's
    size but the last: just past the first page smaller than the first (its end)."""
    size = page_tokens[start]
    for i in range(start + 1, len(page_tokens)):
        if page_tokens[i] != size:
            return i + 1 if page_tokens[i] < size else i
    return len(page_tokens)


@dataclass(frozen=True, slots=True)
class PoolFigures:
    """The pool after a run: its counters, what crossed the links, and the busiest link
    direction's busy share of the run (0 in cache-only runs, which time nothing)."""

    capacity_tokens: int | None
    counters: CacheCounters
    read_tokens: int
    write_tokens: int
    read_bytes: int
    write_bytes: int
    busiest_link_share: float

    @classmethod
    def of(cls, pool: SharedPool, links: Sequence[PoolLink] = (),
           duration_s: float = 0.0) -> PoolFigures:
        busiest = max((max(link.reads.busy_s, link.writes.busy_s, link.serves.busy_s)
                       for link in links), default=0.0)
        return cls(pool.cache.capacity_tokens, pool.cache.counters, pool.read_tokens,
                   pool.write_tokens, sum(link.reads.bytes for link in links),
                   sum(link.writes.bytes for link in links),
                   busiest / duration_s if duration_s > 0 else 0.0)
