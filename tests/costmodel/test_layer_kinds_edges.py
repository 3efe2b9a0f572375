"""Layer kinds at their edges (docs/cost-models.md "Layer kinds"), written to kill the
mutants bench/mutation.sh left alive in costmodel/layer_kinds.py: the counts read from a
spec, and a prefill chunk's attention summed over full and window layers, each kind asked
for its own work (checked with a fake operator table whose answers name their arguments)."""

import dataclasses

import pytest
from test_layer_kinds import TINY_STATE, TINY_WINDOW
from test_roofline import SLOW, TINY

from prefixsim.costmodel import PrefillChunk, Roofline, StepBatch
from prefixsim.costmodel.layer_kinds import LayerKinds


def test_counts_come_from_the_spec():
    """A plain model: every layer full, no window (0 tokens), no state layer, so plain."""
    plain = LayerKinds.from_spec(TINY)
    assert plain == LayerKinds(full=2, window=0, state=0, window_tokens=0)
    assert plain.plain and plain.attention == 2
    assert LayerKinds.from_spec(TINY_WINDOW) == LayerKinds(1, 1, 0, 32)
    state = LayerKinds.from_spec(TINY_STATE)
    assert state == LayerKinds(1, 0, 1, 0)
    assert not state.plain and state.attention == 1
    three = dataclasses.replace(TINY, num_layers=5, num_window_layers=2, num_state_layers=1,
                                sliding_window=8)
    assert LayerKinds.from_spec(three) == LayerKinds(2, 2, 1, 8)


class NamingOps:
    """prefill_attention_s(n, c, w) = n + 1000 c + 1e6 w (w = 0 without a window)."""

    def prefill_attention_s(self, new_tokens, cached_tokens, window_tokens=None):
        return new_tokens + 1000.0 * cached_tokens + 1e6 * (window_tokens or 0)


def test_a_chunk_sums_each_kinds_own_attention():
    """3 full layers x (7 + 5,000) + 2 window layers x (7 + 5,000 + 32,000,000)."""
    kinds = LayerKinds(full=3, window=2, state=4, window_tokens=32)
    assert kinds.prefill_attention_s(NamingOps(), 7, 5) == 3 * 5007 + 2 * 32_005_007
    assert LayerKinds(3, 0, 0, 0).prefill_attention_s(NamingOps(), 7, 5) == 3 * 5007


def test_a_window_layer_prefill_step_differs_from_a_full_one_by_the_window():
    """TINY_WINDOW is TINY with its second layer a 32-token window: a step of one chunk (10
    new after 100 cached) differs only in that layer's attention, 1.7077 ms (worked in
    test_layer_kinds.py) instead of the full layer's."""
    window, full = Roofline(TINY_WINDOW, SLOW), Roofline(TINY, SLOW)
    chunk = StepBatch((PrefillChunk(10, 100, True),), ())
    ops = full.ops
    assert window.ops.prefill_attention_s(10, 100, 32) == pytest.approx(1.7077e-3, rel=1e-4)
    assert window.step_time_s(chunk) - full.step_time_s(chunk) == pytest.approx(
        ops.prefill_attention_s(10, 100, 32) - ops.prefill_attention_s(10, 100), rel=1e-9)
