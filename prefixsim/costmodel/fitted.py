"""The fitted cost model: step times from a profile's measurements and fitted coefficients
(docs/cost-models.md "The fitted cost model").

A step is, per layer, its GEMMs, element-wise kernels, attention and two all-reduces, times
the layers; plus the LM head over the sequences that sample a token, the embedding gather
and final norm, and the CPU time of the step. Each part reads the profile's measurements
where it has them and falls back otherwise:

| part | measured (imported profiles) | fallback |
|---|---|---|
| GEMM | table of that weight matrix over tokens | class coefficients . features |
| element-wise | table per kernel (tables are width-stretched, measured.py) | none (CPU profiles) |
| attention | prefill and decode grids (attention_grid.py) | class coefficients . features |
| all-reduce | table of the run's GPU count | bandwidth-only ring formula (collectives.py) |
| CPU per step | table by batch size | `step_overhead_s` + per sequence + per token |

Serving overheads (frontend, emission, idle wake-up) and the CPU fallback take the
roofline's defaults (roofline.ServingParams), overridable as `cost_model.params`; passing a
`step_overhead_*` parameter replaces the profile's CPU table by the formula. `describe`
names the profile and says in one line how a run at a TP the profile does not cover falls
back, and which parts were borrowed from another GPU or model.
Decode-only stretches: closed form without grids; with a decode grid the attention is
summed over the steps with numpy (the rest of a decode step does not change).
Leaves out: MoE routing kernels, sampling kernels, pipeline parallelism.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from prefixsim.costmodel.attention_grid import DecodeTimes, PrefillTimes
from prefixsim.costmodel.collectives import ACTIVATION_BYTES, allreduce_s_per_token
from prefixsim.costmodel.engines import DEFAULT_ENGINE, get_engine
from prefixsim.costmodel.measured import AllReduceTimes, CpuTimes, ElementwiseTimes
from prefixsim.costmodel.operators import (
    DecodeAttention,
    FeatureRules,
    Gemm,
    LayerDims,
    Operator,
    PrefillAttention,
    layer_gemms,
    lm_head,
)
from prefixsim.costmodel.profile import Profile, load_profile
from prefixsim.costmodel.protocol import COST_MODELS, CostModelBase, StepBatch
from prefixsim.costmodel.roofline import ServingParams
from prefixsim.costmodel.tables import Table1D
from prefixsim.presets import GPUSpec, ModelSpec

GemmInterpolation = Table1D  # a GEMM table: time over token counts
PARAMS = ("frontend_s", "emission_s", "idle_wakeup_s", "frontend_s_per_prompt_token",
          "step_overhead_s", "step_overhead_s_per_seq", "step_overhead_s_per_token")
CPU_FORMULA = ("step_overhead_s", "step_overhead_s_per_seq", "step_overhead_s_per_token")


class Predictor:
    """Predicted seconds of operators: interpolated GEMMs for matrices with a table, and
    per class `coefficients . (sum of the features)` for everything else."""

    def __init__(self, rules: FeatureRules, coefficients: dict[str, Sequence[float]],
                 tables: dict[tuple[int, int], Table1D] | None = None) -> None:
        self.rules = rules
        self.coefficients = coefficients
        self.tables = tables or {}

    @classmethod
    def from_profile(cls, profile: Profile) -> Predictor:
        coefficients = {c: profile.coefficient_vector(c) for c in profile.coefficients}
        tables = {(t.in_features, t.out_features): Table1D(t.tokens, t.time_s)
                  for t in profile.gemm_tables}
        return cls(profile.rules.feature_rules(), coefficients, tables)

    def time_s(self, ops: Iterable[Operator]) -> float:
        total = 0.0
        rest: list[Operator] = []
        for op in ops:
            table = self.tables.get((op.in_features, op.out_features)) \
                if isinstance(op, Gemm) else None
            if table is None:
                rest.append(op)
            else:
                total += table.time_s(op.tokens)
        for cls, vec in self.rules.class_sums(rest).items():
            total += sum(c * f for c, f in zip(self.coefficients[cls], vec, strict=True))
        return total


def fitted_params(params: dict[str, float]) -> ServingParams:
    """`cost_model.params` of the fitted model (an unknown name is a TypeError naming it)."""
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        raise TypeError(f"unknown fitted parameter {unknown[0]!r} (valid: "
                        f"{', '.join(PARAMS)})")
    return ServingParams(**params)


@COST_MODELS.register("fitted", keywords=("profile", "engine", *sorted(PARAMS)))
class FittedCostModel(CostModelBase):
    """Step times of `model` on `tp` devices from a `profile` (a Profile, a path or a
    shipped profile's name). `gpu` is the run's GPU preset: it prices all-reduces the
    profile did not measure and is compared with the GPU the profile describes."""

    name = "fitted"

    def __init__(self, model: ModelSpec, gpu: GPUSpec | None = None, tp: int = 1, *,
                 profile: Profile | str | Path, engine: str = DEFAULT_ENGINE,
                 **params: float) -> None:
        if tp < 1:
            raise ValueError(f"tp must be >= 1, got {tp}")
        serving = get_engine(engine)
        if serving.overlaps_cpu:
            raise ValueError(f"serving engine {engine!r} overlaps CPU and GPU work; the "
                             "fitted cost model times the CPU after the GPU (use the roofline)")
        # the engine's figures are defaults; its CPU formula applies where the profile has
        # no CPU table (a step_overhead_* parameter of the user's replaces the table)
        self.params = fitted_params({**serving.params(), **params})
        self.serving_overheads = self.params.overheads()
        self.profile = profile if isinstance(profile, Profile) else load_profile(profile)
        self.profile_source = "(in memory)" if isinstance(profile, Profile) else str(profile)
        self.model, self.gpu, self.tp = model, gpu, tp
        self.dims = replace(LayerDims.from_spec(model, tp),
                            num_kv_heads=model.kv_heads_per_gpu(tp))
        p, d = self.profile, self.dims
        self.predictor = Predictor.from_profile(p)
        self.elementwise = ElementwiseTimes(p.elementwise, d) if p.elementwise else None
        self.prefill = self.decode = None
        if p.attention is not None:
            self.prefill = PrefillTimes(p.attention.prefill, d.num_heads, d.head_dim)
            self.decode = DecodeTimes(p.attention.decode, d.num_kv_heads, d.head_dim)
        self.allreduce = AllReduceTimes(p.collectives, tp)
        self._ring_s_per_token = allreduce_s_per_token(model, gpu, tp)
        self.cpu = None
        if p.cpu_overhead is not None and not set(CPU_FORMULA) & set(params):
            self.cpu = CpuTimes(p.cpu_overhead)
        heads = (d.num_heads, d.num_kv_heads, d.head_dim)
        self._growth_per_sequence_s = d.num_layers * (
            self.predictor.time_s([DecodeAttention((1,), *heads)])
            - self.predictor.time_s([DecodeAttention((0,), *heads)]))
        self._layer_cache: dict[int, float] = {}

    # ----------------------------------------------------------------- pieces
    def layer_s(self, tokens: int) -> float:
        """One layer's GEMMs, element-wise kernels and all-reduces (memoised)."""
        cached = self._layer_cache.get(tokens)
        if cached is not None:
            return cached
        total = self.predictor.time_s(layer_gemms(self.dims, tokens))
        if self.elementwise is not None:
            total += self.elementwise.layer_s(tokens)
        if self.tp > 1 and self.allreduce.measured:
            total += 2 * self.allreduce.time_s(tokens * self.dims.hidden_size
                                               * ACTIVATION_BYTES)
        elif self.tp > 1:
            total += self._ring_s_per_token * tokens / self.dims.num_layers
        if len(self._layer_cache) < 65536:
            self._layer_cache[tokens] = total
        return total

    def attention_s(self, batch: StepBatch) -> float:
        """One layer's attention: one prefill call over the chunks, one decode call."""
        d = self.dims
        if self.prefill is None or self.decode is None:
            heads = (d.num_heads, d.num_kv_heads, d.head_dim)
            ops: list[Operator] = [PrefillAttention(c.new_tokens, c.cached_tokens, *heads)
                                   for c in batch.prefills if c.new_tokens > 0]
            if batch.decode_contexts:
                ops.append(DecodeAttention(tuple(batch.decode_contexts), *heads))
            return self.predictor.time_s(ops)
        total = 0.0
        chunks = [c for c in batch.prefills if c.new_tokens > 0]
        if chunks:
            total += self.prefill.floor_s + sum(
                self.prefill.above_floor_s(c.new_tokens, c.cached_tokens) for c in chunks)
        contexts = batch.decode_contexts
        if contexts:
            total += self.decode.batch_s(len(contexts), sum(contexts) / len(contexts))
        return total

    def head_s(self, tokens: int, sampled: int) -> float:
        """LM head over `sampled` sequences; embedding gather and final norm over `tokens`."""
        total = self.predictor.time_s(lm_head(self.dims, sampled))
        if self.elementwise is not None:
            total += self.elementwise.head_s(tokens)
        return total

    def cpu_s(self, num_seqs: int, num_tokens: int) -> float:
        if self.cpu is not None:
            return self.cpu.time_s(num_seqs)
        return self.params.cpu_s(num_seqs, num_tokens)

    # ----------------------------------------------------------------- CostModel
    def step_time_s(self, batch: StepBatch) -> float:
        tokens = batch.num_tokens
        if tokens == 0:
            return 0.0
        sampled = len(batch.decode_contexts) + sum(c.emits_token for c in batch.prefills)
        num_seqs = len(batch.decode_contexts) + len(batch.prefills)
        return (self.dims.num_layers * (self.layer_s(tokens) + self.attention_s(batch))
                + self.head_s(tokens, sampled) + self.cpu_s(num_seqs, tokens))

    def decode_steps_time_s(self, decode_contexts: Sequence[int], num_steps: int) -> float:
        """With a decode grid: the steps' fixed part times the steps plus the attention
        summed over the steps; else the closed form (decode attention's coefficients are
        linear in the contexts, so step k adds k x growth x batch size)."""
        if num_steps <= 0 or not decode_contexts:
            return 0.0
        batch = len(decode_contexts)
        if self.decode is not None:
            fixed = (self.dims.num_layers * self.layer_s(batch) + self.head_s(batch, batch)
                     + self.cpu_s(batch, batch))
            attention = self.decode.run_s(batch, sum(decode_contexts) / batch, num_steps)
            return num_steps * fixed + self.dims.num_layers * attention
        first = self.step_time_s(StepBatch((), tuple(decode_contexts)))
        growth = self._growth_per_sequence_s * batch
        return num_steps * first + growth * num_steps * (num_steps - 1) / 2

    def transfer_time_s(self, num_bytes: int, bandwidth_bytes_s: float) -> float:
        if num_bytes <= 0:
            return 0.0
        rate = bandwidth_bytes_s
        measured = self.profile.bandwidth
        if measured is not None:
            rate = min(rate, measured.host_to_device_bytes_s, measured.device_to_host_bytes_s)
        return num_bytes / rate

    # ------------------------------------------------------------------ summary
    def tp_fallback(self) -> str | None:
        """One line on how a run at a TP the profile does not cover is timed (None when
        the profile covers the run's TP)."""
        p = self.profile
        if self.tp in p.covers_tp:
            return None
        weights = self.dims.weights().values()
        tabled = sum(w in self.predictor.tables for w in weights)
        parts = [f"GEMMs: {tabled} of {len(weights)} layer weights have a table, the rest "
                 "use the fitted coefficients"]
        if self.elementwise is not None and not self.elementwise.exact:
            parts.append("element-wise tables read at the same number of elements")
        if self.prefill is not None:
            parts.append("attention grids scaled by heads per GPU")
        if self.tp > 1 and not self.allreduce.measured:
            parts.append("all-reduce by the ring formula")
        if self.cpu is not None and p.cpu_overhead is not None:
            parts.append(f"CPU overhead as measured at tp {p.cpu_overhead.measured_tp}")
        covered = ", ".join(str(t) for t in p.covers_tp)
        return f"profile covers tp {covered}; at tp {self.tp}: " + "; ".join(parts)

    def describe(self) -> dict[str, object]:
        """Summary keys naming the profile; `cost_model_warning` when it was measured on
        another device, with another model's shapes or at another TP; `cost_model_borrowed`
        when parts of it were borrowed from another GPU or model."""
        prov = self.profile.provenance
        gpu_name = None if self.gpu is None else self.gpu.name
        info: dict[str, object] = {
            "cost_model": self.name,
            "cost_model_profile": self.profile_source,
            "cost_model_profile_device": f"{prov.device}: {prov.device_name}",
            "cost_model_profile_model": prov.model.name,
        }
        warnings = []
        if gpu_name is not None and prov.hardware_preset != gpu_name:
            warnings.append(f"profile measured on {prov.device} ({prov.device_name}) is used "
                            f"for gpu preset {gpu_name}")
        if prov.model.name != self.model.name:
            warnings.append(f"profile measured with {prov.model.name} shapes is used for "
                            f"{self.model.name}")
        fallback = self.tp_fallback()
        if fallback is not None:
            warnings.append(fallback)
        if warnings:
            info["cost_model_warning"] = "; ".join(warnings)
        source = self.profile.source
        if source is not None and source.borrowed:
            info["cost_model_borrowed"] = "; ".join(f"{b.part}: {b.source}"
                                                    for b in source.borrowed)
        return info
