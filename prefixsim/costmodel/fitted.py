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

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from prefixsim.costmodel.operators import (
    FeatureRules,
    Gemm,
    LayerDims,
    Operator,
    layer_operators,
    lm_head,
)
from prefixsim.costmodel.profile import Profile, load_profile
from prefixsim.costmodel.protocol import COST_MODELS, StepBatch
from prefixsim.presets import GPUSpec, ModelSpec


class GemmInterpolation:
    """Time of one weight matrix at any token count from measured (tokens, time) points:
    piecewise linear between points, the measured time at the smallest point below it, and
    beyond the largest point that point's time plus the per-token slope measured from about
    half its token count (the compute-bound rate)."""

    def __init__(self, tokens: Sequence[int], times_s: Sequence[float]) -> None:
        order = np.argsort(tokens)
        self.tokens = np.asarray(tokens, dtype=float)[order]
        self.times_s = np.asarray(times_s, dtype=float)[order]
        top = len(self.tokens) - 1
        below = np.nonzero(self.tokens <= self.tokens[top] / 2)[0]
        j = int(below[-1]) if len(below) else 0
        rise = self.times_s[top] - self.times_s[j]
        self.slope_s_per_token = max(0.0, rise / (self.tokens[top] - self.tokens[j])) if j < top \
            else 0.0

    def time_s(self, tokens: float) -> float:
        if tokens > self.tokens[-1]:
            return float(self.times_s[-1] + (tokens - self.tokens[-1]) * self.slope_s_per_token)
        return float(np.interp(tokens, self.tokens, self.times_s))


class Predictor:
    """Predicted seconds of operators: interpolated GEMMs for matrices with a table, and
    per class `coefficients . (sum of the features)` for everything else."""

    def __init__(self, rules: FeatureRules, coefficients: dict[str, np.ndarray],
                 tables: dict[tuple[int, int], GemmInterpolation] | None = None) -> None:
        self.rules = rules
        self.coefficients = coefficients
        self.tables = tables or {}

    @classmethod
    def from_profile(cls, profile: Profile) -> Predictor:
        coefficients = {c: np.array(profile.coefficient_vector(c)) for c in profile.coefficients}
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
            total += float(self.coefficients[cls] @ vec)
        return total


@COST_MODELS.register("fitted")
class FittedCostModel:
    """Step times of `model` on `tp` devices from a calibration `profile` (a Profile, a
    path or a shipped profile's name). `gpu` is the run's GPU preset: it prices tensor-
    parallel all-reduces and is compared with the device the profile was measured on."""

    name = "fitted"

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
        self._allreduce_s_per_token = 0.0
        if tp > 1 and gpu is not None:
            per_token = model.num_layers * 2 * model.hidden_size * 2  # bf16 activations
            self._allreduce_s_per_token = (2 * (tp - 1) / tp * per_token
                                           / gpu.interconnect_bytes_s)

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
        takes first + k * (second - first) and the sum is arithmetic."""
        if num_steps <= 0 or not decode_contexts:
            return 0.0
        first = self.step_time_s(StepBatch((), tuple(decode_contexts)))
        if num_steps == 1:
            return first
        shifted = self.step_time_s(StepBatch((), tuple(c + 1 for c in decode_contexts)))
        per_step_growth = shifted - first
        return num_steps * first + per_step_growth * num_steps * (num_steps - 1) / 2

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
