"""S3-FIFO's queues driven hook by hook on pages built directly (prefixsim/cache/s3fifo.py):
the ghost list's token count, S's budget when pages leave it (hit, reconsidered, stale
entries), frequencies, and the hand's bounded history. A page's key band says its queue:
below BAND due, then main, then small within the budget. Whole-cache orders are in
tests/cache/test_policies.py."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache.page import Page
from prefixsim.cache.s3fifo import BAND, S3FIFO


class FakeCache:
    """What S3FIFO reads of its cache: the capacity, and `requeue` (a no-op here)."""

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity_tokens = capacity_tokens

    def requeue(self, page: Page) -> None:
        return None


def policy(capacity: int) -> S3FIFO:
    made = S3FIFO(0.1)
    made.bind_cache(FakeCache(capacity))
    return made


def page(page_id: int, tokens: int) -> Page:
    return Page(page_id, None, tokens, 0.0, 0)


def band(s3: S3FIFO, made: Page) -> str:
    return ("due", "main", "small")[int(s3.key(made) // BAND)]


def test_an_unknown_page_is_in_no_queue():
    assert policy(10).queue_of(page(5, 1)) is None and policy(10).queue_of(None) is None


def test_the_ghost_list_holds_its_budget_in_tokens_oldest_out_at_least_one_id():
    """Capacity 10: S's budget 1 token, the ghost's 9. Pages 1 (4 tokens) and 2 (2) leave S
    due and are evicted: ghost 6 tokens. Page 1 comes back (a ghost hit, into main): ghost
    2. Page 3 (7) evicted: ghost 9, exactly the budget, so page 2 stays. Page 4 (1): 10,
    the oldest (2) goes. Page 5 (2): 10, page 3 goes. Page 6 (9): 12, pages 4 and 5 go.
    Page 7 (10), alone over the budget: page 6 goes, page 7 stays."""
    s3 = policy(10)
    for made in (page(1, 4), page(2, 2)):
        s3.on_insert(made)
        assert band(s3, made) == "due"
        s3.on_evict(made)
    again = page(1, 4)
    s3.on_insert(again)
    assert s3.queue_of(again) == "main" and not s3.in_ghost(1)
    ghosts = {3: [2, 3], 4: [3, 4], 5: [4, 5], 6: [6], 7: [7]}
    for page_id, tokens in zip(ghosts, (7, 1, 2, 9, 10), strict=True):
        made = page(page_id, tokens)
        s3.on_insert(made)
        s3.on_evict(made)
        assert [i for i in range(1, 8) if s3.in_ghost(i)] == ghosts[page_id], page_id


def test_a_ghost_entry_keeps_a_page_of_up_to_2_to_the_32_minus_1_tokens():
    """A ghost entry packs its number and the page's tokens in one int (32 bits for the
    tokens): the largest page that fits counts in full; one token more is refused by name
    rather than corrupting the entry's number."""
    s3 = policy(2**34)
    s3.on_insert(big := page(1, 2**32 - 1))
    s3.on_evict(big)
    assert s3.in_ghost(1) and s3._ghost_tokens == 2**32 - 1
    s3.on_insert(again := page(1, 8))  # a ghost hit: into main, its tokens leave G
    assert s3.queue_of(again) == "main" and s3._ghost_tokens == 0
    assert again.policy_state.tokens == 8  # its state records its size, in M too
    s3.on_insert(huge := page(2, 2**32))
    with pytest.raises(ValueError, match="2\\*\\*32"):
        s3.on_evict(huge)


