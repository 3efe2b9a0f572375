"""S3-FIFO (Yang et al., SOSP'23) adapted to a radix tree whose victims are unlocked leaves.

As published: a small FIFO S (10% of the capacity, in tokens; the parameter
`small_fraction`, `cache.policy_params.small_fraction`), a main FIFO M (the rest) and
a ghost FIFO G of ids evicted from S (as many tokens as M, at least one id). A new page
enters S, or M when its id is in G. A hit bumps a 2-bit frequency (at most 3). When S holds
more than its 10% the victim comes from the head of S: a page that was hit moves to the back
of M (its frequency cleared), one never hit is evicted and its id goes to G; otherwise the
victim comes from the head of M: a page that was hit goes to the back of M with its
frequency less one (CLOCK-like reinsertion), one with frequency 0 is evicted.

Adaptation to the tree (which pops the lowest key among evictable leaves and asks
`reconsider(page)` whether a popped page gets a second chance): the key of a page is its
place in its queue (a global sequence number taken when it entered that queue) in one of
three bands, lowest first:

  0  "due" S pages: the oldest S pages by which S exceeds its 10% budget
  1  M pages
  2  S pages within the budget

So while S is over budget its head goes first, else M's head, as in the paper. S overflows
only when a page is inserted; `on_insert` then takes the pages leaving the budget from S's
head: one that was hit moves to the back of M right away (a queue move needs no eviction),
one never hit becomes due, and the cache (bound by `bind_cache`) is asked to `requeue` them
under their new key. A page at the head of a queue that is not an evictable leaf (it has
children, or is locked) cannot be evicted: it keeps its place and is skipped; it is taken
when it becomes a leaf again (the tree then asks its key). So a due page may wait in S
until its descendants are gone (a chain leaves S from its tip); a hit on it meanwhile moves
it to M (as the ghost hit it would have been had it been evicted). When M has no evictable
leaf, S pages within the budget are taken as a last resort (hit ones move to M). A page
removed by TTL expiry leaves its queue without entering G (not an S eviction).

On the compressed tree (cache/segment_tree.py) the same logic runs on states: a segment
keeps one PageState per page (its pages entered together, but S overflowing, hits on due
pages and second chances set them apart), each naming the segment as its `holder`, which
a split updates; `requeue` of a state re-keys its segment when that page is its tail, and
eviction offers the tail page its second chance, one page at a time, as the tree above
pops leaves. The page hooks (`on_insert`, ...) and the run calls (`enter_run`, ...) are
the same functions on the states.

M's hand passing an inner page counts as a visit: in a flat S3-FIFO it would have been
reinserted with one frequency less at the clock of that pass. The passes are recorded
(position passed, clock then), and when an M page is popped with an old position (it
became a leaf after the hand went by) its frequency is first reduced by the passes it
missed. Without this a dead conversation's prefix drains one page per up to 3 full laps of
M (each page enters the queue only when its child is gone), instead of in the laps its
pages would take side by side: 0.162 instead of 0.188 at 4M tokens on Mooncake.

Measured (bench/policy_zoo.py, Mooncake conversation trace, token hit rate at 1M/4M/16M
tokens): s3fifo 0.0796/0.1878/0.2996, lru 0.0551/0.1811/0.3386. A flat page-level S3-FIFO
with no tree constraint (bench/s3fifo_flat.py) scores 0.0788/0.1866/0.2978 on the same
page stream (flat LRU 0.0545/0.1808/0.3386): the loss at 16M is S3-FIFO's own on this
trace (a conversation's pages are reused at its next turn, often later than a 10% FIFO
holds them); likewise on the chat preset at 1M/4M.
"""

from __future__ import annotations

from bisect import bisect_right
from types import MappingProxyType
from typing import TYPE_CHECKING

from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES, Policy

if TYPE_CHECKING:
    from prefixsim.cache.segment_tree import SegmentCache

MAX_FREQUENCY = 3
SMALL_FRACTION = 0.1

