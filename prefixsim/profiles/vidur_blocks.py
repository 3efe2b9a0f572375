"""Block hold-outs of a Vidur import (docs/cost-models.md "Imported GPU profiles",
"Block hold-outs"): splits of an import's measurements that hold out whole blocks instead
of scattered points, so the errors say how far a profile generalises rather than how well
it interpolates between neighbours.

- `top_range`: the top 20% of every axis (token counts of the layer kernels, each attention
  row's KV sizes, each GPU count's message sizes, the CPU batch sizes);
- `whole_rows`: a seeded 20% of whole attention rows (prefill chunk sizes, decode batch
  sizes; the first and last kept);
- `model`: the GEMMs of the other models measured on the same GPU at the same TP, fitted
  (linear form) and judged on this model's GEMMs (`other_model_gemms`); not where the
  layer kernels are borrowed (the borrow rule's leave-one-model-out error says that).
Leaves out: building and judging the profile of a split (vidur_import.py); the profile's
own tables never come from these splits.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from prefixsim.costmodel.operators import Gemm
from prefixsim.errors import InputError
from prefixsim.profiles.fit import holdout_split
from prefixsim.profiles.vidur import measured_models, mlp_path, read_mlp
from prefixsim.profiles.vidur_borrow import source_dims
from prefixsim.profiles.vidur_split import Measured

BLOCK_FRACTION = 0.2
BLOCK_CLASSES = {
    "top_range": ("gemm", "elementwise", "layer", "prefill_attention", "decode_attention",
                  "all_reduce", "send_recv", "cpu_overhead", "step"),
    "whole_rows": ("prefill_attention", "decode_attention"),
}
"""The classes each split judges (the others equal the random split's)."""


def _top(values: np.ndarray, fraction: float) -> np.ndarray:
    """Mask of the values in the top `fraction` of the distinct values (two always kept)."""
    distinct = np.unique(values)
    count = min(max(1, round(fraction * len(distinct))), len(distinct) - 2)
    if count <= 0:
        return np.zeros(len(values), dtype=bool)
    return values >= distinct[len(distinct) - count]


def _top_of_grid(frame: pd.DataFrame, key: str, x: str,
                 fraction: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    held = np.zeros(len(frame), dtype=bool)
    for _, group in frame.groupby(key):
        held[frame.index.get_indexer(group.index)] = _top(group[x].to_numpy(), fraction)
    return frame[~held], frame[held]


def _top_of_series(full: pd.Series, fraction: float):
    full = full.sort_index()
    held = _top(full.index.to_numpy(), fraction)
    return full[~held], full[held], full


def _grids(m: Measured) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (pd.concat([m.prefill_train, m.prefill_test]).reset_index(drop=True),
            pd.concat([m.decode_train, m.decode_test]).reset_index(drop=True))


def top_range(m: Measured, fraction: float = BLOCK_FRACTION) -> Measured:
    """`m` with the top `fraction` of every axis held out (module docstring)."""
    tokens = np.sort(np.concatenate([m.tokens_train, m.tokens_test]))
    held = _top(tokens, fraction)
    prefill, decode = _grids(m)
    prefill_train, prefill_test = _top_of_grid(prefill, "prefill_chunk_size", "kv_cache_size",
                                               fraction)
    decode_train, decode_test = _top_of_grid(decode, "batch_size", "kv_cache_size", fraction)
    collectives = {name: {n: _top_of_series(full, fraction) for n, (_, _, full) in t.items()}
                   for name, t in m.collectives.items()}
    cpu = None if m.cpu is None else _top_of_series(m.cpu[2], fraction)
    return replace(m, tokens_train=tokens[~held], tokens_test=tokens[held],
                   prefill_train=prefill_train, prefill_test=prefill_test,
                   decode_train=decode_train, decode_test=decode_test,
                   collectives=collectives, cpu=cpu)


def _rows_out(frame: pd.DataFrame, key: str, fraction: float, rng: np.random.Generator):
    keys = np.sort(frame[key].unique())
    if len(keys) < 3:
        return frame, frame.iloc[:0]
    _, test = holdout_split(len(keys), fraction, rng, keep=[0, len(keys) - 1])
    held = frame[key].isin(keys[test]).to_numpy()
    return frame[~held], frame[held]


def whole_rows(m: Measured, seed: int, fraction: float = BLOCK_FRACTION) -> Measured:
    """`m` with a seeded `fraction` of whole attention rows held out (its own generator,
    so the random split stays as it was)."""
    rng = np.random.default_rng([seed, 1])
    prefill, decode = _grids(m)
    prefill_train, prefill_test = _rows_out(prefill, "prefill_chunk_size", fraction, rng)
    decode_train, decode_test = _rows_out(decode, "batch_size", fraction, rng)
    return replace(m, prefill_train=prefill_train, prefill_test=prefill_test,
                   decode_train=decode_train, decode_test=decode_test)


GEMM_NAMES = ("qkv", "o", "gate_up", "down")


def _gemm_points(times_s: pd.DataFrame, weights: dict) -> tuple[list, list]:
    features, times = [], []
    for name in GEMM_NAMES:
        for tokens, time_s in times_s[name].dropna().items():
            features.append(Gemm(int(tokens), *weights[name]).features(2))
            times.append(float(time_s))
    return features, times


def other_model_gemms(m: Measured, tp: int) -> tuple[tuple[list, list], tuple[list, list]]:
    """((features, seconds) of the other models' GEMMs on the same GPU at `tp`, the same of
    this model's); empty when no other model was measured there."""
    gpu_dir = m.compute.path.relative_to(m.root / "compute").parts[0]
    own = str(m.compute.path.parent.relative_to(m.root / "compute" / gpu_dir))
    others: tuple[list, list] = ([], [])
    for model in measured_models(m.root, gpu_dir):
        if model == own:
            continue
        try:
            data = read_mlp(mlp_path(m.root, gpu_dir, model), tp)
        except InputError:  # not measured at this TP
            continue
        dims = source_dims(data, tp)
        weights = dims.weights()
        if not data.geometry["use_gated_mlp"]:
            weights["gate_up"] = (dims.hidden_size, dims.intermediate_size)
        features, times = _gemm_points(data.times_s, weights)
        others[0].extend(features)
        others[1].extend(times)
    return others, _gemm_points(m.compute.times_s, source_dims(m.compute, tp).weights())
