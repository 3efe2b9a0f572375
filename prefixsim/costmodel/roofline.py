"""The roofline cost model (`roofline`, the default; docs/cost-models.md "Per-operator
roofline"): what one step of a vLLM-style server costs on `tp` GPUs.

A step is timed as its kernels run, one GPU of the replica standing for all (shapes per
GPU): per layer the QKV, O, gate/up and down GEMMs (MoE: two grouped GEMMs, gate/up and
down, over the experts the step's tokens touch in expectation), the element-wise kernels,
one attention call (a floor, each prefill chunk's work, the decodes' KV reads) and two
all-reduces (collectives.py, latency + bytes / bandwidth); then the LM head over the
sequences that sample a token (decodes and chunks that finish their prompt), the embedding
gather and the final norm; then the CPU time of the step (scheduling, input preparation,
sampling, output processing), which grows with the sequences and tokens in the batch,
after the GPU's or under it as the serving engine does (engines.py). Operator times are
operator_times.py's. Each request also spends `frontend_s` (plus a time per prompt token)
before it reaches the scheduler and `emission_s` before a token reaches the client
(`serving_overheads`).

Decode-only runs are summed in closed form: with a fixed batch only the decodes' KV reads
grow, by one token per sequence per step, so the run is arithmetic (with an overlapping
engine, the sum of the longer of a growing GPU line and a constant CPU time).
Leaves out: pipeline parallelism, speculative decoding, CUDA-graph padding of batch sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from prefixsim.costmodel.collectives import ACTIVATION_BYTES, AllReduceCost
from prefixsim.costmodel.engines import DEFAULT_ENGINE, get_engine, overlapped_run_s
from prefixsim.costmodel.layer_kinds import LayerKinds
from prefixsim.costmodel.operator_times import OperatorParams, OperatorTimes
from prefixsim.costmodel.operators import LayerDims
from prefixsim.costmodel.protocol import (
    COST_MODELS,
    DecodeRunTime,
    ServingOverheads,
    StepBatch,
    check_finite_nonnegative,
)
from prefixsim.costmodel.roofline_base import RooflineBase
from prefixsim.presets import GPUSpec, ModelSpec


@dataclass(frozen=True, slots=True)
class ServingParams:
    """CPU time per step, per-request overheads and all-reduce figures, in seconds (sources
    in docs/cost-models.md "Serving overheads" and "Defaults and their sources")."""

    step_overhead_s: float = 0.0005  # the vllm-v1 engine's figures (engines.py)
    step_overhead_s_per_seq: float = 0.000005
    step_overhead_s_per_token: float = 0.0
    frontend_s: float = 0.0064
    emission_s: float = 0.007
    idle_wakeup_s: float = 0.006
    frontend_s_per_prompt_token: float = 3.2e-6
    allreduce_ring_latency_s: float | None = None
    allreduce_ring_bus_bytes_s: float | None = None
    allreduce_small_latency_s: float | None = None
    allreduce_small_bytes_s: float | None = None
    allreduce_graph_latency_s: float | None = None
    allreduce_two_shot_latency_s: float | None = None
    allreduce_two_shot_bytes_s: float | None = None
    weight_dtype_bytes: float = 2
    kv_dtype_bytes: float = 2

    def __post_init__(self) -> None:
        check_finite_nonnegative(self, [f.name for f in fields(self)
                                        if getattr(self, f.name) is not None])
        for name in ("weight_dtype_bytes", "kv_dtype_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        for name in ("allreduce_ring_bus_bytes_s", "allreduce_small_bytes_s",
                     "allreduce_two_shot_bytes_s"):  # bandwidths: divided by
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0, got {value:g}")

    def overheads(self) -> ServingOverheads:
        """The per-request times outside the steps these parameters set."""
        return ServingOverheads(self.frontend_s, self.emission_s, self.idle_wakeup_s,
                                self.frontend_s_per_prompt_token)

    def cpu_s(self, num_seqs: int, num_tokens: int) -> float:
        """CPU time of a step scheduling `num_seqs` sequences and `num_tokens` tokens."""
        return (self.step_overhead_s + self.step_overhead_s_per_seq * num_seqs
                + self.step_overhead_s_per_token * num_tokens)


def param_names() -> list[str]:
    """Every name `cost_model.params` of the roofline may set (both parameter sets)."""
    return sorted({f.name for f in fields(OperatorParams)}
                  | {f.name for f in fields(ServingParams)})


def split_params(params: dict[str, float]) -> tuple[OperatorParams, ServingParams]:
    """`cost_model.params` of the roofline into its two parameter sets (an unknown name is
    a TypeError that names it)."""
    ops = {f.name for f in fields(OperatorParams)}
    serving = {f.name for f in fields(ServingParams)}
    unknown = sorted(set(params) - ops - serving)
    if unknown:
        raise TypeError(f"unknown roofline parameter {unknown[0]!r} (valid: "
                        f"{', '.join(param_names())})")
    return (OperatorParams(**{k: v for k, v in params.items() if k in ops}),
            ServingParams(**{k: v for k, v in params.items() if k in serving}))


class Roofline(RooflineBase):
    """Per-operator step times of `model` on `tp` x `gpu` (see the module docstring). (An
    extension type when compiled, roofline.pxd: registered below rather than by a
    decorator.)"""

    name = "roofline"

    def __init__(self, model: ModelSpec, gpu: GPUSpec, tp: int = 1,
                 engine: str = DEFAULT_ENGINE, expert_parallel: bool = False,
                 **params: float) -> None:
        super().__init__(model, gpu, tp)
        self.engine = get_engine(engine)
        self.expert_parallel = tp if expert_parallel else 1  # GPUs the experts are split over
        if expert_parallel and (model.num_experts is None or model.num_experts % tp):
            raise ValueError(f"expert_parallel splits the experts over the tp {tp} GPUs: "
                             f"{model.name} has {model.num_experts or 'no'} experts")
        self.operator_params, self.params = split_params({**self.engine.params(), **params})
        s = self.params
        self.serving_overheads = s.overheads()
        dims = LayerDims.from_spec(model, tp)
        self.dims = replace(dims, num_kv_heads=model.kv_heads_per_gpu(tp))
        kv_values = model.kv_bytes_per_token_per_gpu(tp, 1) // model.num_kv_layers
        self.kinds = LayerKinds.from_spec(model)
        self.ops = OperatorTimes(self.dims, gpu, self.operator_params, s.weight_dtype_bytes,
                                 s.kv_dtype_bytes, kv_values)
        self.allreduce = AllReduceCost.for_gpu(
            gpu, tp, ring_latency_s=s.allreduce_ring_latency_s,
            ring_bus_bytes_s=s.allreduce_ring_bus_bytes_s,
            small_latency_s=s.allreduce_small_latency_s, small_bytes_s=s.allreduce_small_bytes_s,
            graph_latency_s=s.allreduce_graph_latency_s,
            two_shot_latency_s=s.allreduce_two_shot_latency_s,
            two_shot_bytes_s=s.allreduce_two_shot_bytes_s)
        self._vocab_per_gpu = -(-model.vocab_size // tp)  # the LM head is split tp ways
        self._layer_caches: tuple[dict[int, float], dict[int, float]] = ({}, {})  # eager, graph
        # a decode-only step of n sequences: (GPU time less the KV reads, CPU time), by n
        self._decode_step_cache: dict[int, tuple[float, float]] = {}
        self._s_per_context = (self.kinds.full
                               * self.ops.decode_attention_s_per_context_token())
        self._s_per_window_token = (self.kinds.window
                                    * self.ops.decode_attention_s_per_context_token())
        # the model's weight matrices' GEMM terms, read by every step (operator_times.py)
        ops, d = self.ops, self.dims
        q_out, kv_out = d.num_heads * d.head_dim, 2 * d.num_kv_heads * d.head_dim
        self._qkv = ops.gemm_terms(d.hidden_size, q_out + kv_out)
        self._o = ops.gemm_terms(q_out, d.hidden_size)
        self._lm_head = ops.gemm_terms(d.hidden_size, self._vocab_per_gpu)
        dense = d.num_experts is None or d.experts_per_token is None
        self._gate_up = ops.gemm_terms(d.hidden_size, 2 * d.intermediate_size) if dense else None
        self._down = ops.gemm_terms(d.intermediate_size, d.hidden_size) if dense else None
        self._all_reduces = tp > 1  # collectives.py: nothing to add on one GPU
        # what every step reads of the layer kinds and the model, held as fields
        self._plain, self._windowed = self.kinds.plain, bool(self.kinds.window)
        self._num_layers = d.num_layers

    # ------------------------------------------------------------------ pieces
    def _mlp_s(self, tokens: int) -> float:
        d, ops = self.dims, self.ops
        h, inter = d.hidden_size, d.intermediate_size
        if self._gate_up is not None:  # dense
            return ops.gemm_with(self._gate_up, tokens) + ops.gemm_with(self._down, tokens)
        experts, k, ep = d.num_experts, d.experts_per_token, self.expert_parallel
        if ep > 1:  # each GPU holds experts / ep whole experts, and their share of the rows
            inter = self.model.intermediate_size
        touched = experts / ep * (1.0 - (1.0 - k / experts) ** tokens)
        routed = tokens * k / ep
        return (ops.grouped_gemm_s(touched, routed, h, 2 * inter)
                + ops.grouped_gemm_s(touched, routed, inter, h))

    def layer_s(self, tokens: int, decode_only: bool = True) -> float:
        """One layer's GEMMs, element-wise kernels and all-reduces over `tokens` (attention
        apart) in a step of only decodes or not (the engine's CUDA graphs may cover only
        the former: their all-reduces are faster), memoised by token count."""
        graphed = self.engine.graphed(tokens, decode_only)
        memo = self._layer_caches[graphed]
        cached = memo.get(tokens)
        if cached is not None:
            return cached
        d, ops = self.dims, self.ops
        routed = tokens * (d.experts_per_token or 1)
        total = (ops.gemm_with(self._qkv, tokens) + ops.gemm_with(self._o, tokens)
                 + self._mlp_s(tokens) + ops.layer_elementwise_s(tokens, routed,
                                                                  d.intermediate_size))
        if self._all_reduces:  # on one GPU the all-reduces are 0.0: nothing added
            total += 2 * self.allreduce.time_s(tokens * d.hidden_size * ACTIVATION_BYTES,
                                               graphed)
        if len(memo) < 65536:
            memo[tokens] = total
        return total

    def _head_s(self, tokens: int, sampled: int) -> float:
        """LM head over `sampled` sequences, embedding gather and final norm over `tokens`."""
        ops = self.ops
        row = ACTIVATION_BYTES * tokens * self.dims.hidden_size
        return (ops.gemm_with(self._lm_head, sampled) + ops.moved_s(2 * row, ops._eff_embedding)
                + ops.moved_s(2 * row, ops._eff_norm))

    def cpu_s(self, num_seqs: int, num_tokens: int) -> float:
        """CPU time of a step scheduling `num_seqs` sequences and `num_tokens` tokens."""
        return self.params.cpu_s(num_seqs, num_tokens)

    def _decode_fixed_s(self, num_seqs: int) -> float:
        """A decode-only step of `num_seqs` sequences on the GPU, less their KV reads."""
        return self._decode_step(num_seqs)[0]

    def _decode_step(self, num_seqs: int) -> tuple[float, float]:
        """A decode-only step of `num_seqs` sequences: its GPU time less the KV reads, and
        its CPU time (kept per batch size: the run clocks and routers ask often)."""
        step = self._decode_step_cache.get(num_seqs)
        if step is not None:
            return step
        ops = self.ops
        attention = ops.attention_floor_s(False) + ops.decode_attention_fixed_s(num_seqs)
        if self._plain:
            total = (self._num_layers * (self.layer_s(num_seqs) + attention)
                     + self._head_s(num_seqs, num_seqs))
        else:  # state layers make no attention call
            total = (self._num_layers * self.layer_s(num_seqs)
                     + self.kinds.attention * attention + self._head_s(num_seqs, num_seqs))
        step = total, self.cpu_s(num_seqs, num_seqs)
        if len(self._decode_step_cache) < 65536:
            self._decode_step_cache[num_seqs] = step
        return step

    def _with_cpu(self, gpu_s: float, num_seqs: int, num_tokens: int) -> float:
        """A step's GPU time with its CPU time: after it, or under it when the engine
        overlaps the two (docs/cost-models.md "Serving engines")."""
        cpu = self.cpu_s(num_seqs, num_tokens)
        return max(gpu_s, cpu) if self.engine.overlaps_cpu else gpu_s + cpu

    # -------------------------------------------------------------- protocol
    def step_time_s(self, batch: StepBatch) -> float:
        prefills, contexts = batch.prefills, batch.decode_contexts
        tokens = len(contexts)  # batch.num_tokens, written out
        for chunk in prefills:
            tokens += chunk.new_tokens
        if tokens == 0:
            return 0.0
        window_reads = (self._s_per_window_token * self.kinds.window_context(contexts)
                        if self._windowed else 0.0)
        if not prefills:
            num_seqs = len(contexts)
            return self._with_cpu(self._decode_fixed_s(num_seqs)
                                  + self._s_per_context * sum(contexts) + window_reads,
                                  num_seqs, num_seqs)
        if not self._plain:
            return self._hybrid_step_s(batch, tokens, window_reads)
        ops = self.ops
        attention = ops.attention_floor_s(True)
        sampled = len(contexts)
        for chunk in prefills:
            if chunk.new_tokens > 0:
                attention += ops.prefill_attention_s(chunk.new_tokens, chunk.cached_tokens)
            sampled += chunk.emits_token
        if contexts:
            attention += ops.decode_attention_fixed_s(len(contexts))
        num_seqs = len(contexts) + len(prefills)
        return self._with_cpu(self._num_layers * (self.layer_s(tokens, False) + attention)
                              + self._s_per_context * sum(contexts)
                              + self._head_s(tokens, sampled), num_seqs, tokens)

    def chunk_time_s(self, new_tokens: int, cached_tokens: int) -> float:
        """`step_time_s` of one prefill chunk alone (emitting its token), without building
        the batch: the same terms added in the same order (the summary's prefill pricing
        asks for one per chunk of every request, gdsf for one per page it keys). Written
        out rather than shared with `step_time_s` through a helper, which would cost the
        engine a call per step (1.8% of a compiled timed run's instructions); the tests
        hold the two equal to the bit."""
        if new_tokens <= 0 or not self._plain:
            return super().chunk_time_s(new_tokens, cached_tokens)
        ops = self.ops
        attention = ops.attention_floor_s(True) + ops.prefill_attention_s(new_tokens,
                                                                          cached_tokens)
        return self._with_cpu(self._num_layers * (self.layer_s(new_tokens, False) + attention)
                              + self._s_per_context * 0 + self._head_s(new_tokens, 1),
                              1, new_tokens)

    def _hybrid_step_s(self, batch: StepBatch, tokens: int, window_reads: float) -> float:
        """A step with prefill chunks of a model with window or state layers: every layer's
        GEMMs, each kind's attention (docs/cost-models.md "Layer kinds")."""
        ops, kinds, contexts = self.ops, self.kinds, batch.decode_contexts
        per_layer = ops.attention_floor_s(True)
        if contexts:
            per_layer += ops.decode_attention_fixed_s(len(contexts))
        attention = kinds.attention * per_layer
        sampled = len(contexts)
        for chunk in batch.prefills:
            if chunk.new_tokens > 0:
                attention += kinds.prefill_attention_s(ops, chunk.new_tokens,
                                                       chunk.cached_tokens)
            sampled += chunk.emits_token
        num_seqs = len(contexts) + len(batch.prefills)
        return self._with_cpu(self.dims.num_layers * self.layer_s(tokens, False) + attention
                              + self._s_per_context * sum(contexts) + window_reads
                              + self._head_s(tokens, sampled), num_seqs, tokens)

    def decode_steps_time_s(self, decode_contexts: Sequence[int], num_steps: int) -> float:
        if not self.kinds.window:
            return super().decode_steps_time_s(decode_contexts, num_steps)
        return self._window_run_s(*self._sorted(decode_contexts), num_steps)

    def decode_run_timer(self, decode_contexts: tuple[int, ...]) -> DecodeRunTime:
        if not self.kinds.window:
            return super().decode_run_timer(decode_contexts)
        ordered, prefix = self._sorted(decode_contexts)
        return lambda _contexts, steps: self._window_run_s(ordered, prefix, steps)

    @staticmethod
    def _sorted(contexts: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        ordered = np.sort(np.asarray(contexts, dtype=np.int64))
        return ordered, np.concatenate(([0], np.cumsum(ordered)))

    def _window_run_s(self, ordered: np.ndarray, prefix: np.ndarray, num_steps: int) -> float:
        """A decode run of a model with window layers, step by step in numpy: the window
        layers' reads grow with each context only until it reaches the window."""
        num_seqs = len(ordered)
        if num_seqs == 0 or num_steps <= 0:
            return 0.0
        steps = np.arange(num_steps, dtype=np.float64)
        gpu = (self._decode_fixed_s(num_seqs)
               + self._s_per_context * (float(prefix[-1]) + num_seqs * steps)
               + self._s_per_window_token
               * self.kinds.window_context_by_step(ordered, prefix, num_steps))
        cpu = self.cpu_s(num_seqs, num_seqs)
        if self.engine.overlaps_cpu:
            return float(np.maximum(gpu, cpu).sum())
        return float(gpu.sum()) + num_steps * cpu

    def decode_run_time_s(self, num_seqs: int, context_sum: int, num_steps: int) -> float:
        if num_seqs <= 0 or num_steps <= 0:
            return 0.0
        fixed, cpu = self._decode_step(num_seqs)
        if self.engine.overlaps_cpu:
            return overlapped_run_s(fixed + self._s_per_context * context_sum,
                                    self._s_per_context * num_seqs, cpu, num_steps)
        growth = num_seqs * num_steps * (num_steps - 1) / 2
        return (num_steps * (fixed + cpu)
                + self._s_per_context * (num_steps * context_sum + growth))


COST_MODELS.register("roofline", keywords=["engine", "expert_parallel", *param_names()])(
    Roofline)
