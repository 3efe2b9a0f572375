"""Edges of engine/decode_steps.py worked by hand: which cost-model calls the searches make
(the contexts passed through, the run's timer rather than the model's own method, how many
calls each query costs) and the bound past the cursor with numbers that are not capped."""

import math
from itertools import accumulate

import pytest

from prefixsim.engine.decode_steps import RunClock, steps_done_by, steps_reaching

CONTEXTS = (5, 9)


class Strict:
    """A run's k-th step lasts durations[k - 1]; it answers only for CONTEXTS and only for
    0..steps, and counts the model's own calls (`direct`) apart from its run timer's
    (`timed`). `never_shorten` None: the model does not say (no such attribute)."""

    def __init__(self, durations, never_shorten=None) -> None:
        self.ends = [0.0, *accumulate(durations)]
        if never_shorten is not None:
            self.decode_steps_never_shorten = never_shorten
        self.direct = 0
        self.timed = 0

    def _end(self, contexts, steps) -> float:
        assert contexts == CONTEXTS, contexts
        assert 0 <= steps < len(self.ends), steps
        return self.ends[steps]

    def decode_steps_time_s(self, contexts, steps) -> float:
        self.direct += 1
        return self._end(contexts, steps)

    def decode_run_timer(self, contexts):
        assert contexts == CONTEXTS, contexts

        def time_of(contexts_, steps):
            self.timed += 1
            return self._end(contexts_, steps)

        return time_of


@pytest.mark.parametrize(("elapsed", "done", "calls"), [
    # eight steps of 0.5 s: the guess elapsed / 0.5 is the answer, so the total and one
    # look either way (two when the guess is 0: nothing below it)
    (1.75, 3, 3), (0.25, 0, 2), (0.5, 1, 3), (3.9, 7, 3), (4.0, 8, 1), (9.0, 8, 1),
    (-1.0, 0, 2),
])
def test_an_even_run_costs_three_calls(elapsed, done, calls):
    check_calls([0.5] * 8, elapsed, done, calls)


@pytest.mark.parametrize(("elapsed", "done", "calls"), [
    # steps of 5, 1, 1 and 1 s (ends 5, 6, 7, 8; a mean of 2 s): the guess int(4.9 / 2) = 2
    # is two steps high, so two looks down and one up; int(6.5 / 2) = 3 is one high
    (4.9, 0, 4), (6.5, 2, 4), (7.0, 3, 3), (5.0, 1, 4),
])
def test_a_guess_too_high_walks_down(elapsed, done, calls):
    check_calls([5.0, 1.0, 1.0, 1.0], elapsed, done, calls)


def check_calls(durations, elapsed, done, calls):
    """`steps_done_by` through the model's own method, then through a run timer."""
    steps = len(durations)
    cost = Strict(durations)
    assert steps_done_by(cost, CONTEXTS, steps, elapsed) == done
    assert cost.direct == calls and cost.timed == 0
    timed = Strict(durations)
    assert steps_done_by(timed, CONTEXTS, steps, elapsed,
                         timed.decode_run_timer(CONTEXTS)) == done
    assert timed.timed == calls and timed.direct == 0


def test_steps_reaching_by_hand():
    """Steps of 1, 2 and 4 s (ends 1, 3, 7): the boundary at or after each time."""
    cost = Strict([1.0, 2.0, 4.0])
    got = [steps_reaching(cost, CONTEXTS, 3, t) for t in (0.0, 0.5, 1.0, 2.9, 3.0, 3.1, 7.0, 9.0)]
    assert got == [0, 1, 1, 2, 2, 3, 3, 3]
    assert [steps_done_by(cost, CONTEXTS, 3, t) for t in (0.0, 0.5, 1.0, 2.9, 3.0, 6.9)] == \
        [0, 0, 1, 1, 2, 2]


