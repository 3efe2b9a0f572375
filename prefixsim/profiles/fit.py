"""Fitting measured operator times: non-negative least squares on relative error, hold-out.

A class's model is t = features . coefficients with every coefficient >= 0 (seconds per FLOP,
per byte, per call, ...). The fit minimises the sum of squared *relative* errors, so a 20 us
GEMM counts as much as a 200 ms one. NNLS is solved exactly by enumerating supports (the
classes have at most four features, so at most 16 small least-squares solves); numpy only.
Leaves out: robust losses and model selection beyond the fixed feature sets.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin ||a x - b|| subject to x >= 0, exactly, for a few columns (<= 8).

    The optimum is the least-squares solution on its own support, so trying every support
    and keeping the best feasible candidate finds it. Columns are scaled to unit norm first.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    cols = a.shape[1]
    if cols > 8:
        raise ValueError(f"nnls by enumeration handles at most 8 columns, got {cols}")
    norms = np.linalg.norm(a, axis=0)
    norms[norms == 0] = 1.0
    scaled = a / norms
    best = np.zeros(cols)
    best_residual = float(np.dot(b, b))
    for size in range(1, cols + 1):
        for support in itertools.combinations(range(cols), size):
            idx = list(support)
            sol, *_ = np.linalg.lstsq(scaled[:, idx], b, rcond=None)
            if np.any(sol < 0):
                continue
            residual = float(np.sum((scaled[:, idx] @ sol - b) ** 2))
            if residual < best_residual - 1e-15 * max(1.0, best_residual):
                best = np.zeros(cols)
                best[idx] = sol
                best_residual = residual
    return best / norms


def fit_relative(features: np.ndarray, times_s: np.ndarray) -> np.ndarray:
    """Non-negative coefficients minimising sum(((features @ c) - t) / t)^2."""
    features = np.asarray(features, dtype=float)
    times_s = np.asarray(times_s, dtype=float)
    if features.ndim != 2 or len(features) != len(times_s) or len(times_s) == 0:
        raise ValueError("need one feature row per measured time")
    if np.any(times_s <= 0):
        raise ValueError("measured times must be > 0")
    return nnls(features / times_s[:, None], np.ones(len(times_s)))


def relative_errors(predicted_s: np.ndarray, measured_s: np.ndarray) -> np.ndarray:
    """|predicted - measured| / measured, elementwise."""
    predicted_s = np.asarray(predicted_s, dtype=float)
    measured_s = np.asarray(measured_s, dtype=float)
    return np.abs(predicted_s - measured_s) / measured_s


def error_summary(errors: np.ndarray) -> dict[str, float | int]:
    """`median_rel_error`, `p90_rel_error` (linear interpolation) and `n`."""
    errors = np.asarray(errors, dtype=float)
    if len(errors) == 0:
        raise ValueError("no errors to summarise")
    return {
        "median_rel_error": float(np.median(errors)),
        "p90_rel_error": float(np.percentile(errors, 90)),
        "n": int(len(errors)),
    }


def holdout_split(
    n: int, fraction: float, rng: np.random.Generator, keep: Sequence[int] = ()
) -> tuple[np.ndarray, np.ndarray]:
    """Random (train, test) index arrays, both sorted: test has round(n * fraction) items
    (at least one) drawn from the indices not in `keep`; train keeps the rest (at least one)."""
    candidates = np.array([i for i in range(n) if i not in set(keep)], dtype=int)
    if n < 2 or len(candidates) == 0:
        raise ValueError("a hold-out split needs at least two items, one of them not kept")
    num_test = min(len(candidates), n - 1, max(1, round(n * fraction)))
    test = rng.choice(candidates, size=num_test, replace=False)
    train = np.setdiff1d(np.arange(n), test)
    return train, np.sort(test)
