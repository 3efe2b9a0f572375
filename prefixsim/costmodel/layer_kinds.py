"""What a model's layer kinds cost in the roofline (docs/cost-models.md "Layer kinds"):
full-attention layers attend over the whole context, sliding-window layers over the last
`sliding_window` tokens, state layers (linear attention, Mamba) keep no per-token KV and
make no attention call.

Owns the counts and the window's arithmetic: a prefill chunk's work in each kind, and the
window layers' KV reads over a decode run (the sum over sequences of min(context, W), step
by step). Leaves the kernel times to operator_times.py and the step's assembly to
roofline.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefixsim.costmodel.operator_times import OperatorTimes
from prefixsim.presets import ModelSpec


@dataclass(frozen=True, slots=True)
class LayerKinds:
    """Layers by kind: `full` attention, `window` (over the last `window_tokens`) and
    `state` layers."""

    full: int
    window: int
    state: int
    window_tokens: int

    @classmethod
    def from_spec(cls, model: ModelSpec) -> LayerKinds:
        return cls(model.num_full_attention_layers, model.num_window_layers,
                   model.num_state_layers, model.sliding_window or 0)

    @property
    def attention(self) -> int:
        """Layers that make an attention call (full and window)."""
        return self.full + self.window

    @property
    def plain(self) -> bool:
        """Every layer full attention (the older presets)."""
        return self.window == 0 and self.state == 0

    def prefill_attention_s(self, ops: OperatorTimes, new_tokens: int,
                            cached_tokens: int) -> float:
        """One chunk's attention work over every attention layer (no floor)."""
        total = self.full * ops.prefill_attention_s(new_tokens, cached_tokens)
        if self.window:
            total += self.window * ops.prefill_attention_s(new_tokens, cached_tokens,
                                                           self.window_tokens)
        return total

    def window_context(self, contexts: tuple[int, ...] | list[int]) -> int:
        """Tokens a window layer reads for decodes of `contexts`: sum of min(c, W)."""
        w = self.window_tokens
        return sum(c if c < w else w for c in contexts)

    def window_context_by_step(self, sorted_contexts: np.ndarray, prefix: np.ndarray,
                               num_steps: int) -> np.ndarray:
        """For steps j = 0 .. num_steps - 1 of a decode run whose sequence i has context
        `sorted_contexts[i] + j` (sorted ascending; `prefix` their running sums from 0): the
        sum over sequences of min(context, W)."""
        steps = np.arange(num_steps, dtype=np.int64)
        below = np.searchsorted(sorted_contexts, self.window_tokens - steps, side="left")
        n = len(sorted_contexts)
        return prefix[below] + below * steps + (n - below) * self.window_tokens
