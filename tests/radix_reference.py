"""The test suite's per-page reference of the prefix cache: a radix tree of one `Page`
object per page that matches, inserts, locks, evicts and expires pages by the policies'
per-page methods (`key`, `on_insert`, `on_access`, `on_evict`, `reconsider`, `requeue`,
`on_expire`), in the plainest way. prefixsim's cache is `SegmentCache`
(cache/segment_tree.py; docs/architecture.md "One prefix cache"), which must give exactly
this tree's results (every counter, every request's hits, every victim in order): the
differential and property tests drive both with the same workloads, and the engines and
the pool accept this tree where they take a cache (it answers the same calls). Not
compiled, not used by any command.

Pages are keyed by chained page id (an id names its whole prefix), so a lookup is one dict
probe per page and a request's work is O(its pages). The tree owns structure, locks, TTL
deadlines and token accounting; the eviction policy only orders victims.

Victims are unlocked leaves (docs/cache-semantics.md R9), kept in a priority queue ordered by
(policy key, recency, -depth, page id) with lazy invalidation: an entry is valid while its
page's `version` is unchanged and the page is still an unlocked resident leaf (the queue,
cache/ordered_queue.py, pops as a heap would, entries that come in order at O(1)). TTL
expiry uses a second queue over the same leaves by deadline; since a parent's deadline is
never earlier than a child's (R12), the earliest deadline of the tree is always at a leaf. A
deadline entry is acted on only while it states the page's deadline: one raised since (block
mode queues every unlocked page, and a child's insert or adoption raises its ancestors) is
re-queued when popped.
A policy with a `reconsider(page)` method (S3-FIFO) may give a popped victim a second
chance: it is re-queued under its new key instead of evicted; one with `bind_cache(cache)`
may `requeue(page)` when its key of a page changes without an access. `touch`/`insert` take
a request's `ttl_s` (its TTL class) and `priority` (R16: a page keeps the highest priority
that touched it).

Locks follow SGLang: locking a page counts a lock on it and every ancestor, so locked pages
and their prefixes are never evicted or expired.

Block mode (R3, vLLM): every unlocked page is a victim, not only leaves; a page whose parent
was evicted stays resident and charged but unreachable (an orphan: `match` stops at the
missing parent) until the parent is resident again, when `match` or `insert` re-adopts it.
The matched path passed to `evict(protect=...)` is protected whole. Lower tiers hang off `on_demote`
(cache/tiers.py); namespaces are not here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from prefixsim.cache.accounting import TokenAccounting
from prefixsim.cache.cache_types import CacheCounters, CacheMode, ChainConflict, MatchResult
from prefixsim.cache.idle_ages import age_bin
from prefixsim.cache.ordered_queue import OrderedQueue
from prefixsim.cache.page import INFINITY, Page, new_page
from prefixsim.cache.policy import EvictionPolicy, key_field_code, overrides
from prefixsim.cache.ttl import TTLRule


def _is_current(entry: tuple, page: Page) -> bool:
    """Whether a queue entry still describes `page` as an unlocked resident leaf."""
    return (
        entry[-2] == page.version
        and page.resident
        and page.num_children == 0
        and page.lock_count == 0
    )


def _sorts_first(key: object, page: Page, entry: tuple) -> bool:
    """Whether `page` under `key` would be popped before the victim queue entry `entry`
    (the order of `_entry`'s tuples; page ids are unique, so it is decided by then)."""
    top = entry[0]
    if key != top:
        return key < top
    if page.recency != entry[1]:
        return page.recency < entry[1]
    if page.depth != -entry[2]:
        return page.depth > -entry[2]
    return page.page_id < entry[3]


def _is_current_block(entry: tuple, page: Page) -> bool:
    """Block mode: whether a queue entry still describes `page` as unlocked and resident."""
    return entry[-2] == page.version and page.resident and page.lock_count == 0


class CacheObserver(Protocol):
    """Told of every page that enters or leaves a RadixCache (after the change)."""

    def added(self, page: Page) -> None: ...

    def removed(self, page: Page) -> None: ...


class RadixCache:
    """A capacity-bounded (in tokens) prefix cache over chained page ids, page by page
    (TokenAccounting's figures taken as attributes, as SegmentCache does)."""

    free_tokens = TokenAccounting.free_tokens  # docs/cache-semantics.md R10
    evictable_tokens = TokenAccounting.evictable_tokens

    def __init__(
        self,
        capacity_tokens: int | None,
        policy: EvictionPolicy,
        ttl: TTLRule | None = None,
        mode: CacheMode = CacheMode.RADIX,
    ) -> None:
        if capacity_tokens is not None and capacity_tokens < 0:
            raise ValueError(f"capacity_tokens must be >= 0, got {capacity_tokens}")
        self.capacity_tokens = capacity_tokens
        self.policy = policy
        self._key_field = key_field_code(policy)  # a key that is a field is read (_victim_key)
        self.ttl = ttl
        self.mode = CacheMode(mode)
        self.block = self.mode is CacheMode.BLOCK
        self._current = _is_current_block if self.block else _is_current
        self.counters = CacheCounters()
        # the latest `now` seen by match/insert: the time an eviction (which takes no `now`)
        # happens at, for the idle ages of evicted pages
        self._clock = 0.0
        self.resident_tokens = 0
        self.locked_tokens = 0
        self.reserved_tokens = 0
        self._pages: dict[int, Page] = {}
        self._victims = OrderedQueue()  # victim entries (`_entry`), least first
        self._deadlines = OrderedQueue()  # deadline entries, earliest first
        self._until_compact = 1024  # queue operations until the next look at stale entries
        # hooks left at their default (cache/policy.py: Policy) are skipped, not called
        self._hook_access = overrides(policy, "on_access")
        self._hook_insert = overrides(policy, "on_insert")
        self._hook_evict = overrides(policy, "on_evict")
        # Second chance (S3-FIFO, CLOCK): a popped victim for which the policy's
        # `reconsider(page)` returns True is re-queued under its new key instead of evicted.
        self._reconsider: Callable[[Page], bool] | None = (
            policy.reconsider if overrides(policy, "reconsider") else None)
        # A policy whose state should not treat expiry as eviction (GreedyDual's clock rises
        # only on evictions) gets expired pages through `on_expire(page)`.
        self._on_expire: Callable[[Page], None] | None = (
            policy.on_expire if overrides(policy, "on_expire") else None)
        # A policy whose keys change without an access (S3-FIFO's small queue overflowing)
        # is handed the cache by `bind_cache(cache)` to call `requeue(page)`.
        policy.bind_cache(self)
        # A prefix index (router/index.py) sets `observer` to hear of every page that
        # becomes resident (`added(page)`) or leaves, by eviction or expiry (`removed(page)`).
        self._observer: CacheObserver | None = None
        # Tiers (cache/tiers.py) set this to receive each page evicted (not expired) from
        # here, after its removal, to demote it to a lower tier (R15). None = it vanishes.
        self.on_demote: Callable[[Page], None] | None = None

    @property
    def observer(self) -> CacheObserver | None:
        """Told of every page that becomes resident or leaves (None: nobody)."""
        return self._observer

    @observer.setter
    def observer(self, observer: CacheObserver | None) -> None:
        self._observer = observer

    # ----------------------------------------------------------------- accounting
    @property
    def num_pages(self) -> int:
        return len(self._pages)

    def get(self, page_id: int) -> Page | None:
        """The resident page with this id, if any."""
        return self._pages.get(page_id)

    def pages(self) -> list[Page]:
        """All resident pages (no particular order)."""
        return list(self._pages.values())

    def page_ids(self) -> set[int]:
        """The ids of all resident pages (a router's snapshot)."""
        return set(self._pages)

    def announce_pages(self, observer: CacheObserver) -> None:
        """Tell `observer` of every resident page, as added: a prefix index attached to a
        cache that holds pages already."""
        for page in self.pages():
            observer.added(page)

    def orphan_tokens(self) -> int:
        """Tokens of resident pages whose parent is gone (block mode: charged, unreachable)."""
        return sum(p.num_tokens for p in self._pages.values()
                   if p.parent is not None and not p.parent.resident)

    # --------------------------------------------------------------------- lookup
    def match(self, page_ids: Sequence[int], now: float) -> MatchResult:
        """Longest run of resident, alive pages from the first of `page_ids` (R3).

        Expired pages are dropped first, so a dead page is never matched. Nothing is refreshed.
        In block mode an orphan whose parent is resident again is re-adopted and matched (the
        chain of ids is whole again, as vLLM's hash lookup would find it).
        """
        self._clock = now
        if self.ttl is not None:
            self.expire(now)
        pages: list[Page] = []
        get = self._pages.get
        parent = None
        for page_id in page_ids:
            page = get(page_id)
            if page is None or (page.parent is not parent and not self._adopt(page, parent)):
                break
            pages.append(page)
            parent = page
        return MatchResult(pages)

    def touch(
        self,
        pages: Sequence[Page],
        now: float,
        recency: int,
        ttl_s: float | None = None,
        priority: int = 0,
    ) -> None:
        """Refresh a matched path as a hit (R5): last access, recency, hit count, TTL;
        a page's priority rises to the request's `priority` (R16). A run that starts below
        the root (a shared pool's beyond HBM's match, R18) raises its ancestors' deadlines
        to its first page's (R12), their other statistics unchanged; not in block mode,
        where a page touched alone may outlive its parent (an orphan)."""
        if not pages:
            return
        deadline = self._deadline(now, ttl_s) if self._sliding() else None
        ages = self.counters.hit_ages.counts
        for page in pages:
            ages[age_bin(now - page.last_access_s)] += 1
            page.last_access_s = now
            page.recency = recency
            page.num_hits += 1
            if priority > page.priority:
                page.priority = priority
            if deadline is not None and deadline > page.deadline_s:
                page.deadline_s = deadline
        if deadline is not None and not self.block:  # a run below the root (a pool's,
            first = pages[0]  # beyond HBM's match): its ancestors live as long (R12)
            self._raise_deadlines(first.parent, first.deadline_s)
        if self._hook_access:
            for page in pages:
                self.policy.on_access(page)
        if self.block:
            for page in pages:
                if page.lock_count == 0:
                    self._queue(page)
            return
        tip = pages[-1]
        if tip.num_children == 0 and tip.lock_count == 0:
            self._queue(tip)

    # --------------------------------------------------------------------- insert
    def insert(
        self,
        parent: Page | None,
        page_ids: Sequence[int],
        page_tokens: Sequence[int],
        now: float,
        recency: int,
        ttl_s: float | None = None,
        priority: int = 0,
    ) -> list[Page]:
        """Add a chain of pages below `parent`, in order, as many as fit without evicting.

        A page already resident under the same parent is reused (R7: the first insert wins).
        Returns the pages now holding the chain (reused or new), first page first. Raises
        ValueError, having inserted nothing, when the two sequences differ in length.
        """
        self._clock = now
        placed: list[Page] = []
        first_new: Page | None = None
        last_new = 0
        capacity = self.capacity_tokens
        limit = INFINITY if capacity is None else capacity - self.reserved_tokens
        deadline = self._deadline(now, ttl_s) if self.ttl is not None else INFINITY
        pages = self._pages
        get = pages.get
        hook = self.policy.on_insert if self._hook_insert else None
        added = self._observer.added if self._observer is not None else None
        resident = start = self.resident_tokens
        counters = self.counters
        inserted = counters.inserted_pages  # insertion order of the first new page
        new_pages = 0
        append = placed.append
        count = len(page_ids)
        if len(page_tokens) != count:
            raise ValueError(f"{count} page ids but {len(page_tokens)} page token counts")
        try:
            for index in range(count):  # (not zip(..., strict=True): a call with a keyword)
                page_id = page_ids[index]
                tokens = page_tokens[index]
                page = get(page_id)
                if page is not None:
                    if page.parent is not parent and not self._adopt(page, parent):
                        raise ChainConflict(
                            f"page id {page_id} is already cached after a different prefix"
                        )
                    append(page)
                    parent = page
                    continue
                if resident + tokens > limit:
                    break
                page = new_page(page_id, parent, tokens, now, recency, deadline, priority,
                                inserted + new_pages)
                if first_new is None:
                    first_new = page
                last_new = len(placed)  # index of the deepest new page in `placed`
                pages[page_id] = page
                if parent is not None:
                    parent.num_children += 1
                resident += tokens
                new_pages += 1
                if hook is not None:
                    hook(page)
                if added is not None:
                    added(page)
                append(page)
                parent = page
        finally:
            self.resident_tokens = resident
            counters.inserted_pages += new_pages  # also the next page's insertion order
            counters.inserted_tokens += resident - start
        if not placed:
            return placed
        if self.resident_tokens > self.counters.peak_tokens:
            self.counters.peak_tokens = self.resident_tokens
        if first_new is not None and deadline != INFINITY:
            # Reused pages before the first new one are ancestors too (R12, C11).
            self._raise_deadlines(first_new.parent, deadline)
            if self.block:  # orphans adopted between new pages are their ancestors too
                for page in placed[:last_new]:
                    if page.deadline_s < deadline:
                        self._raise_deadlines(page, deadline)
        if self.block:
            for page in placed:
                if page.lock_count == 0:
                    self._queue(page)
            return placed
        tip = placed[-1]
        if tip.num_children == 0 and tip.lock_count == 0:
            self._queue(tip)
        return placed

    def _adopt(self, orphan: Page, parent: Page | None) -> bool:
        """Block mode: re-attach a resident orphan under its re-inserted parent."""
        old = orphan.parent
        if not self.block or old is None or old.resident or parent is None:
            return False
        if old.page_id != parent.page_id:
            return False
        orphan.parent = parent
        parent.num_children += 1
        if orphan.deadline_s > parent.deadline_s:
            self._raise_deadlines(parent, orphan.deadline_s)
        return True

    # --------------------------------------------------------------- reservation
    def available_tokens(self) -> float:
        """`free_tokens + evictable_tokens` (R10): what a reservation can have, evicting
        every unlocked page (inf when unbounded)."""
        if self.capacity_tokens is None:
            return INFINITY
        return self.capacity_tokens - self.reserved_tokens - self.locked_tokens

    def reserve(self, num_tokens: int) -> None:
        """Charge `num_tokens` of private (not cached) KV against capacity (R13).

        The timed engine keeps running requests' uncached KV here, so free tokens and
        eviction see the whole pool: free + evictable + locked + reserved == capacity.
        The caller must have made the space free first (`evict`). Unused by Part A (0).
        """
        if num_tokens < 0:
            raise ValueError(f"cannot reserve {num_tokens} tokens")
        capacity = self.capacity_tokens  # free_tokens, written out (each step reserves)
        if capacity is not None and (num_tokens
                                     > capacity - self.resident_tokens - self.reserved_tokens):
            raise ValueError(f"reserving {num_tokens} tokens, only {self.free_tokens} free")
        self.reserved_tokens += num_tokens

    def release(self, num_tokens: int) -> None:
        """Return `num_tokens` of a `reserve` (a request's private KV freed or cached)."""
        if not 0 <= num_tokens <= self.reserved_tokens:
            raise ValueError(f"releasing {num_tokens} of {self.reserved_tokens} reserved")
        self.reserved_tokens -= num_tokens

    # ---------------------------------------------------------------------- locks
    def lock(self, page: Page) -> None:
        """Lock `page` and its whole prefix for a running request (R8)."""
        node: Page | None = page
        while node is not None:
            if node.lock_count == 0:
                self.locked_tokens += node.num_tokens
            node.lock_count += 1
            node = node.parent

    def relock(self, old: Page | None, page: Page, now: float) -> None:
        """`lock(page)` then `unlock(old, now)` (when `old` is not None), for a lock moving
        down a path: when `old` is an ancestor of `page` (a prefill chunk's pages inserted
        below the request's tip) only the pages below `old` gain a lock, as the pair would
        leave `old` and its prefix as they were (they stay locked throughout)."""
        node: Page | None = page
        while node is not None and node is not old:
            if node.lock_count == 0:
                self.locked_tokens += node.num_tokens
            node.lock_count += 1
            node = node.parent
        if old is None:
            return
        if node is None:  # `old` is not on the path: it is unlocked on its own
            self.unlock(old, now)
        elif self.ttl is not None:  # what unlock(old) ends with
            self.expire(now)

    def unlock(self, page: Page, now: float) -> None:
        """Release a lock taken by `lock(page)`; expired pages it held are freed (R12)."""
        node: Page | None = page
        while node is not None:
            if node.lock_count <= 0:
                raise ValueError(f"unlock of an unlocked page: {node!r}")
            node.lock_count -= 1
            if node.lock_count == 0:
                self.locked_tokens -= node.num_tokens
                if node.resident and (self.block or node.num_children == 0):
                    self._queue(node)
            node = node.parent
        if self.ttl is not None:
            self.expire(now)

    # -------------------------------------------------------------- evict, expire
    def evict(self, num_tokens: int, protect: Page | None = None) -> bool:
        """Evict leaves one page at a time until `num_tokens` are free (R10).

        `protect` (with its prefix) is never evicted. Returns whether the space is free;
        when it cannot be, everything evictable has been evicted and nothing more.
        """
        if self.capacity_tokens is None:
            return True
        need = num_tokens - (self.capacity_tokens - self.resident_tokens - self.reserved_tokens)
        if need <= 0:
            return True
        if self.block:
            return self._evict_general(need, protect)
        return self._evict_leaves(need, protect)

    def _evict_leaves(self, need: int, protect: Page | None) -> bool:
        """`evict` in radix mode, `_remove` and `_entry` inlined (the hot path of the timed
        engine: every page inserted is evicted one by one). A victim the policy reconsiders
        (a second chance) is re-queued under its new key and the next one taken."""
        queue = self._victims
        reconsider = self._reconsider
        pages = self._pages
        skipped = []
        demote = self.on_demote
        observer = self._observer
        removed = observer.removed if observer is not None else None
        on_evict = self.policy.on_evict if self._hook_evict else None
        ttl = self.ttl is not None
        counters = self.counters
        ages = counters.evicted_ages.counts
        clock = self._clock
        evicted = evicted_tokens = 0
        # A page's parent that becomes a leaf is often the very next victim (a chain is
        # evicted from its end): when it sorts before the queue's head it is evicted at once
        # (`page` carried over), which is what a push and a pop would do, and never entered;
        # any stale entries of it are left for later pops to drop (it is no longer resident).
        page = None
        last_access, bucket = None, 0  # the idle-age bucket of the last page evicted
        try:
            while need > 0:
                if page is None:
                    if not queue:
                        break
                    entry = queue.pop()
                    page = entry[-1]
                    if (entry[-2] != page.version or not page.resident or page.num_children
                            or page.lock_count):
                        page = None
                        continue  # stale (_is_current)
                    if page is protect:
                        skipped.append(entry)
                        page = None
                        continue
                if reconsider is not None and reconsider(page):
                    self._queue(page)
                    page = None
                    continue
                tokens = page.num_tokens
                need -= tokens
                # _remove(page, defer=True)
                page.resident = False
                del pages[page.page_id]
                if removed is not None:
                    removed(page)
                self.resident_tokens -= tokens
                parent = page.parent
                ready = False  # the parent is now an unlocked leaf, keyed before the hooks
                if parent is not None:
                    parent.num_children -= 1
                    if parent.num_children == 0 and parent.lock_count == 0:
                        ready = True
                        parent_entry = self._entry(parent) if ttl else None
                        parent_key = (self._victim_key(parent) if parent_entry is None
                                      else parent_entry[0])
                if on_evict is not None:
                    on_evict(page)
                evicted += 1
                evicted_tokens += tokens
                if page.last_access_s != last_access:  # a chain's pages share theirs
                    last_access = page.last_access_s
                    bucket = age_bin(clock - last_access)
                ages[bucket] += 1
                if demote is not None:
                    demote(page)
                page.parent = None  # let the evicted chain go (see `_let_go`)
                page = None
                if ready:
                    # before the queue's least entry: before the heads of its sorted run
                    # and of its heap (two field comparisons, no tuple compared)
                    run_first = queue.run_first()
                    if need > 0 and parent is not protect and (
                            run_first is None
                            or _sorts_first(parent_key, parent, run_first)) and (
                            not queue.heap or _sorts_first(parent_key, parent, queue.heap[0])):
                        page = parent  # the very next victim
                        continue
                    if parent_entry is None:  # _entry without a deadline queue
                        parent.version = version = parent.version + 1
                        self._until_compact -= 1
                        if self._until_compact <= 0:
                            self._compact()
                        parent_entry = (parent_key, parent.recency, -parent.depth,
                                        parent.page_id, version, parent)
                    queue.push(parent_entry)
        finally:
            counters.evicted_pages += evicted
            counters.evicted_tokens += evicted_tokens
        for entry in skipped:
            queue.push(entry)
        return need <= 0

    def _evict_general(self, need: int, protect: Page | None) -> bool:
        """`evict` in block mode (every unlocked page a victim, the matched path protected
        whole), with a policy's second chances as in `_evict_leaves`."""
        queue = self._victims
        current = self._current
        protected = set(protect.path()) if protect is not None else ()  # block mode only
        skipped = []
        reconsider = self._reconsider
        demote = self.on_demote
        counters = self.counters
        ages = counters.evicted_ages.counts
        clock = self._clock
        pending = None  # as in _evict_leaves
        while need > 0:
            if pending is not None:
                entry, pending = pending, None
            elif queue:
                entry = queue.pop()
            else:
                break
            page = entry[-1]
            if not current(entry, page):
                continue
            if page is protect or page in protected:
                skipped.append(entry)
                continue
            if reconsider is not None and reconsider(page):
                self._queue(page)
                continue
            tokens = page.num_tokens
            need -= tokens
            parent_entry = self._remove(page, defer=True)
            counters.evicted_pages += 1
            counters.evicted_tokens += tokens
            ages[age_bin(clock - page.last_access_s)] += 1
            if demote is not None:
                demote(page)
            self._let_go(page)
            if parent_entry is not None:
                if need > 0 and (not queue or parent_entry < queue.head()):
                    pending = parent_entry
                else:
                    queue.push(parent_entry)
        for entry in skipped:
            queue.push(entry)
        return need <= 0

    def next_expiry_s(self) -> float:
        """At or before the least deadline `expire` could free: the queue's head (stale
        entries included), INFINITY when empty."""
        return self._deadlines.head()[0] if self._deadlines else INFINITY

    def expire(self, now: float) -> int:
        """Free every unlocked page whose deadline is before `now`; returns pages freed."""
        queue = self._deadlines
        freed = 0
        while queue and queue.head()[0] < now:
            entry = queue.pop()
            page = entry[-1]
            if not self._current(entry, page):
                continue
            if entry[0] != page.deadline_s:
                # raised since it was queued without being queued again: re-queue it
                # under the deadline it has now
                queue.push((page.deadline_s, *entry[1:]))
                continue
            self._remove(page, expired=True)
            self.counters.expired_pages += 1
            self.counters.expired_tokens += page.num_tokens
            self.counters.expired_ages.add(page.deadline_s - page.last_access_s)
            self._let_go(page)
            freed += 1
        return freed

    # ------------------------------------------------------------------- internal
    def _sliding(self) -> bool:
        return self.ttl is not None and self.ttl.refreshes_on_access

    def _deadline(self, now: float, ttl_s: float | None) -> float:
        assert self.ttl is not None
        return now + (self.ttl.ttl_s if ttl_s is None else ttl_s)

    def _raise_deadlines(self, page: Page | None, deadline: float) -> None:
        """Keep every ancestor alive at least as long as a new descendant (R12, C11). In
        block mode an unlocked page raised is a victim whose key may read its deadline
        (ttl: earliest deadline first, R11), so it is queued again under its key now."""
        block = self.block
        while page is not None and page.deadline_s < deadline:
            page.deadline_s = deadline
            if block and page.lock_count == 0:
                self._queue(page)
            page = page.parent

    def _queue(self, page: Page) -> None:
        """(Re)enter an unlocked resident leaf into the victim and deadline queues."""
        entry = self._entry(page)
        if entry is not None:
            self._victims.push(entry)

    def _entry(self, page: Page) -> tuple | None:
        """Invalidate `page`'s queued entries, push its deadline entry (with a TTL) and
        return its victim entry for the caller to push (None when unbounded: no eviction)."""
        page.version = version = page.version + 1
        if self.ttl is not None:
            self._deadlines.push((page.deadline_s, page.recency, -page.depth, page.page_id,
                                  version, page))
        self._until_compact -= 1
        if self._until_compact <= 0:
            self._compact()
        if self.capacity_tokens is None:
            return None
        return (self._victim_key(page), page.recency, -page.depth, page.page_id, version,
                page)

    def _victim_key(self, page: Page) -> object:
        """The policy's key of `page`: the field it names, read (`key_field_code`), or a
        call."""
        field = self._key_field
        if field == 1:
            return page.recency
        if field == 2:
            return page.inserted
        if field == 3:
            return page.deadline_s
        return self.policy.key(page)

    def _compact(self) -> None:
        """Drop stale queue entries (lazy invalidation leaves them behind) once the queues
        hold more than twice as many entries as there are pages; checked every so often."""
        self._until_compact = max(1024, len(self._pages))
        if len(self._victims) + len(self._deadlines) <= 4 * len(self._pages) + 2048:
            return
        current = self._current
        for queue in (self._victims, self._deadlines):
            queue.keep(lambda entry: current(entry, entry[-1]))

    def _remove(self, page: Page, defer: bool = False, expired: bool = False) -> tuple | None:
        """Take `page` out; a parent it leaves as an unlocked leaf is queued as a victim,
        or with `defer` its victim entry is returned for the caller to push. An expired
        page goes to the policy's `on_expire` when it has one, else to `on_evict`."""
        page.resident = False
        del self._pages[page.page_id]
        if self._observer is not None:
            self._observer.removed(page)
        self.resident_tokens -= page.num_tokens
        parent = page.parent
        entry = None
        if parent is not None:
            parent.num_children -= 1
            if parent.num_children == 0 and parent.lock_count == 0 and not self.block:
                entry = self._entry(parent)
                if entry is not None and not defer:
                    self._victims.push(entry)
                    entry = None
        if expired and self._on_expire is not None:
            self._on_expire(page)
        elif self._hook_evict:
            self.policy.on_evict(page)
        return entry

    def _let_go(self, page: Page) -> None:
        """Drop a removed page's pointer to its parent once its hooks and demotion have
        read it, in radix mode: stale queue entries (lazy invalidation) hold removed pages
        until they are popped or compacted away, and through the pointers every evicted
        ancestor too. In block mode a resident orphan still names its removed parent (to
        re-adopt and for the pool's write of the chain its pointers name), so it stays."""
        if not self.block:
            page.parent = None

    def requeue(self, page: Page) -> None:
        """Re-key `page` in the victim order under the policy's current `key(page)`; a no-op
        unless it is an evictable page (an unlocked resident leaf; in block mode any unlocked
        resident page). For policies bound by `bind_cache` whose key of a page changes
        without an access to it."""
        if page.resident and page.lock_count == 0 and (self.block or page.num_children == 0):
            self._queue(page)

    # ----------------------------------------------------------------- invariants
    def check_invariants(self) -> None:
        """Raise AssertionError if accounting, structure or TTL ordering is inconsistent."""
        pages = self._pages
        children: dict[int, int] = {pid: 0 for pid in pages}
        total = locked = 0
        for pid, page in pages.items():
            assert page.resident and page.page_id == pid
            total += page.num_tokens
            if page.lock_count > 0:
                locked += page.num_tokens
            parent = page.parent
            if parent is not None and self.block and not parent.resident:
                assert pages.get(parent.page_id) is not parent, "orphan of a resident parent"
                continue  # block mode: an orphan, charged but unreachable
            if parent is not None:
                assert parent.resident and pages.get(parent.page_id) is parent, "orphan page"
                children[parent.page_id] += 1
                assert parent.lock_count >= page.lock_count, "lock not on the whole prefix"
                assert parent.deadline_s >= page.deadline_s, "parent expires before child"
        for pid, count in children.items():
            assert pages[pid].num_children == count, f"child count of {pid}"
        assert total == self.resident_tokens, "resident tokens"
        assert locked == self.locked_tokens, "locked tokens"
        if self.capacity_tokens is not None:
            assert self.reserved_tokens >= 0, "negative reservation"
            assert self.resident_tokens + self.reserved_tokens <= self.capacity_tokens, (
                "capacity exceeded")
