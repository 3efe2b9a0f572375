"""RunClock (engine/decode_steps.py) answers as steps_done_by does, for any query order."""

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
