"""The fitted (calibrated) cost model: operator-class coefficients from a profile.

A step's time is the predicted time of the operators of one layer (operators.py), times the
number of layers, plus the LM head GEMM for the sequences that emit a token (every decode and
every prefill chunk; a chunk that does not finish its prompt is counted too, a small
overestimate). With tensor parallelism the layer shapes are split `tp` ways and, given the
GPU preset, two ring all-reduces per layer are added as in the roofline model (the profile
measured one device, not the link).
Decode-only stretches are summed in closed form: the model is linear in the contexts.
Transfers take `num_bytes / bandwidth`, capped by the profile's measured host<->device copy
rate when it has one (CUDA profiles).

An operator's time: a GEMM on a weight matrix the profile measured is interpolated over token
counts (`GemmInterpolation`); anything else is, per class, `coefficients . summed features`.
Leaves out: step overheads of the serving framework beyond the fitted per-call constants,
and the element-wise operators (their share shows in the profile's `layer` error).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from pathlib import Path

from prefixsim.costmodel.collectives import allreduce_s_per_token
from prefixsim.costmodel.operators import (
    DecodeAttention,
    FeatureRules,
    Gemm,
    LayerDims,
    Operator,
    layer_operators,
    lm_head,
)
from prefixsim.costmodel.profile import Profile, load_profile
from prefixsim.costmodel.protocol import COST_MODELS, NO_OVERHEADS, StepBatch
from prefixsim.presets import GPUSpec, ModelSpec


class GemmInterpolation:
    """Time of one weight matrix at any token count from measured (tokens, time) points:
    piecewise linear between points, the measured time at the smallest point below it, and
    beyond the largest point that point's time plus the per-token slope measured from about
    half its token count (the compute-bound rate)."""

    def __init__(self, tokens: Sequence[int], times_s: Sequence[float]) -> None:
        pairs = sorted(zip(tokens, times_s, strict=True))
        self.tokens = [float(m) for m, _ in pairs]
        self.times_s = [float(t) for _, t in pairs]
        top = len(self.tokens) - 1
        j = max([i for i, m in enumerate(self.tokens) if m <= self.tokens[top] / 2], default=0)
        rise = self.times_s[top] - self.times_s[j]
        self.slope_s_per_token = max(0.0, rise / (self.tokens[top] - self.tokens[j])) \
            if j < top else 0.0

    def time_s(self, tokens: float) -> float:
        xs, ys = self.tokens, self.times_s
        if tokens >= xs[-1]:
            return ys[-1] + (tokens - xs[-1]) * self.slope_s_per_token
        if tokens <= xs[0]:
            return ys[0]
        i = bisect.bisect_right(xs, tokens)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (tokens - x0) / (x1 - x0)


class Predictor:
    """Predicted seconds of operators: interpolated GEMMs for matrices with a table, and
    per class `coefficients . (sum of the features)` for everything else."""

    def __init__(self, rules: FeatureRules, coefficients: dict[str, Sequence[float]],
                 tables: dict[tuple[int, int], GemmInterpolation] | None = None) -> None:
        self.rules = rules
        self.coefficients = coefficients
        self.tables = tables or {}

    @classmethod
    def from_profile(cls, profile: Profile) -> Predictor:
        coefficients = {c: profile.coefficient_vector(c) for c in profile.coefficients}
        tables = {(t.in_features, t.out_features): GemmInterpolation(t.tokens, t.time_s)
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


@COST_MODELS.register("fitted")
class FittedCostModel:
    """Step times of `model` on `tp` devices from a calibration `profile` (a Profile, a
    path or a shipped profile's name). `gpu` is the run's GPU preset: it prices tensor-
    parallel all-reduces and is compared with the device the profile was measured on."""

    name = "fitted"
    serving_overheads = NO_OVERHEADS

    def __init__(self, model: ModelSpec, gpu: GPUSpec | None = None, tp: int = 1, *,
                 profile: Profile | str | Path) -> None:
        if tp < 1:
            raise ValueError(f"tp must be >= 1, got {tp}")
        self.profile = profile if isinstance(profile, Profile) else load_profile(profile)
        self.profile_source = "(in memory)" if isinstance(profile, Profile) else str(profile)
        self.model = model
        self.gpu = gpu
        self.tp = tp
        self.dims = LayerDims.from_spec(model, tp)
        self.predictor = Predictor.from_profile(self.profile)
        heads = (self.dims.num_heads, self.dims.num_kv_heads, self.dims.head_dim)
        self._growth_per_sequence_s = self.dims.num_layers * (
            self.predictor.time_s([DecodeAttention((1,), *heads)])
            - self.predictor.time_s([DecodeAttention((0,), *heads)]))
        self._allreduce_s_per_token = allreduce_s_per_token(model, gpu, tp)

    # ----------------------------------------------------------------- CostModel
    def step_time_s(self, batch: StepBatch) -> float:
        if batch.num_tokens == 0:
            return 0.0
        layer = self.predictor.time_s(layer_operators(self.dims, batch))
        sequences = len(batch.prefills) + len(batch.decode_contexts)
        head = self.predictor.time_s(lm_head(self.dims, sequences))
        return (self.dims.num_layers * layer + head
                + self._allreduce_s_per_token * batch.num_tokens)

    def decode_steps_time_s(self, decode_contexts: Sequence[int], num_steps: int) -> float:
        """Closed form: only decode attention depends on the contexts, linearly, so step k
        takes first + k * (growth per sequence) * batch size and the sum is arithmetic."""
        if num_steps <= 0 or not decode_contexts:
            return 0.0
        first = self.step_time_s(StepBatch((), tuple(decode_contexts)))
        growth = self._growth_per_sequence_s * len(decode_contexts)
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
    def describe(self) -> dict[str, object]:
        """Summary keys naming the profile, and a warning when it was measured on another
        device than the run's GPU preset (or with another model's shapes)."""
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
        if warnings:
            info["cost_model_warning"] = "; ".join(warnings)
        return info
