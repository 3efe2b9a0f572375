"""The roofline over layer kinds (docs/cost-models.md "Layer kinds"), worked by hand on
the toy model and slow GPU of test_roofline.py: one full-attention layer and one layer with
a 32-token sliding window (TINY_WINDOW), or one full and one state layer (TINY_STATE)."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_roofline import PLAIN, SLOW, TINY

from prefixsim.costmodel import PrefillChunk, Roofline, StepBatch

TINY_WINDOW = dataclasses.replace(TINY, name="tiny-window", sliding_window=32,
                                  num_window_layers=1)
TINY_STATE = dataclasses.replace(TINY, name="tiny-state", num_state_layers=1)


def test_a_window_caps_the_keys_and_the_cached_reads():
    """10 new after 100 cached, window 32: keys min(100 + 1.2*10, 1.2*32) = 38.4; flop
    4*4*16*64*38.4 = 629,145.6 -> / (1e9*0.44) = 1.42988 ms; bytes 2*4*16*10*2 + (10 + 32)
    * 64 * 2 = 7,936 -> / (1e7*0.85) = 0.93365 ms; p = 2: 1.7077 ms. A chunk shorter than
    the window after nothing cached is the full layer's work."""
    ops = Roofline(TINY, SLOW).ops
    assert ops.prefill_attention_s(10, 100, 32) == pytest.approx(1.7077e-3, rel=1e-4)
    assert ops.prefill_attention_s(10, 0, 32) == ops.prefill_attention_s(10, 0)
    assert ops.prefill_attention_s(10, 100, 32) < ops.prefill_attention_s(10, 100)


def test_decode_reads_the_window_only_in_window_layers():
    """Contexts 10 and 100 with window 32: the full layer reads 110 tokens' KV, the window
    layer 10 + 32 = 42; at 64 values x 2 B per token and 1e7 B/s (efficiency 1): 14.08 ms
    + 5.376 ms, on top of the same step without any context."""
    window, full = Roofline(TINY_WINDOW, SLOW, **PLAIN), Roofline(TINY, SLOW, **PLAIN)
    base = window.step_time_s(StepBatch((), (0, 0)))
    assert window.step_time_s(StepBatch((), (10, 100))) - base == pytest.approx(
        (110 + 42) * 64 * 2 / 1e7)
    assert full.step_time_s(StepBatch((), (10, 100))) - full.step_time_s(
        StepBatch((), (0, 0))) == pytest.approx(2 * 110 * 64 * 2 / 1e7)


def test_state_layers_make_no_attention_call_and_store_no_kv():
    """Two layers, one of them a state layer: both run their GEMMs and element-wise kernels,
    one attention call (floor and chunk work) and one layer's KV reads: the step is the
    full-attention model's less one layer's attention; the KV values per token per layer are
    the attention layer's (64), not halved by the state layer."""
    state, full = Roofline(TINY_STATE, SLOW), Roofline(TINY, SLOW)
    assert state.ops.kv_values == full.ops.kv_values == 64
    chunk = StepBatch((PrefillChunk(10, 100, True),), (50,))
    ops = full.ops
    one_attention = (ops.attention_floor_s(True) + ops.decode_attention_fixed_s(1)
                     + ops.prefill_attention_s(10, 100)
                     + 50 * ops.decode_attention_s_per_context_token())
    assert state.step_time_s(chunk) == pytest.approx(full.step_time_s(chunk) - one_attention)


@settings(max_examples=40, deadline=None)
@given(contexts=st.lists(st.integers(1, 80), min_size=1, max_size=6),
       steps=st.integers(0, 50), engine=st.sampled_from(["vllm-v1", "sglang"]),
       cpu=st.sampled_from([None, 0.05]))
def test_window_decode_runs_sum_to_their_steps(contexts, steps, engine, cpu):
    """Contexts on both sides of the 32-token window, runs crossing it; with an overlapping
    engine and a CPU time near the GPU's, steps on both sides of the crossing."""
    params = {} if cpu is None else {"step_overhead_s": cpu}
    rf = Roofline(TINY_WINDOW, SLOW, engine=engine, **params)
    naive = math.fsum(rf.step_time_s(StepBatch((), tuple(c + k for c in contexts)))
                      for k in range(steps))
    assert rf.decode_steps_time_s(contexts, steps) == pytest.approx(naive, rel=1e-9)
    assert rf.decode_run_timer(tuple(contexts))(contexts, steps) == pytest.approx(
        naive, rel=1e-9)
