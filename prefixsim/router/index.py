"""PrefixIndex: one index of which replica holds which prefix, for routing in O(prompt pages).

Looking a prompt up in every replica's cache costs O(replicas x pages) per arrival, so a
fleet of hundreds of replicas is slow to study. The index keeps, per page id, the replicas
whose HBM cache holds it, updated by the caches' events (a page added; a page removed by
eviction or expiry: a SegmentCache's `observer` by runs of pages, cache/segment_tree.py's
RunFeed, a split passing pages to a new segment). A lookup walks the prompt's pages once,
narrowing the set of replicas still matching: O(pages + holders), whatever the fleet size.

With `event_delay_s` = 0 the index is exact: a page counts for a replica only while it is
resident and alive (locked, or its deadline not passed: the test the cache's `match` applies
before matching), so `prefix_tokens` equals each replica's live `cached_prefix_tokens` (the
page-aligned cap of docs/cache-semantics.md R3) without expiring anything as a side effect.
With `event_delay_s` > 0 each event reaches the index that many simulated seconds late, as
a router fed by KV events sees the caches (additions and removals alike); the stale view
then counts pages whose removal it has not heard of yet. Radix mode only: block mode's
re-adoption of orphans changes what matches without an event, so routers read block-mode
caches live.

Live and without TTLs (the usual case) every indexed page counts, so the index keeps one
int per page id, a bit per replica holding it, and a lookup is a few integer ANDs per
page; with TTLs (pages must be checked alive) or a delayed feed it keeps the pages
themselves, page id -> {replica: page}.

Below HBM (`attach_pool`, `attach_host`; `lower_runs`) the index also follows the shared
KV pool's tree (docs/cache-semantics.md R18: page id -> page, checked alive) and each
replica's host DRAM tier (R15: page id -> a bit per replica), live (their events are not
delayed), so a router can credit the tokens a replica would load from them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from prefixsim.cache import PrefixCache
from prefixsim.cache import id_arrays as _ids
from prefixsim.cache.page import Page
from prefixsim.trace import Request


class _ReplicaFeed:
    """The observer one replica's cache reports to (live: straight into the index's map,
    one call per page event; delayed: queued). A page's holder is what its liveness is read
    from: its segment on a SegmentCache (by run: a split passes the prefix's pages to the
    new segment, `moved_run`), the page itself on the test suite's per-page reference."""

    __slots__ = ("index", "replica", "live")

    def __init__(self, index: PrefixIndex, replica: int, live: bool | None = None) -> None:
        self.index, self.replica = index, replica
        self.live = index._live if live is None else live  # True: applied at once

    def added(self, page: Page) -> None:
        self._page(page.page_id, page, True)

    def removed(self, page: Page) -> None:
        self._page(page.page_id, page, False)

    def added_run(self, ids, start: int, stop: int, holder) -> None:
        for i in range(start, stop):
            self._page(ids[i], holder, True)

    def removed_run(self, ids, start: int, stop: int, holder) -> None:
        for i in range(start, stop):
            self._page(ids[i], holder, False)

    def _page(self, page_id: int, holder, added: bool) -> None:
        """One page's event: into the index's map now (live), or queued (`event`)."""
        if self.live:
            self.index._apply(self.replica, page_id, holder, added)
        else:
            self.index.event(self.replica, page_id, holder, added)

    moved_run = added_run  # the pages' holder is the new segment


