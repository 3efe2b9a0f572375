"""What the two roofline models (roofline.py, step_roofline.py) share (docs/cost-models.md
"Per-operator roofline" and "Whole-step roofline"): the replica they time (`model` on `tp`
x `gpu`), the least FLOPs a prefill chunk needs, and decode runs timed from the batch size and
context sum alone (`decode_run_time_s`, each model's closed form).

Leaves out the step formulas themselves, which differ (per operator or whole step).
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixsim.costmodel.protocol import CostModelBase, DecodeRunTime
from prefixsim.presets import GPUSpec, ModelSpec


class RooflineBase(CostModelBase):
    """A roofline model of `model` on `tp` x `gpu`; subclasses write `step_time_s` and
    `decode_run_time_s(num_seqs, context_sum, num_steps)`."""

    decode_steps_never_shorten = True  # a decode step's time grows with its contexts

    def __init__(self, model: ModelSpec, gpu: GPUSpec, tp: int) -> None:
        if tp < 1:
            raise ValueError(f"tp must be >= 1, got {tp}")
        self.model = model
        self.gpu = gpu
        self.tp = tp
        self._linear_flops_per_token = 2.0 * model.linear_params_per_token
        self._logit_flops_per_seq = 2.0 * model.hidden_size * model.vocab_size
        self._attn_flops_per_pair = 4.0 * model.num_layers * model.num_heads * model.head_dim

    def prefill_flops(self, new_tokens: int, cached_tokens: int) -> tuple[float, float]:
        """(GEMM FLOPs incl. logits, attention FLOPs) of one prefill chunk, whole replica,
        without padding: the least work any GPU arrangement must do."""
        n, c = new_tokens, cached_tokens
        gemm = self._linear_flops_per_token * n + self._logit_flops_per_seq
        attn = self._attn_flops_per_pair * (n * c + n * (n + 1) / 2)
        return gemm, attn

    def decode_run_time_s(self, num_seqs: int, context_sum: int, num_steps: int) -> float:
        """`decode_steps_time_s` from the batch size and context sum alone."""
        raise NotImplementedError

    def decode_steps_time_s(self, decode_contexts: Sequence[int], num_steps: int) -> float:
        return self.decode_run_time_s(len(decode_contexts), sum(decode_contexts), num_steps)

    def decode_run_timer(self, decode_contexts: tuple[int, ...]) -> DecodeRunTime:
        """Asks `decode_run_time_s` directly, without summing the contexts at every call."""
        num_seqs, context_sum = len(decode_contexts), sum(decode_contexts)
        return lambda _contexts, steps: self.decode_run_time_s(num_seqs, context_sum, steps)
