"""Bench: time the kernels the per-operator roofline prices, on this machine's GPU, and
compare them with the roofline's prediction for the same shapes (docs/cost-models.md
"Per-operator roofline", "Checked against kernel timings").

Two steps, so the GPU time stays short and the comparison can be rerun anywhere:

    python bench/gpu_kernels.py measure -o h200-kernels.json     # needs torch + CUDA
    .venv/bin/python bench/gpu_kernels.py compare h200-kernels.json [--gpu h200]

`measure` times, with CUDA events (median of 5 timed runs of enough back-to-back calls to
fill ~20 ms, after warm-up), the shapes of the validation models at their tensor-parallel
sizes (per-GPU shapes):
- prefill attention through torch's SDPA (flash, bottom-right causal for new tokens over
  cached ones; cuDNN's kernel too where c = 0): whole prompts and 8192-token chunks of the
  kv-cache-tester model (64k-128k contexts), a 96 %-cached hit, Llama-3.1-8B chunks;
- decode attention, one flash varlen call per batch (as paged decode kernels run), for MHA
  (Llama-2-7B), GQA (Llama-3.1-8B) and the MoE model's 1 KV head per GPU;
- GEMMs (F.linear bf16; torch._scaled_mm FP8 e4m3 with per-tensor scales) of the models'
  weight matrices, cycling through enough weight copies to exceed the L2 cache (a real
  forward pass reads each layer's weights once);
- MoE expert GEMMs as one grouped GEMM (torch._grouped_mm) with the routed rows spread
  evenly over the experts;
- an HBM copy.
Each row records the shape, the backend and the seconds, or the error that stopped it;
the file is rewritten after every section (a run cut short keeps what finished).

`compare` prices each row with `Roofline(model, gpu, tp)`'s operator times (defaults only,
the row's weight dtype) and prints measured, predicted and the error per row and per kind.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

# (model preset, tp): the per-GPU shapes timed. Heads, KV heads, head dim, hidden size,
# intermediate (per GPU), experts and experts per token come from the presets at compare
# time; here they are written out so `measure` needs torch alone.
SHAPES = {
    "qwen3-coder-30b-a3b@4": dict(heads=8, kv_heads=1, head_dim=128, hidden=2048,
                                   q_out=1024, experts=128, top_k=8, expert_inter=192),
    "llama-3.1-8b@1": dict(heads=32, kv_heads=8, head_dim=128, hidden=4096, q_out=4096,
                            inter=14336),
    "llama-2-7b@1": dict(heads=32, kv_heads=32, head_dim=128, hidden=4096, q_out=4096,
                          inter=11008),
    "llama-3.1-70b@4": dict(heads=16, kv_heads=2, head_dim=128, hidden=8192, q_out=2048,
                             inter=7168),
    "codellama-34b@2": dict(heads=32, kv_heads=4, head_dim=128, hidden=8192, q_out=4096,
                             inter=11008),
    "mixtral-8x7b@2": dict(heads=16, kv_heads=4, head_dim=128, hidden=4096, q_out=2048,
                            experts=8, top_k=2, expert_inter=7168),
}
L2_BYTES = 256 * 2**20  # cycle weights over more than this (H100/H200 L2: 50-60 MB)
GEMM_TOKENS = (1, 16, 64, 256, 1024, 4096, 8192)
GROUPED_TOKENS = (1, 16, 256, 2048, 8192)
DECODE_BATCHES, DECODE_CONTEXTS = (1, 8, 32, 128, 256), (512, 2048, 8192)


# ------------------------------------------------------------------------------ measure
class Timer:
    def __init__(self, torch: Any, target_s: float = 0.02) -> None:
        self.torch, self.target_s = torch, target_s
        self.cuda = torch.cuda.is_available()

    def _sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def _run(self, call: Any, reps: int) -> float:
        if not self.cuda:
            started = time.perf_counter()
            for _ in range(reps):
                call()
            return (time.perf_counter() - started) / reps
        start = self.torch.cuda.Event(enable_timing=True)
        end = self.torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0 / reps

    def seconds(self, call: Any) -> float:
        """Median over 5 runs of the mean time of `reps` back-to-back calls."""
        call()
        self._sync()
        once = self._run(call, 1)
        reps = max(2, min(200, math.ceil(self.target_s / max(once, 1e-7))))
        return statistics.median(self._run(call, reps) for _ in range(5))


def _row(rows: list, kind: str, model: str, backend: str, run: Any, **shape: Any) -> None:
    record = {"kind": kind, "model": model, "backend": backend, **shape}
    try:
        record["time_s"] = run()
    except Exception as error:  # noqa: BLE001 - a kernel a build lacks is recorded, not fatal
        record["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    rows.append(record)
    shown = (f"{record['time_s'] * 1e3:9.3f} ms" if "time_s" in record
             else record["error"][:90])
    print(f"  {kind:<18} {model:<22} {backend:<16} "
          f"{json.dumps(shape, separators=(',', ':')):<60} {shown}", flush=True)


def _flash_prefill(torch: Any, q: Any, k: Any, v: Any) -> Any:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    mask = causal_lower_right(q.shape[-2], k.shape[-2])
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1])


def _cudnn_prefill(torch: Any, q: Any, k: Any, v: Any) -> Any:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def measure_prefill(torch: Any, timer: Timer, rows: list) -> None:
    cases = [("qwen3-coder-30b-a3b@4", n, 0) for n in (8192, 16384, 32768, 65536, 131072)]
    cases += [("qwen3-coder-30b-a3b@4", 8192, c) for c in (16384, 57344, 90112, 122880)]
    cases += [("qwen3-coder-30b-a3b@4", n, c) for n, c in ((2560, 61440), (4000, 96000),
                                                         (5120, 122880))]
    cases += [("llama-3.1-8b@1", n, 0) for n in (512, 1024, 2048, 4096, 8192)]
    cases += [("llama-3.1-8b@1", n, c) for n, c in ((512, 2048), (2048, 2048), (2048, 8192),
                                                    (128, 4096))]
    cases += [("llama-2-7b@1", n, 0) for n in (512, 2048)]
    for model, n, c in cases:
        s = SHAPES[model]
        hq, hkv, d = s["heads"], s["kv_heads"], s["head_dim"]
        q = torch.randn(1, hq, n, d, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(1, hkv, n + c, d, dtype=torch.bfloat16, device="cuda")
        v = torch.randn_like(k)
        flash = partial(_flash_prefill, torch, q, k, v)
        _row(rows, "prefill_attention", model, "sdpa-flash", partial(timer.seconds, flash),
             new=n, cached=c)
        if c == 0:  # cuDNN's kernel takes equal head counts here: K/V expanded for it
            k_full = k.repeat_interleave(hq // hkv, 1)
            cudnn = partial(_cudnn_prefill, torch, q, k_full, k_full)
            _row(rows, "prefill_attention", model, "sdpa-cudnn",
                 partial(timer.seconds, cudnn), new=n, cached=c)
    torch.cuda.empty_cache()


def _varlen_decode(torch: Any, q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any,
                   max_k: int) -> Any:
    return torch.ops.aten._flash_attention_forward(
        q, k, v, cu_q, cu_k, 1, max_k, 0.0, False, False)[0]


def measure_decode(torch: Any, timer: Timer, rows: list) -> None:
    for model in ("llama-2-7b@1", "llama-3.1-8b@1", "qwen3-coder-30b-a3b@4"):
        s = SHAPES[model]
        hq, hkv, d = s["heads"], s["kv_heads"], s["head_dim"]
        for batch in DECODE_BATCHES:
            for context in DECODE_CONTEXTS:
                if batch * context > 2**20:
                    continue
                total = batch * context
                q = torch.randn(batch, hq, d, dtype=torch.bfloat16, device="cuda")
                k = torch.randn(total, hkv, d, dtype=torch.bfloat16, device="cuda")
                v = torch.randn_like(k)
                cu_q = torch.arange(batch + 1, dtype=torch.int32, device="cuda")
                call = partial(_varlen_decode, torch, q, k, v, cu_q, cu_q * context, context)
                _row(rows, "decode_attention", model, "flash-varlen",
                     partial(timer.seconds, call), batch=batch, context=context)
    torch.cuda.empty_cache()


def _weights(torch: Any, k: int, n: int, dtype: Any, groups: int = 1) -> list:
    size = groups * k * n * torch.tensor([], dtype=dtype).element_size()
    copies = max(1, min(64, math.ceil(L2_BYTES / size)))
    shape = (groups, n, k) if groups > 1 else (n, k)
    return [torch.randn(*shape, dtype=torch.bfloat16, device="cuda").to(dtype)
            for _ in range(copies)]


def _cycling(calls: list) -> Any:
    state = {"i": 0}

    def call() -> Any:
        state["i"] = (state["i"] + 1) % len(calls)
        return calls[state["i"]]()
    return call


def _scaled_mm(torch: Any, x: Any, w: Any, scale: Any) -> Any:
    return torch._scaled_mm(x, w.t(), scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)


def measure_gemm(torch: Any, timer: Timer, rows: list) -> None:
    linear = torch.nn.functional.linear
    fp8 = getattr(torch, "float8_e4m3fn", None)
    mats: list[tuple[str, str, int, int]] = []
    for model in ("qwen3-coder-30b-a3b@4", "llama-3.1-8b@1", "llama-3.1-70b@4",
                  "codellama-34b@2"):
        s = SHAPES[model]
        kv_out = 2 * s["kv_heads"] * s["head_dim"]
        mats += [(model, "qkv", s["hidden"], s["q_out"] + kv_out),
                 (model, "o", s["q_out"], s["hidden"])]
        if "inter" in s:
            mats += [(model, "gate_up", s["hidden"], 2 * s["inter"]),
                     (model, "down", s["inter"], s["hidden"])]
    one = torch.ones((), dtype=torch.float32, device="cuda")
    for model, name, k, n in mats:
        weights = _weights(torch, k, n, torch.bfloat16)
        weights8 = ([w.to(fp8) for w in weights]
                    if fp8 is not None and model.startswith("qwen3") else [])
        for m in GEMM_TOKENS:
            x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
            call = _cycling([partial(linear, x, w) for w in weights])
            _row(rows, "gemm", model, "bf16-linear", partial(timer.seconds, call),
                 matrix=name, tokens=m, in_features=k, out_features=n)
            if weights8:
                x8 = x.to(fp8)
                call8 = _cycling([partial(_scaled_mm, torch, x8, w, one) for w in weights8])
                _row(rows, "gemm", model, "fp8-scaled-mm", partial(timer.seconds, call8),
                     matrix=name, tokens=m, in_features=k, out_features=n)
    torch.cuda.empty_cache()


def _grouped_time(torch: Any, timer: Timer, x: Any, weights: list, offs: Any) -> float:
    grouped = getattr(torch, "_grouped_mm", None)
    if grouped is None:
        raise RuntimeError("torch._grouped_mm is not in this torch")
    calls = [partial(grouped, x, w.transpose(-2, -1), offs=offs) for w in weights]
    return timer.seconds(_cycling(calls))


def measure_grouped(torch: Any, timer: Timer, rows: list) -> None:
    for model in ("qwen3-coder-30b-a3b@4", "mixtral-8x7b@2"):
        s = SHAPES[model]
        g, top_k, h, inter = s["experts"], s["top_k"], s["hidden"], s["expert_inter"]
        for name, k, n in (("gate_up", h, 2 * inter), ("down", inter, h)):
            weights = _weights(torch, k, n, torch.bfloat16, groups=g)
            for tokens in GROUPED_TOKENS:
                routed = tokens * top_k
                per = [routed // g + (1 if i < routed % g else 0) for i in range(g)]
                offs = torch.tensor(list(_cumsum(per)), dtype=torch.int32, device="cuda")
                x = torch.randn(routed, k, dtype=torch.bfloat16, device="cuda")
                _row(rows, "grouped_gemm", model, "bf16-grouped-mm",
                     partial(_grouped_time, torch, timer, x, weights, offs), matrix=name,
                     tokens=tokens, routed=routed, groups=g, in_features=k, out_features=n)
            del weights
    torch.cuda.empty_cache()


def _cumsum(values: list[int]):
    total = 0
    for value in values:
        total += value
        yield total


def measure_copy(torch: Any, timer: Timer, rows: list) -> None:
    size = 2**30
    src = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    _row(rows, "hbm_copy", "-", "copy_", lambda: timer.seconds(lambda: dst.copy_(src)),
         bytes_moved=2 * size)


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=1)
        handle.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp makes it private; a result is for reading
    os.replace(tmp, path)


def measure(output: Path, sections: list[str]) -> None:
    import torch

    if not torch.cuda.is_available():
        print("gpu_kernels.py measure: no CUDA GPU visible to torch; nothing measured",
              file=sys.stderr)
        raise SystemExit(2)
    torch.backends.cuda.matmul.allow_tf32 = False
    timer = Timer(torch)
    rows: list = []
    payload = {"schema": "prefixsim-kernel-timings/1",
               "device_name": torch.cuda.get_device_name(0),
               "torch_version": str(torch.__version__), "cuda": str(torch.version.cuda),
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "method": "CUDA events; median of 5 runs of back-to-back calls (~20 ms "
                         "each) after warm-up; GEMM weights cycled over > 256 MiB",
               "rows": rows}
    steps = {"copy": measure_copy, "prefill": measure_prefill, "decode": measure_decode,
             "gemm": measure_gemm, "grouped": measure_grouped}
    with torch.inference_mode():
        for name in sections:
            started = time.perf_counter()
            print(f"== {name}", flush=True)
            try:
                steps[name](torch, timer, rows)
            except Exception as error:  # noqa: BLE001 - keep the other sections
                print(f"  section {name} stopped: {type(error).__name__}: {error}",
                      flush=True)
                rows.append({"kind": "section", "model": "-", "backend": name,
                             "error": f"{type(error).__name__}: {error}"[:300]})
            print(f"   ({time.perf_counter() - started:.1f} s)", flush=True)
            write_json(output, payload)


# ------------------------------------------------------------------------------ compare
def predicted_s(row: dict, gpu: str) -> float | None:
    """The per-operator roofline's time for a measured row (defaults, the row's dtypes)."""
    from prefixsim.costmodel.roofline import Roofline
    from prefixsim.presets import get_gpu, get_model

    name, tp = row["model"].split("@")
    params = {"weight_dtype_bytes": 1.0} if row["backend"].startswith("fp8") else {}
    ops = Roofline(get_model(name), get_gpu(gpu), int(tp), **params).ops
    kind = row["kind"]
    if kind == "prefill_attention":
        return (ops.prefill_attention_s(row["new"], row["cached"])
                + ops.attention_floor_s(True))
    if kind == "decode_attention":
        return (ops.attention_floor_s(False) + ops.decode_attention_fixed_s(row["batch"])
                + ops.decode_attention_s_per_context_token() * row["batch"] * row["context"])
    if kind == "gemm":
        return ops.gemm_s(row["tokens"], row["in_features"], row["out_features"])
    if kind == "grouped_gemm":
        groups = row["groups"] * (1.0 - (1.0 - row["routed"] / row["tokens"] / row["groups"])
                                  ** row["tokens"])
        return ops.grouped_gemm_s(groups, row["routed"], row["in_features"],
                                  row["out_features"])
    return None


ROW_FIELDS = {"prefill_attention": ("new", "cached"), "decode_attention": ("batch", "context"),
              "gemm": ("tokens", "in_features", "out_features"),
              "grouped_gemm": ("tokens", "routed", "groups", "in_features", "out_features"),
              "hbm_copy": ("bytes_moved",)}


def _refuse(message: str) -> None:
    print(f"gpu_kernels.py compare: {message}", file=sys.stderr)
    raise SystemExit(2)


def read_timings(path: Path) -> dict:
    """A `measure` file, checked: one line naming the file and field otherwise (exit 2)."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        _refuse(f"{path}: cannot read it ({error.strerror or error})")
    except ValueError as error:
        _refuse(f"{path}: not JSON ({error})")
    if not isinstance(payload, dict) or not isinstance(payload.get("rows"), list):
        _refuse(f"{path}: field rows: missing (not a `measure` file)")
    for key in ("device_name", "torch_version", "date"):
        if key not in payload:
            _refuse(f"{path}: field {key}: missing")
    for i, row in enumerate(payload["rows"]):
        if not isinstance(row, dict) or "kind" not in row:
            _refuse(f"{path}: rows[{i}].kind: missing")
        if "time_s" not in row:
            continue  # a row that recorded its error
        needed = ROW_FIELDS.get(row["kind"], ())
        if row["kind"] != "hbm_copy":
            needed = ("model", "backend", *needed)
        for key in ("time_s", *needed):
            value = row.get(key)
            if key in ("model", "backend"):
                if not isinstance(value, str) or (key == "model" and "@" not in value):
                    _refuse(f"{path}: rows[{i}].{key}: {value!r} is not a "
                            f"{'MODEL@TP name' if key == 'model' else 'name'}")
            elif not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                _refuse(f"{path}: rows[{i}].{key}: {value!r} is not a number >= 0")
    return payload