class _MaskFeed:
    """The observer of one replica's cache when the index keeps bit masks (live, no TTL):
    its bit set on a page id when a page is added, cleared when it is removed (a cache
    holds a page id once, so the events of one replica alternate). By run from a
    SegmentCache (RunFeed); page by page from the test suite's per-page reference."""

    __slots__ = ("masks", "bit", "others")

    def __init__(self, masks: dict[int, int], replica: int) -> None:
        self.masks = masks
        self.bit = 1 << replica
        self.others = ~self.bit  # made once: an int op less for every page removed

    def added(self, page: Page) -> None:
        masks = self.masks
        page_id = page.page_id
        masks[page_id] = masks.get(page_id, 0) | self.bit

    def removed(self, page: Page) -> None:
        masks = self.masks
        page_id = page.page_id
        mask = masks.get(page_id, 0) & self.others
        if mask:
            masks[page_id] = mask
        else:
            masks.pop(page_id, None)

    def added_run(self, ids, start: int, stop: int, holder) -> None:
        """A SegmentCache's run of pages (RunFeed): its bit set on each id."""
        masks = self.masks
        bit = self.bit
        for i in range(start, stop):
            page_id = _ids.id_at(ids, i)
            masks[page_id] = masks.get(page_id, 0) | bit

    def removed_run(self, ids, start: int, stop: int, holder) -> None:
        masks = self.masks
        others = self.others
        for i in range(start, stop):
            page_id = _ids.id_at(ids, i)
            mask = masks.get(page_id, 0) & others
            if mask:
                masks[page_id] = mask
            else:
                masks.pop(page_id, None)

    def moved_run(self, ids, start: int, stop: int, holder) -> None:
        """A split: the pages stay, bits know no holders."""


class _PoolFeed:
    """The observer of the shared pool's tree: page id -> its holder (the Segment holding
    it, by run: a RunFeed; a Page from the test suite's per-page reference), whose lock
    count and deadline are the page's."""

    __slots__ = ("pages",)

    def __init__(self, pages: dict[int, object]) -> None:
        self.pages = pages

    def added(self, page: Page) -> None:
        self.pages[page.page_id] = page

    def removed(self, page: Page) -> None:
        if self.pages.get(page.page_id) is page:
            del self.pages[page.page_id]

    def added_run(self, ids, start: int, stop: int, holder) -> None:
        pages = self.pages
        for i in range(start, stop):
            pages[ids[i]] = holder

    def removed_run(self, ids, start: int, stop: int, holder) -> None:
        pages = self.pages
        for i in range(start, stop):
            if pages.get(ids[i]) is holder:
                del pages[ids[i]]

    moved_run = added_run  # a split: the pages' holder is the new segment


class _HostFeed:
    """The observer of one replica's host tier (cache/tiers.py's FlatTier, page ids)."""

    __slots__ = ("masks", "bit")

    def __init__(self, masks: dict[int, int], replica: int) -> None:
        self.masks = masks
        self.bit = 1 << replica

    def added(self, page_id: int) -> None:
        self.masks[page_id] = self.masks.get(page_id, 0) | self.bit

    def removed(self, page_id: int) -> None:
        mask = self.masks.get(page_id, 0) & ~self.bit
        if mask:
            self.masks[page_id] = mask
        else:
            self.masks.pop(page_id, None)


def _set_positions(values: list, positions: tuple[int, ...], count: int,
                   tokens: float) -> None:
    """`values[p] = tokens` for each replica position p below `count` (a loop in C
    compiled, index.pxd)."""
    for position in positions:
        if position < count:
            values[position] = tokens


