"""Borrowing a GPU's missing measurements from another GPU (docs/cost-models.md "Borrow
rules"): scale the other GPU's times by the ratio of the two GPUs' times on the models
Vidur measured on both ("donors").

The ratio depends on how compute- or memory-bound a kernel is, so it is read at a size:
- a GEMM: at the same token count, interpolated over the donors' weight sizes (in x out
  elements per GPU) at that count (beyond the donors' largest count, that count's ratios);
- an element-wise kernel: the same kernel's ratio interpolated over the elements it touches
  (tokens x row width), a running median over 9 donor points;
- prefill attention (unmeasured on the target): the donors' GEMM ratio at the same FLOPs;
- decode attention (unmeasured on the target): the donors' element-wise ratio (all kernels)
  at the same bytes (the KV read), both running medians over 15 points.
Every ratio is clamped to the donors' range. `leave_one_model_out` validates the GEMM and
element-wise rules: each donor in turn is predicted from the others (two donors at least).
Leaves out: any rule for GPUs without a donor (refused, naming the two GPUs).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from prefixsim.costmodel.measured import elementwise_widths
from prefixsim.costmodel.operators import LayerDims
from prefixsim.errors import InputError
from prefixsim.profiles.fit import error_summary, relative_errors
from prefixsim.profiles.vidur import GEMM_OPS, MlpData, measured_models, mlp_path, read_mlp

RULES = {
    "gemm": "ratio of the donors' GEMMs at the same token count, interpolated over "
            "weight size",
    "elementwise": "ratio of the donors' same kernel at the same elements touched",
    "prefill_attention": "ratio of the donors' GEMMs at the same FLOPs",
    "decode_attention": "ratio of the donors' element-wise kernels at the same bytes",
}


def source_dims(data: MlpData, tp: int) -> LayerDims:
    """Per-GPU layer shapes of a Vidur file's model at `tp`."""
    g = data.geometry
    return LayerDims(name="vidur", num_layers=1, hidden_size=g["n_embd"],
                     num_heads=g["n_head"] // tp, num_kv_heads=max(1, g["n_kv_head"] // tp),
                     head_dim=g["n_embd"] // g["n_head"],
                     intermediate_size=g["n_expanded_embd"] // tp, vocab_size=1)


def size_columns(dims: LayerDims, gated: bool = True) -> dict[str, int]:
    """The size axis of each operator: weight elements (GEMMs), row width (element-wise)."""
    weights = dims.weights()
    if not gated:
        weights["gate_up"] = (dims.hidden_size, dims.intermediate_size)
    sizes = {name: k * n for name, (k, n) in weights.items()}
    widths = elementwise_widths(dims)
    if not gated:
        widths["activation"] = dims.intermediate_size
    return {**sizes, **widths}


def donor_points(root: Path, from_dir: str, to_dir: str, exclude: str) -> pd.DataFrame:
    """One row per (donor, tp, tokens, op): times on both GPUs, their ratio and the size
    (read once per process and folder)."""
    return _donor_points(str(root.resolve()), from_dir, to_dir, exclude).copy()


@functools.lru_cache(maxsize=8)
def _donor_points(root_name: str, from_dir: str, to_dir: str, exclude: str) -> pd.DataFrame:
    root = Path(root_name)
    rows = []
    donors = sorted(set(measured_models(root, from_dir)) & set(measured_models(root, to_dir)))
    for model in donors:
        if model == exclude:
            continue
        for tp in (1, 2, 4, 8):
            try:
                a = read_mlp(mlp_path(root, from_dir, model), tp)
                b = read_mlp(mlp_path(root, to_dir, model), tp)
            except InputError:  # a donor without this TP adds nothing
                continue
            sizes = size_columns(source_dims(a, tp), a.geometry["use_gated_mlp"])
            both = a.times_s.add_suffix("_a").join(b.times_s.add_suffix("_b"), how="inner")
            for op, size in sizes.items():
                if f"{op}_a" not in both or f"{op}_b" not in both:
                    continue
                part = both[[f"{op}_a", f"{op}_b"]].dropna()
                rows.append(pd.DataFrame({
                    "model": model, "tp": tp, "tokens": part.index.to_numpy(), "op": op,
                    "size": size, "a_s": part[f"{op}_a"].to_numpy(),
                    "b_s": part[f"{op}_b"].to_numpy()}))
    if not rows:
        raise InputError(f"no model is measured on both {from_dir} and {to_dir} at the same TP "
                         "(compute/<gpu>/<org>/<model>/mlp.csv) to borrow from",
                         file=root_name, field="--borrow")
    frame = pd.concat(rows, ignore_index=True)
    frame["ratio"] = frame["b_s"] / frame["a_s"]
    frame["gemm"] = frame["op"].isin(list(GEMM_OPS.values()))
    # GEMM FLOPs (2 x tokens x weight elements) or element-wise bytes (2 x tokens x width)
    frame["log_work"] = np.log(2.0 * frame["tokens"] * frame["size"])
    return frame


def _running(x: pd.Series, ratio: pd.Series, window: int) -> tuple[np.ndarray, np.ndarray]:
    curve = ratio.groupby(x).median().sort_index()
    smooth = curve.rolling(window, center=True, min_periods=1).median()
    return smooth.index.to_numpy(dtype=float), smooth.to_numpy(dtype=float)


@dataclass(frozen=True)
class BorrowRule:
    """The ratio curves of the module docstring, built from donor points."""

    gemm_by_tokens: dict[int, tuple[np.ndarray, np.ndarray]]
    elementwise: dict[str, tuple[np.ndarray, np.ndarray]]
    gemm_by_flops: tuple[np.ndarray, np.ndarray]
    elementwise_by_bytes: tuple[np.ndarray, np.ndarray]
    donors: tuple[str, ...]

    @classmethod
    def from_points(cls, points: pd.DataFrame) -> BorrowRule:
        gemms, elementwise = points[points["gemm"]], points[~points["gemm"]]
        by_tokens = {}
        for tokens, group in gemms.groupby("tokens"):
            by_tokens[int(tokens)] = _running(np.log(group["size"]), group["ratio"], 1)
        per_op = {op: _running(g["log_work"], g["ratio"], 9)
                  for op, g in elementwise.groupby("op")}
        return cls(by_tokens, per_op, _running(gemms["log_work"], gemms["ratio"], 15),
                   _running(elementwise["log_work"], elementwise["ratio"], 15),
                   tuple(sorted(points["model"].unique())))

    def gemm_ratio(self, tokens: np.ndarray, weight_elements: int) -> np.ndarray:
        counts = np.array(sorted(self.gemm_by_tokens))
        out = np.empty(len(tokens))
        for i, t in enumerate(np.asarray(tokens)):
            nearest = int(counts[np.argmin(np.abs(counts - min(t, counts[-1])))])
            x, y = self.gemm_by_tokens[nearest]
            out[i] = np.interp(np.log(weight_elements), x, y)
        return out

    def elementwise_ratio(self, op: str, tokens: np.ndarray, width: int) -> np.ndarray:
        x, y = self.elementwise[op]
        return np.interp(np.log(2.0 * np.asarray(tokens, dtype=float) * width), x, y)

    def prefill_ratio(self, flops: np.ndarray) -> np.ndarray:
        return np.interp(np.log(np.maximum(flops, 1.0)), *self.gemm_by_flops)

    def decode_ratio(self, num_bytes: np.ndarray) -> np.ndarray:
        return np.interp(np.log(np.maximum(num_bytes, 1.0)), *self.elementwise_by_bytes)

    def scale_mlp(self, data: MlpData, dims: LayerDims) -> MlpData:
        """`data` (the other GPU's times of the target model) times the ratios."""
        sizes = size_columns(dims)
        tokens = data.times_s.index.to_numpy()
        scaled = data.times_s.copy()
        for op in scaled.columns:
            ratio = (self.gemm_ratio(tokens, sizes[op]) if op in GEMM_OPS.values()
                     else self.elementwise_ratio(op, tokens, sizes[op]))
            scaled[op] = scaled[op].to_numpy() * ratio
        return replace(data, times_s=scaled)


def leave_one_model_out(points: pd.DataFrame) -> dict[str, dict[str, float | int]]:
    """Held-out errors of the GEMM and element-wise rules: each donor predicted from the
    rest (`gemm`, `elementwise`, and per donor `gemm:<model>` medians for the report);
    empty with a single donor, where leaving it out leaves no rule."""
    errors: dict[str, list[np.ndarray]] = {"gemm": [], "elementwise": []}
    per_model: dict[str, dict[str, float | int]] = {}
    models = sorted(points["model"].unique())
    if len(models) < 2:
        return {}
    for model in models:
        rule = BorrowRule.from_points(points[points["model"] != model])
        mine = points[points["model"] == model]
        for cls, part in (("gemm", mine[mine["gemm"]]), ("elementwise", mine[~mine["gemm"]])):
            predicted = np.empty(len(part))
            for (op, size), group in part.groupby(["op", "size"]):
                idx = part.index.get_indexer(group.index)
                tokens = group["tokens"].to_numpy()
                ratio = (rule.gemm_ratio(tokens, size) if cls == "gemm"
                         else rule.elementwise_ratio(op, tokens, size))
                predicted[idx] = group["a_s"].to_numpy() * ratio
            err = relative_errors(predicted, part["b_s"].to_numpy())
            errors[cls].append(err)
            per_model[f"{cls}:{model}"] = error_summary(err)
    summary = {cls: error_summary(np.concatenate(e)) for cls, e in errors.items()}
    return summary | per_model