DUE, MAIN, SMALL = 0, 1, 2  # queue of a page, also its key band (lowest evicted first)
GONE = -1  # the queue of a state whose page has left
COMPACT_AFTER = 4096  # S's and G's lists drop their consumed front past this many (_consumed)
BAND = float(2**50)  # sequence numbers stay below this; 3 * BAND is exact in a float
# A ghost entry is one int: its entry's number shifted left by GHOST_SHIFT, or'ed with the
# evicted page's tokens (a page holds fewer than 2**32 tokens: on_evict checks)
GHOST_SHIFT = 32
GHOST_TOKENS = 0xFFFF_FFFF  # 2**GHOST_SHIFT - 1, written out (a C int shift would overflow)


class PageState:
    """What S3-FIFO keeps of one resident page: its queue (DUE / MAIN / SMALL; GONE once the
    page has left), its sequence number in that queue, its 2-bit access frequency, its
    tokens, and what holds it in the cache (`holder`: the Segment on a SegmentCache, which
    `requeue` is told of, or a Page of the test suite's per-page reference; None once gone)."""

    __slots__ = ("queue", "position", "frequency", "tokens", "holder")

    def __init__(self, queue: int, position: int, tokens: int = 0,
                 holder: object = None) -> None:
        self.queue = queue
        self.position = position
        self.frequency = 0
        self.tokens = tokens
        self.holder = holder


