"""Time real operators with torch and fit a profile (the only module that imports torch).

For one model's layer shapes it times linear layers (QKV, O, gate/up, down) over token
counts, prefill attention of n new tokens over c cached ones (bottom-right causal, via
`causal_lower_right`), decode attention for batches of contexts, and a whole torch layer for
a few step batches; on CUDA also HBM and host<->device copy bandwidth.

Timing protocol (shared machines are noisy): a warm-up (every shape built, which sizes the
input pools, and the first shape of each kind run); then several passes over all shapes of
all classes in a fresh random order, each shape taking the minimum of a few back-to-back
calls (device synchronised around each call on CUDA); a shape's time is the median over
passes. CPU attention runs in fp32 (bf16 attention is several times slower
on CPU); grouped-query heads are handled by the kernels (`enable_gqa`), decode attention runs
one sequence at a time with the query heads of a KV head as the query rows; on CUDA the K/V
are packed token-major and a decode batch is one flash varlen call (docs/cost-models.md
"Calibration": per-sequence calls would time kernel launches).

Fitting (fit.py): per class, a random 20% of shapes is held out, the rest fits
t = coefficients . features with coefficients >= 0, and the held-out relative errors are
reported. GEMMs of the model's own matrices are predicted by interpolating the training
times over token counts (measured better than the linear form, whose errors are kept as
`heldout_linear`); each matrix's table ends (1 and the largest token count) are always
measured and never held out. The layer check compares each timed layer (never fitted) with
the sum of its operator predictions. On CPU one thread is timed by its CPU time.
Leaves out: paged KV layouts, CUDA graphs, MLA kernels, MoE routing in the layer check.
Paths marked CUDA are untested without a GPU.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import numpy as np

from prefixsim._version import __version__
from prefixsim.costmodel.fitted import GemmInterpolation, Predictor
from prefixsim.costmodel.operators import (
    FEATURES,
    DecodeAttention,
    FeatureRules,
    Gemm,
    LayerDims,
    Operator,
    PrefillAttention,
    layer_operators,
)
from prefixsim.costmodel.profile import Profile, profile_from_mapping
from prefixsim.costmodel.protocol import StepBatch
from prefixsim.errors import InputError
from prefixsim.profiles.fit import error_summary, fit_relative, holdout_split, relative_errors
from prefixsim.profiles.shapes import Plan, ShapeRanges, plan_shapes, shape_ranges

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
TARGETS = {"gemm": 0.10, "prefill_attention": 0.10, "decode_attention": 0.10, "layer": 0.15}
HOLDOUT_FRACTION = 0.2
DEFAULT_CPU_THREADS = 1


# ------------------------------------------------------------------------- torch side
def import_torch() -> Any:
    """torch, or InputError saying how to install it (the CLI exits 2)."""
    try:
        import torch
    except ImportError:
        raise InputError("calibrate needs torch, which is not installed; install it with "
                         "pip install 'prefixsim[calibrate]'") from None
    return torch


def prefill_attention(torch: Any, q: Any, k: Any, v: Any) -> Any:
    """Attention of q [B, Hq, n, d] over k, v [B, Hkv, c + n, d]: the n new tokens come
    after c cached ones, so the causal mask is aligned bottom-right (`causal_lower_right`)."""
    from torch.nn.attention.bias import causal_lower_right

    mask = causal_lower_right(q.shape[-2], k.shape[-2])
    if q.is_cuda and q.dtype == torch.float32 and q.shape[1] != k.shape[1]:
        # CUDA (untested here): no flash kernel for fp32, and the memory-efficient one that
        # takes the lower-right mask wants equal head counts
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1])


def decode_attention_varlen(torch: Any, q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any,
                            max_k: int, out: Any) -> Any:
    """CUDA (untested without a GPU): a whole decode batch in one flash-attention varlen
    call, as vLLM's paged decode kernels take it: q [B, Hq, d] (one token per sequence),
    k, v packed [sum L, Hkv, d], cu_q = 0..B and cu_k the cumulative context lengths
    (int32), into out [B, Hq, d]."""
    result = torch.ops.aten._flash_attention_forward(
        q, k, v, cu_q, cu_k, 1, max_k, 0.0, False, False)
    return out.copy_(result[0])


def decode_attention(torch: Any, q: Any, keys: list, values: list, out: Any) -> Any:
    """One query token per sequence: q [B, Hq, d] over keys[i], values[i] [Hkv, L_i, d],
    into out [B, Hq, d]. The Hq/Hkv query heads sharing a KV head are its query rows."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    heads, dim = q.shape[1], q.shape[2]
    kv_heads = keys[0].shape[0]
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        rows = q[i].view(1, kv_heads, heads // kv_heads, dim)
        out[i] = sdpa(rows, k.unsqueeze(0), v.unsqueeze(0)).view(heads, dim)
    return out


class Bench:
    """Builds a zero-argument callable per operator or layer step, on one device.

    Inputs are views into one random pool per dtype (grown during the warm-up pass), so
    building a callable is cheap and memory stays at the largest shape; weights are kept."""

    def __init__(self, torch: Any, dims: LayerDims, device: str, dtype: str,
                 attention_dtype: str, seed: int, threads: int | None = None) -> None:
        if device == "cuda" and not torch.cuda.is_available():
            raise InputError("CUDA is not available to torch on this machine", field="--device")
        names = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
        self.torch, self.dims, self.device = torch, dims, torch.device(device)
        self.gemm_dtype, self.attn_dtype = names[dtype], names[attention_dtype]
        torch.manual_seed(seed)
        if threads is not None:
            torch.set_num_threads(threads)
        self._weights: dict[tuple[int, int], Any] = {}
        self._pools: dict[Any, Any] = {}
        # CUDA: K/V packed token-major (one buffer per step, as varlen kernels read it) and
        # decode batches in one varlen call where this torch build has the kernel
        self.packed_kv = device == "cuda"
        self.varlen_decode = self.packed_kv and self._varlen_works()

    def _varlen_works(self) -> bool:
        """Whether this torch build runs the flash varlen kernel for the model's heads (CUDA:
        decode batches then run in one call; otherwise one SDPA call per sequence)."""
        torch, d = self.torch, self.dims
        try:
            q = torch.randn(2, d.num_heads, d.head_dim, dtype=self.attn_dtype,
                            device=self.device)
            k = torch.randn(48, d.num_kv_heads, d.head_dim, dtype=self.attn_dtype,
                            device=self.device)
            cu_q = torch.tensor([0, 1, 2], dtype=torch.int32, device=self.device)
            cu_k = torch.tensor([0, 16, 48], dtype=torch.int32, device=self.device)
            decode_attention_varlen(torch, q, k, k, cu_q, cu_k, 32, torch.empty_like(q))
            torch.cuda.synchronize()
        except (RuntimeError, TypeError, NotImplementedError):
            return False
        return True

    def _varlen_args(self, contexts: tuple | list) -> tuple[Any, Any, int]:
        """cu_q (0..B), cu_k (cumulative contexts) as int32 on the device, and the longest."""
        torch = self.torch
        cu_k = np.concatenate([[0], np.cumsum(contexts)]).astype(np.int32)
        return (torch.arange(len(contexts) + 1, dtype=torch.int32, device=self.device),
                torch.from_numpy(cu_k).to(self.device), int(max(contexts)))

    def _view(self, dtype: Any, offset: int, *shape: int) -> Any:
        numel = int(np.prod(shape))
        pool = self._pools.get(dtype)
        if pool is None or pool.numel() < offset + numel:
            size = int((offset + numel) * 1.25)
            pool = self.torch.randn(size, dtype=dtype, device=self.device)
            self._pools[dtype] = pool
        return pool[offset:offset + numel].view(*shape)

    def weight(self, k: int, n: int) -> Any:
        if (k, n) not in self._weights:
            self._weights[(k, n)] = self.torch.randn(
                n, k, dtype=self.gemm_dtype, device=self.device) * k ** -0.5
        return self._weights[(k, n)]

    def operator(self, op: Operator) -> Callable[[], Any]:
        torch, linear = self.torch, self.torch.nn.functional.linear
        if isinstance(op, Gemm):
            x = self._view(self.gemm_dtype, 0, op.tokens, op.in_features)
            w = self.weight(op.in_features, op.out_features)
            return lambda: linear(x, w)
        hq, hkv, d = op.num_heads, op.num_kv_heads, op.head_dim
        if isinstance(op, PrefillAttention):
            total = op.new_tokens + op.cached_tokens
            q = self._view(self.attn_dtype, 0, 1, hq, op.new_tokens, d)
            k = self._view(self.attn_dtype, q.numel(), 1, hkv, total, d)
            v = self._view(self.attn_dtype, q.numel() + k.numel(), 1, hkv, total, d)
            return lambda: prefill_attention(torch, q, k, v)
        assert isinstance(op, DecodeAttention)
        q = self._view(self.attn_dtype, 0, len(op.contexts), hq, d)
        out = torch.empty_like(q)
        if self.varlen_decode:
            k, v = self._packed(q.numel(), hkv, d, sum(op.contexts))
            cu_q, cu_k, max_k = self._varlen_args(op.contexts)
            return lambda: decode_attention_varlen(torch, q, k, v, cu_q, cu_k, max_k, out)
        keys, values = self._caches(q.numel(), hkv, d, op.contexts)
        return lambda: decode_attention(torch, q, keys, values, out)

    def _packed(self, offset: int, hkv: int, d: int, total: int) -> tuple[Any, Any]:
        """K and V of `total` tokens packed token-major, [total, hkv, d] each (varlen): one
        view of both, so growing the pool cannot leave K and V in different pools and calls
        with the same arguments return views of the same memory."""
        kv = self._view(self.attn_dtype, offset, 2, total, hkv, d)
        return kv[0], kv[1]

    def _caches(self, offset: int, hkv: int, d: int, lengths: tuple) -> tuple[list, list]:
        """Per sequence K and V views [hkv, L, d]: contiguous per sequence, or (varlen decode)
        token-major views into one packed K and one packed V, sequences in order."""
        if self.packed_kv:
            k, v = self._packed(offset, hkv, d, sum(lengths))
            ends = np.cumsum([0, *lengths])
            return ([k[a:b].transpose(0, 1) for a, b in zip(ends[:-1], ends[1:], strict=True)],
                    [v[a:b].transpose(0, 1) for a, b in zip(ends[:-1], ends[1:], strict=True)])
        keys, values = [], []
        for length in lengths:
            keys.append(self._view(self.attn_dtype, offset, hkv, length, d))
            values.append(self._view(self.attn_dtype, offset + hkv * length * d, hkv, length, d))
            offset += 2 * hkv * length * d
        return keys, values

    def layer(self, batch: StepBatch) -> Callable[[], Any]:
        """One dense pre-norm transformer layer over `batch` (RMSNorm, QKV, rotary, KV
        writes, attention, O, residual, RMSNorm, gate/up, SiLU, down, residual)."""
        torch, dims = self.torch, self.dims
        f = torch.nn.functional
        m, hq, hkv, d = batch.num_tokens, dims.num_heads, dims.num_kv_heads, dims.head_dim
        w = {name: self.weight(*kn) for name, kn in dims.weights().items()}
        x = self._view(self.gemm_dtype, 0, m, dims.hidden_size)
        angle = torch.rand(m, 1, d // 2, device=self.device)
        cos = torch.cat([angle.cos()] * 2, -1).to(self.gemm_dtype)
        sin = torch.cat([angle.sin()] * 2, -1).to(self.gemm_dtype)
        lengths = [c.cached_tokens + c.new_tokens for c in batch.prefills]
        lengths += list(batch.decode_contexts)
        # The caches are written every call: they must not alias x (same pool when the
        # linear and attention dtypes agree), or repeated calls feed outputs back into x.
        keys, values = self._caches(x.numel(), hkv, d, tuple(lengths))
        new = [c.new_tokens for c in batch.prefills] + [1] * len(batch.decode_contexts)
        num_prefills = len(batch.prefills)
        attn = self.attn_dtype
        decode_varlen = None
        if self.varlen_decode and batch.decode_contexts:  # the decodes' packed K/V follow
            start = sum(lengths[:num_prefills])           # the prefills' in one buffer
            k_all, v_all = self._packed(x.numel(), hkv, d, sum(lengths))
            decode_varlen = (k_all[start:], v_all[start:],
                             *self._varlen_args(batch.decode_contexts))

        def rotate(t: Any) -> Any:
            half = t.shape[-1] // 2
            return t * cos + torch.cat([-t[..., half:], t[..., :half]], -1) * sin

        def run() -> Any:
            h = f.rms_norm(x, (dims.hidden_size,))
            q, k, v = f.linear(h, w["qkv"]).split([hq * d, hkv * d, hkv * d], -1)
            q, k = rotate(q.view(m, hq, d)), rotate(k.view(m, hkv, d))
            v = v.view(m, hkv, d)
            out = torch.empty(m, hq, d, dtype=attn, device=self.device)
            row = 0
            for i, n in enumerate(new):  # write the step's KV into each sequence's cache
                keys[i][:, -n:].copy_(k[row:row + n].transpose(0, 1))
                values[i][:, -n:].copy_(v[row:row + n].transpose(0, 1))
                if i < num_prefills:
                    qi = q[row:row + n].transpose(0, 1).unsqueeze(0).to(attn)
                    o = prefill_attention(torch, qi, keys[i].unsqueeze(0), values[i].unsqueeze(0))
                    out[row:row + n] = o[0].transpose(0, 1)
                row += n
            first_decode = m - (len(new) - num_prefills)  # decode rows follow the prefills
            if first_decode < m and decode_varlen is not None:
                decode_attention_varlen(torch, q[first_decode:].to(attn).contiguous(),
                                        *decode_varlen, out[first_decode:])
            elif first_decode < m:
                decode_attention(torch, q[first_decode:].to(attn).contiguous(),
                                 keys[num_prefills:], values[num_prefills:], out[first_decode:])
            h = x + f.linear(out.view(m, hq * d).to(self.gemm_dtype), w["o"])
            gate, up = f.linear(f.rms_norm(h, (dims.hidden_size,)), w["gate_up"]).chunk(2, -1)
            return h + f.linear(f.silu(gate) * up, w["down"])

        return run

    def best_of(self, call: Callable[[], Any], repeats: int) -> float:
        """The fastest of `repeats` back-to-back calls, in seconds (synchronised on CUDA)."""
        sync = self.torch.cuda.synchronize if self.device.type == "cuda" else _no_sync
        clock = self.clock()
        best = float("inf")
        for _ in range(repeats):
            sync()
            started = clock()
            call()
            sync()
            best = min(best, clock() - started)
        return best

    def clock(self) -> Callable[[], float]:
        """Wall time on CUDA and for multi-threaded CPU runs; with one CPU thread the
        thread's CPU time, which leaves out the time the OS gives other processes (the
        operators run inline in the calling thread, so nothing else is missed)."""
        if self.device.type == "cpu" and self.torch.get_num_threads() == 1:
            return time.thread_time
        return time.perf_counter

    def bandwidth(self) -> dict[str, float]:
        """CUDA only (untested without a GPU): HBM copy (read + write) and pinned host<->
        device copy rates, median of 5 copies of 256 MiB."""
        torch, size = self.torch, 256 * 2**20
        src = torch.empty(size, dtype=torch.uint8, device=self.device)
        dst = torch.empty_like(src)
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)

        def rate(copy: Callable[[], Any], moved: int) -> float:
            copy()
            return moved / float(np.median([self.best_of(copy, 1) for _ in range(5)]))

        return {"hbm_copy_bytes_s": rate(lambda: dst.copy_(src), 2 * size),
                "host_to_device_bytes_s": rate(lambda: dst.copy_(host), size),
                "device_to_host_bytes_s": rate(lambda: host.copy_(src), size)}

    def device_name(self) -> str:
        if self.device.type == "cuda":
            return str(self.torch.cuda.get_device_name(self.device))
        return cpu_name()

    def backend(self) -> str:
        torch = self.torch
        if self.device.type == "cuda":
            decode = ("flash varlen, one call per batch" if self.varlen_decode
                      else "one sdpa call per sequence")
            return (f"cuda {torch.version.cuda}, sdpa (flash where eligible), decode "
                    f"{decode}, F.linear (cuBLAS)")
        clock = "thread CPU time" if self.clock() is time.thread_time else "wall time"
        return (f"cpu sdpa (lower-right mask materialised), F.linear (mkldnn "
                f"{'on' if torch.backends.mkldnn.is_available() else 'off'}), "
                f"{torch.get_num_threads()} threads, {clock}")

    def num_threads(self) -> int:
        return int(self.torch.get_num_threads())


def _no_sync() -> None:
    return None


# ------------------------------------------------------------------------ measuring
def measure(bench: Bench, plan: Plan, ranges: ShapeRanges, rng: np.random.Generator,
            on_progress: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:
    """Median-of-pass-minima seconds per shape, keyed by class (`layer` for the layers).

    Warm-up (every shape built, the first of each kind run), then `ranges.passes` passes
    over all shapes in a fresh random order, each shape the minimum of `ranges.repeats`
    calls; the first pass's minimum also absorbs a shape's first-call costs."""
    keys = [(cls, i) for cls, ops in plan.ops.items() for i in range(len(ops))]
    keys += [("layer", i) for i in range(len(plan.layers))]

    def build(j: int) -> Callable[[], Any]:
        cls, i = keys[j]
        return bench.layer(plan.layers[i]) if cls == "layer" else bench.operator(plan.ops[cls][i])

    passes = np.empty((ranges.passes, len(keys)))
    total = (ranges.passes + 1) * len(keys)
    done = 0
    warmed: set[object] = set()
    with bench.torch.inference_mode():
        for j, (cls, i) in enumerate(keys):  # warm-up: build every shape (which grows the
            call = build(j)                    # input pools to their final size) and run the
            op = plan.ops[cls][i] if cls != "layer" else None  # first of each kind once
            kind = (op.in_features, op.out_features) if isinstance(op, Gemm) else cls
            if kind not in warmed:
                warmed.add(kind)
                bench.best_of(call, 1)
            done += 1
            if on_progress:
                on_progress(done, total)
        for p in range(ranges.passes):
            for j in rng.permutation(len(keys)):
                passes[p, j] = bench.best_of(build(j), ranges.repeats)
                done += 1
                if on_progress:
                    on_progress(done, total)
    median = np.median(passes, axis=0)
    out: dict[str, list[float]] = {}
    for (cls, _), value in zip(keys, median, strict=True):
        out.setdefault(cls, []).append(float(value))
    return {cls: np.array(values) for cls, values in out.items()}


def feature_rules(device: str, dtype: str) -> FeatureRules:
    attention = "fp32" if device == "cpu" else dtype
    return FeatureRules(DTYPE_BYTES[dtype], DTYPE_BYTES[attention], device == "cuda")


def _shape_record(op: Operator | StepBatch) -> dict[str, Any]:
    if isinstance(op, StepBatch):
        return {"prefills": [[c.new_tokens, c.cached_tokens] for c in op.prefills],
                "decode_contexts": list(op.decode_contexts)}
    record = asdict(op)
    for key in ("num_heads", "num_kv_heads", "head_dim"):
        record.pop(key, None)
    if "contexts" in record:
        record["contexts"] = list(record["contexts"])
    return record


def gemm_tables(ops: list[Operator], times_s: np.ndarray) -> list[dict[str, Any]]:
    """Per weight matrix with at least two measured token counts: its (tokens, time_s)."""
    points: dict[tuple[int, int], dict[int, float]] = {}
    for op, t in zip(ops, times_s, strict=True):
        assert isinstance(op, Gemm)
        points.setdefault((op.in_features, op.out_features), {})[op.tokens] = float(t)
    return [{"in_features": k, "out_features": n, "tokens": sorted(by_m),
             "time_s": [by_m[m] for m in sorted(by_m)]}
            for (k, n), by_m in points.items() if len(by_m) >= 2]


def _interpolations(tables: list[dict[str, Any]]) -> dict[tuple[int, int], GemmInterpolation]:
    return {(t["in_features"], t["out_features"]): GemmInterpolation(t["tokens"], t["time_s"])
            for t in tables}


def layer_ops(dims: LayerDims, batch: StepBatch) -> list[Operator]:
    """One dense layer's operators, as the torch layer computes it (no MoE routing)."""
    return layer_operators(dims, batch, moe=False)


def calibrate(dims: LayerDims, device: str = "cpu", dtype: str | None = None,
              quick: bool = False, seed: int = 0, ranges: ShapeRanges | None = None,
              threads: int | None = None,
              on_progress: Callable[[int, int], None] | None = None) -> Profile:
    """Measure `dims`' operators on `device`, fit, hold out, check layers: a Profile.

    `threads`: torch CPU threads (default 1 on CPU: on a shared machine a descheduled
    OpenMP thread stalls every parallel region by a time slice, so one thread times
    reliably; the profile records the count)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    torch = import_torch()
    dtype = dtype or ("bf16" if device == "cuda" else "fp32")
    if dtype not in DTYPE_BYTES:
        raise InputError(f"unknown dtype {dtype!r} (valid: bf16, fp16, fp32)", field="--dtype")
    ranges = ranges or shape_ranges(device, quick)
    rng = np.random.default_rng(seed)
    plan = plan_shapes(dims, ranges, rng)
    rules = feature_rules(device, dtype)
    if device == "cpu" and threads is None:
        threads = DEFAULT_CPU_THREADS
    previous_threads = torch.get_num_threads()
    try:
        bench = Bench(torch, dims, device, dtype, "fp32" if device == "cpu" else dtype, seed,
                      threads)
        times = measure(bench, plan, ranges, rng, on_progress)
        num_threads, backend = bench.num_threads(), bench.backend()
    finally:
        torch.set_num_threads(previous_threads)

    coefficients: dict[str, Any] = {}
    heldout: dict[str, dict[str, float | int]] = {}
    shapes: dict[str, list[dict[str, Any]]] = {}
    tables: list[dict[str, Any]] = []
    linear_gemm: dict[str, float | int] = {}
    for cls, ops in plan.ops.items():
        x = np.array([rules.features(op) for op in ops])
        ends = [i for i, op in enumerate(ops)
                if isinstance(op, Gemm) and op.tokens in (1, ranges.max_tokens)]
        train, test = holdout_split(len(ops), HOLDOUT_FRACTION, rng, keep=ends)
        coefficients[cls] = fit_relative(x[train], times[cls][train])
        linear = x[test] @ coefficients[cls]
        heldout[cls] = error_summary(relative_errors(linear, times[cls][test]))
        if cls == "gemm":
            tables = gemm_tables([ops[i] for i in train], times[cls][train])
            predictor = Predictor(rules, coefficients, _interpolations(tables))
            table = np.array([predictor.time_s([ops[i]]) for i in test])
            linear_gemm = heldout[cls]
            heldout[cls] = error_summary(relative_errors(table, times[cls][test]))
        shapes[cls] = [{**_shape_record(op), "time_s": float(t), "heldout": bool(i in test)}
                       for i, (op, t) in enumerate(zip(ops, times[cls], strict=True))]
    predictor = Predictor(rules, coefficients, _interpolations(tables))
    predicted = np.array([predictor.time_s(layer_ops(dims, b)) for b in plan.layers])
    heldout["layer"] = error_summary(relative_errors(predicted, times["layer"]))
    shapes["layer"] = [{**_shape_record(b), "time_s": float(t), "predicted_s": float(p)}
                       for b, t, p in zip(plan.layers, times["layer"], predicted, strict=True)]
    return profile_from_mapping({
        "schema": "prefixsim-profile/1",
        "provenance": {
            "device": device, "device_name": bench.device_name(),
            "hardware_preset": guess_hardware_preset(bench.device_name()),
            "torch_version": str(torch.__version__), "backend": backend,
            "dtype": dtype, "attention_dtype": "fp32" if device == "cpu" else dtype,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "prefixsim_version": __version__, "model": dims.to_dict(), "quick": quick,
            "seed": seed, "passes": ranges.passes, "repeats": ranges.repeats,
            "num_threads": num_threads, "wall_time_s": time.perf_counter() - started,
            "cpu_time_s": time.process_time() - cpu_started,
            "shapes": shapes,
        },
        "rules": asdict(rules),
        "coefficients": {cls: {f"s_per_{name}": float(v)
                               for name, v in zip(FEATURES[cls], vec, strict=True)}
                         for cls, vec in coefficients.items()},
        "gemm_tables": tables,
        "bandwidth": bench.bandwidth() if device == "cuda" else None,
        "heldout": heldout,
        "heldout_linear": {"gemm": linear_gemm},
    })


def validate(profile: Profile, seed: int = 1, quick: bool | None = None,
             ranges: ShapeRanges | None = None,
             on_progress: Callable[[int, int], None] | None = None) -> dict[str, dict]:
    """Re-measure fresh random shapes on this machine and compare with `profile`'s
    predictions: error summaries per class (every shape is held out from the fit)."""
    prov = profile.provenance
    torch = import_torch()
    dims = prov.model.dims()
    ranges = ranges or shape_ranges(prov.device, prov.quick if quick is None else quick)
    rng = np.random.default_rng(seed)
    plan = plan_shapes(dims, ranges, rng)
    predictor = Predictor.from_profile(profile)
    previous_threads = torch.get_num_threads()
    try:
        bench = Bench(torch, dims, prov.device, prov.dtype, prov.attention_dtype, seed,
                      prov.num_threads if prov.device == "cpu" else None)
        times = measure(bench, plan, ranges, rng, on_progress)
    finally:
        torch.set_num_threads(previous_threads)
    result = {}
    for cls, ops in plan.ops.items():
        predicted = np.array([predictor.time_s([op]) for op in ops])
        result[cls] = error_summary(relative_errors(predicted, times[cls]))
    predicted = np.array([predictor.time_s(layer_ops(dims, b)) for b in plan.layers])
    result["layer"] = error_summary(relative_errors(predicted, times["layer"]))
    return result


def guess_hardware_preset(device_name: str) -> str | None:
    """The GPU preset a CUDA device name corresponds to (None for CPUs and unknown GPUs)."""
    name = device_name.upper()
    rules = [("H200", "h200"), ("H100 PCIE", "h100-pcie"), ("H100", "h100-sxm"),
             ("A100-SXM4-40GB", "a100-40g"), ("A100-PCIE-40GB", "a100-40g"),
             ("A100", "a100-80g"), ("L40S", "l40s"), ("L4", "l4"), ("B200", "b200"),
             ("MI300X", "mi300x")]
    for needle, preset in rules:
        if needle in name:
            return preset
    return None


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