def test_cursor_calls_by_hand():
    """Steps of 1, 2, 4, 8 and 16 s (ends 1, 3, 7, 15, 31), asked through the run's timer
    only: a repeat or a time inside the cursor's step costs nothing, the next step one
    call; two steps on (5 s is past 2 x 3 - 1) is a search from the start."""
    cost = Strict([1.0, 2.0, 4.0, 8.0, 16.0])
    clock = RunClock(cost, CONTEXTS, 5, 31.0)
    assert clock.num_seqs == 2 and clock.steps == 5 and clock.steps_grow is False
    state = [(clock.steps_done(0.0), cost.timed), (clock.steps_done(0.0), cost.timed)]
    assert state == [(0, 1), (0, 1)]
    assert (clock.steps_done(1.0), cost.timed) == (1, 2)
    assert (clock.done, clock.done_s, clock.next_s) == (1, 1.0, 3.0)
    assert (clock.steps_done(1.0), cost.timed) == (1, 2)  # on the cursor's start: no call
    assert (clock.steps_done(2.9), cost.timed) == (1, 2)
    # the total, three steps up from the guess 0, and step 3's end (step 2's is known)
    assert (clock.steps_done(5.0), cost.timed) == (2, 7)
    assert (clock.done, clock.done_s, clock.next_s) == (2, 3.0, 7.0)
    assert (clock.steps_done(7.0), cost.timed) == (3, 8)
    assert (clock.steps_done(31.0), clock.steps_done(40.0), cost.timed) == (5, 5, 8)
    # backwards: a search, then both ends of the step it lands in
    assert (clock.steps_done(2.0), cost.timed) == (1, 13)
    assert (clock.done, clock.done_s, clock.next_s) == (1, 1.0, 3.0)
    assert cost.direct == 0


def test_a_first_step_of_no_time():
    """Steps of 0, 1 and 1 s (ends 0, 0, 1, 2): at time 0 one step has ended."""
    cost = Strict([0.0, 1.0, 1.0])
    clock = RunClock(cost, CONTEXTS, 3, 2.0)
    assert clock.steps_done(0.0) == 1 and (clock.done_s, clock.next_s) == (0.0, 1.0)
    assert clock.steps_done(0.5) == 1 and clock.steps_done(1.0) == 2
    assert clock.steps_done(2.0) == 3


def test_at_most_past_the_cursor_by_hand():
    """Steps of 0.5, 0.5, 0.5 then seven of 1 s (ends 0.5, 1, 1.5, 2.5, ..., 8.5) on a model
    whose steps never shorten. After a query at 0.6 the cursor is step 2 (0.5 to 1.0), so
    later steps last at least 0.5 s: by 1.0 at most 1 + 2 + 0 steps, by 2.6 at most
    1 + 2 + int(1.6 / 0.5) = 6 (exactly 4 have ended), by 4.0 at most 9."""
    durations = [0.5] * 3 + [1.0] * 7
    cost = Strict(durations, never_shorten=True)
    clock = RunClock(cost, CONTEXTS, 10, 8.5)
    assert clock.steps_grow
    assert clock.steps_done(0.6) == 1 and (clock.done_s, clock.next_s) == (0.5, 1.0)
    calls = cost.timed
    got = [clock.steps_done_at_most(t) for t in (0.4, 0.5, 0.7, 1.0, 1.2, 2.6, 4.0, 8.4, 8.5)]
    assert got == [10, 1, 1, 3, 3, 6, 9, 10, 10]
    assert cost.timed == calls  # the bound costs no call
    silent = Strict(durations)  # a model that does not say: past the cursor, the run's end
    clock = RunClock(silent, CONTEXTS, 10, 8.5)
    assert clock.steps_grow is False
    assert clock.steps_done(0.6) == 1
    assert [clock.steps_done_at_most(t) for t in (0.5, 0.7, 1.0, 2.6)] == [1, 1, 10, 10]
    clock = RunClock(Strict(durations, never_shorten=False), CONTEXTS, 10, 8.5)
    assert clock.steps_done(0.6) == 1 and clock.steps_done_at_most(2.6) == 10


def test_a_timer_that_ends_the_run_early():
    """The run's timer may round the run's end a little below the `total_s` the clock was
    given: a time between the two has every step done, and the cursor's next end is the
    run's end, never a step past the run."""
    total_s = math.nextafter(4.0, math.inf)
    cost = Strict([1.0, 1.0, 2.0], never_shorten=True)  # the timer's end: 4.0
    clock = RunClock(cost, CONTEXTS, 3, total_s)
    assert clock.steps_done(4.0) == 3
    assert (clock.done, clock.done_s, clock.next_s) == (3, 4.0, total_s)
    assert clock.steps_done_at_most(4.0) == 3 and clock.steps_done(4.0) == 3


def test_a_query_before_the_start_on_a_first_step_of_no_time():
    """Asked at -1 s, a run whose first step takes no time has done 0 steps with the next
    ending at 0 as well: a cursor step of no length, so the bound past it is the run's
    end (no division by zero)."""
    clock = RunClock(Strict([0.0, 1.0, 1.0], never_shorten=True), CONTEXTS, 3, 2.0)
    assert clock.steps_done(-1.0) == 0 and (clock.done_s, clock.next_s) == (0.0, 0.0)
    assert clock.steps_done_at_most(0.5) == 3
    assert clock.steps_done(0.5) == 1 and clock.steps_done_at_most(0.5) == 1
