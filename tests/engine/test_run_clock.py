"""RunClock (engine/decode_steps.py) answers as steps_done_by does, for any query order."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.costmodel import Roofline, StepRoofline
from prefixsim.engine.decode_steps import RunClock, steps_done_by
from prefixsim.presets import get_gpu, get_model

MODELS = [Roofline(get_model("llama-3.1-8b"), get_gpu("h100-sxm")),
          StepRoofline(get_model("mixtral-8x7b"), get_gpu("h100-sxm"), tp=2)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 50_000), min_size=1, max_size=40), st.integers(1, 400),
       st.lists(st.floats(0.0, 1.2), min_size=1, max_size=30), st.sampled_from([0, 1]))
def test_run_clock_equals_steps_done_by(contexts, steps, fractions, which):
    """Queries at any fractions of the run's time (repeated, increasing or not; past its
    end), each answered from the cursor, equal the plain search."""
    cost = MODELS[which]
    contexts = tuple(contexts)
    total = cost.decode_steps_time_s(contexts, steps)
    clock = RunClock(cost, contexts, steps, total)
    for fraction in sorted(fractions) + fractions:
        elapsed = fraction * total
        assert clock.steps_done(elapsed) == steps_done_by(cost, contexts, steps, elapsed)


WINDOWED = Roofline(get_model("gemma-3-27b"), get_gpu("h100-sxm"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 50_000), min_size=1, max_size=20), st.integers(2, 300),
       st.sampled_from([0, 1, 2]))
def test_roofline_decode_steps_never_shorten(contexts, steps, which):
    """The claim `decode_steps_never_shorten` makes for the roofline models (windowed
    attention included): each step of a run lasts at least as long as the one before."""
    cost = (*MODELS, WINDOWED)[which]
    assert cost.decode_steps_never_shorten
    time_of = cost.decode_run_timer(tuple(contexts))
    ends = [time_of(tuple(contexts), k) for k in range(steps + 1)]
    durations = [b - a for a, b in zip(ends, ends[1:], strict=False)]
    assert all(later >= earlier * (1 - 1e-9)
               for earlier, later in zip(durations, durations[1:], strict=False))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 50_000), min_size=1, max_size=40), st.integers(1, 400),
       st.lists(st.floats(0.0, 1.2), min_size=1, max_size=30), st.sampled_from([0, 1, 2]))
def test_steps_done_at_most_bounds_the_clock_from_its_cursor(contexts, steps, fractions,
                                                             which):
    """At increasing times, the bound taken before the clock is read is never below the
    clock's answer, and equals it inside the step the clock was last asked about."""
    cost = (*MODELS, WINDOWED)[which]
    contexts = tuple(contexts)
    total = cost.decode_steps_time_s(contexts, steps)
    clock = RunClock(cost, contexts, steps, total)
    assert clock.steps_done_at_most(0.0) == steps  # never asked: the run's end
    for fraction in sorted(fractions):
        elapsed = fraction * total
        bound = clock.steps_done_at_most(elapsed)
        exact = clock.steps_done(elapsed)
        assert exact <= bound
        assert clock.steps_done_at_most(elapsed) == exact  # inside the cursor's step


@pytest.mark.parametrize(("grow", "bound"), [(True, 6), (False, 10)])
def test_steps_done_at_most_by_hand(grow, bound):
    """Steps of 1 s, 10 of them; the clock last read at 2.5 s (2 done, the next ends at 3 s).
    At 2.7 s: still 2. At 5.5 s (5 done): growing steps allow 2 + 1 + (5.5 - 3) // 1 and
    one for rounding = 6; a model that does not promise growing steps, the run's end."""

    class Steady:
        decode_steps_never_shorten = grow

        def decode_run_timer(self, contexts):
            return lambda _contexts, k: float(k)

    clock = RunClock(Steady(), (5,), 10, 10.0)
    assert clock.steps_done(2.5) == 2
    assert clock.steps_done_at_most(2.7) == 2
    assert clock.steps_done_at_most(5.5) == bound
    assert clock.steps_done(5.5) == 5
