"""A tiny folder in the layout of Vidur's profiling data, made up by the tests (no copied
data): times follow simple formulas so imported tables have known answers.

- mlp.csv of Meta-Llama-3-8B on A100 (the import target) and of two donors, Llama-2-7b and
  CodeLlama-34b, on A100 and H100 with H100 = 0.5 x A100 for GEMMs and 0.7 x A100 for
  element-wise kernels; TP 1 and 2; one duplicated row (tokens 8, TP 1) at 0.5x and 1.5x
  the formula, whose median is the formula.
- A100 attention of Llama-2-70B at TP 2 (64 query, 8 KV heads, hidden 8192).
- all_reduce and send_recv for a100_dgx and h100_dgx, with multi-node rows to be dropped.
- CPU overheads on A100 for Llama-2-7b at TP 1 only.
"""

from __future__ import annotations

import csv
from pathlib import Path

TOKENS = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)
GEMMS = {"attn_pre_proj": 0.010, "attn_post_proj": 0.006, "mlp_up_proj": 0.020,
         "mlp_down_proj": 0.012}
ELEMENTWISE = ("emb", "input_layernorm", "attn_rope", "post_attention_layernorm", "mlp_act",
               "add")
MODELS = {"meta-llama/Meta-Llama-3-8B": (32, 8, 4096, 14336, 128256),
          "meta-llama/Llama-2-7b-hf": (32, 32, 4096, 11008, 32768),
          "codellama/CodeLlama-34b-Instruct-hf": (64, 8, 8192, 22016, 32768)}
GPU_FACTOR = {"a100": (1.0, 1.0), "h100": (0.5, 0.7)}  # (GEMM, element-wise) x A100


def gemm_ms(op: str, tokens: int, tp: int) -> float:
    return GEMMS[op] + 0.001 * tokens / tp


def elementwise_ms(tokens: int, tp: int) -> float:
    return 0.002 + 0.0001 * tokens / tp


def _write(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _stats(median: float) -> list[float]:
    return [median * 0.98, median * 1.05, median, median, median * 0.01]


def write_mlp(path: Path, geometry: tuple[int, ...], gpu: str) -> None:
    ops = [*GEMMS, *ELEMENTWISE]
    header = [f"time_stats.{op}.{s}" for op in ops for s in ("min", "max", "mean", "median",
                                                                "std")]
    header += ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size",
               "use_gated_mlp", "num_tokens", "num_tensor_parallel_workers"]
    g, e = GPU_FACTOR[gpu]
    rows = []
    for tp in (1, 2):
        for tokens in TOKENS:
            copies = (0.5, 1.5) if (tokens, tp) == (8, 1) else (1.0,)
            for scale in copies:
                row: list[object] = []
                for op in ops:
                    ms = g * gemm_ms(op, tokens, tp) if op in GEMMS else (
                        e * elementwise_ms(tokens, tp))
                    row += _stats(ms * scale)
                rows.append(row + [*geometry, True, tokens, tp])
    _write(path, header, rows)


def prefill_ms(chunk: int, cached: int) -> float:
    return 0.010 + 1e-7 * chunk * (cached + chunk / 2)


def decode_ms(batch: int, context: int) -> float:
    return 0.012 + 2e-6 * batch * context


def write_attention(path: Path) -> None:
    header = ["n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "is_prefill",
              "batch_size", "prefill_chunk_size", "kv_cache_size",
              "time_stats.attn_prefill.median", "time_stats.attn_decode.median"]
    rows: list[list[object]] = []
    for chunk in (64, 128, 256):
        for cached in (0, 32, 64, 128, 256, 512):
            rows.append([8192, 64, 8, 2, True, 1, chunk, cached, prefill_ms(chunk, cached), ""])
    for batch in (1, 2, 4, 8):
        for context in (32, 64, 128, 256, 512, 1024):
            rows.append([8192, 64, 8, 2, False, batch, 0, context, "",
                         decode_ms(batch, context)])
    _write(path, header, rows)


def collective_ms(num_bytes: int, gpus: int) -> float:
    return 0.02 + num_bytes * 1e-8 * gpus / 2


def write_network(folder: Path) -> None:
    sizes = [2048 * 2**i for i in range(10)]
    header = ["", "time_stats.{}.min", "time_stats.{}.max", "time_stats.{}.mean",
              "time_stats.{}.median", "time_stats.{}.std", "rank", "num_workers", "size",
              "collective", "devices_per_node", "max_devices_per_node"]
    for name, layouts in (("all_reduce", ((2, 2), (4, 4), (8, 8), (4, 2))),
                          ("send_recv", ((2, 2), (2, 1)))):
        rows = []
        for gpus, per_node in layouts:
            for size in sizes:
                ms = collective_ms(size, gpus) * (3 if per_node != gpus else 1)
                rows.append([len(rows), *_stats(ms), 0, gpus, size, name, per_node, 8])
        _write(folder / f"{name}.csv", [h.format(name) for h in header], rows)


def cpu_ms(batch: int) -> float:
    return 1.0 + 0.04 * batch


CPU_BATCHES = (8, 16, 24, 32, 48, 64, 96, 128)


def write_cpu(path: Path, models: tuple[tuple[str, int], ...] = (
        ("meta-llama/Llama-2-7b-hf", 1),)) -> None:
    """CPU overheads of each (model name, TP) at CPU_BATCHES, cpu_ms(batch) in four parts."""
    parts = ("schedule", "prepare_inputs_e2e", "sampler_e2e", "process_model_outputs")
    header = ["", *(f"{p}_median" for p in parts), "model_name", "batch_size",
              "tensor_parallel_degree"]
    rows = [[0, *(cpu_ms(b) / 4 for _ in parts), model, b, tp]
            for model, tp in models for b in CPU_BATCHES]
    for i, row in enumerate(rows):
        row[0] = i
    _write(path, header, rows)


def write_vidur_excerpt(root: Path) -> Path:
    """The folder of the module docstring under `root` (returned)."""
    compute = root / "compute"
    write_mlp(compute / "a100" / "meta-llama/Meta-Llama-3-8B" / "mlp.csv",
              MODELS["meta-llama/Meta-Llama-3-8B"], "a100")
    for donor in ("meta-llama/Llama-2-7b-hf", "codellama/CodeLlama-34b-Instruct-hf"):
        for gpu in ("a100", "h100"):
            write_mlp(compute / gpu / donor / "mlp.csv", MODELS[donor], gpu)
    write_attention(compute / "a100" / "meta-llama" / "Llama-2-70b-hf-attention-2024-05"
                    / "attention.csv")
    for node in ("a100_dgx", "h100_dgx"):
        write_network(root / "network" / node)
    write_cpu(root / "cpu_overheads_a100_2024-05.csv")
    return root