def test_ghost_entries_keep_their_numbers_when_the_order_list_drops_its_front(monkeypatch):
    """Ghost budget 9 tokens, pages of 5: each id evicted from S pushes the one before out of
    G. With the consumed front dropped at every pop (COMPACT_AFTER 1), an entry's number is
    the dropped count plus its index: a count lost or an entry numbered by its index alone
    trims the wrong id, or none."""
    import prefixsim.cache.s3fifo as s3fifo

    monkeypatch.setattr(s3fifo, "COMPACT_AFTER", 1)
    s3 = policy(10)
    for page_id in range(1, 7):
        s3.on_insert(made := page(page_id, 5))
        s3.on_evict(made)
        assert [i for i in range(8) if s3.in_ghost(i)] == [page_id]
        assert s3._ghost_tokens == 5 and len(s3._ghost_order) <= 2


def test_an_id_back_in_the_ghost_list_takes_its_new_place():
    """Capacity 10 (G's budget 9), pages of 2 tokens. 1 and 2 leave S for G: [1, 2]. 1
    comes back (a ghost hit: main), is evicted from main (not into G: [2]), comes back
    into S and leaves it for G again: [2, 1], its first entry stale. 3 and 4: [2, 1, 3, 4],
    8 tokens. 5: 10 tokens, so the oldest, 2, goes (not 1 by its stale first entry)."""
    s3 = policy(10)
    for page_id in (1, 2):
        s3.on_insert(made := page(page_id, 2))
        s3.on_evict(made)
    s3.on_insert(main := page(1, 2))
    assert s3.queue_of(main) == "main"
    s3.on_evict(main)
    assert [i for i in range(1, 6) if s3.in_ghost(i)] == [2]
    for page_id in (1, 3, 4, 5):
        s3.on_insert(made := page(page_id, 2))
        s3.on_evict(made)
    assert [i for i in range(1, 6) if s3.in_ghost(i)] == [1, 3, 4, 5]
    assert s3._ghost_tokens == 8


def test_an_id_evicted_again_without_an_insert_keeps_its_place_in_g():
    """Capacity 10 (G's budget 9). 1 (2 tokens) and 2 (3) leave S for G: [1, 2], 5 tokens.
    1 is evicted again without coming back (a page the policy never queued, 4 tokens now):
    it keeps its place and number, its tokens replaced: 7. 3 (3 tokens): 10, so the
    oldest, 1, goes by its kept number: [2, 3], 6 tokens."""
    s3 = policy(10)
    for page_id, tokens in ((1, 2), (2, 3)):
        s3.on_insert(made := page(page_id, tokens))
        s3.on_evict(made)
    s3.on_evict(page(1, 4))
    assert list(s3._ghost_order[s3._ghost_head:]) == [1, 2] and s3._ghost_tokens == 7
    s3.on_insert(made := page(3, 3))
    s3.on_evict(made)
    assert [i for i in range(1, 4) if s3.in_ghost(i)] == [2, 3] and s3._ghost_tokens == 6


def test_a_state_that_left_lets_go_of_its_holder():
    """A page's state names what holds it (the page here; a segment on the compressed
    tree); once the page has left, by eviction or expiry, the state is GONE and holds
    nothing (no cycle between a page and its state outlives the page)."""
    s3 = policy(100)
    for leave in (s3.on_evict, s3.on_expire):
        s3.on_insert(made := page(1, 4))
        state = made.policy_state
        assert state.holder is made and state.tokens == 4
        leave(made)
        gone = -1  # s3fifo.GONE (a C constant when compiled, not importable)
        assert state.holder is None and state.queue == gone and made.policy_state is None


def test_small_fraction_must_be_a_number_strictly_between_0_and_1():
    for bad in ("0.1", 0.0, 1.0, True):
        with pytest.raises(ValueError, match="small_fraction: expected a number in"):
            S3FIFO(bad)


def test_an_unbound_policy_has_no_budgets():
    """Without a cache (no capacity) S never overflows and the ghost keeps every id; a page
    that was never queued leaves quietly, and a page that leaves takes its state along."""
    s3 = S3FIFO()
    pages = [page(i, 100) for i in range(5)]
    for made in pages:
        s3.on_insert(made)
    assert {band(s3, p) for p in pages} == {"small"}
    for made in pages:
        s3.on_evict(made)
    assert all(s3.in_ghost(i) for i in range(5))
    s3.on_expire(page(42, 1))
    s3.on_evict(page(43, 1))
    assert s3._tracked == 0 and all(p.policy_state is None for p in pages)
    assert not s3.in_ghost(42) and s3.in_ghost(43)  # evicted without a queue: as from S


