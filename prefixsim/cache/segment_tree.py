"""The prefix cache: a compressed radix tree, one node per run of pages, for every replay.

A radix tree of one Python object per page (the test suite's per-page reference,
`RadixCache` in tests/radix_reference.py, which these docstrings name for its steps and
results) costs more per page than a whole flat-LRU replay does. SegmentCache stores a
*segment*: a run of consecutive pages that have always been touched together, as an array
of chained page ids (signed 64-bit integers: `id_array`) with token counts and one set of
statistics (created, last access, recency, deadline, hits, priority) shared by its pages.
It replays docs/cache-semantics.md Part A with exactly the results of RadixCache
(per-request hits and every counter), under these conditions (`SegmentCache.supports`
checks the policy and mode, pipeline/build.py: build_cache(..., replay_only=True) the
rest):

- radix mode (leaves only are victims; lower tiers, a shared pool and request classes go
  through the step methods below; the cache-only replay takes no locks or reservations,
  a timed replica's do); or block mode in a cache-only replay (`whole_paths`) under a
  policy that declares `parents_outlast_children` (lru, priority), where the least
  unlocked page is always a leaf, so block mode evicts what radix mode does; or block
  mode anywhere under a policy that declares `shared_key` (lru, priority, lfu, ttl: the
  pages of a segment share their key) or `head_first` (fifo: insertion orders grow along
  a segment), where every unlocked segment is a victim (`block`);
- a policy that declares `node_uniform = True`: its `key(node)` reads only statistics shared
  by a segment's pages (recency, last access, deadline, hits, priority) or the insertion
  order of its last page (`inserted`), and its hooks are the stateless ones (LRU, ttl,
  priority, FIFO); or a GreedyDual policy (LFU-DA, GDSF) whose priority L + value is set
  for all of a segment's pages at once (inserted together, hit together: the segment keeps
  that L, `aged_base`) and whose value does not fall with depth along a segment (LFU's is
  the shared hits, GDSF's grows with the position), so the last page's priority is the
  segment's key and the highest of its pages, to which L rises when they leave; or a policy
  that declares `page_keyed` (belady): a page's key is fixed by the request that last
  touched it, which gives the keys of all its pages up front (`request_keys`), and the
  segment keeps them page by page (`keys`); or, built `by_access` (a timed replica's
  cache, a shared pool's: their recency is not the replay position), a policy that
  declares `access_keyed` (belady again): a page's key is read from its id and its
  segment's last access and recency whenever RadixCache would call `key` (queued, or
  weighed for eviction); or a policy that declares `run_keyed` (workload-aware): a page's
  key is set when a request touches it, from the policy's statistics then, which
  `run_keys` gives for a run of pages at once (counting them as its page hooks would), and
  the segment keeps them page by page (`keys`; a GreedyDual one's clock L rises to the
  highest key of the pages that leave); or a policy that declares `page_states` (s3fifo):
  its state of each page changes without a touch (S overflowing, a second chance), so the
  segment keeps the states page by page (`states`, each naming its segment as `holder`),
  the policy's `requeue` of a state re-keys its segment where that page is the tail, and
  eviction takes one tail page at a time, each offered its second chance
  (`_evict_states`). Block mode runs here with every policy that declares one of the
  flags below or keeps keys or states per page; a GreedyDual policy that declares
  `run_valued` (gdsf: its value reads the page before each page) keeps its pages'
  priorities as set (`keys`, from `run_values`) there. A policy that declares none of
  these is refused (cache/factory.py).

Why it is exact:
- Match compares id slices at C speed (arrays of int64: a request's ids are a slice of the
  block the chunk replay takes from the trace's columns, engine/cache_only_fast.py). A
  match ending inside a segment splits it (R4): both halves keep the statistics and only
  the prefix half is then refreshed, as per-page touches would leave them. The suffix keeps
  its object (and so its queued entries).
- Eviction stays page-at-a-time (Part A rule 3, edge case 8) by taking pages from the tail of
  the least leaf segment. RadixCache orders leaf pages by (key, recency, -depth, page id); the
  pages of one segment share key and recency, and two distinct leaves never share a recency
  (one request touches one root-to-leaf path), so the tail pages of the least leaf segment are
  exactly the next victims, deepest first, until it is gone and its parent may become a leaf.
  Under a page-keyed (or run-keyed) policy a segment is queued under its tail page's key
  (the only leaf page it has), and its next pages go on only while each is below every
  other queued entry (the victim queue's head, stale or not: stopping early only re-queues
  the segment), so again the pages go in RadixCache's order.
  Under FIFO the key is the page's insertion order, unique in the cache: a segment's pages
  were inserted together, so each page before the tail has a smaller order than the tail,
  which was the least of all leaves; the same pages go, in the same order.
  A segment that loses only tail pages keeps its queued entry where its key does not
  depend on its tail (LRU's recency, ttl's deadline: `_steady_key`): the entry's depth and
  id are then out of date, but they never decide, since its recency, which no other leaf
  shares, comes first; where the key moves (FIFO's order, an aging priority) it is queued
  again.
- Expiry frees exactly the pages whose deadline is before now (a parent never expires before
  its children, R12); a deadline queue over leaf segments frees them whole (`DeadlineRun`:
  the segments themselves in deadline order, no entry object for one queued in order). All
  entries below now go in one call, so their order among equal deadlines changes nothing.
- Block mode (`block`, R3): any unlocked page is a victim. Under a `shared_key` policy the
  pages of a segment tie on (key, recency), so the deeper goes first: a segment is queued
  under its tail and loses pages from its tail, as in radix mode, and every unlocked
  segment is queued (whenever RadixCache queues its pages: a touch, an insert, an
  unlock). A segment whose last page leaves while it has children makes them orphans
  (`_orphans`, by first id; `Segment.lost` keeps the ids and tokens of the chain down to
  the lost page): resident and charged, unreachable until a walk or an insert reaches
  the lost page's id again and re-adopts them (`_adopt`, `_next_orphan`), as RadixCache
  finds an orphan page by its id. The deadline queue holds every unlocked segment, which
  is queued again whenever its deadline rises (R12), so its live entries state it (and
  ttl's key, the deadline, is the one it has now). Under a `head_first` policy (fifo) a
  segment is queued under its head and loses pages from its head (`_evict_heads`): split
  after the last one that goes, the rest goes on as an orphan. Under keys or states per
  page (belady, workload-aware, s3fifo: any page of a segment may go first) each page
  is queued under its own entry (`_page_entries`: its key, recency, depth and id, as
  RadixCache's), which names the segment that held the page when it was queued; a split
  gives the pages above the suffix's first to a new prefix, which the suffix names
  (`above`), so an entry finds its page along that chain by depth, which no split
  changes (`_resolve`: stale unless the page is resident, unlocked and touched last at
  the entry's recency, and under keys set per touch or states, the key is its own now).
  Pages leave one by one in their entries' order, each handed down and told to the
  policy as it goes (`_evict_pages`); the pages taken from one segment one after another
  (each the next page of its segment's run so far) leave the structure together
  (`_leave_run`: the pages before stay, the rest an orphan).
- Page ids are unique in the tree (a set of resident ids), so a segment position stands for
  RadixCache's page identity; an id already resident when it would be inserted (ids not
  chained) raises ChainConflict at the same page RadixCache would. Chained ids (an id always
  follows the same parent id) are unique by construction: an id fixes its whole prefix, and
  a resident id's prefix is resident, so the match reaches it before any insert could place
  it again. A caller whose ids are checked chained already (a streamed run: the trace
  readers' ChunkChains, trace/chains.py) builds the cache with `chained=True`, which keeps no
  resident-id set (a fifth of an LRU replay's time and most of its memory per page) and
  checks nothing; ids it was wrongly promised to be chained would go unnoticed.

It owns structure, victim and deadline queues (cache/ordered_queue.py), counters and token
accounting, and hands evicted pages to `on_demote` (lower tiers, cache/tiers.py, or a
shared pool's write-back, cache/pool.py: deepest first, as RadixCache evicts them); it
leaves out block mode under policies that declare none of the segment flags, and policy
hooks.

RadixCache's step methods are here, under its names and with its results step for step
(`tests/cache/test_segment_locks.py`), for replays that drive a cache a step at a time (a
timed replica; request classes; lower tiers; a shared pool): `match`, `touch` and `insert`
(with reuse, R7) read and return a run of pages as a `SegmentRun` (the segments holding it;
item i the segment holding page i, its last ending at the run's last page: a run ending
inside a segment splits it), `lock` / `relock` / `unlock` hold a path (R8: a locked segment
is neither evicted nor expired; a lock covers whole segments, since a tip always ends one
and a later split copies the count), `reserve` / `release` charge private KV (R13), and
per-request TTL and priority (R16) go through `touch` and `insert`: a timed replica drives
them (docs/architecture.md "One prefix cache"). A prefix index follows the cache through
`observer` (a RunFeed: runs of pages added, removed, or passed to the new segment a split
makes), and `pages()` lists each page as a SegmentPage view.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from heapq import heapify, heappop, heappush
from typing import Protocol

from prefixsim.cache import id_arrays as _ids
from prefixsim.cache.accounting import TokenAccounting
from prefixsim.cache.aging import GreedyDualPolicy
from prefixsim.cache.cache_types import CacheCounters, CacheMode, ChainConflict, MatchResult
from prefixsim.cache.idle_ages import age_bin
from prefixsim.cache.ordered_queue import OrderedQueue
from prefixsim.cache.page import INFINITY
from prefixsim.cache.policy import EvictionPolicy, key_field_code
from prefixsim.cache.ttl import TTLRule


class Segment:
    """A run of resident pages touched together: one radix-tree node of the SegmentCache.

    Fields:
      ids            chained page ids, first page first (an `array("q")`: 8 bytes a page,
                     no int object per page; slices and comparisons run in C), its own:
                     no other segment or caller holds it, so eviction shortens it in place
      first          `ids[0]` as the int object its parent's child map (or the roots) is
                     keyed by: removing or re-keying the segment makes no int object
      parent         the segment holding the page before the first one (None at the root)
      children       child segments by their first page id (None until the first child)
      depth          depth of the first page (0 for a first page of a prompt)
      page_tokens    tokens of each page but the last (the inserting request's page size)
      last_tokens    tokens of the last page (a prompt's partial last page stays last)
      num_tokens     tokens of all pages (charged against capacity)
      created_s, last_access_s, recency, deadline_s, num_hits, priority
                     statistics shared by every page of the segment (as on Page)
      version        bumped whenever a queued victim entry of this segment goes stale
      resident       False once the segment has left the cache
      inserted       insertion order (Page.inserted) of its last page: its pages, inserted
                     together, have consecutive orders, so page i's is inserted - (n - 1 - i)
      aged_base      under an aging policy (lfu, gdsf): the GreedyDual clock L when its
                     pages' priorities were set (insert, each hit: cache/aging.py); a page's
                     priority is L + the policy's value of it
      keys           under a page-keyed policy (belady): each page's key, as `ids` (a
                     tuple), set by the request that last touched the page; else None
      deadline_entry where its latest deadline-queue entry is (DeadlineRun): a position
                     in the run, or -1 - the number of an entry out of order; an older
                     entry of it is stale
      lock_count     running requests whose path holds its pages (R8; a timed replica's
                     locks, `lock`): a locked segment is neither evicted nor expired
      states         under a policy that keeps a state per page (S3-FIFO, `page_states`):
                     each page's, as `ids` (a list; each state's `holder` is this
                     segment); else None
      lost           block mode, an orphan (its first page's parent was evicted or expired:
                     resident and charged, unreachable until re-adopted): the chain of
                     pages from the root to that lost parent, as a link (first id, last
                     id, the link above or None, ids, tokens: lists), each link the pages
                     below its `above` link's, so an orphan of an orphan shares its
                     parent's chain (`_lost_chain` reads it whole); else None
      above          block mode with a victim entry per page (`_page_entries`): the prefix
                     that the latest split of this segment made (its pages were this
                     segment's), through which an older entry finds its page: the pages
                     above `depth` lie along the `above` chain; else None
      below          the resident segment whose `above` this one is, if any: a segment
                     leaving the cache is taken out of that chain (`_unlink`), so a
                     resident segment's chain holds resident segments only
    """

    __slots__ = (
        "ids", "first", "parent", "children", "depth", "page_tokens", "last_tokens", "num_tokens",
        "created_s", "last_access_s", "recency", "deadline_s", "num_hits", "priority",
        "version", "resident", "inserted", "aged_base", "keys", "deadline_entry",
        "lock_count", "states", "lost", "above", "below",
    )

    def __init__(self, ids: Sequence[int], parent: Segment | None, depth: int,
                 page_tokens: int, last_tokens: int, now: float, recency: int,
                 deadline_s: float, priority: int = 0) -> None:
        ids = ids if _ids.is_id_array(ids) else id_array(ids)  # an array is kept, not copied
        _fill(self, ids, ids[0], parent, depth, page_tokens, last_tokens, now, recency,
              deadline_s, priority)

    def __repr__(self) -> str:
        return (f"Segment(ids={self.ids[0]}..{self.ids[-1]} x{len(self.ids)}, "
                f"depth={self.depth}, tokens={self.num_tokens}, recency={self.recency})")


def _new_segment(ids, first: int, parent: Segment | None, depth: int, page_tokens: int,
                 last_tokens: int, now: float, recency: int, deadline_s: float,
                 priority: int = 0) -> Segment:
    """`Segment(...)` as the cache makes them, `first` its key (`ids[0]`, the object the
    caller keys its child map by): compiled, a C call (no arguments packed for
    `__init__`)."""
    node = Segment.__new__(Segment)
    _fill(node, ids, first, parent, depth, page_tokens, last_tokens, now, recency,
          deadline_s, priority)
    return node


def _fill(node: Segment, ids, first: int, parent: Segment | None, depth: int,
          page_tokens: int, last_tokens: int, now: float, recency: int, deadline_s: float,
          priority: int) -> None:
    """A new segment's fields (see Segment): unique statistics, no children, no hits."""
    node.ids = ids
    node.first = first
    node.parent = parent
    node.children = None
    node.depth = depth
    node.page_tokens = page_tokens
    node.last_tokens = last_tokens
    node.num_tokens = page_tokens * (_ids.id_count(ids) - 1) + last_tokens
    node.created_s = now
    node.last_access_s = now
    node.recency = recency
    node.deadline_s = deadline_s
    node.num_hits = 0
    node.priority = priority
    node.version = 0
    node.resident = True
    node.inserted = 0
    node.aged_base = 0.0
    node.keys = None
    node.deadline_entry = _NO_ENTRY
    node.lock_count = 0
    node.states = None
    node.lost = None
    node.above = None
    node.below = None


class SegmentPage:
    """One page of a segment, read while its segment holds it: what eviction hands to
    `SegmentCache.on_demote` and what `SegmentCache.pages()` lists. Its id and tokens (what
    lower tiers read), its segment's lock count and deadline (a replica's invariant check,
    a prefix index), and its chain from the root (`chain`, what a shared pool's write-back
    writes)."""

    __slots__ = ("page_id", "num_tokens", "_node", "_index")

    def __init__(self, page_id: int, num_tokens: int, node: Segment | None = None,
                 index: int = 0) -> None:
        self.page_id = page_id
        self.num_tokens = num_tokens
        self._node = node  # the segment holding it, at position `_index`
        self._index = index

    @property
    def lock_count(self) -> int:
        """Running requests whose path holds the page (its segment's, R8)."""
        return 0 if self._node is None else self._node.lock_count

    @property
    def deadline_s(self) -> float:
        """When the page expires (its segment's deadline)."""
        return INFINITY if self._node is None else self._node.deadline_s

    def chain(self) -> tuple[list[int], list[int]]:
        """The ids and tokens of the pages from the first of the prefix down to this one
        (as Page.chain), read from the segments holding them."""
        ids, tokens, lost = _path_pages(self._node, self._index + 1)
        if lost is None:
            return ids, tokens
        lost_ids, lost_tokens = _lost_chain(lost)  # an orphan: its lost ancestors' pages
        return lost_ids + ids, lost_tokens + tokens


def _path_pages(node: Segment | None, upto: int) -> tuple[list[int], list[int], tuple | None]:
    """The ids and tokens of the pages from the top of `node`'s path (a root segment, or
    an orphan) down to page `upto` - 1 of `node`, and that top's lost chain (an orphan's
    `Segment.lost`; else None)."""
    ids: list[int] = []
    tokens: list[int] = []
    lost = None
    while node is not None:
        seg = node.ids
        size = _ids.id_count(seg)
        run = _ids.id_run(seg, 0, upto).tolist()
        run.reverse()
        ids.extend(run)
        if upto == size:
            tokens.append(node.last_tokens)
            tokens.extend([node.page_tokens] * (upto - 1))
        else:
            tokens.extend([node.page_tokens] * upto)
        lost = node.lost
        node = node.parent
        upto = 0 if node is None else _ids.id_count(node.ids)
    ids.reverse()
    tokens.reverse()
    return ids, tokens, lost


def _segment_page(page_id: int, num_tokens: int, node: Segment, index: int) -> SegmentPage:
    """`SegmentPage(...)` as eviction makes them, one per page handed down: compiled, a C
    call (as `_new_segment`)."""
    page = SegmentPage.__new__(SegmentPage)
    page.page_id = page_id
    page.num_tokens = num_tokens
    page._node = node
    page._index = index
    return page


class RunFeed(Protocol):
    """Told of every run of pages that enters or leaves a SegmentCache, or passes to
    another segment when a split makes one (`moved_run`): the pages `ids[start:stop]`, held
    by `holder` (the Segment whose lock count and deadline are theirs). A removal is told
    while the segment still holds the pages. RadixCache's CacheObserver, by run."""

    def added_run(self, ids, start: int, stop: int, holder: Segment) -> None: ...

    def removed_run(self, ids, start: int, stop: int, holder: Segment) -> None: ...

    def moved_run(self, ids, start: int, stop: int, holder: Segment) -> None: ...


class SegmentRun(Sequence):
    """A run of pages as the segments holding it, root first (a match's or an insert's):
    as a sequence of pages, item i is the segment holding page i, so `len` counts pages
    and `[-1]` is the tip segment, as RadixCache's page lists are read."""

    __slots__ = ("segments", "num_pages")

    def __init__(self, segments: list[Segment]) -> None:
        self.segments = segments
        num_pages = 0
        for node in segments:
            num_pages += _ids.id_count(node.ids)
        self.num_pages = num_pages

    def __len__(self) -> int:
        return self.num_pages

    def __getitem__(self, index: int) -> Segment:
        if isinstance(index, slice):
            raise TypeError("a SegmentRun is read by page position, not sliced")
        if index < 0:
            index += self.num_pages
        if not 0 <= index < self.num_pages:
            raise IndexError("page position out of the run")
        if index == self.num_pages - 1:  # the tip, as callers mostly read it
            return self.segments[-1]
        for node in self.segments:
            size = _ids.id_count(node.ids)
            if index < size:
                return node
            index -= size
        raise AssertionError("unreachable")  # pragma: no cover

    def page_sizes(self) -> list[tuple[int, int]]:
        """(page id, tokens) of each page, first first (its segments whole, as a match,
        an insert and `SegmentCache.run_from` give them)."""
        out: list[tuple[int, int]] = []
        for node in self.segments:
            ids = node.ids
            size = _ids.id_count(ids)
            tokens = node.page_tokens
            for i in range(size - 1):
                out.append((_ids.id_at(ids, i), tokens))
            out.append((_ids.id_at(ids, size - 1), node.last_tokens))
        return out

    def __repr__(self) -> str:
        return f"SegmentRun({self.segments!r})"


class SegmentCache:
    """A capacity-bounded (in tokens) prefix cache of page segments, for Part A replays.

    Compiled by `prefixsim accelerate` with the types of segment_tree.pxd (an extension
    type, so it takes TokenAccounting's figures as attributes rather than as a base)."""

    free_tokens = TokenAccounting.free_tokens  # docs/cache-semantics.md R10
    evictable_tokens = TokenAccounting.evictable_tokens
    requeues_states = True  # `requeue` takes a page-state policy's PageState

    def __init__(
        self,
        capacity_tokens: int | None,
        policy: EvictionPolicy,
        ttl: TTLRule | None = None,
        chained: bool = False,
        by_access: bool = False,
        mode: CacheMode | str = CacheMode.RADIX,
        whole_paths: bool = False,
    ) -> None:
        """`chained`: the caller vouches that the page ids are chained (see the module
        docstring); no resident-id set is kept and ChainConflict is never raised.
        `mode` block with `whole_paths`: the caller vouches that every request touches its
        whole path from the root (a cache-only replay), where a policy that declares
        `parents_outlast_children` evicts in block mode exactly the leaves it evicts in
        radix mode, so the cache runs as in radix mode (`supports`). Otherwise block mode
        (a policy that declares `shared_key` or `head_first`) makes every unlocked segment
        a victim, from its tail or its head, and keeps orphans (`block`).
        `by_access`: a policy that declares `access_keyed` (belady) keys each page from
        its segment's last access and recency when it is queued or may be evicted, as
        RadixCache calls `key` (a timed replica's cache, whose recency counts its steps,
        or a shared pool's), rather than from the request's keys up front (`page_keyed`:
        a cache-only replay, whose recency is the replay position)."""
        if capacity_tokens is not None and capacity_tokens < 0:
            raise ValueError(f"capacity_tokens must be >= 0, got {capacity_tokens}")
        if not self.supports(policy, mode, by_access, whole_paths):
            raise ValueError(f"policy {type(policy).__name__} cannot run on segments in "
                             f"{CacheMode(mode).value} mode (see SegmentCache.supports)")
        self.capacity_tokens = capacity_tokens  # also sets `_bounded` and `_capacity`
        self.policy = policy
        self.ttl = ttl
        self.mode = CacheMode(mode)
        # block mode with orphans: every unlocked segment a victim (else leaves only, also
        # in block mode where parents outlast children in a whole-path replay: `supports`)
        self._any_victim = self.mode is CacheMode.BLOCK and not (
            whole_paths and _declares(policy, "parents_outlast_children"))
        self.block = self._any_victim  # RadixCache's flag, read by engines
        # block mode where a segment's first victim is its head (fifo: insertion orders
        # grow along a segment), else its tail
        self._head_first = self._any_victim and _declares(policy, "head_first")
        # block mode: orphan segments by their first id (`Segment.lost`)
        self._orphans: dict[int, Segment] = {}
        self.counters = CacheCounters()
        self._clock = 0.0  # the latest request's `now`: when evictions happen (idle ages)
        self._hit_ages = self.counters.hit_ages.counts
        self._evicted_ages = self.counters.evicted_ages.counts
        self._expired_ages = self.counters.expired_ages.counts
        self.resident_tokens = 0
        self.locked_tokens = 0
        self.reserved_tokens = 0
        self.num_segments = 0
        self._roots: dict[int, Segment] = {}
        # resident page ids (ids are unique in the tree), None when `chained`
        self._ids: set[int] | None = None if chained else set()
        self._num_pages = 0
        self._victims = OrderedQueue()
        self._deadlines = DeadlineRun(not self._any_victim)
        # an aging policy (LFU-DA, GDSF): the clock its priorities were set at lives on the
        # segments, its clock on it; a segment's key is its last page's priority
        self._aging = policy if isinstance(policy, GreedyDualPolicy) else None
        self._until_compact = 1024
        # keys per page: read from the segment's last access when queued (`by_access`),
        # else a page-keyed policy's kept per page from the request's (`keys`)
        self._lazy = by_access and getattr(policy, "access_keyed", False) is True
        self._keyed = not self._lazy and getattr(policy, "page_keyed", False) is True
        # keys per page set by the policy as a request touches the pages (`run_keyed`:
        # workload-aware; its GreedyDual clock still rises as its pages leave, `_aging`)
        self._run_keyed = getattr(policy, "run_keyed", False) is True
        # block mode under a GreedyDual policy whose value reads the page before each page
        # (gdsf: `run_valued`): each page's priority kept as set (`keys`), page by page
        self._valued = (self._any_victim and self._aging is not None
                        and getattr(policy, "run_valued", False) is True)
        # a state per page, which the policy changes (S3-FIFO, `page_states`): kept on the
        # segments, a victim offered a second chance page by page (`_evict_states`)
        self._stateful = getattr(policy, "page_states", False) is True
        per_page = self._keyed or self._lazy or self._run_keyed or self._valued
        # block mode where any page of a segment may be its first victim (keys or states
        # per page: belady, workload-aware, gdsf, s3fifo): a victim entry per page, which
        # finds its page through the segment's later splits (`_resolve`, `Segment.above`)
        self._page_entries = self._any_victim and (per_page or self._stateful)
        self._stamp = 0  # the page entries' tie-breaker: each one pushed numbered
        # the policy's key of a page state, or of a page by its id and its segment's last
        # access and recency (`_page_key`), bound once: a call, not a lookup, per page
        self._key_of = (policy.key_of if self._stateful
                        else policy.access_key if self._lazy else None)
        self._key = (self._tail_key if per_page else self._state_key if self._stateful
                     else self._aged_key if self._aging is not None else policy.key)
        # a key that is a segment's field is read, not called (`_victim_key`)
        self._key_field = (key_field_code(policy)
                           if self._aging is None and not per_page and not self._stateful
                           else 0)
        # A key that losing tail pages leaves alone (recency, deadline): a partly evicted
        # segment keeps its queued entry (`evict`)
        self._steady_key = self._key_field == 1 or self._key_field == 3
        self._sliding = ttl is not None and ttl.refreshes_on_access
        self._ttl_s = INFINITY if ttl is None else ttl.ttl_s
        # called with each page eviction takes out (lower tiers: cache/tiers.py), as on
        # RadixCache; None: nothing below
        self.on_demote = None
        # a prefix index following this cache (router/index.py): a RunFeed; None: nobody
        self.observer: RunFeed | None = None
        if self._stateful:  # its budgets from the capacity; `requeue` when a key moves
            policy.bind_cache(self)

    @property
    def capacity_tokens(self) -> int | None:
        """The capacity in tokens (None: unbounded). Kept beside it as `_bounded` and
        `_capacity` (0 when unbounded), which compiled are C fields: a replay's capacity
        checks make no int object."""
        return self._capacity_tokens

    @capacity_tokens.setter
    def capacity_tokens(self, value: int | None) -> None:
        self._capacity_tokens = value
        self._bounded = value is not None
        self._capacity = 0 if value is None else value

    @staticmethod
    def supports(policy: EvictionPolicy, mode: CacheMode = CacheMode.RADIX,
                 by_access: bool = False, whole_paths: bool = False) -> bool:
        """Whether a replay with `policy` in `mode` can run here (see the module docstring;
        `by_access`: as the constructor's, where a policy's keys come from each page's
        access, so a page-keyed one must be `access_keyed`). Block mode only where every
        request touches its whole path (`whole_paths`: a cache-only replay) and the
        policy's own class declares `parents_outlast_children` (a subclass that changes
        the key must declare it again): eviction then takes the leaves radix mode takes; or
        anywhere where the policy's own class declares `shared_key` or `head_first`, or the
        policy keeps keys or states per page (or, a GreedyDual one, declares `run_valued`):
        every unlocked segment is then a victim, its pages taken from its tail, its head,
        or (per page) in the order of their own entries, and the pages below one that
        leaves are kept as orphans until a request reaches them again."""
        keyed = "access_keyed" if by_access else "page_keyed"
        per_page = (getattr(policy, keyed, False) is True
                    or getattr(policy, "run_keyed", False) is True
                    or getattr(policy, "page_states", False) is True)
        if CacheMode(mode) is CacheMode.BLOCK:
            return ((whole_paths and _declares(policy, "parents_outlast_children"))
                    or _declares(policy, "shared_key") or _declares(policy, "head_first")
                    or per_page or (isinstance(policy, GreedyDualPolicy)
                                    and _declares(policy, "run_valued")))
        if CacheMode(mode) is not CacheMode.RADIX:
            return False
        return type(policy).node_uniform is True or per_page

    # ----------------------------------------------------------------- accounting
    @property
    def num_pages(self) -> int:
        return self._num_pages

    def orphan_tokens(self) -> int:
        """Tokens of the resident pages whose parent is gone (block mode: an orphan
        segment's first page; charged, unreachable), as RadixCache reports them."""
        total = 0
        for node in self._orphans.values():
            total += node.page_tokens if _ids.id_count(node.ids) > 1 else node.last_tokens
        return total

    def segments(self) -> list[Segment]:
        """All resident segments, parents before children (orphans too)."""
        out: list[Segment] = []
        stack = list(self._roots.values())
        stack.extend(self._orphans.values())
        while stack:
            node = stack.pop()
            out.append(node)
            if node.children:
                stack.extend(node.children.values())
        return out

    def pages(self) -> Iterator[SegmentPage]:
        """Every resident page, parents before children (as RadixCache.pages)."""
        for node in self.segments():
            seg = node.ids
            size = _ids.id_count(seg)
            for i in range(size):
                yield SegmentPage(_ids.id_at(seg, i),
                                  node.last_tokens if i == size - 1 else node.page_tokens,
                                  node, i)

    def page_ids(self) -> set[int]:
        """The ids of all resident pages (a router's snapshot; no page views built)."""
        out: set[int] = set()
        for node in self.segments():
            out.update(node.ids)
        return out

    def announce_pages(self, observer) -> None:
        """Tell `observer` (a RunFeed) of every resident page, as added: a prefix index
        attached to a cache that holds pages already."""
        for node in self.segments():
            observer.added_run(node.ids, 0, _ids.id_count(node.ids), node)

    def clear(self) -> None:
        """Drop every segment at once (no eviction or expiry counted; the counters stay):
        an empty cache, as built (an aging policy's clock L back at 0; what a policy has
        learned, workload-aware's counts, stays with the policy). A segment and its
        parent reference each other, so a tree dropped whole would be freed only by the
        cyclic collector, which walks every segment first (half a second for a 1M-request
        run's tree, and the runs pause it: a curve's trees would pile up); cleared, each
        segment goes by reference counting as its last reference does. A cache that is
        itself freed takes its tree apart (`__del__`), so a replay's caller need not. A
        page-state policy (S3-FIFO) is told the pages left, as by expiry."""
        if self._stateful:
            for node in self.segments():
                self._leave_states(node, False)
        self._take_apart()
        if self._aging is not None:  # an aging policy's clock L starts again, as built
            self._aging.clock = 0.0
        self._roots = {}
        self._orphans = {}
        if self._ids is not None:
            self._ids = set()
        self._victims = OrderedQueue()
        self._deadlines = DeadlineRun(not self._any_victim)
        self.resident_tokens = 0
        self.num_segments = 0
        self._num_pages = 0

    def _take_apart(self) -> None:
        """Unlink every segment from its parent and children (the cycles), marking it gone;
        reads no module name, so that it also runs as the interpreter shuts down."""
        roots = getattr(self, "_roots", None)  # None: __init__ stopped before making it
        orphans = getattr(self, "_orphans", None)
        if not roots and not orphans:
            return
        stack = list(roots.values()) if roots else []
        if orphans:
            stack.extend(orphans.values())
        while stack:
            node = stack.pop()
            node.parent = None
            node.above = None
            node.below = None
            node.resident = False
            children = node.children
            if children:
                stack.extend(children.values())
                node.children = None

    def __del__(self) -> None:
        self._take_apart()

    # ------------------------------------------------------------- one request
    def access(self, page_ids: Sequence[int], now: float, recency: int, page_tokens: int,
               input_tokens: int, first: int = 0, stop: int = -1) -> int:
        """Part A for one request, at `now`, replay position `recency`: drop expired pages,
        match the longest resident prefix of `page_ids` (a match ending inside a segment
        splits it, R4), refresh the matched path (R5), evict while the new pages do not fit
        (the path protected), insert them as one segment as far as they fit. Pages hold
        `page_tokens` but the last, which holds the rest of `input_tokens`. Returns the
        matched pages. Raises ChainConflict when the ids are not chained. The request's ids
        may be a part of `page_ids`, `page_ids[first:stop]` (`stop` -1: to the end), as the
        chunk replay passes a block's array (engine/cache_only_fast.py): positions below
        are indices into `page_ids`."""
        block = page_ids if _ids.is_id_array(page_ids) else id_array(page_ids)
        n = _ids.id_count(block) if stop < 0 else stop
        if not 0 <= first <= n <= _ids.id_count(block):  # compiled, ids are read unchecked
            raise ValueError(f"ids [{first}:{stop}] out of {_ids.id_count(block)} page ids")
        if self._any_victim:  # block mode with orphans: RadixCache's steps, one by one
            return self._access_steps(_ids.id_run(block, first, n), now, recency, page_tokens,
                                      input_tokens)
        self._clock = now
        if self.ttl is not None:
            self.expire(now)
        keys = None
        if self._keyed:
            keys = tuple(self.policy.request_keys(recency))
        run_keyed = self._run_keyed
        category = _ids.id_at(block, first) if run_keyed and first < n else 0
        # hit ages (cache/idle_ages.py), added per run of matched segments last used together
        run_last = _NO_TIME  # equal to no time: no run yet
        run_pages = 0
        pos = first
        tip: Segment | None = None
        children: dict[int, Segment] | None = self._roots
        sliding = self._sliding
        refresh = now + self._ttl_s  # a sliding TTL's new deadline
        aging = self._aging
        # Chained ids (a caller's promise, `chained`: no resident-id set): an id fixes its
        # whole prefix, so two runs below the same matched path agree up to a position iff
        # their ids at that position are equal; no slice of ids is compared.
        chained = self._ids is None
        while pos < n and children:
            node = children.get(_ids.id_at(block, pos))
            if node is None:
                break
            seg = node.ids
            size = _ids.id_count(seg)
            end = pos + size
            whole = end <= n and _ids.id_at(block, end - 1) == _ids.id_at(seg, size - 1) and (
                chained or _ids.same_ids(block, pos, seg, size))
            if not whole:  # the match ends inside `node`
                lo = _match_length(block, pos, seg, size, n, chained)
                node = self._split(node, lo)
                end = pos + lo
            if node.last_access_s == run_last:
                run_pages += end - pos
            else:
                if run_pages:
                    self._hit_ages[age_bin(now - run_last)] += run_pages
                run_last = node.last_access_s
                run_pages = end - pos
            node.last_access_s = now
            node.recency = recency
            node.num_hits += 1
            if keys is not None:
                node.keys = keys[pos - first:end - first]
            elif run_keyed:  # the policy's on_access, page by page
                node.keys = tuple(self.policy.run_keys(category, node.depth, end - pos,
                                                       node.num_hits))
            elif node.states is not None:  # the policy's on_access, page by page
                self.policy.hit_run(node.states)
            if aging is not None:  # GreedyDualPolicy.on_access, for each of its pages
                node.aged_base = aging.clock
            if sliding and refresh > node.deadline_s:
                node.deadline_s = refresh
            tip = node
            pos = end
            if not whole:
                break
            children = node.children
        if run_pages:
            self._hit_ages[age_bin(now - run_last)] += run_pages
        try:
            if pos < n:
                last = input_tokens - page_tokens * (n - first - 1)
                new_tokens = page_tokens * (n - 1 - pos) + last
                if self._bounded and new_tokens > self._capacity - self.resident_tokens:
                    self.evict(new_tokens, tip)
                self.insert_run(tip, block, pos, page_tokens, last, now, recency, keys, n,
                                first)
        finally:
            # The refreshed path's last segment is queued once the new pages are in, if it
            # is still a leaf: queued before them, its entry would go stale as they land
            # below it, and the new segment's entry (same recency, deeper) would come before
            # it, out of the victim queue's sorted run. Eviction protects it either way; a
            # ChainConflict leaves it queued.
            if tip is not None and not tip.children:
                self._queue(tip)
        return pos - first

    def _access_steps(self, ids, now: float, recency: int, page_tokens: int,
                      input_tokens: int) -> int:
        """`access` in block mode with orphans, as the step-by-step replay takes a request
        (engine/cache_only.py): match (re-adopting orphans it reaches), touch, evict with
        the matched path protected, insert the rest (re-adopting orphans among it)."""
        count = _ids.id_count(ids)
        path = self.match(ids, now).pages
        matched = len(path)
        self.touch(path, now, recency)
        if matched < count:
            tokens = [page_tokens] * (count - matched)
            tokens[-1] = input_tokens - page_tokens * (count - 1)
            tip = path[-1] if matched else None
            self.evict(sum(tokens), tip)
            self.insert(tip, _ids.id_run(ids, matched, count), tokens, now, recency)
        return matched

    def _split(self, node: Segment, k: int) -> Segment:
        """Split `node` after its first `k` pages (R4); returns the new prefix half. The
        suffix keeps the object, its statistics and its queued entries (its tail is
        unchanged); the prefix copies the statistics."""
        seg = node.ids
        first = node.first  # the prefix takes the suffix's place (and key) in its parent
        prefix = _new_segment(_ids.id_run(seg, 0, k), first, node.parent, node.depth,
                              node.page_tokens, node.page_tokens, node.created_s, node.recency,
                              node.deadline_s, node.priority)
        prefix.last_access_s = node.last_access_s
        prefix.num_hits = node.num_hits
        prefix.inserted = node.inserted - (_ids.id_count(seg) - k)  # its last page's order
        prefix.aged_base = node.aged_base
        prefix.lock_count = node.lock_count  # a lock holds a whole path: both halves
        keys = node.keys
        if keys is not None:
            prefix.keys = keys[:k]
            node.keys = keys[k:]
        states = node.states
        if states is not None:
            prefix.states = states[:k]
            node.states = states[k:]
            for state in prefix.states:
                state.holder = prefix
        node.first = key = _ids.id_at(seg, k)
        prefix.children = {key: node}
        parent = node.parent
        if parent is None and node.lost is not None:  # an orphan's first pages
            self._orphans[first] = prefix
            prefix.lost = node.lost
            node.lost = None
        else:
            (self._roots if parent is None else parent.children)[first] = prefix
        _ids.drop_first(seg, k)  # in place: the suffix keeps its array (its own, see Segment)
        node.parent = prefix
        node.depth += k
        node.num_tokens -= prefix.num_tokens
        self.num_segments += 1
        if self.observer is not None:  # the first k pages are the prefix's now
            self.observer.moved_run(prefix.ids, 0, k, prefix)
        # its entries numbered past the suffix's, which they may tie with on (key, recency,
        # depth, id): its head's, in block mode head first (no two entries are equal)
        prefix.version = node.version
        if self._page_entries:  # the pages' entries find them through `above`
            above = node.above
            prefix.above = above
            if above is not None:
                above.below = prefix
            node.above = prefix
            prefix.below = node
            if self.ttl is not None and not prefix.lock_count:
                self._deadlines.push(prefix)
        elif self._any_victim and not prefix.lock_count:  # its pages are victims too
            self._queue(prefix)
            if self._head_first:  # the suffix's head is another page now
                self._queue(node, with_deadline=False)
        return prefix

    # ------------------------------ RadixCache's steps (Part A by request, Part B)
    # docs/cache-semantics.md's steps one by one, as RadixCache takes them and with its
    # results, for the replays that drive a cache step by step (request classes, tiers, a
    # pool; a timed replica's locks and reservations): a matched or inserted run of pages
    # is a SegmentRun, the segments holding it, whose last one ends at the run's last page
    # (a run ending inside a segment splits it, which no count sees) and is what a request
    # locks (its tip).
    def match(self, page_ids: Sequence[int], now: float) -> MatchResult:
        """The longest resident prefix of `page_ids` (R3), its pages a SegmentRun; expired
        pages are dropped first, nothing is refreshed (RadixCache.match)."""
        self._clock = now
        if self.ttl is not None:
            self.expire(now)
        return MatchResult(SegmentRun(self._walk(None, page_ids, 0, [])))

    def matched_pages(self, page_ids: Sequence[int], now: float) -> int:
        """How many pages `match(page_ids, now)` would find (expired pages dropped first),
        without splitting the segment where it ends: a shared pool's write of a chain it
        may hold whole already (cache/pool.py; each page HBM evicts writes its chain, one
        page shorter than the last, which a match would split off one page at a time)."""
        self._clock = now
        if self.ttl is not None:
            self.expire(now)
        block = page_ids if _ids.is_id_array(page_ids) else id_array(page_ids)
        n = _ids.id_count(block)
        pos = 0
        chained = self._ids is None
        children = self._roots
        while pos < n and children:
            node = children.get(_ids.id_at(block, pos))
            if node is None:
                break
            seg = node.ids
            size = _ids.id_count(seg)
            if pos + size > n or not _ids.same_ids(block, pos, seg, size):
                return pos + _match_length(block, pos, seg, size, n, chained)
            pos += size
            children = node.children
        return pos

    def _walk(self, parent: Segment | None, page_ids: Sequence[int], start: int,
              path: list[Segment]) -> list[Segment]:
        """Append to `path` the segments matching `page_ids[start:]` below `parent` (None:
        from the roots), splitting the last where the match ends inside it; returns `path`.
        In block mode an orphan whose lost parent is the page the match has reached is
        re-adopted there and matched on (as RadixCache.match finds it by its id)."""
        block = page_ids if _ids.is_id_array(page_ids) else id_array(page_ids)
        n = _ids.id_count(block)
        pos = start
        chained = self._ids is None
        any_victim = self._any_victim
        tip = parent
        children = self._roots if parent is None else parent.children
        while pos < n:
            node = children.get(_ids.id_at(block, pos)) if children else None
            if node is None:
                if tip is None or not self._orphans:
                    break
                node = self._adopt(tip, _ids.id_at(block, pos))
                if node is None:
                    break
            seg = node.ids
            size = _ids.id_count(seg)
            end = pos + size
            whole = end <= n and _ids.same_ids(block, pos, seg, size)
            if not whole:  # the match ends inside `node`
                lo = _match_length(block, pos, seg, size, n, chained)
                node = self._split(node, lo)
                end = pos + lo
            path.append(node)
            tip = node
            pos = end
            if not whole and not any_victim:
                break
            children = node.children
        return path

    def run_from(self, run: SegmentRun, start: int) -> SegmentRun:
        """The pages of `run` (a match's, from the root) from position `start` on, as a run
        of their own (a RadixCache page list's `[start:]`): the segment holding pages on
        both sides of `start` is split there (R4: no page or count changes). A shared pool
        refreshes only what it adds to HBM's match (cache/pool.py)."""
        segments = run.segments
        pos = 0
        for i in range(len(segments)):
            node = segments[i]
            size = _ids.id_count(node.ids)
            if pos + size > start:
                if start > pos:
                    self._split(node, start - pos)  # `node` keeps the pages from `start`
                return SegmentRun(segments[i:])
            pos += size
        return SegmentRun([])

    def touch(self, pages: SegmentRun, now: float, recency: int,
              ttl_s: float | None = None, priority: int = 0) -> None:
        """Refresh a match's pages as a hit (R5; RadixCache.touch): last access, recency,
        hits, a sliding TTL's deadline (`ttl_s`: the request's, R16), priority raised to
        `priority`; the tip queued if it is an unlocked leaf. A run that starts below the
        root (a shared pool's, `run_from`) raises its ancestors' deadlines to its first
        segment's (R12), as RadixCache.touch."""
        path = pages.segments
        if not path:
            return
        sliding = self._sliding
        refresh = now + (self._ttl_s if ttl_s is None else ttl_s)
        aging = self._aging
        # a page-keyed policy's keys of the request's pages, from its first (as `access`)
        keys = tuple(self.policy.request_keys(recency)) if self._keyed else None
        run_keyed = self._run_keyed
        category = _category(path[0]) if run_keyed else 0
        pos = 0
        for node in path:
            size = _ids.id_count(node.ids)
            if keys is not None:
                node.keys = keys[pos:pos + size]
            pos += size
            self._hit_ages[age_bin(now - node.last_access_s)] += size
            node.last_access_s = now
            node.recency = recency
            node.num_hits += 1
            if run_keyed:  # the policy's on_access, page by page
                node.keys = tuple(self.policy.run_keys(category, node.depth, size,
                                                       node.num_hits))
            elif node.states is not None:
                self.policy.hit_run(node.states)
            if priority > node.priority:
                node.priority = priority
            if aging is not None:
                node.aged_base = aging.clock
                if self._valued:
                    node.keys = self._valued_keys(node, node.parent)
            if sliding and refresh > node.deadline_s:
                node.deadline_s = refresh
        if self._any_victim:  # block mode: every page touched is queued again, and a run
            self._queue_unlocked(path)  # below the root raises no ancestor (RadixCache)
            return
        if sliding:  # a run below the root (`run_from`): its ancestors live as long (R12)
            node = path[0]
            deadline = node.deadline_s
            node = node.parent
            while node is not None and node.deadline_s < deadline:
                node.deadline_s = deadline
                node = node.parent
        tip = path[-1]
        if not tip.children and not tip.lock_count:
            self._queue(tip)

    def insert(self, parent: Segment | None, page_ids: Sequence[int],
               page_tokens: Sequence[int], now: float, recency: int,
               ttl_s: float | None = None, priority: int = 0) -> SegmentRun:
        """Add a chain of pages below `parent` (RadixCache.insert): the pages already
        resident there are reused (R7), the rest go in as one segment, as many as fit
        beside the reservations without evicting. Returns the pages placed (reused or new;
        none: empty). `page_tokens`: each page's tokens, equal but for the last (as a
        prompt's pages are)."""
        self._clock = now  # when later evictions happen (idle ages), as RadixCache.insert
        count = len(page_ids)
        if len(page_tokens) != count:
            raise ValueError(f"{count} page ids but {len(page_tokens)} page token counts")
        block = page_ids if _ids.is_id_array(page_ids) else id_array(page_ids)
        keys = None
        if self._keyed:  # the keys of these pages: the request's from the parent's end on
            start = 0 if parent is None else parent.depth + _ids.id_count(parent.ids)
            keys = tuple(self.policy.request_keys(recency))[start:start + count]
        path = self._walk(parent, block, 0, [])
        placed = sum([_ids.id_count(node.ids) for node in path])
        tip = path[-1] if path else parent
        if placed < count:
            size = page_tokens[placed]
            if list(page_tokens[placed:count - 1]).count(size) != count - 1 - placed:
                raise ValueError("the compressed cache takes pages of one size but the last")
            if self._any_victim:
                return self._insert_adopting(path, tip, block, placed, size,
                                             page_tokens[count - 1], now, recency,
                                             -1.0 if ttl_s is None else ttl_s, priority,
                                             keys)
            if self.insert_run(tip, block, placed, size, page_tokens[count - 1], now, recency,
                               keys, count, 0, -1.0 if ttl_s is None else ttl_s, priority):
                first_id = _ids.id_at(block, placed)
                path.append(self._roots[first_id] if tip is None else tip.children[first_id])
                return SegmentRun(path)
        if self._any_victim:
            self._queue_unlocked(path)
        elif path and not path[-1].children and not path[-1].lock_count:
            self._queue(path[-1])
        return SegmentRun(path)

    def _insert_adopting(self, path: list[Segment], tip: Segment | None, block, placed: int,
                         size: int, last_tokens: int, now: float, recency: int, ttl_s: float,
                         priority: int, keys: tuple | None = None) -> SegmentRun:
        """`insert`'s new pages in block mode with orphans, `block[placed:]` below `tip`:
        a new segment up to the next orphan whose lost parent is the page before it, which
        is re-adopted there and matched on, and so on while every new page fits (as
        RadixCache.insert reuses an orphan it meets by its id). Every segment placed is
        queued again; returns them all, `path`'s first. `keys`: a page-keyed policy's keys
        of `block`'s pages."""
        count = _ids.id_count(block)
        while placed < count:
            stop = self._next_orphan(block, placed + 1, count) if self._orphans else count
            fit = self.insert_run(tip, block, placed, size,
                                  last_tokens if stop == count else size, now, recency,
                                  keys, stop, 0, ttl_s, priority)
            if fit == 0:
                break
            first_id = _ids.id_at(block, placed)
            tip = self._roots[first_id] if tip is None else tip.children[first_id]
            path.append(tip)
            placed += fit
            if placed < stop or stop == count:
                break
            before = len(path)
            self._walk(tip, block, placed, path)  # the orphan at `stop`, and on
            for i in range(before, len(path)):
                placed += _ids.id_count(path[i].ids)
            tip = path[-1]
        self._queue_unlocked(path)
        return SegmentRun(path)

    def _next_orphan(self, block, lo: int, hi: int) -> int:
        """The first position in [lo, hi) of `block` holding an orphan's first id whose lost
        parent is the id before it (`hi` if none)."""
        orphans = self._orphans
        for i in range(lo, hi):
            node = orphans.get(_ids.id_at(block, i))
            if node is not None and node.lost[1] == _ids.id_at(block, i - 1):
                return i
        return hi

    def _adopt(self, parent: Segment, first_id: int) -> Segment | None:
        """Block mode: the orphan whose first id is `first_id`, re-attached below `parent`
        if its lost parent was `parent`'s last page (RadixCache._adopt), else None. Its
        ancestors live as long as it (R12)."""
        orphan = self._orphans.get(first_id)
        if orphan is None:
            return None
        seg = parent.ids
        if orphan.lost[1] != _ids.id_at(seg, _ids.id_count(seg) - 1):
            return None
        del self._orphans[orphan.first]
        orphan.lost = None
        orphan.parent = parent
        if parent.children is None:
            parent.children = {}
        parent.children[orphan.first] = orphan
        if orphan.deadline_s > parent.deadline_s:
            self._raise_deadlines(parent, orphan.deadline_s)
        return orphan

    def _raise_deadlines(self, node: Segment | None, deadline: float) -> None:
        """Keep `node` and its ancestors alive at least until `deadline` (R12); in block mode
        with orphans each unlocked one raised is queued again (its deadline entry, and its
        victim entry under its key now, which may read the deadline: RadixCache too)."""
        requeue = self._any_victim
        while node is not None and node.deadline_s < deadline:
            node.deadline_s = deadline
            if requeue and not node.lock_count:
                if self._page_entries:  # no key per page reads the deadline
                    self._deadlines.push(node)
                else:
                    self._queue(node)
            node = node.parent

    def _queue_unlocked(self, path: list[Segment]) -> None:
        """Queue again each unlocked segment of `path` (block mode: every page a request
        touched or placed, as RadixCache queues them)."""
        for node in path:
            if not node.lock_count:
                self._queue(node)

    def _orphan_children(self, node: Segment) -> None:
        """Block mode: `node`'s last page is about to leave; its children become orphans,
        each naming the chain of that page (`Segment.lost`): a link of the pages from the
        top of `node`'s path down to it, below the lost chain of that top when it is an
        orphan (shared, not copied)."""
        ids, tokens, above = _path_pages(node, _ids.id_count(node.ids))
        lost = (ids[0] if above is None else above[0], ids[-1], above, ids, tokens)
        for child in node.children.values():
            child.parent = None
            child.lost = lost
            self._orphans[child.first] = child
        node.children = None

    def lock(self, node: Segment) -> None:
        """Lock `node` and its whole prefix for a running request (R8)."""
        while node is not None:
            if node.lock_count == 0:
                self.locked_tokens += node.num_tokens
            node.lock_count += 1
            node = node.parent

    def relock(self, old: Segment | None, node: Segment, now: float) -> None:
        """`lock(node)` then `unlock(old, now)` (RadixCache.relock): where `old` is on
        `node`'s path only the segments below it gain a lock."""
        while node is not None and node is not old:
            if node.lock_count == 0:
                self.locked_tokens += node.num_tokens
            node.lock_count += 1
            node = node.parent
        if old is None:
            return
        if node is None:
            self.unlock(old, now)
        elif self.ttl is not None:
            self.expire(now)

    def unlock(self, node: Segment, now: float) -> None:
        """Release a lock taken by `lock(node)`; expired pages it held are freed (R12)."""
        while node is not None:
            if node.lock_count <= 0:
                raise ValueError(f"unlock of an unlocked segment: {node!r}")
            node.lock_count -= 1
            if node.lock_count == 0:
                self.locked_tokens -= node.num_tokens
                if node.resident and (not node.children or self._any_victim):
                    self._queue(node)
            node = node.parent
        if self.ttl is not None:
            self.expire(now)

    def available_tokens(self) -> float:
        """`free_tokens + evictable_tokens` (R10; inf when unbounded)."""
        if not self._bounded:
            return INFINITY
        return self._capacity - self.reserved_tokens - self.locked_tokens

    def reserve(self, num_tokens: int) -> None:
        """Charge `num_tokens` of private KV against capacity (R13; RadixCache.reserve)."""
        if num_tokens < 0:
            raise ValueError(f"cannot reserve {num_tokens} tokens")
        if self._bounded and (num_tokens
                              > self._capacity - self.resident_tokens - self.reserved_tokens):
            raise ValueError(f"reserving {num_tokens} tokens, only {self.free_tokens} free")
        self.reserved_tokens += num_tokens

    def release(self, num_tokens: int) -> None:
        """Return `num_tokens` of a `reserve`."""
        if not 0 <= num_tokens <= self.reserved_tokens:
            raise ValueError(f"releasing {num_tokens} of {self.reserved_tokens} reserved")
        self.reserved_tokens -= num_tokens

    # --------------------------------------------------------------------- insert
    def insert_run(self, parent: Segment | None, page_ids: Sequence[int], start: int,
               page_tokens: int, last_tokens: int, now: float, recency: int,
               keys: tuple | None = None, stop: int = -1, first: int = 0,
               ttl_s: float = -1.0, priority: int = 0) -> int:
        """Add `page_ids[start:stop]` (`stop` -1: to the end) below `parent` as one segment,
        as many pages as fit without evicting (every page holds `page_tokens` but the last,
        `last_tokens`); `keys`: a page-keyed policy's keys of the request's pages,
        `page_ids[first:stop]` (`access` passes them); `ttl_s`: the request's TTL (R16:
        its class's; negative: the cache's), `priority` its pages' priority. Returns the
        pages inserted. Raises
        ChainConflict, before changing anything, when an id it reaches is already resident
        (or repeats in the run): the ids are not chained."""
        block = page_ids if _ids.is_id_array(page_ids) else id_array(page_ids)
        if stop < 0:
            stop = _ids.id_count(block)
        if not (0 <= start and stop <= _ids.id_count(block)):  # compiled, read unchecked
            raise ValueError(f"ids [{start}:{stop}] out of {_ids.id_count(block)} page ids")
        total = stop - start
        if total <= 0:
            return 0
        bounded = self._bounded
        fit = total
        if bounded:
            free = self._capacity - self.resident_tokens - self.reserved_tokens
            if page_tokens * (total - 1) + last_tokens > free:
                fit = min(total - 1, free // page_tokens)
                last_tokens = page_tokens
        run = _ids.id_run(block, start, start + fit)
        # Every id placed must be new, and so must the first one that did not fit (RadixCache
        # looks an id up before it checks that its page fits).
        ids = self._ids
        if ids is not None:
            before = len(ids)
            ids.update(run)
            if len(ids) != before + fit or (fit < total and _ids.id_at(block, start + fit) in ids):
                self._chain_conflict(_ids.id_run(block, start, min(start + fit + 1, stop)))
        if fit == 0:
            return 0
        ttl = self.ttl
        # infinite without a TTL
        deadline = now + (self._ttl_s if ttl_s < 0 or ttl is None else ttl_s)
        depth = 0 if parent is None else parent.depth + _ids.id_count(parent.ids)
        first_id = _ids.id_at(run, 0)  # its key in its parent's child map (or the roots)
        node = _new_segment(run, first_id, parent, depth, page_tokens, last_tokens, now, recency,
                            deadline, priority)
        node.inserted = self.counters.inserted_pages + fit - 1  # as RadixCache numbers pages
        if keys is not None:
            node.keys = keys[start - first:start - first + fit]
        elif self._run_keyed:  # the policy's on_insert, page by page
            node.keys = tuple(self.policy.run_keys(first_id if parent is None
                                                   else _category(parent), depth, fit, 0))
        aging = self._aging
        if aging is not None:  # GreedyDualPolicy.on_insert, for each new page
            node.aged_base = aging.clock
            if self._valued:
                node.keys = self._valued_keys(node, parent)
        if parent is None:
            self._roots[first_id] = node
        else:
            if parent.children is None:
                parent.children = {}
            parent.children[first_id] = node
            if deadline != _NEVER:  # ancestors live as long as the new pages (R12, C11)
                if self._any_victim:
                    self._raise_deadlines(parent, deadline)
                else:
                    anc: Segment | None = parent
                    while anc is not None and anc.deadline_s < deadline:
                        anc.deadline_s = deadline
                        anc = anc.parent
        if self._stateful:  # the policy's on_insert, page by page (once linked: its
            # overflow may re-key other segments, and the parent is no leaf now)
            node.states = self.policy.enter_run(run, 0, fit, page_tokens, last_tokens, node)
        self.num_segments += 1
        self._num_pages += fit
        if self.observer is not None:
            self.observer.added_run(run, 0, fit, node)
        tokens = node.num_tokens
        self.resident_tokens = resident = self.resident_tokens + tokens
        counters = self.counters
        counters.inserted_pages += fit
        counters.inserted_tokens += tokens
        if resident > counters.peak_tokens:
            counters.peak_tokens = resident
        # self._queue(node), inlined: a new segment is a leaf (its version is 0).
        if bounded and self._head_first:
            self._victims.push(self._head_entry(node, 0))
        elif bounded and not self._page_entries:  # (page entries: `_insert_adopting`
            # queues every segment it placed once they are all in)
            key = self._victim_key(node)  # LRU's key is the recency: one int for both
            self._victims.push((key, key if self._key_field == 1 else recency,
                                -(depth + fit - 1), _ids.id_at(run, fit - 1), 0, node))
        if ttl is not None:
            self._deadlines.push(node)
        self._until_compact -= 1
        if self._until_compact <= 0:
            self._compact()
        return fit

    def _chain_conflict(self, checked: Sequence[int]) -> None:
        """Restore the resident ids (an insert added some) and raise ChainConflict naming the
        first id of `checked` that was resident or repeats."""
        self._ids = ids = set()
        for node in self.segments():
            ids.update(node.ids)
        seen: set[int] = set()
        for page_id in checked:
            if page_id in ids or page_id in seen:
                raise ChainConflict(
                    f"page id {page_id} is already cached after a different prefix")
            seen.add(page_id)
        raise AssertionError("no conflicting id found")  # pragma: no cover

    # -------------------------------------------------------------- evict, expire
    def evict(self, num_tokens: int, protect: Segment | None = None) -> bool:
        """Evict leaf pages one at a time (from leaf segments' tails) until `num_tokens` are
        free (R10); `protect` (a matched path's last segment) is never evicted. Returns
        whether the space is free; when it cannot be, everything evictable is gone. In block
        mode with orphans any unlocked segment's tail pages go (its children left as
        orphans), and `protect`'s whole path is kept."""
        if not self._bounded:
            return True
        need = num_tokens - (self._capacity - self.resident_tokens - self.reserved_tokens)
        if need <= 0:
            return True
        if self._page_entries:
            return self._evict_pages(need, protect)
        if self._stateful:
            return self._evict_states(need, protect)
        if self._head_first:
            return self._evict_heads(need, protect)
        queue = self._victims
        counters = self.counters
        ages = self._evicted_ages
        clock = self._clock
        aging = self._aging
        skipped = None  # the protected segment's entries, pushed back after
        pages_out = tokens_out = 0  # added to the counters once, at the end
        steady = self._steady_key
        run_keyed = self._run_keyed
        per_page = self._keyed or self._lazy or run_keyed
        any_victim = self._any_victim
        # block mode: the protected path above `protect`
        protected = _path_above(protect) if any_victim and protect is not None else None
        try:
            while need > 0 and queue:
                entry = queue.head()  # taken out below, unless it stays (`steady`)
                node = entry[-1]
                if (entry[-2] != node.version or not node.resident
                        or (node.children and not any_victim) or node.lock_count):
                    queue.pop()
                    continue
                if node is protect or (protected is not None and node in protected):
                    queue.pop()
                    if skipped is None:
                        skipped = []
                    skipped.append(entry)
                    continue
                if not steady:
                    queue.pop()
                if (aging is not None and not run_keyed
                        and entry[0] > aging.clock):  # GreedyDualPolicy.on_evict: L rises
                    aging.clock = entry[0]  # to the leavers' highest key (the tail's)
                seg = node.ids
                size = _ids.id_count(seg)
                last = node.last_tokens
                page = node.page_tokens
                k = 1 if need <= last else 2 + (need - last - 1) // page  # pages to free
                if k > 1 and per_page and queue:
                    k = self._keyed_run(node, k, queue.head())
                if run_keyed and aging is not None:  # L rises to the leavers' highest key
                    top = max(node.keys[size - min(k, size):])
                    if top > aging.clock:
                        aging.clock = top
                if node.children:  # block mode: the pages below the tail are orphans now
                    self._orphan_children(node)
                if self.on_demote is not None:  # lower tiers take what leaves (R15)
                    self._demote(node, min(k, size))
                if k >= size:
                    if steady:
                        queue.pop()
                    need -= node.num_tokens
                    pages_out += size
                    tokens_out += node.num_tokens
                    ages[age_bin(clock - node.last_access_s)] += size
                    self._remove(node)
                    continue
                tokens = last + page * (k - 1)
                need -= tokens
                pages_out += k
                tokens_out += tokens
                ages[age_bin(clock - node.last_access_s)] += k
                self._drop_tail(node, k, tokens)
                if not steady:  # its key moved: queued again (its deadline entry stays valid)
                    self._queue(node, with_deadline=False)
        finally:
            counters.evicted_pages += pages_out
            counters.evicted_tokens += tokens_out
        if skipped is not None:
            for entry in skipped:
                queue.push(entry)
        return need <= 0

    def _evict_states(self, need: int, protect: Segment | None) -> bool:
        """`evict` under a policy that keeps a state per page (S3-FIFO): the least leaf
        segment's tail page goes unless the policy gives it a second chance (the segment
        is then queued again under its tail's new key), one page at a time, as RadixCache
        takes leaves with `reconsider`."""
        queue = self._victims
        policy = self.policy
        counters = self.counters
        ages = self._evicted_ages
        clock = self._clock
        skipped = None
        pending = None  # a segment's entry after its tail left, when it is the next victim
        while need > 0:
            if pending is not None:
                entry = pending
                pending = None
            elif queue:
                entry = queue.pop()
            else:
                break
            node = entry[-1]
            if (entry[-2] != node.version or not node.resident or node.children
                    or node.lock_count):
                continue
            if node is protect:
                if skipped is None:
                    skipped = []
                skipped.append(entry)
                continue
            states = node.states
            state = states[-1]
            if policy.second_chance(state):
                self._queue(node, with_deadline=False)
                continue
            seg = node.ids
            size = _ids.id_count(seg)
            tokens = node.last_tokens
            if self.on_demote is not None:
                self._demote(node, 1)
            policy.leave(state, _ids.id_at(seg, size - 1), True)
            need -= tokens
            counters.evicted_pages += 1
            counters.evicted_tokens += tokens
            ages[age_bin(clock - node.last_access_s)] += 1
            if size == 1:
                self._remove(node)
                continue
            self._drop_tail(node, 1, tokens)
            # self._queue(node, with_deadline=False), its entry kept back while it is the
            # least (its new tail is often the next victim: no heap push and pop)
            node.version += 1
            entry = (policy.key_of(states[-1]), node.recency, -(node.depth + size - 2),
                     _ids.id_at(seg, size - 2), node.version, node)
            if need > 0 and (not queue or entry < queue.head()):
                pending = entry
            else:
                queue.push(entry)
                self._until_compact -= 1
                if self._until_compact <= 0:
                    self._compact()
        if pending is not None:
            queue.push(pending)
        if skipped is not None:
            for entry in skipped:
                queue.push(entry)
        return need <= 0

    def _evict_heads(self, need: int, protect: Segment) -> bool:
        """`evict` in block mode where a segment's first victim is its head (fifo: its
        pages' insertion orders follow the head's, and no other page's lie between, so the
        next victims are its next pages): as many pages from the head as `need` asks go at
        once, first page first, as RadixCache takes them; the pages after them go on as an
        orphan (split off first), as do the segment's children when all of it goes; the
        matched path above `protect` is kept whole."""
        queue = self._victims
        counters = self.counters
        ages = self._evicted_ages
        clock = self._clock
        protected = _path_above(protect)
        skipped = []
        while need > 0 and queue:
            entry = queue.pop()
            node = entry[-1]
            if entry[-2] != node.version or not node.resident or node.lock_count:
                continue
            if node is protect or node in protected:
                skipped.append(entry)
                continue
            size = _ids.id_count(node.ids)
            page = node.page_tokens
            k = size if need > page * (size - 1) else max(1, (need + page - 1) // page)
            if k < size:  # the pages after them go on as an orphan
                node = self._split(node, k)
            tokens = node.num_tokens
            need -= tokens
            counters.evicted_pages += k
            counters.evicted_tokens += tokens
            ages[age_bin(clock - node.last_access_s)] += k
            if node.children:
                self._orphan_children(node)
            if self.on_demote is not None:  # first page first, as they leave
                seg = node.ids
                for i in range(k):
                    self.on_demote(_segment_page(_ids.id_at(seg, i),
                                               node.last_tokens if i == k - 1 else page,
                                               node, i))
            self._remove(node)
        for entry in skipped:
            queue.push(entry)
        return need <= 0

    def _head_entry(self, node: Segment, version: int) -> tuple:
        """The victim entry of a segment whose first victim is its head: (key, recency,
        -depth, page id) of its head page (fifo's key: the head's insertion order),
        version, segment."""
        seg = node.ids
        return (node.inserted - (_ids.id_count(seg) - 1), node.recency, -node.depth,
                node.first, version, node)

    def _evict_pages(self, need: int, protect: Segment | None) -> bool:
        """`evict` in block mode under keys or states per page (`_page_entries`), one page
        at a time in the order of their own entries, as RadixCache takes them: the page an
        entry names leaves (unless a page-state policy gives it a second chance: queued
        again under its new key), handed down and told to the policy as it is taken; the
        pages before it in its segment stay, those after it go on as an orphan, as do the
        segment's children when it was the last; the matched path above `protect` is kept
        whole. The pages taken from one segment, each the next page of the one taken
        before from it (a FIFO's head pages; gdsf's, whose value grows along a segment,
        taken in turn with other segments' pages), leave the structure together when that
        run ends (`_leave_run`: a split or two, one orphan chain)."""
        queue = self._victims
        policy = self.policy
        counters = self.counters
        ages = self._evicted_ages
        clock = self._clock
        aging = self._aging
        stateful = self._stateful
        second_chance = policy.second_chance if stateful else None
        leave = policy.leave if stateful else None
        demote = self.on_demote
        protected = _path_above(protect)
        skipped = []
        runs = {}  # segment -> (first, last): its pages taken and still in it
        while need > 0 and queue:
            entry = queue.pop()
            node = self._resolve(entry)
            if node is None:
                continue
            index = -entry[2] - node.depth  # the page's position in its segment
            span = runs.get(node)
            if span is not None and span[0] <= index <= span[1]:
                continue  # taken already (a second entry of its page)
            if node is protect or node in protected:
                skipped.append(entry)
                continue
            state = None
            if stateful:
                state = node.states[index]
                if second_chance(state):
                    self._push_page(node, index)
                    continue
            if aging is not None and entry[0] > aging.clock:  # GreedyDual: L rises
                aging.clock = entry[0]
            if span is None:
                runs[node] = (index, index)
            elif index == span[1] + 1:
                runs[node] = (span[0], index)
            else:  # that run ends; the page may be in another segment after it
                del runs[node]
                self._leave_run(node, span[0], span[1])
                node = self._resolve(entry)
                index = -entry[2] - node.depth
                runs[node] = (index, index)
            tokens = (node.last_tokens if index == _ids.id_count(node.ids) - 1
                      else node.page_tokens)
            need -= tokens
            counters.evicted_pages += 1
            counters.evicted_tokens += tokens
            ages[age_bin(clock - node.last_access_s)] += 1
            if demote is not None:
                demote(_segment_page(entry[3], tokens, node, index))
            if state is not None:
                leave(state, entry[3], True)
        for node, span in runs.items():
            self._leave_run(node, span[0], span[1])
        for entry in skipped:
            queue.push(entry)
        return need <= 0

    def _leave_run(self, node: Segment, first: int, last: int) -> None:
        """Take pages [first, last] of `node` out of the tree (`_evict_pages` counted them,
        handed them down and told the policy): the pages before them stay, those after them
        go on as an orphan (as do the segment's children when the run ends it)."""
        size = _ids.id_count(node.ids)
        if last == size - 1:  # the segment's tail
            if node.children:
                self._orphan_children(node)
            if first == 0:
                self._remove(node)
            else:
                self._drop_tail(node, size - first,
                                node.num_tokens - node.page_tokens * first)
            return
        if first > 0:  # the pages before the run stay (the prefix a split makes)
            self._split(node, first)
        node = self._split(node, last - first + 1)  # the run; `node` goes on as an orphan
        self._orphan_children(node)
        self._remove(node)

    def _push_pages(self, node: Segment) -> None:
        """Queue each page of `node` under its own victim entry (`_page_entries`)."""
        for i in range(_ids.id_count(node.ids)):
            self._push_page(node, i)

    def _push_page(self, node: Segment, i: int) -> None:
        """Queue page `i` of `node` under its key now: (key, recency, -depth, page id, a
        number, the segment), found again through the segment's splits (`_resolve`)."""
        self._stamp = stamp = self._stamp + 1
        self._victims.push((self._page_key(node, i), node.recency, -(node.depth + i),
                            _ids.id_at(node.ids, i), stamp, node))
        self._until_compact -= 1
        if self._until_compact <= 0:
            self._compact()

    def _page_key(self, node: Segment, i: int) -> object:
        """The policy's key of page `i` of `node` under keys or states per page."""
        if node.keys is not None:
            return node.keys[i]
        if node.states is not None:
            return self._key_of(node.states[i])
        return self._key_of(_ids.id_at(node.ids, i), node.last_access_s, node.recency)

    def _valued_keys(self, node: Segment, parent: Segment | None) -> tuple:
        """A `run_valued` policy's priorities of `node`'s pages as a touch or an insert sets
        them (GreedyDualPolicy.on_access / on_insert page by page): L then + each page's
        value, the first page's read below `parent`'s last page."""
        base = node.aged_base
        values = self.policy.run_values(node.depth, _ids.id_count(node.ids), node.page_tokens,
                                        0 if parent is None else parent.last_tokens,
                                        node.num_hits)
        return tuple([base + value for value in values])

    def _resolve(self, entry: tuple) -> Segment | None:
        """The segment now holding the page of a page entry (`_push_page`), if the entry
        still states it (the page resident, unlocked, its key and recency the entry's);
        else None (stale). A split since gave the pages above the segment's first to the
        prefix it made (`Segment.above`); the page's depth never changes. A segment leaving
        the cache leaves the chain of the resident segment naming it (`_unlink`: a page
        it held is then not found in the next one above, whose pages end where its began);
        a gone segment an entry names keeps its own link, and a walk from it takes the
        gone ones it passes out of it, so no chain keeps an evicted segment alive."""
        node = entry[-1]
        depth = -entry[2]
        while depth < node.depth:
            above = node.above
            while above is not None and not above.resident:
                above = above.above
            node.above = above
            node = above
            if node is None:
                return None
        if not node.resident or node.lock_count:
            return None
        seg = node.ids
        i = depth - node.depth
        if i >= _ids.id_count(seg) or _ids.id_at(seg, i) != entry[3] or (
                node.recency != entry[1]):
            return None
        # belady's key comes with the touch that set the recency (the request's keys, or
        # read from the page's id and that touch); a run-keyed policy's may differ between
        # two touches of one recency (one step of a timed replica)
        if (self._run_keyed or self._valued or self._stateful) and (
                self._page_key(node, i) != entry[0]):
            return None
        return node

    def _live_page(self, entry: tuple) -> bool:
        """Whether a page entry still stands for its page (`_resolve`)."""
        return self._resolve(entry) is not None

    def _drop_tail(self, node: Segment, k: int, tokens: int) -> None:
        """Take the last `k` pages (`tokens` in all) out of `node`, which keeps at least
        one: ids, page keys or states, counts; the caller counts the eviction and queues
        the segment again where its key moved."""
        seg = node.ids
        size = _ids.id_count(seg)
        if self._ids is not None:
            self._ids.difference_update(_ids.id_run(seg, size - k, size))
        if self.observer is not None:
            self.observer.removed_run(seg, size - k, size, node)
        self._num_pages -= k
        _ids.drop_last(seg, k)  # in place: a segment's ids are its own (see Segment)
        if node.keys is not None:
            node.keys = node.keys[:size - k]
        if node.states is not None:
            del node.states[size - k:]
        node.inserted -= k
        node.num_tokens -= tokens
        node.last_tokens = node.page_tokens
        self.resident_tokens -= tokens

    def requeue(self, state) -> None:
        """A page's key moved without an access (S3-FIFO's S overflowing: `state`, a
        PageState, is the page's): its segment is queued again where that page is its tail
        and it is an evictable leaf, or in block mode the page alone wherever it is
        (RadixCache.requeue, by state)."""
        node = state.holder
        if node is None or not node.resident or node.lock_count or node.states is None:
            return
        if self._page_entries:  # block mode: any page a victim, by its own entry
            if self._bounded:
                self._push_page(node, _position(node.states, state))
        elif not node.children and node.states[-1] is state:
            self._queue(node, with_deadline=False)

    def _leave_states(self, node: Segment, evicted: bool) -> None:
        """Tell a page-state policy that every page of `node` left."""
        seg = node.ids
        states = node.states
        for i in range(len(states)):
            self.policy.leave(states[i], _ids.id_at(seg, i), evicted)

    def next_expiry_s(self) -> float:
        """A time at or before the least deadline of a page `expire` could free (INFINITY
        when none): the deadline queue's floor, exact after an `expire` that stopped at a
        live page; a replay's sampler reads it to sample the cache as a TTL empties it
        between arrivals (engine/cache_samples.py)."""
        return self._deadlines.floor_s

    def expire(self, now: float) -> int:
        """Free every page whose deadline is before `now`; returns pages freed. A parent
        that an expired leaf leaves a leaf, its own deadline before `now` too, goes at once
        rather than through the deadline queue (it would leave in this call either way;
        their order changes no count)."""
        queue = self._deadlines
        counters = self.counters
        ages = self._expired_ages
        freed = 0
        least = INFINITY  # the exact extremes of the ages counted (AgeHistogram.bound)
        most = -INFINITY
        while True:
            node = queue.pop_below(now)  # a resident leaf, its deadline the entry's
            if node is None:
                break
            while node is not None:
                size = _ids.id_count(node.ids)
                freed += size
                counters.expired_pages += size
                counters.expired_tokens += node.num_tokens
                age = node.deadline_s - node.last_access_s
                ages[age_bin(age)] += size
                if age < least:
                    least = age
                if age > most:
                    most = age
                if node.states is not None:  # the policy's on_expire, page by page
                    self._leave_states(node, False)
                parent = self._unlink(node)
                if parent is not None and (parent.lock_count or not parent.deadline_s < now):
                    if not parent.lock_count:
                        self._queue(parent)
                    parent = None
                node = parent
        if freed:
            counters.expired_ages.bound(least, most, freed)
        return freed

    # ------------------------------------------------------------------- internal
    def _demote(self, node: Segment, k: int) -> None:
        """Hand the `k` tail pages of `node`, about to be evicted, to `on_demote` one by one,
        deepest first (the order RadixCache evicts them in), each as a SegmentPage."""
        seg = node.ids
        size = _ids.id_count(seg)
        demote = self.on_demote
        for i in range(size - 1, size - 1 - k, -1):
            demote(_segment_page(_ids.id_at(seg, i),
                               node.last_tokens if i == size - 1 else node.page_tokens, node, i))

    def _remove(self, node: Segment) -> None:
        """Take a whole leaf segment out; a parent it leaves as a leaf is queued."""
        parent = self._unlink(node)
        if parent is not None and not parent.lock_count:
            self._queue(parent)

    def _unlink(self, node: Segment) -> Segment | None:
        """Take a whole leaf segment out; returns its parent if that is left a leaf (for
        the caller to queue), else None. In block mode with orphans any segment: its
        children become orphans, and None is returned (every segment is queued)."""
        if node.children:
            self._orphan_children(node)
        node.resident = False
        below = node.below
        if below is not None:  # out of the `above` chain of the segment naming it: its
            # own `above` stays, for the entries that name it (`_resolve`)
            below.above = node.above
            node.below = None
        if node.above is not None:
            node.above.below = below
        if self._ids is not None:
            self._ids.difference_update(node.ids)
        if self.observer is not None:
            self.observer.removed_run(node.ids, 0, _ids.id_count(node.ids), node)
        self._num_pages -= _ids.id_count(node.ids)
        self.resident_tokens -= node.num_tokens
        self.num_segments -= 1
        parent = node.parent
        if parent is None:
            if node.lost is not None:
                del self._orphans[node.first]
            else:
                del self._roots[node.first]
            return None
        children = parent.children
        del children[node.first]
        return None if children or self._any_victim else parent

    def _keyed_run(self, node: Segment, k: int, head: tuple) -> int:
        """Under a page-keyed policy, how many of the `k` tail pages of the popped `node` go
        now: the tail, then each page before it while its victim order (key, recency,
        -depth, id) is below `head`, the victim queue's least entry."""
        keys = node.keys
        seg = node.ids
        recency = node.recency
        depth = node.depth
        size = _ids.id_count(seg)
        taken = 1
        while taken < k and taken < size:
            i = size - 1 - taken
            key = (keys[i] if keys is not None
                   else self.policy.access_key(_ids.id_at(seg, i), node.last_access_s,
                                               recency))
            if (key, recency, -(depth + i), _ids.id_at(seg, i)) >= head[:4]:
                break
            taken += 1
        return taken

    def _victim_key(self, node: Segment) -> object:
        """The policy's key of a leaf segment (its last page's): the field it names, read
        (`key_field_code`), or a call."""
        field = self._key_field
        if field == 1:
            return node.recency
        if field == 2:
            return node.inserted
        if field == 3:
            return node.deadline_s
        return self._key(node)

    def _tail_key(self, node: Segment) -> float:
        """A page-keyed policy's key of a leaf segment: its last page's (kept, or read from
        the segment's last access: `by_access`)."""
        keys = node.keys
        if keys is not None:
            return keys[-1]
        seg = node.ids
        return self.policy.access_key(_ids.id_at(seg, _ids.id_count(seg) - 1),
                                      node.last_access_s, node.recency)

    def _state_key(self, node: Segment) -> float:
        """A page-state policy's key of a leaf segment: its last page's."""
        return self.policy.key_of(node.states[-1])

    def _aged_key(self, node: Segment) -> float:
        """An aging policy's key of a leaf segment: its last page's GreedyDual priority."""
        return node.aged_base + self._aging.segment_value(node)

    def _queue(self, node: Segment, with_deadline: bool = True) -> None:
        """(Re)enter a leaf segment into the victim queue (when bounded) and, with a TTL, the
        deadline queue; older victim entries of it go stale."""
        node.version = version = node.version + 1
        if self._bounded and self._head_first:
            self._victims.push(self._head_entry(node, version))
        elif self._bounded and self._page_entries:
            self._push_pages(node)
        elif self._bounded:
            key = self._victim_key(node)
            seg = node.ids
            size = _ids.id_count(seg)
            self._victims.push((key, key if self._key_field == 1 else node.recency,
                                -(node.depth + size - 1), _ids.id_at(seg, size - 1), version,
                                node))
        if with_deadline and self.ttl is not None:
            self._deadlines.push(node)
        self._until_compact -= 1
        if self._until_compact <= 0:
            self._compact()

    def _compact(self) -> None:
        """Drop stale entries once the queues hold many more entries than segments (than
        pages, with an entry per page)."""
        if self._page_entries:  # an entry per page
            self._until_compact = max(1024, self._num_pages)
            if len(self._victims) + len(self._deadlines) <= 4 * self._num_pages + 2048:
                return
            self._victims.keep(self._live_page)
            self._deadlines.keep()
            return
        self._until_compact = max(1024, self.num_segments)
        if len(self._victims) + len(self._deadlines) <= 4 * self.num_segments + 2048:
            return
        self._victims.keep(_live_any if self._any_victim else _live_victim)
        self._deadlines.keep()

    # ----------------------------------------------------------------- invariants
    def check_invariants(self) -> None:
        """Raise AssertionError if accounting, structure or TTL ordering is inconsistent."""
        total = pages = segments = locked = 0
        seen: set[int] = set()
        for node in self.segments():
            assert node.resident and node.ids, "empty or gone segment in the tree"
            assert node.above is None or (node.above.resident and node.above.below is node), (
                "an above chain holds a gone segment, or a back link is off")
            assert node.below is None or (node.below.resident and node.below.above is node), (
                "a below link names a gone segment, or a chain link is off")
            assert node.first == node.ids[0], "a segment's key is its first id"
            segments += 1
            pages += len(node.ids)
            seen.update(node.ids)
            assert node.num_tokens == node.page_tokens * (len(node.ids) - 1) + node.last_tokens
            assert (node.keys is None) is not (self._keyed or self._run_keyed or self._valued), (
                "page keys kept iff page-keyed, run-keyed or run-valued")
            assert node.keys is None or len(node.keys) == len(node.ids), "a key per page"
            assert (node.states is None) is not self._stateful, "states kept iff stateful"
            assert node.states is None or (len(node.states) == len(node.ids) and all(
                state.holder is node for state in node.states)), "a state per page, held"
            total += node.num_tokens
            if node.lock_count:
                locked += node.num_tokens
            parent = node.parent
            if parent is not None:
                assert node.lost is None, "an attached segment names a lost parent"
                assert parent.lock_count >= node.lock_count, "a lock holds the whole path"
                assert parent.children and parent.children[node.ids[0]] is node
                # (an orphan adopted below a page of its lost parent's id keeps its depth,
                # as on RadixCache: with ids not chained, that page may sit elsewhere)
                assert node.depth == parent.depth + len(parent.ids) or self._any_victim, (
                    "depth")
                assert parent.deadline_s >= node.deadline_s, "parent expires before child"
            elif node.lost is not None:
                assert self._any_victim and self._orphans[node.ids[0]] is node, "orphan"
                lost_ids, lost_tokens = _lost_chain(node.lost)
                assert len(lost_ids) == len(lost_tokens) >= 1, "an orphan's lost chain"
                assert node.lost[:2] == (lost_ids[0], lost_ids[-1]), "a lost chain's ends"
                assert not node.lock_count, "a locked orphan"
            else:
                assert self._roots[node.ids[0]] is node and node.depth == 0
        assert pages == len(seen) == self._num_pages, "page ids not unique, or page count"
        assert self._ids is None or seen == self._ids, "resident ids"
        assert segments == self.num_segments, "segment count"
        assert all(node.resident and node.lost is not None for node in self._orphans.values())
        assert total == self.resident_tokens, "resident tokens"
        assert locked == self.locked_tokens, "locked tokens"
        if self.capacity_tokens is not None:
            assert self.resident_tokens + self.reserved_tokens <= self.capacity_tokens, (
                "capacity exceeded")
        if self.ttl is not None:
            self._deadlines.check(self.segments())


_NO_TIME = float("nan")  # `access`: the last access of the run of hits so far, before one
_NEVER = INFINITY  # a deadline without a TTL (a C double compiled, as `_NO_TIME`)


def _category(node: Segment) -> int:
    """The first page id of the prompt `node`'s pages belong to (its root segment's first
    id): a `run_keyed` policy's category of them (`run_keys`)."""
    while node.parent is not None:
        node = node.parent
    return node.first if node.lost is None else node.lost[0]  # an orphan: its chain's


def _position(states: list, state: object) -> int:
    """Where `state` is in `states`, found by identity (`list.index` calls `==` on each
    state before it)."""
    for i in range(len(states)):
        if states[i] is state:
            return i
    raise ValueError("a page state not among its holder's states")


def _lost_chain(lost: tuple) -> tuple[list[int], list[int]]:
    """The ids and tokens of an orphan's lost chain (`Segment.lost`), its links joined."""
    links = []
    while lost is not None:
        links.append(lost)
        lost = lost[2]
    ids: list[int] = []
    tokens: list[int] = []
    for link in reversed(links):
        ids.extend(link[3])
        tokens.extend(link[4])
    return ids, tokens


def _same_prefix(page_ids, pos: int, seg, length: int, chained: bool) -> bool:
    """Whether `page_ids[pos:pos + length]` equals `seg[:length]`: by their last ids alone
    when the ids are chained (an id fixes its prefix), else as slices."""
    if chained:
        return _ids.id_at(page_ids, pos + length - 1) == _ids.id_at(seg, length - 1)
    return _ids.same_ids(page_ids, pos, seg, length)


def _match_length(page_ids, pos: int, seg, size: int, n: int, chained: bool) -> int:
    """How many of the `size` ids of `seg` `page_ids[pos:n]` starts with, when it does not
    start with all of them but with the first (the child map found it): the longest common
    prefix, by binary search on prefix equality (monotone in the length)."""
    lo, hi = 1, min(size, n - pos)
    if _same_prefix(page_ids, pos, seg, hi, chained):
        return hi
    hi -= 1  # seg[:lo] matches, seg[:hi + 1] does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _same_prefix(page_ids, pos, seg, mid, chained):
            lo = mid
        else:
            hi = mid - 1
    return lo


def id_array(page_ids: Sequence[int]) -> array:
    """`page_ids` as the cache keeps them: an array of signed 64-bit integers (the range the
    trace readers accept). Raises ValueError naming the first id outside it."""
    try:
        return array("q", page_ids)
    except (OverflowError, TypeError):
        bad = next((i for i in page_ids if type(i) is not int or not -2**63 <= i < 2**63), None)
        raise ValueError(f"page id {bad!r} is not an integer of 64 bits (signed); the "
                         "compressed cache keeps ids as such") from None


def _live_victim(entry: tuple) -> bool:
    """Whether a victim entry still stands for its segment (its version, a resident leaf)."""
    node = entry[-1]
    return (entry[-2] == node.version and node.resident and not node.children
            and not node.lock_count)


def _path_above(node: Segment | None) -> set:
    """The segments above `node` on its path from the root (block mode protects a request's
    whole matched path while it evicts)."""
    out = set()
    above = None if node is None else node.parent
    while above is not None:
        out.add(above)
        above = above.parent
    return out


def _live_any(entry: tuple) -> bool:
    """`_live_victim` in block mode with orphans, where any unlocked segment is a victim."""
    node = entry[-1]
    return entry[-2] == node.version and node.resident and not node.lock_count


def _declares(policy: EvictionPolicy, flag: str) -> bool:
    """Whether the policy's own class (not a base) sets `flag` True: a subclass that changes
    the key must declare it again."""
    return vars(type(policy)).get(flag) is True


_NO_ENTRY = -(2**62)  # a segment's `deadline_entry` before its first one


def _live_entry(node: Segment, entry: int, leaves_only: bool) -> bool:
    """Whether the deadline entry `entry` (a run position, or -1 - a heap entry's number)
    of `node` is live: its latest, and `node` resident, unlocked and (`leaves_only`) a
    leaf (DeadlineRun)."""
    return (node.deadline_entry == entry and node.resident and not node.lock_count
            and not (leaves_only and node.children))


class DeadlineRun:
    """The deadline queue of a SegmentCache's leaf segments (`leaves_only`; in block mode
    with orphans, of all its unlocked segments): the least deadline first (R12).

    A segment queued at or after the run's last deadline (a new leaf or a sliding TTL's
    refreshed one: now + TTL, the latest yet) is appended to `run` itself, a list consumed
    from `first`, with no entry object; the others (a parent left a leaf, its deadline
    older) go to `heap` as (deadline, number, segment). A segment records where its latest
    entry is (`Segment.deadline_entry`: the run position `base + index`, positions never
    reused, or -1 - the heap entry's number), so an entry is live iff it is its segment's
    latest and the segment is a resident leaf; a live entry's deadline is its segment's (a
    leaf's deadline changes only where the cache queues it again). Stale entries are dropped
    as they reach a head, and all of them by `keep`. (In block mode an inner segment's
    deadline rises as pages are inserted below it: the cache queues it again then.)"""

    __slots__ = ("run", "first", "base", "last_s", "heap", "count", "leaves_only", "floor_s")

    def __init__(self, leaves_only: bool = True) -> None:
        self.leaves_only = leaves_only
        self.run: list[Segment | None] = []  # in order of deadline at the push
        self.first = 0  # run[:first] are consumed (None)
        self.base = 0  # the position of run[0]
        self.last_s = -INFINITY  # the deadline of the run's last entry
        self.heap: list[tuple[float, int, Segment]] = []
        self.count = 0  # numbers the heap entries
        # No live entry's deadline is below it: the least live deadline a pop_below found,
        # lowered by every push since (a segment's deadline only rises between its pushes)
        self.floor_s = INFINITY

    def __len__(self) -> int:
        return len(self.run) - self.first + len(self.heap)

    def push(self, node: Segment) -> None:
        """Queue `node` at its deadline; its earlier entries go stale."""
        deadline = node.deadline_s
        if deadline < self.floor_s:
            self.floor_s = deadline
        run = self.run
        if deadline >= self.last_s or self.first == len(run):
            node.deadline_entry = self.base + len(run)
            run.append(node)
            self.last_s = deadline
        else:
            count = self.count
            self.count = count + 1
            node.deadline_entry = -1 - count
            heappush(self.heap, (deadline, count, node))

    def pop_below(self, now: float) -> Segment | None:
        """The segment of the least live entry, taken out, if its deadline is before `now`;
        else None (stale heads are dropped either way). Nothing to look at while `floor_s`
        is not before `now` (most calls of a replay)."""
        if not self.floor_s < now:
            return None
        run = self.run
        first = self.first
        size = len(run)
        base = self.base
        head = None
        while first < size:
            node = run[first]
            if _live_entry(node, base + first, self.leaves_only):
                head = node
                break
            run[first] = None
            first += 1
        if first == size and size:
            run.clear()
            self.base = base + size
            first = 0
        elif first >= 1024 and 2 * first >= size:
            del run[:first]
            self.base = base + first
            first = 0
        self.first = first
        heap = self.heap
        while heap:
            entry = heap[0]
            node = entry[2]
            number = entry[1]
            if _live_entry(node, -1 - number, self.leaves_only):
                deadline = entry[0]
                if head is None or deadline < head.deadline_s:
                    if deadline < now:
                        heappop(heap)
                        return node
                    self.floor_s = deadline
                    return None
                break
            heappop(heap)
        if head is None:
            self.floor_s = INFINITY
            return None
        if head.deadline_s < now:
            run[first] = None
            self.first = first + 1
            return head
        self.floor_s = head.deadline_s
        return None

    def keep(self) -> None:
        """Drop every stale entry; the live run entries get new positions."""
        run = self.run
        base = self.base
        leaves_only = self.leaves_only
        live = [node for i, node in enumerate(run[self.first:], self.first)
                if _live_entry(node, base + i, leaves_only)]
        base += len(run)  # past every position given before
        for i, node in enumerate(live):
            node.deadline_entry = base + i
        self.run = live
        self.first = 0
        self.base = base
        self.heap = [entry for entry in self.heap
                     if _live_entry(entry[2], -1 - entry[1], leaves_only)]
        heapify(self.heap)

    def check(self, segments: Sequence[Segment]) -> None:
        """Assert that every unlocked resident leaf of `segments` (every one, not
        `leaves_only`) has a live entry at its deadline and that the run is in deadline
        order."""
        run = self.run
        previous = -INFINITY
        for i in range(self.first, len(run)):
            node = run[i]
            if _live_entry(node, self.base + i, self.leaves_only):
                assert node.deadline_s >= previous, "deadline run out of order"
                previous = node.deadline_s
        numbers = {entry[1]: entry for entry in self.heap}
        for node in segments:
            if (self.leaves_only and node.children) or node.lock_count:
                continue
            entry = node.deadline_entry
            if entry >= 0:
                index = entry - self.base
                assert self.first <= index < len(run) and run[index] is node, "no live entry"
            else:
                found = numbers.get(-1 - entry)
                assert found is not None and found[2] is node, "no live entry"
                assert found[0] == node.deadline_s, "a live entry off its deadline"
