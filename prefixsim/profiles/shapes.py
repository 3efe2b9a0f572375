"""Which shapes a calibration times: random, log-uniform sizes per operator class (torch-free).

`shape_ranges` says how many shapes of which sizes per device and mode (`--quick` keeps a
2-core CPU under two minutes); `plan_shapes` draws them reproducibly from a numpy Generator:
GEMM token counts per weight matrix (always 1 and the maximum, the ends of its interpolation
table, plus `gemms_per_weight` random ones), prefill (new, cached) pairs under a cap on
n*(n+c), decode batches with a cap on the summed contexts, and layer steps (a prefill chunk,
decodes, or both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prefixsim.costmodel.operators import (
    DecodeAttention,
    Gemm,
    LayerDims,
    Operator,
    PrefillAttention,
)
from prefixsim.costmodel.protocol import PrefillChunk, StepBatch


@dataclass(frozen=True, slots=True)
class ShapeRanges:
    """How many shapes of which sizes a calibration times (per device and mode)."""

    max_tokens: int        # GEMM token counts 1..max_tokens
    gemms_per_weight: int
    max_new: int           # prefill new tokens
    max_context: int       # cached tokens / decode contexts
    max_pairs: int         # cap on n * (n + c) of one prefill
    num_prefill: int
    max_batch: int         # decode sequences per batch
    max_kv_tokens: int     # cap on the sum of decode contexts
    num_decode: int
    num_layer: int
    passes: int
    repeats: int


def shape_ranges(device: str, quick: bool) -> ShapeRanges:
    if device == "cuda":  # CUDA: untested without a GPU
        return (ShapeRanges(4096, 10, 4096, 32768, 2**26, 40, 256, 2**19, 40, 6, 5, 5) if quick
                else ShapeRanges(8192, 16, 8192, 65536, 2**28, 64, 512, 2**21, 64, 10, 7, 5))
    return (ShapeRanges(128, 8, 512, 4096, 2**20, 60, 32, 2**14, 60, 5, 3, 2) if quick
            else ShapeRanges(1024, 16, 1024, 8192, 2**22, 80, 64, 2**16, 80, 10, 7, 3))


def _log_int(rng: np.random.Generator, low: int, high: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


@dataclass(frozen=True, slots=True)
class Plan:
    """The shapes of one measurement: operators per class and layer step batches."""

    ops: dict[str, list[Operator]]
    layers: list[StepBatch]


def plan_shapes(dims: LayerDims, ranges: ShapeRanges, rng: np.random.Generator) -> Plan:
    """Random shapes (log-uniform sizes) for every class; reproducible from `rng`."""
    heads = (dims.num_heads, dims.num_kv_heads, dims.head_dim)
    gemms: list[Operator] = []
    for k, n in dims.weights().values():
        counts = {1, ranges.max_tokens}  # the table's ends; never held out
        for _ in range(50 * ranges.gemms_per_weight):
            if len(counts) == ranges.gemms_per_weight + 2:
                break
            counts.add(_log_int(rng, 1, ranges.max_tokens))
        gemms += [Gemm(m, k, n) for m in sorted(counts)]
    prefills: list[Operator] = []
    while len(prefills) < ranges.num_prefill:
        new = _log_int(rng, 8, ranges.max_new)
        cached = 0 if rng.random() < 0.2 else _log_int(rng, 16, ranges.max_context)
        if new * (new + cached) <= ranges.max_pairs:
            prefills.append(PrefillAttention(new, cached, *heads))
    decodes: list[Operator] = [DecodeAttention(_contexts(rng, ranges), *heads)
                               for _ in range(ranges.num_decode)]
    layers = [_layer_step(rng, ranges, i % 3) for i in range(ranges.num_layer)]
    return Plan({"gemm": gemms, "prefill_attention": prefills, "decode_attention": decodes},
                layers)


def _contexts(rng: np.random.Generator, ranges: ShapeRanges, max_batch: int = 0) -> tuple:
    batch = _log_int(rng, 1, max_batch or ranges.max_batch)
    contexts = [_log_int(rng, 16, ranges.max_context) for _ in range(batch)]
    scale = min(1.0, ranges.max_kv_tokens / sum(contexts))
    return tuple(max(1, int(c * scale)) for c in contexts)


def _layer_step(rng: np.random.Generator, ranges: ShapeRanges, kind: int) -> StepBatch:
    """kind 0: one prefill chunk; 1: decodes only; 2: a chunk plus decodes."""
    prefills: tuple[PrefillChunk, ...] = ()
    if kind != 1:
        new = _log_int(rng, 8, max(8, min(ranges.max_new, ranges.max_tokens) // 2))
        cached = _log_int(rng, 16, ranges.max_context)
        cached = min(cached, max(0, ranges.max_pairs // new - new))
        prefills = (PrefillChunk(new, cached),)
    decodes = () if kind == 0 else _contexts(rng, ranges, max(1, ranges.max_batch // 2))
    return StepBatch(prefills, decodes)
