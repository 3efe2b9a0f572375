"""LoadBoard (engine/load_board.py) and prefix_aware's reading of it.

Known answers by hand on fake replica views that post bounds to a board: which replicas'
clocks and exact loads prefix_aware reads, what it writes back, its ties, and the scan it
falls back to for a sequence the board was not made over; then the engine's replicas'
board entries through a decode run, by hand (Ticks: every step 1 s).
"""

from __future__ import annotations

import pytest
from fakes import BoardView as View
from fakes import Ticks
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache import POLICIES, SegmentCache
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.load_board import LoadBoard
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.router import ROUTERS
from prefixsim.trace import Request

# each test runs on the package's cache and on the per-page reference (conftest: each_cache)
pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache



def choose(views, bases, weight=1.0, other=0):
    return ROUTERS.build("prefix_aware", load_weight=weight)._choose(views, bases, other, 0.0)


def test_only_replicas_that_can_win_have_their_clock_and_load_read():
    """Bases 0, weight 1. A idle at 10; B mid-run: bounds (0, 30), clock's least 5, exact
    20; C mid-run: bounds (0, 40), least 35; D mid-run: bounds (12, 40). The best worst
    case is A's -10, so D (best case -12) is skipped unread; B's least (-5) can beat -10:
    its exact load is read (-20, A stays best) and becomes its board high; C's least (-35)
    cannot: its exact load is never read."""
    views = [View(0, 10), View(1, 20, 0, 30, 5), View(2, 38, 0, 40, 35),
             View(3, 30, 12, 40)]
    board = LoadBoard(views)
    assert choose(views, {}) == 0
    assert [(v.least_reads, v.exact_reads) for v in views] == [(0, 0), (1, 1), (1, 0), (0, 0)]
    assert board.highs == [10, 20, 40, 40] and board.lows == [10, 0, 0, 12]


def test_a_better_exact_score_raises_the_floor_for_the_rest():
    """A mid-run: bounds (0, 50), exact 5; B mid-run: bounds (0, 50), least 8. The floor
    starts at -50; A's exact -5 raises it, so B's least (-8) is below: B's load is unread."""
    views = [View(0, 5, 0, 50, 0), View(1, 9, 0, 50, 8)]
    LoadBoard(views)
    assert choose(views, {}) == 0
    assert (views[1].least_reads, views[1].exact_reads) == (1, 0)


def test_ties_go_to_the_lower_load_then_the_lower_position():
    """Scores base - load: {0: 10 - 10, 1: 20 - 20} tie at 0, the lower load wins (0);
    {0: 20 - 20, 1: 10 - 10}: position 1; equal scores and loads: position 0. Weight 0.5:
    20 - 0.5 x 20 = 10 beats 10 - 0.5 x 10 = 5."""
    def pick(bases, loads, weight=1.0):
        views = [View(i, load) for i, load in enumerate(loads)]
        LoadBoard(views)
        return choose(views, bases, weight)
    assert pick({0: 10, 1: 20}, [10, 20]) == 0
    assert pick({0: 20, 1: 10}, [20, 10]) == 1
    assert pick({0: 7, 1: 7}, [3, 3]) == 0
    assert pick({0: 10, 1: 20}, [10, 20], weight=0.5) == 1
    assert pick({1: 20}, [0, 25], weight=1.0) == 0  # `other` (0) for position 0: 0 > -5


def test_a_sequence_the_board_was_not_made_over_is_read_whole():
    """A copy of the board's list: every exact load is read, no clock bound."""
    views = [View(0, 10), View(1, 20, 0, 30, 5), View(2, 38, 0, 40, 35)]
    LoadBoard(views)
    assert choose(list(views), {}) == 0
    assert [(v.least_reads, v.exact_reads) for v in views] == [(0, 1), (0, 1), (0, 1)]


REPLICA = st.tuples(st.integers(0, 60), st.integers(0, 20), st.integers(0, 20),
                    st.integers(0, 20))


@settings(max_examples=400, deadline=None)
@given(st.lists(REPLICA, min_size=1, max_size=12), st.dictionaries(st.integers(0, 11),
       st.one_of(st.integers(0, 80), st.floats(0, 80))),
       st.sampled_from([0.0, 0.5, 1.0, 1, 2.0]), st.integers(0, 30))
def test_the_board_picks_what_a_scan_of_exact_loads_picks(loads, bases, weight, other):
    """Random fleets (exact load; how far below it the run's end and the clock's bound lie;
    how far above it the board's high is), bases of some positions, `other` for the rest:
    the board's pruned scan (a C loop when compiled) picks the replica a scan of every
    exact load picks, ties included."""
    def views():
        made = []
        for index, (exact, below_least, below_low, above) in enumerate(loads):
            least = max(0, exact - below_least)
            made.append(View(index, exact, max(0, least - below_low), exact + above, least))
        return made

    on_board = views()
    LoadBoard(on_board)
    scanned = views()
    LoadBoard(scanned)
    assert choose(on_board, bases, weight, other) == choose(list(scanned), bases, weight, other)


class BoardWatch:
    """Sends the first 2 requests to replica 0, the rest to replica 1, writing down replica
    0's board entry at each arrival."""

    def __init__(self) -> None:
        self.seen = []

    def route(self, request, replicas, now) -> int:
        board, slot = replicas[0].load_board, replicas[0].load_slot
        self.seen.append((now, board.lows[slot], board.highs[slot]))
        return 0 if request.request_id < 2 else 1


def test_the_engine_replicas_post_their_bounds_through_a_run_by_hand():
    """A and B (t=0, L=4, 10 outputs each) prefill together t=0->1 (20 outstanding before,
    18 after) and decode t=1->10 in one run of 9 steps of 2 sequences. Replica 0's entry:
    t=0.5: (28, 28), nothing running yet but the prefill's 8 tokens and 20 outputs;
    t=2.5 and t=5.5: (0, 18): the run's end and its start, as nothing posts mid-run;
    t=10.5: (0, 0). The probes (1 token, 1 output each) go to replica 1."""
    def req(i, at, tokens, outputs, pages):
        return Request(i, at, tokens, outputs, tuple(pages), 4)
    requests = [req(0, 0.0, 4, 10, [1]), req(1, 0.0, 4, 10, [2])]
    requests += [req(2 + k, at, 1, 1, [100 + k]) for k, at in enumerate([0.5, 2.5, 5.5, 10.5])]
    watch = BoardWatch()
    caches = [Cache(100, POLICIES.build("lru")) for _ in range(2)]
    replay_timed(requests, Fleet(caches, Ticks(), ContinuousBatching(8192, 256), watch),
                 Sampling(check_invariants=True))
    assert watch.seen[2:] == [(0.5, 28, 28), (2.5, 0, 18), (5.5, 0, 18), (10.5, 0, 0)]
