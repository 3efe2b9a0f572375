"""The whole-step roofline (`step_roofline`; docs/cost-models.md "Whole-step roofline"):
the formula prefixsim used before the per-operator model (roofline.py), kept for comparison
and for the hand-worked timelines of the engine's tests.

For one step of a replica (a model on `tp` GPUs sharing FLOPs, weights and KV evenly):

  GEMM FLOPs      = 2·P·T + 2·hidden·vocab·S          (T tokens computed, S sequences: logits)
  attention FLOPs = L·4·Hq·d · Σ_prefill (n·c + n(n+1)/2) + L·4·Hq·d · Σ_decode ctx
  bytes           = weight bytes read + B · (Σ_prefill (c + n) + Σ_decode ctx)
  time            = max(GEMM/(peak·ηG) + attention/(peak·ηA), bytes/(bandwidth·ηB)) / per tp
                    + all-reduce time + step overhead

P = active linear parameters per token, B = KV bytes per token. MoE reads the non-expert
weights plus the share of experts the step's T tokens touch, 1 - (1 - k/E)^T in expectation.
Tensor parallelism: two ring all-reduces per layer of T·hidden activations,
2·(tp-1)/tp · bytes over the per-direction GPU link, not overlapped with compute.
Logits are charged once per prefill chunk (real engines skip them on intermediate chunks:
an overcount of 2·hidden·vocab FLOPs, about 1 GFLOP for Llama-8B, per extra chunk).
Not modelled: kernel launch detail beyond the fixed overhead, pipeline parallelism,
communication latency, quantised weights other than `weight_dtype_bytes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from prefixsim.costmodel.collectives import allreduce_s_per_token
from prefixsim.costmodel.protocol import COST_MODELS, StepBatch
from prefixsim.costmodel.roofline_base import RooflineBase
from prefixsim.presets import GPUSpec, ModelSpec


@dataclass(frozen=True, slots=True)
class StepRooflineParams:
    """Efficiencies and overheads (docs/cost-models.md defaults)."""

    gemm_efficiency: float = 0.65
    attention_efficiency: float = 0.5
    bandwidth_efficiency: float = 0.8
    step_overhead_s: float = 0.0002
    weight_dtype_bytes: float = 2
    kv_dtype_bytes: float = 2

    def __post_init__(self) -> None:
        for name in ("gemm_efficiency", "attention_efficiency", "bandwidth_efficiency"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        if self.step_overhead_s < 0:
            raise ValueError(f"step_overhead_s must be >= 0, got {self.step_overhead_s}")


def _sum_max_of_lines(a1: float, b1: float, a2: float, b2: float, num_steps: int) -> float:
    """Σ_{j=0}^{num_steps-1} max(a1 + b1·j, a2 + b2·j), in closed form."""

    def line_sum(a: float, b: float, lo: int, hi: int) -> float:  # Σ_{j=lo}^{hi-1}
        count = hi - lo
        return a * count + b * (lo + hi - 1) * count / 2 if count > 0 else 0.0

    if b1 == b2:
        return line_sum(max(a1, a2), b1, 0, num_steps)
    # the lines cross at j* = (a2 - a1) / (b1 - b2); split the range there.
    cross = (a2 - a1) / (b1 - b2)
    cross = min(max(cross, -1.0), num_steps + 1.0)  # only its place within [0, num_steps]
    if b1 > b2:  # line 1 rises faster: it is the max for j >= cross
        split = min(num_steps, max(0, math.ceil(cross)))
        return line_sum(a2, b2, 0, split) + line_sum(a1, b1, split, num_steps)
    split = min(num_steps, max(0, math.floor(cross) + 1))  # line 1 is the max for j <= cross
    return line_sum(a1, b1, 0, split) + line_sum(a2, b2, split, num_steps)


@COST_MODELS.register("step_roofline",
                      keywords=sorted(f.name for f in fields(StepRooflineParams)))
class StepRoofline(RooflineBase):
    """Whole-step roofline times of `model` on `tp` × `gpu` (see the module docstring)."""

    name = "step_roofline"

    def __init__(self, model: ModelSpec, gpu: GPUSpec, tp: int = 1, **params: float) -> None:
        super().__init__(model, gpu, tp)
        self.params = StepRooflineParams(**params)
        p = self.params
        peak = gpu.peak_flops(p.weight_dtype_bytes) * tp
        bandwidth = gpu.hbm_bandwidth_bytes_s * tp * p.bandwidth_efficiency
        # seconds per unit of work, for the whole replica
        self._s_per_gemm_flop = 1.0 / (peak * p.gemm_efficiency)
        self._s_per_attn_flop = 1.0 / (peak * p.attention_efficiency)
        self._s_per_byte = 1.0 / bandwidth
        self._kv_bytes_per_token = model.kv_bytes_per_token(p.kv_dtype_bytes)
        weights = model.weight_bytes(p.weight_dtype_bytes)
        self._expert_bytes = model.expert_params * p.weight_dtype_bytes
        self._dense_weight_bytes = weights - self._expert_bytes
        self._allreduce_s_per_token = allreduce_s_per_token(model, gpu, tp)

    # ------------------------------------------------------------------ pieces
    def weight_bytes_read(self, num_tokens: int) -> float:
        """Weight bytes one step over `num_tokens` tokens reads (MoE: touched experts)."""
        model = self.model
        if not model.is_moe or num_tokens <= 0:
            return self._dense_weight_bytes + self._expert_bytes
        untouched = (1.0 - model.experts_per_token / model.num_experts) ** num_tokens
        return self._dense_weight_bytes + self._expert_bytes * (1.0 - untouched)

    def _time(self, gemm: float, attn: float, num_bytes: float, num_tokens: int) -> float:
        compute = gemm * self._s_per_gemm_flop + attn * self._s_per_attn_flop
        memory = num_bytes * self._s_per_byte
        return (max(compute, memory) + self._allreduce_s_per_token * num_tokens
                + self.params.step_overhead_s)

    # -------------------------------------------------------------- protocol
    def step_time_s(self, batch: StepBatch) -> float:
        gemm = attn = 0.0
        kv_tokens = 0
        tokens = 0
        for chunk in batch.prefills:
            g, a = self.prefill_flops(chunk.new_tokens, chunk.cached_tokens)
            gemm += g
            attn += a
            kv_tokens += chunk.cached_tokens + chunk.new_tokens
            tokens += chunk.new_tokens
        contexts = batch.decode_contexts
        if contexts:
            num = len(contexts)
            total = sum(contexts)
            gemm += (self._linear_flops_per_token + self._logit_flops_per_seq) * num
            attn += self._attn_flops_per_pair * total
            kv_tokens += total
            tokens += num
        if tokens == 0:
            return 0.0
        num_bytes = self.weight_bytes_read(tokens) + self._kv_bytes_per_token * kv_tokens
        return self._time(gemm, attn, num_bytes, tokens)

    def decode_run_lines(self, num_seqs: int, context_sum: int) -> tuple[float, ...]:
        """(compute a, b, memory a, b, fixed) with step j taking max(a1+b1·j, a2+b2·j)+fixed."""
        n = num_seqs
        gemm = (self._linear_flops_per_token + self._logit_flops_per_seq) * n
        a1 = gemm * self._s_per_gemm_flop + self._attn_flops_per_pair * context_sum * (
            self._s_per_attn_flop)
        b1 = self._attn_flops_per_pair * n * self._s_per_attn_flop
        weights = self.weight_bytes_read(n)
        a2 = (weights + self._kv_bytes_per_token * context_sum) * self._s_per_byte
        b2 = self._kv_bytes_per_token * n * self._s_per_byte
        fixed = self._allreduce_s_per_token * n + self.params.step_overhead_s
        return a1, b1, a2, b2, fixed

    def decode_run_time_s(self, num_seqs: int, context_sum: int, num_steps: int) -> float:
        if num_seqs <= 0 or num_steps <= 0:
            return 0.0
        a1, b1, a2, b2, fixed = self.decode_run_lines(num_seqs, context_sum)
        return _sum_max_of_lines(a1, b1, a2, b2, num_steps) + fixed * num_steps