def compare(path: Path, gpu: str) -> None:
    payload = read_timings(path)
    print(f"{path}: {payload['device_name']}, torch {payload['torch_version']}, "
          f"{payload['date']}; roofline defaults on preset {gpu}")
    by_kind: dict[tuple[str, str], list[float]] = {}
    for row in payload["rows"]:
        if "time_s" not in row:
            continue
        if row["kind"] == "hbm_copy":
            rate = row["bytes_moved"] / row["time_s"]
            print(f"  hbm copy: {rate / 1e12:.2f} TB/s (read + write)")
            continue
        predicted = predicted_s(row, gpu)
        if predicted is None:
            continue
        error = predicted / row["time_s"] - 1.0
        by_kind.setdefault((row["kind"], row["backend"]), []).append(error)
        shape = {k: v for k, v in row.items()
                 if k not in ("kind", "model", "backend", "time_s")}
        print(f"  {row['kind']:<18} {row['model']:<22} {row['backend']:<16} "
              f"{json.dumps(shape, separators=(',', ':')):<72} measured "
              f"{row['time_s'] * 1e3:9.3f} ms  predicted {predicted * 1e3:9.3f} ms  "
              f"{error:+7.1%}")
    print("per kind: n, median signed error (predicted / measured - 1), median |error|")
    for (kind, backend), errors in by_kind.items():
        print(f"  {kind:<18} {backend:<16} n={len(errors):<3} "
              f"{statistics.median(errors):+7.1%} {statistics.median(map(abs, errors)):7.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="time the kernels on this machine's GPU")
    m.add_argument("-o", "--output", type=Path, required=True)
    m.add_argument("--sections", default="copy,prefill,decode,gemm,grouped")
    c = sub.add_parser("compare", help="measured vs the roofline's prediction")
    c.add_argument("path", type=Path)
    c.add_argument("--gpu", default="h200")
    args = parser.parse_args()
    if args.command == "measure":
        measure(args.output, args.sections.split(","))
    else:
        compare(args.path, args.gpu)


if __name__ == "__main__":
    main()