def test_a_page_hit_once_in_s_moves_to_main_with_its_bits_cleared():
    """Capacity 10 (S's budget 1): page 1 (1 token) fits S; one hit; page 2 pushes S over,
    so page 1 leaves S for main with frequency 0: popped from main, no second chance."""
    s3 = policy(10)
    first = page(1, 1)
    s3.on_insert(first)
    s3.on_access(first)
    s3.on_insert(page(2, 1))
    assert band(s3, first) == "main"
    assert s3.reconsider(first) is False


def test_one_hit_in_main_is_one_second_chance():
    s3 = policy(10)
    s3.on_insert(gone := page(1, 4))
    s3.on_evict(gone)
    s3.on_insert(main := page(1, 4))  # ghost hit: main
    s3.on_access(main)
    assert s3.reconsider(main) is True and s3.reconsider(main) is False


def test_a_small_page_reconsidered_leaves_s_and_frees_its_budget():
    """Capacity 100 (S's budget 10): pages 1 (2 tokens) and 2 (4) in S; page 1 hit, then
    taken as a last resort: to main, S holds 4. Page 3 (7): 11 > 10, page 2 becomes due,
    page 3 stays within the budget; page 4 (2): 9, nothing more leaves S."""
    s3 = policy(100)
    one, two, three, four = page(1, 2), page(2, 4), page(3, 7), page(4, 2)
    s3.on_insert(one)
    s3.on_insert(two)
    s3.on_access(one)
    assert s3.reconsider(one) is True and band(s3, one) == "main"
    s3.on_insert(three)
    assert (band(s3, two), band(s3, three)) == ("due", "small")
    s3.on_insert(four)
    assert (band(s3, three), band(s3, four)) == ("small", "small")
    assert s3.reconsider(one) is False  # it entered main with its bits cleared


def test_a_stale_s_entry_of_a_page_that_came_back_is_skipped():
    """Capacity 100 (S's budget 10): page 1 (4 tokens) enters S, expires, enters again
    (S's FIFO holds its old entry too). Pages 2 and 3 (4 each) bring S to 12: the old
    entry is skipped and page 1's current one becomes due (S 8). Page 4 (4) brings S to
    12 again: page 1's entry is gone, so page 2 becomes due."""
    s3 = policy(100)
    first = page(1, 4)
    s3.on_insert(first)
    s3.on_expire(first)
    s3.on_insert(first)
    others = [page(i, 4) for i in (2, 3, 4)]
    s3.on_insert(others[0])
    s3.on_insert(others[1])
    assert [band(s3, p) for p in (first, *others[:2])] == ["due", "small", "small"]
    s3.on_insert(others[2])
    assert [band(s3, p) for p in others] == ["due", "small", "small"]


def test_the_hands_history_is_halved_past_its_bound():
    """One main page hit and reconsidered 5,000 times: each pass is recorded, and past 4 x
    (1 page + 1,024) = 4,100 entries the older half is dropped: the 4,101st pass leaves
    2,051, and 899 more make 2,950."""
    s3 = policy(10)
    s3.on_insert(gone := page(1, 4))
    s3.on_evict(gone)
    s3.on_insert(main := page(1, 4))
    for _ in range(5000):
        s3.on_access(main)
        assert s3.reconsider(main) is True
    assert len(s3._hand) == len(s3._hand_clock) == 2950


