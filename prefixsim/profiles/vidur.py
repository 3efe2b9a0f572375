"""Reading Vidur's public profiling data (docs/cost-models.md "Imported GPU profiles").

Vidur (microsoft/vidur, MIT) publishes kernel times measured on A100 and H100 GPUs: per
model `compute/<gpu>/<org>/<model>/mlp.csv` (every non-attention kernel of one layer over
token counts and TP degrees), attention grids (`attention.csv`), NCCL collectives by message
size and GPU count (`network/<node>/all_reduce.csv`, `send_recv.csv`) and vLLM's per-step
CPU overheads (`cpu_overheads*.csv`). This module finds those files under a folder, checks
their columns and values (a bad value is an InputError naming file, line and column), maps
Vidur's names onto prefixsim's (presets, GPUs, operators), merges duplicate grid points by
their median and converts milliseconds to seconds. Fitting and tables are vidur_import.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from prefixsim.errors import InputError
from prefixsim.presets import ModelSpec

VIDUR_REPO = "microsoft/vidur"
VIDUR_COMMIT = "7d47513363ec447a741ac5e47241580b47724fbf"
VIDUR_OLD_COMMIT = "acb95f6"
# files of the local copy taken from an older commit (../shared/gpu-measurements/README.md):
# local path -> (commit, path there); every other file is data/profiling/<path> at VIDUR_COMMIT
VIDUR_OLDER_FILES = {
    "compute/a100/meta-llama/Llama-2-70b-hf-attention-2024-05/attention.csv":
        (VIDUR_OLD_COMMIT, "data/profiling/a100/attention.csv"),
    "cpu_overheads_a100_2024-05.csv": (VIDUR_OLD_COMMIT, "data/profiling/a100/cpu_overheads.csv"),
}
# prefixsim preset -> Vidur model folder (org/name); Llama-3 has Llama-3.1's geometry
VIDUR_MODELS = {
    "llama-2-7b": "meta-llama/Llama-2-7b-hf",
    "llama-2-70b": "meta-llama/Llama-2-70b-hf",
    "codellama-34b": "codellama/CodeLlama-34b-Instruct-hf",
    "llama-3.1-8b": "meta-llama/Meta-Llama-3-8B",
    "llama-3.1-70b": "meta-llama/Meta-Llama-3-70B",
}
# prefixsim GPU preset -> (compute folder, single-node network folder, device name)
VIDUR_GPUS = {
    "a100-80g": ("a100", "a100_dgx", "NVIDIA A100-SXM4-80GB"),
    "h100-sxm": ("h100", "h100_dgx", "NVIDIA H100 80GB HBM3"),
}
# Vidur's mlp.csv operators -> prefixsim's (GEMM weights and element-wise kernels)
GEMM_OPS = {"attn_pre_proj": "qkv", "attn_post_proj": "o", "mlp_up_proj": "gate_up",
            "mlp_down_proj": "down"}
ELEMENTWISE_SOURCE = {"input_layernorm": "input_norm",
                      "post_attention_layernorm": "post_attention_norm", "attn_rope": "rope",
                      "mlp_act": "activation", "add": "residual_add", "emb": "embedding"}
GEOMETRY = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd")
CPU_PARTS = ("schedule_median", "prepare_inputs_e2e_median", "sampler_e2e_median",
             "process_model_outputs_median")


def find_root(folder: str | Path) -> Path:
    """The folder holding `compute/` (the given one, its `profiling/` or `data/profiling/`)."""
    base = Path(folder)
    for candidate in (base, base / "profiling", base / "data" / "profiling"):
        if (candidate / "compute").is_dir():
            return candidate
    raise InputError("no Vidur profiling data here (expected compute/ under it, its "
                     "profiling/ or data/profiling/)", file=str(folder))


def upstream_of(relative: str) -> tuple[str, str]:
    """(commit, path in microsoft/vidur) a file of the local copy came from."""
    return VIDUR_OLDER_FILES.get(relative, (VIDUR_COMMIT, f"data/profiling/{relative}"))


def read_csv(path: Path, columns: tuple[str, ...], numeric: tuple[str, ...] = ()) -> pd.DataFrame:
    """A CSV with `columns` present and `numeric` columns numbers on every row."""
    if not path.is_file():
        raise InputError("no such file", file=str(path))
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"not a readable CSV ({str(exc).splitlines()[0]})",
                         file=str(path)) from None
    for column in columns:
        if column not in frame.columns:
            raise InputError("missing column", file=str(path), line=1, field=column)
    check_numeric(frame, path, numeric)
    return frame


def check_numeric(frame: pd.DataFrame, path: Path, columns: tuple[str, ...]) -> None:
    """Make `columns` numbers, or raise naming the first bad row (file line = row + 2)."""
    for column in columns:
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna() | (values < 0)
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            value = frame[column].iloc[row]
            value = value.item() if hasattr(value, "item") else value  # -3, not np.int64(-3)
            raise InputError(f"not a number >= 0: {value!r}", file=str(path), line=row + 2,
                             field=column)
        frame[column] = values


@dataclass(frozen=True)
class MlpData:
    """One model's non-attention kernels at one TP: seconds by token count (index), one
    column per prefixsim operator (GEMM weights and element-wise kernels)."""

    path: Path
    times_s: pd.DataFrame
    geometry: dict[str, int]
    rows: int
    rows_used: int


def mlp_path(root: Path, gpu_dir: str, model_dir: str) -> Path:
    return root / "compute" / gpu_dir / model_dir / "mlp.csv"


def measured_models(root: Path, gpu_dir: str) -> list[str]:
    """Vidur model folders (org/name) with an mlp.csv for `gpu_dir`."""
    base = root / "compute" / gpu_dir
    return sorted(str(p.parent.relative_to(base)) for p in base.glob("*/*/mlp.csv"))


def read_mlp(path: Path, tp: int) -> MlpData:
    """The rows of `path` at `tp`, duplicates merged by their median."""
    medians = [f"time_stats.{op}.median" for op in GEMM_OPS]
    required = (*GEOMETRY, "num_tokens", "num_tensor_parallel_workers", *medians)
    frame = read_csv(path, required, required)
    check_numeric(frame, path, tuple(f"time_stats.{op}.median" for op in ELEMENTWISE_SOURCE
                                     if f"time_stats.{op}.median" in frame.columns))
    at_tp = frame[frame["num_tensor_parallel_workers"] == tp]
    if at_tp.empty:
        found = ", ".join(str(t) for t in sorted(frame["num_tensor_parallel_workers"].unique()))
        raise InputError(f"no rows at tp {tp} (measured: {found})", file=str(path),
                         field="num_tensor_parallel_workers")
    ops = {**GEMM_OPS, **ELEMENTWISE_SOURCE}
    columns = {f"time_stats.{src}.median": dst for src, dst in ops.items()
               if f"time_stats.{src}.median" in frame.columns}
    merged = at_tp.groupby("num_tokens")[list(columns)].median().rename(columns=columns)
    merged.index = merged.index.astype(int)
    geometry = {g: int(frame[g].iloc[0]) for g in GEOMETRY}
    geometry["use_gated_mlp"] = bool(str(frame["use_gated_mlp"].iloc[0]) == "True") \
        if "use_gated_mlp" in frame.columns else True
    return MlpData(path, merged * 1e-3, geometry, len(frame), len(at_tp))


def check_geometry(data: MlpData, spec: ModelSpec) -> None:
    """Refuse a file whose model is not the preset's (heads, hidden, intermediate)."""
    want = {"n_head": spec.num_heads, "n_kv_head": spec.num_kv_heads,
            "n_embd": spec.hidden_size, "n_expanded_embd": spec.intermediate_size}
    for key, value in want.items():
        if data.geometry[key] != value:
            raise InputError(f"{data.geometry[key]} does not match {spec.name}'s {value}",
                             file=str(data.path), line=2, field=key)


