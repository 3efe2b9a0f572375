"""The decode-run step search (engine/decode_steps.py) against naive scans, on a fake cost
model whose steps last whatever hypothesis draws (uneven, so the search walks both ways)."""

from itertools import accumulate

from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.engine.decode_steps import RunClock, steps_done_by, steps_reaching


class Uneven:
    """A run's k-th step lasts durations[k - 1]; `calls` counts the times asked for."""

    def __init__(self, durations, never_shorten=False) -> None:
        self.ends = [0.0, *accumulate(durations)]
        self.decode_steps_never_shorten = never_shorten
        self.calls = 0

    def decode_steps_time_s(self, contexts, steps) -> float:
        self.calls += 1
        return self.ends[steps]

    def decode_run_timer(self, contexts):
        return self.decode_steps_time_s


def most_fitting(ends, elapsed):
    return max(k for k, end in enumerate(ends) if end <= elapsed or k == 0)


def fewest_reaching(ends, elapsed):
    return next((k for k, end in enumerate(ends) if end >= elapsed), len(ends) - 1)


DURATIONS = st.lists(st.sampled_from([0.25, 0.5, 1.0, 4.0, 16.0]), min_size=1, max_size=30)
TIMES = st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0,
                                  21.0, 34.0, 55.0, 89.0, 200.0, 600.0]), max_size=20)


@settings(max_examples=150, deadline=None)
@given(DURATIONS, TIMES)
def test_searches_equal_the_naive_scans(durations, times):
    """Times on step boundaries and between them (all sums are exact binary fractions)."""
    cost = Uneven(durations)
    ends, steps = cost.ends, len(durations)
    clock = RunClock(cost, (1,), steps, ends[-1])
    for elapsed in times + sorted(times):
        assert steps_done_by(cost, (1,), steps, elapsed) == most_fitting(ends, elapsed)
        assert steps_done_by(cost, (1,), steps, elapsed, cost.decode_steps_time_s) == \
            most_fitting(ends, elapsed)
        assert steps_reaching(cost, (1,), steps, elapsed) == fewest_reaching(ends, elapsed)
        assert clock.steps_done(elapsed) == most_fitting(ends, elapsed)


@settings(max_examples=150, deadline=None)
@given(DURATIONS, TIMES, st.booleans())
def test_at_most_bounds_the_clock(durations, times, sort):
    """Growing steps (sorted durations) and a model that says so, or any steps and one
    that does not: the bound is never below the answer, and exact inside the cursor's
    step."""
    cost = Uneven(sorted(durations) if sort else durations, never_shorten=sort)
    ends, steps = cost.ends, len(durations)
    clock = RunClock(cost, (1,), steps, ends[-1])
    for elapsed in sorted(times):
        exact = most_fitting(ends, elapsed)
        assert clock.steps_done_at_most(elapsed) >= exact
        assert clock.steps_done(elapsed) == exact
        if elapsed < ends[-1]:
            assert clock.steps_done_at_most(elapsed) == exact
            assert clock.done_s <= elapsed < clock.next_s


def test_cursor_by_hand():
    """Steps of 1, 2, 4 and 8 s (ends 1, 3, 7, 15). The first query asks for the first
    step's end only; a query in the next step costs one call; past the run's end, none."""
    cost = Uneven([1.0, 2.0, 4.0, 8.0], never_shorten=True)
    clock = RunClock(cost, (1,), 4, 15.0)
    assert clock.steps_done_at_most(0.5) == 4  # never asked: the run's end
    assert clock.steps_done(0.5) == 0 and cost.calls == 1
    assert (clock.done, clock.done_s, clock.next_s) == (0, 0.0, 1.0)
    assert clock.steps_done(0.9) == 0 and cost.calls == 1
    assert clock.steps_done(1.0) == 1 and cost.calls == 2  # one step on: one call
    assert (clock.done, clock.done_s, clock.next_s) == (1, 1.0, 3.0)
    assert clock.steps_done_at_most(0.5) == 4  # before the cursor: the run's end
    # past the cursor, steps last at least 2 s: 1 + 2 + (6 - 3) // 2 = 4, capped at 4 steps
    assert clock.steps_done_at_most(6.0) == 4
    assert clock.steps_done_at_most(4.0) == 3  # 1 + 2 + 0
    assert clock.steps_done(7.5) == 3 and (clock.done_s, clock.next_s) == (7.0, 15.0)
    calls = cost.calls
    assert clock.steps_done(15.0) == 4 and clock.steps_done(99.0) == 4
    assert cost.calls == calls
    assert clock.steps_done_at_most(15.0) == 4