def test_hits_count_up_to_three_second_chances_in_main():
    """A main page hit five times keeps a frequency of 3 (2 bits): popped, it is re-queued
    three times (3 -> 2 -> 1 -> 0) and evicted the fourth; hit twice, twice."""
    for hits, chances in ((5, 3), (2, 2)):
        s3 = policy(10)
        s3.on_insert(gone := page(1, 4))
        s3.on_evict(gone)
        s3.on_insert(main := page(1, 4))  # ghost hit: main, frequency 0
        for _ in range(hits):
            s3.on_access(main)
        answers = [s3.reconsider(main) for _ in range(chances + 1)]
        assert answers == [True] * chances + [False], hits


class GhostReference:
    """S3-FIFO's ghost list G as the paper states it, in an OrderedDict: an id evicted from
    S goes in at the back with its tokens (an id already there keeps its place), an insert
    of a ghost id takes it out, and while G holds more tokens than its budget (and more
    than one id) its oldest id goes."""

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.ids: OrderedDict[int, int] = OrderedDict()
        self.tokens = 0

    def inserted(self, page_id: int) -> None:
        self.tokens -= self.ids.pop(page_id, 0)

    def evicted_from_s(self, page_id: int, tokens: int) -> None:
        self.tokens += tokens - self.ids.get(page_id, 0)
        self.ids[page_id] = tokens
        while self.tokens > self.budget and len(self.ids) > 1:
            self.tokens -= self.ids.popitem(last=False)[1]


OPS = st.lists(st.tuples(st.sampled_from(("insert", "hit", "evict", "expire")),
                         st.integers(0, 8), st.integers(1, 6)), max_size=400)


@settings(max_examples=200, deadline=None)
@given(OPS, st.integers(5, 30), st.sampled_from((1, 4096)))
def test_the_ghost_and_s_match_the_papers_queues(ops, capacity, compact_after):
    """Random inserts, hits, evictions and expiries of ids 0-8: G holds exactly the ids and
    tokens of GhostReference (its order shows in which ids its budget drops), and a page's
    queue is S until it is hit in S and S overflows or it becomes due, as the paper's S
    drops its oldest first. `compact_after` 1 drops the consumed front of S's and G's
    lists at every pop (4,096 is the default): the same results."""
    import prefixsim.cache.s3fifo as s3fifo

    before = s3fifo.COMPACT_AFTER
    s3fifo.COMPACT_AFTER = compact_after
    try:
        s3 = policy(capacity)
        reference = GhostReference(capacity - 0.1 * capacity)
        resident: dict[int, Page] = {}
        for op, page_id, tokens in ops:
            made = resident.get(page_id)
            if op == "insert" and made is None:
                resident[page_id] = made = page(page_id, tokens)
                s3.on_insert(made)
                reference.inserted(page_id)
            elif op == "hit" and made is not None:
                s3.on_access(made)
            elif op in ("evict", "expire") and made is not None:
                to_ghost = op == "evict" and s3.queue_of(made) != "main"
                (s3.on_evict if op == "evict" else s3.on_expire)(made)
                del resident[page_id]
                assert made.policy_state is None
                if to_ghost:
                    reference.evicted_from_s(page_id, made.num_tokens)
            assert [i for i in range(9) if s3.in_ghost(i)] == sorted(reference.ids)
            assert s3._ghost_tokens == reference.tokens
            assert s3._tracked == len(resident)
        assert sum(p.num_tokens for p in resident.values()
                   if s3.queue_of(p) == "small" and band(s3, p) == "small") \
            == s3._small_tokens
    finally:
        s3fifo.COMPACT_AFTER = before


def test_a_queue_list_drops_its_consumed_front_once_it_is_half_of_it():
    """`_consumed(fifo, head)`: with 4,096 entries consumed of 8,192 the front goes (head
    0, 4,096 left); with 4,095 of 8,190, or 4,096 of 8,193, it stays."""
    from prefixsim.cache.s3fifo import _consumed

    fifo = list(range(8192))
    assert _consumed(fifo, 4096) == 0 and fifo == list(range(4096, 8192))
    for size, head in ((8190, 4095), (8193, 4096)):
        fifo = list(range(size))
        assert _consumed(fifo, head) == head and len(fifo) == size