class S3FIFO(Policy):
    """Small/main FIFO queues with a ghost list; see the module docstring. (An extension
    type when compiled, s3fifo.pxd: registered below rather than by a decorator.)

    Its logic works on PageStates (`_enter`, `_hit`, `second_chance`, `_drop`): the
    per-page reference calls the page hooks, which keep a page's state on
    `page.policy_state`; a SegmentCache keeps the states per page of a segment
    (`page_states`) and calls `enter_run`, `hit_run`, `key_of`, `second_chance` and `leave`
    itself."""

    page_states = True
    parameters = MappingProxyType({
        "small_fraction": "share of the capacity (tokens) the small FIFO S holds, "
                          "0 < f < 1 (the paper's 10%)",
    })

    def __init__(self, small_fraction: float = SMALL_FRACTION) -> None:
        if isinstance(small_fraction, bool) or not isinstance(small_fraction, int | float) \
                or not 0.0 < small_fraction < 1.0:
            raise ValueError(f"small_fraction: expected a number in (0, 1), got "
                             f"{small_fraction!r}")
        self.small_fraction = float(small_fraction)
        self._clock = 0  # the next sequence number
        self._tracked = 0  # resident pages with a PageState
        # S in entry order: the PageState each page had when it entered, from `_small_head`
        # on (lazy: an entry whose page has left S since, so whose state is in another
        # queue or GONE, is skipped; the list drops its consumed front now and then)
        self._small_states: list[PageState] = []
        self._small_head = 0
        self._small_tokens = 0  # tokens of SMALL pages (within-budget S pages)
        # G: page id -> its entry's number << GHOST_SHIFT | its tokens; `_ghost_order` holds
        # the ids oldest first from `_ghost_head`, entry number `_ghost_base` + index (an id
        # that left G by a hit leaves a stale entry: its number no longer matches)
        self._ghost: dict[int, int] = {}
        self._ghost_order: list[int] = []
        self._ghost_head = 0
        self._ghost_base = 0  # the entry number of `_ghost_order[0]`
        self._ghost_tokens = 0
        self._requeue = None  # the bound cache's `requeue` (bind_cache)
        self._by_state = False  # whether it takes a PageState (a SegmentCache's) or a page
        self._hand: list[int] = []  # positions M's hand passed, increasing
        self._hand_clock: list[int] = []  # the clock at each of those passes
        self._small_budget = float("inf")
        self._ghost_budget = float("inf")

    def bind_cache(self, cache: SegmentCache) -> None:
        """Learn the capacity (S's budget: `small_fraction` of it) and where to `requeue`
        pages (a SegmentCache's `requeue` takes the PageState: `requeues_states`)."""
        self._requeue = cache.requeue
        self._by_state = getattr(cache, "requeues_states", False) is True
        if cache.capacity_tokens is not None:
            self._small_budget = self.small_fraction * cache.capacity_tokens
            self._ghost_budget = cache.capacity_tokens - self._small_budget

    def _tick(self) -> int:
        """The next sequence number."""
        position = self._clock
        self._clock = position + 1
        return position

    def key(self, page: Page) -> float:
        return self.key_of(page.policy_state)

    def key_of(self, state: PageState) -> float:
        """The victim key of a page in `state`: its queue's band, then its position."""
        band = BAND  # a C double when compiled
        return state.queue * band + state.position

    def queue_of(self, page: Page | None) -> str | None:
        """'small', 'main' or None (not resident, or None), for tests and inspection."""
        state = None if page is None else page.policy_state
        return None if state is None else ("main" if state.queue == MAIN else "small")

    def in_ghost(self, page_id: int) -> bool:
        return page_id in self._ghost

    # ------------------------------------------------------------ a page enters
    def on_insert(self, page: Page) -> None:
        page.policy_state = self._enter(page.page_id, page.num_tokens, page)
        if self._small_tokens > self._small_budget:
            self._overflow()

    def enter_run(self, page_ids, start: int, count: int, page_tokens: int,
                  last_tokens: int, holder: object) -> list[PageState]:
        """The states of `count` new pages, `page_ids[start:start + count]`, each of
        `page_tokens` but the last (`last_tokens`), held by `holder`: as `on_insert` of
        each in turn (S overflowing after each)."""
        states: list[PageState] = []
        for i in range(count):
            states.append(self._enter(page_ids[start + i],
                                      last_tokens if i == count - 1 else page_tokens, holder))
            if self._small_tokens > self._small_budget:
                self._overflow()
        return states

    def _enter(self, page_id: int, tokens: int, holder: object) -> PageState:
        """A new page's state: into M on a ghost hit, else at the back of S."""
        position = self._tick()
        self._tracked += 1
        ghost = self._ghost.pop(page_id, None)
        if ghost is not None:
            held = ghost
            self._ghost_tokens -= held & GHOST_TOKENS
            return PageState(MAIN, position, tokens, holder)
        state = PageState(SMALL, position, tokens, holder)
        self._small_states.append(state)
        self._small_tokens += tokens
        return state

    def _overflow(self) -> None:
        """Mark the oldest within-budget S pages due while S exceeds its budget."""
        states = self._small_states
        head = self._small_head
        while self._small_tokens > self._small_budget and head < len(states):
            state = states[head]
            head += 1
            if state.queue != SMALL:
                continue  # stale: it left S since (a page inserted again has a new state)
            self._small_tokens -= state.tokens
            if state.frequency > 0:  # hit while in S: to the back of M, bits cleared
                state.queue = MAIN
                state.position = self._tick()
                state.frequency = 0
            else:
                state.queue = DUE
            if self._requeue is not None:
                self._requeue(state if self._by_state else state.holder)
        self._small_head = _consumed(states, head)

    # ------------------------------------------------------------------ a hit
    def on_access(self, page: Page) -> None:
        self._hit(page.policy_state)

    def hit_run(self, states: list[PageState]) -> None:
        """`on_access` of the pages in `states`, in order."""
        for state in states:
            self._hit(state)

    def _hit(self, state: PageState) -> None:
        if state.queue == DUE:  # past S's budget, not yet evicted: as a ghost hit
            state.queue = MAIN
            state.position = self._tick()
            return
        if state.frequency < MAX_FREQUENCY:
            state.frequency += 1

    # ------------------------------------------------------------ a victim
    def reconsider(self, page: Page) -> bool:
        return self.second_chance(page.policy_state)

    def second_chance(self, state: PageState) -> bool:
        """Whether the popped victim gets a second chance (re-queued at the back of M)."""
        frequency = state.frequency
        queue = state.queue
        if queue == MAIN:
            frequency = self._missed_laps(state.position, frequency)
        if frequency == 0:
            return False
        if queue == MAIN:
            state.frequency = frequency - 1
        else:  # S -> M, access bits cleared
            if queue == SMALL:
                self._small_tokens -= state.tokens
            state.queue = MAIN
            state.frequency = 0
        state.position = self._tick()
        return True

    def _missed_laps(self, position: int, frequency: int) -> int:
        """Record this pass of M's hand at `position`; return the page's frequency less the
        passes it missed while it was not a leaf (the hand went past its position then: in
        a flat S3-FIFO it would have been reinserted, one less, at the clock of that pass,
        and so on), so a chain drains in the laps its pages would take side by side."""
        hand, clocks = self._hand, self._hand_clock
        if not hand or position > hand[-1]:
            hand.append(position)
            clocks.append(self._tick())
            if len(hand) > 4 * (self._tracked + 1024):  # bound the history: a page
                del hand[: len(hand) // 2]  # older than it is charged the laps still kept
                del clocks[: len(clocks) // 2]
            return frequency
        while frequency > 0 and position < hand[-1]:
            position = clocks[bisect_right(hand, position)]
            frequency -= 1
        return frequency

    # ------------------------------------------------------------- a page leaves
    def _drop(self, state: PageState | None) -> int:
        """Mark `state`'s page gone; its queue (-1 if it had no state)."""
        if state is None:
            return GONE
        queue = state.queue
        state.queue = GONE
        state.holder = None
        self._tracked -= 1
        if queue == SMALL:
            self._small_tokens -= state.tokens
        return queue

    def _forget(self, page: Page) -> int:
        """Drop `page`'s state; its queue (-1 if it had none)."""
        queue = self._drop(page.policy_state)
        page.policy_state = None
        return queue

    def on_evict(self, page: Page) -> None:
        if self._forget(page) != MAIN:
            self._to_ghost(page.page_id, page.num_tokens)

    def on_expire(self, page: Page) -> None:
        self._forget(page)

    def leave(self, state: PageState, page_id: int, evicted: bool) -> None:
        """A page in `state` left the cache: evicted (`on_evict`: into G unless it was in
        M) or expired (`on_expire`)."""
        tokens = state.tokens
        if self._drop(state) != MAIN and evicted:
            self._to_ghost(page_id, tokens)

    def _to_ghost(self, page_id: int, tokens: int) -> None:
        """Enter an id evicted from S (or never queued) into G, trimming G to its budget."""
        if tokens > GHOST_TOKENS:
            raise ValueError(f"a page of {tokens} tokens: S3-FIFO's ghost list holds "
                             f"pages of fewer than 2**{GHOST_SHIFT}")
        ghost = self._ghost
        order = self._ghost_order
        found = ghost.get(page_id)
        if found is None:
            number = self._ghost_base + len(order)
            order.append(page_id)
        else:  # already in G (evicted again without an insert): it keeps its place
            held = found
            number = held >> GHOST_SHIFT
            self._ghost_tokens -= held & GHOST_TOKENS
        ghost[page_id] = (number << GHOST_SHIFT) | tokens
        self._ghost_tokens += tokens
        head = self._ghost_head
        while self._ghost_tokens > self._ghost_budget and len(ghost) > 1:
            oldest = order[head]  # G's oldest entry, unless it left on a hit
            found = ghost.get(oldest)
            if found is not None:
                held = found
                if held >> GHOST_SHIFT == self._ghost_base + head:
                    del ghost[oldest]
                    self._ghost_tokens -= held & GHOST_TOKENS
            head += 1
        kept = _consumed(order, head)
        self._ghost_base += head - kept  # the entries dropped from the front
        self._ghost_head = kept


def _consumed(fifo: list, head: int) -> int:
    """The head index of a list used as a queue from `head` on, after dropping its
    consumed front once that is at least half of it (and COMPACT_AFTER entries): O(1) a
    pop, amortised."""
    if head >= COMPACT_AFTER and 2 * head >= len(fifo):
        del fifo[:head]
        return 0
    return head


POLICIES.register("s3fifo")(S3FIFO)