@dataclass(frozen=True)
class AttentionData:
    """Attention grids in seconds: `prefill` (chunk, cached, time_s), `decode` (batch,
    context, time_s), in the per-GPU geometry of the measured model at its TP."""

    path: Path
    prefill: pd.DataFrame
    decode: pd.DataFrame
    num_heads: int
    num_kv_heads: int
    head_dim: int
    tp: int
    rows: int


def attention_path(root: Path, gpu_dir: str) -> Path | None:
    found = sorted((root / "compute" / gpu_dir).glob("*/*/attention.csv"))
    return found[0] if found else None


def read_attention(path: Path) -> AttentionData:
    geometry = ("n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers")
    frame = read_csv(path, (*geometry, "is_prefill", "batch_size", "prefill_chunk_size",
                            "kv_cache_size", "time_stats.attn_prefill.median",
                            "time_stats.attn_decode.median"),
                     (*geometry, "batch_size", "prefill_chunk_size", "kv_cache_size"))
    prefill_rows = frame["is_prefill"].astype(str) == "True"
    for column, mask in (("time_stats.attn_prefill.median", prefill_rows),
                         ("time_stats.attn_decode.median", ~prefill_rows)):
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = mask & (values.isna() | (values <= 0))
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise InputError("not a time > 0", file=str(path), line=row + 2, field=column)
        frame[column] = values
    prefill = (frame[prefill_rows].groupby(["prefill_chunk_size", "kv_cache_size"])
               ["time_stats.attn_prefill.median"].median().rename("time_s") * 1e-3)
    decode = (frame[~prefill_rows].groupby(["batch_size", "kv_cache_size"])
              ["time_stats.attn_decode.median"].median().rename("time_s") * 1e-3)
    first = frame.iloc[0]
    tp = int(first["num_tensor_parallel_workers"])
    heads, kv_heads = int(first["n_q_head"]), int(first["n_kv_head"])
    return AttentionData(path, prefill.reset_index(), decode.reset_index(), heads // tp,
                         max(1, kv_heads // tp), int(first["n_embd"]) // heads, tp, len(frame))


@dataclass(frozen=True)
class CollectiveData:
    """One collective's seconds by message bytes, per GPU count (single-node rows)."""

    path: Path
    by_gpus: dict[int, pd.Series]
    rows: int
    rows_used: int


def read_collective(root: Path, net_dir: str, name: str) -> CollectiveData:
    """`network/<net_dir>/<name>.csv`: `size` is bytes; rows with every GPU in one node."""
    path = root / "network" / net_dir / f"{name}.csv"
    median = f"time_stats.{name}.median"
    frame = read_csv(path, ("num_workers", "devices_per_node", "size", median),
                     ("num_workers", "devices_per_node", "size", median))
    if name == "send_recv":  # a pair: two workers on one node
        node = frame[(frame["devices_per_node"] == 2) & (frame["num_workers"] == 2)]
    else:
        node = frame[frame["devices_per_node"] == frame["num_workers"]]
    by_gpus = {int(n): group.groupby("size")[median].median() * 1e-3
               for n, group in node.groupby("num_workers")}
    return CollectiveData(path, by_gpus, len(frame), len(node))


def cpu_path(root: Path) -> Path | None:
    found = sorted(root.glob("cpu_overhead*.csv")) or sorted(root.glob("*/cpu_overhead*.csv"))
    return found[0] if found else None


def read_cpu(path: Path) -> pd.DataFrame:
    """Every row's per-step CPU seconds (`time_s`: the four medians summed), with
    model_name, tensor_parallel_degree and batch_size."""
    frame = read_csv(path, ("model_name", "batch_size", "tensor_parallel_degree", *CPU_PARTS),
                     ("batch_size", "tensor_parallel_degree", *CPU_PARTS))
    frame["time_s"] = frame[list(CPU_PARTS)].sum(axis=1) * 1e-3
    return frame