class PrefixIndex:
    """page id -> {replica: page} over every replica's HBM cache (module docstring)."""

    def __init__(self, clock: Callable[[], float], event_delay_s: float = 0.0) -> None:
        if not event_delay_s >= 0:
            raise ValueError(f"event_delay_s must be >= 0, got {event_delay_s}")
        self.clock = clock
        self.event_delay_s = event_delay_s
        self._holders: dict[int, dict[int, object]] = {}  # page id -> {replica: holder}
        # (when it reaches the index, replica, page id, holder, added)
        self._pending: deque[tuple[float, int, int, object, bool]] = deque()
        self._live = event_delay_s == 0
        self._immortal = True  # no attached cache has a TTL: every indexed page is alive
        # page id -> replica bits while live and immortal (None: `_holders` instead)
        self._masks: dict[int, int] | None = {} if self._live else None
        self._mask_positions: dict[int, tuple[int, ...]] = {}  # `_positions`' memory
        self._attached: list[tuple[int, PrefixCache]] = []
        self._pool: dict[int, object] | None = None  # the shared pool's (attach_pool)
        self._host: dict[int, int] | None = None  # page id -> host-tier replica bits

    def attach_pool(self, cache: PrefixCache) -> None:
        """Follow the shared KV pool's tree (its resident pages are indexed now)."""
        self._pool = {}
        feed = _PoolFeed(self._pool)
        cache.observer = feed
        cache.announce_pages(feed)

    def attach_host(self, replica: int, tier) -> None:
        """Follow replica `replica`'s host tier (a FlatTier; empty when attached)."""
        if self._host is None:
            self._host = {}
        tier.observer = _HostFeed(self._host, replica)

    def lower_runs(self, request: Request, now: float, found: dict[int, int]
                   ) -> tuple[int, dict[int, int]]:
        """Below HBM, for `request` and `found` (`prefix_tokens`' answer): the tokens of the
        pool's run from the root (alive pages, R3's cap), and per replica the tokens its host
        tier holds right after its HBM run (page by page, as admission continues, R15)."""
        page_ids = request.page_ids[:request.matchable_pages(request.input_tokens)]
        pool_pages = 0
        if self._pool is not None:
            pool = self._pool
            for page_id in page_ids:
                page = pool.get(page_id)
                if page is None or not (page.lock_count > 0 or page.deadline_s >= now):
                    break
                pool_pages += 1
        host: dict[int, int] = {}
        if self._host is not None and page_ids:
            get, size, num = self._host.get, request.page_size_tokens, len(page_ids)
            starts = {replica: tokens // size for replica, tokens in found.items()}
            first = get(page_ids[0], 0)
            while first:
                low = first & -first
                starts.setdefault(low.bit_length() - 1, 0)
                first ^= low
            for replica, start in starts.items():
                bit, depth = 1 << replica, start
                while depth < num and get(page_ids[depth], 0) & bit:
                    depth += 1
                if depth > start:
                    host[replica] = request.prefix_tokens(depth) - request.prefix_tokens(start)
        return request.prefix_tokens(pool_pages), host

    def attach(self, replica: int, cache: PrefixCache) -> None:
        """Follow `cache` as replica `replica`'s (its resident pages are indexed now)."""
        self._attached.append((replica, cache))
        self._immortal = self._immortal and cache.ttl is None
        if self._masks is not None and not self._immortal:
            # a cache with a TTL: pages must be checked alive, so the index keeps the pages;
            # the caches attached so far are indexed again that way
            self._masks = None
            for earlier, earlier_cache in self._attached[:-1]:
                feed = _ReplicaFeed(self, earlier)  # live: applied at once
                earlier_cache.observer = feed
                earlier_cache.announce_pages(feed)
        if self._masks is not None:
            feed = _MaskFeed(self._masks, replica)
        else:
            feed = _ReplicaFeed(self, replica)
        cache.observer = feed
        # the pages resident now are known at once, not an event delay later
        cache.announce_pages(feed if self._masks is not None
                             else _ReplicaFeed(self, replica, live=True))

    def event(self, replica: int, page_id: int, holder, added: bool) -> None:
        """A page added to or removed from `replica`'s cache, held by `holder` (a Segment, or
        a Page from the test suite's per-page reference), applied now (live) or queued to
        reach the index `event_delay_s` late."""
        if self._live:
            self._apply(replica, page_id, holder, added)
        else:
            self._pending.append((self.clock() + self.event_delay_s, replica, page_id,
                                  holder, added))

    def _apply(self, replica: int, page_id: int, holder, added: bool) -> None:
        if added:
            holders = self._holders.get(page_id)
            if holders is None:
                self._holders[page_id] = {replica: holder}
            else:
                holders[replica] = holder
            return
        holders = self._holders.get(page_id)
        if holders is not None and holders.get(replica) is holder:
            del holders[replica]
            if not holders:
                del self._holders[page_id]

    def _catch_up(self, now: float) -> None:
        pending = self._pending
        while pending and pending[0][0] <= now:
            _, replica, page_id, holder, added = pending.popleft()
            self._apply(replica, page_id, holder, added)

    def prefix_tokens(self, request: Request, now: float) -> dict[int, int]:
        """Cached prompt tokens per replica that holds at least the first page (others: 0),
        with the page-aligned cap admission uses (R3)."""
        page_ids = self._matchable(request, now)
        matched: dict[int, int] = {}
        if not page_ids:
            return matched
        if self._masks is not None:
            self._walk_masks(request, page_ids, matched)
            return matched
        if not self._live or self._immortal:
            return self._walk_sets(request, page_ids)
        still = list(self._holders.get(page_ids[0], ()))  # with TTLs: check each page alive
        depth = 0
        for page_id in page_ids:  # narrow the replicas still matching, page by page
            holders = self._holders.get(page_id)
            if not holders:
                break
            keep = []
            for replica in still:
                page = holders.get(replica)
                if page is not None and (page.lock_count > 0 or page.deadline_s >= now):
                    keep.append(replica)
                elif depth:
                    matched[replica] = depth
            still = keep
            depth += 1
            if not still:
                break
        for replica in still:
            matched[replica] = depth
        return {replica: request.prefix_tokens(pages) for replica, pages in matched.items()}

    def prefix_token_list(self, request: Request, now: float, count: int) -> list[float]:
        """`prefix_tokens` by replica position as floats, 0.0 for the replicas that hold
        none, positions 0 .. count - 1 (PrefixAware's scan reads each twice as a double:
        a float costs no conversion there, and its scores are those of the ints)."""
        values = [0.0] * count
        if self._masks is None:  # the walks over sets, with TTLs or a delay: the dict's
            for position, tokens in self.prefix_tokens(request, now).items():
                if position < count:
                    values[position] = float(tokens)
            return values
        page_ids = self._matchable(request, now)
        if page_ids:
            self._walk_masks(request, page_ids, values)
        return values

    def _matchable(self, request: Request, now: float) -> tuple[int, ...]:
        """The request's page ids a match may cover (R3), the index caught up to `now`."""
        if not self._live:
            self._catch_up(now)
        return request.page_ids[:request.matchable_pages(request.input_tokens)]

    def _walk_masks(self, request: Request, page_ids: tuple[int, ...], out) -> None:
        """`_walk_sets` over bit masks (live, no TTL): the replicas still matching as one
        int, narrowed by an AND per page. Writes each replica's tokens into `out`: a dict
        by position, or a list (`prefix_token_list`: floats, positions past its end left
        out)."""
        masks = self._masks
        get = masks.get
        still = get(page_ids[0], 0)
        listed = type(out) is list
        count = len(out)
        depth = 0
        num = len(page_ids)
        while still:
            depth += 1
            kept = still & get(page_ids[depth], 0) if depth < num else 0
            dropped = still ^ kept
            if dropped:
                tokens = request.prefix_tokens(depth)
                if listed:
                    _set_positions(out, self._positions(dropped), count, float(tokens))
                else:
                    out.update(dict.fromkeys(self._positions(dropped), tokens))
            still = kept

    def _positions(self, mask: int) -> tuple[int, ...]:
        """The replicas of a bit mask, remembered: the same masks recur at every arrival
        (every replica holding a trace's shared first page drops out at one depth)."""
        positions = self._mask_positions.get(mask)
        if positions is None:
            if len(self._mask_positions) >= 4096:
                self._mask_positions.clear()
            bits, out = mask, []
            while bits:
                low = bits & -bits
                out.append(low.bit_length() - 1)
                bits ^= low
            positions = self._mask_positions[mask] = tuple(out)
        return positions

    def _walk_sets(self, request: Request, page_ids: tuple[int, ...]) -> dict[int, int]:
        """The walk when every indexed page counts (no TTL, or a stale view): set
        intersections page by page, the replicas dropping out at each depth recorded."""
        holders = self._holders
        still = set(holders.get(page_ids[0], ()))
        found: dict[int, int] = {}
        depth = 0
        while still:
            depth += 1
            nxt = holders.get(page_ids[depth]) if depth < len(page_ids) else None
            kept = still & nxt.keys() if nxt else set()
            dropped = still - kept if kept else still
            if dropped:
                tokens = request.prefix_tokens(depth)
                for replica in dropped:
                    found[replica] = tokens
            still = kept
        return found
