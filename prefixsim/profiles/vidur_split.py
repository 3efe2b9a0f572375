"""What an import of Vidur's data reads, borrows and holds out (docs/cost-models.md
"Imported GPU profiles"): `measure` returns every measurement the profile is built from,
split into the points its tables keep (train) and the seeded 20% it is judged on (test).

Held out: token counts of the layer kernels (the same counts for every kernel, so whole
layers are held out; the smallest and largest count are always kept), attention grid points
(each row's first and last point kept), message sizes per GPU count, CPU batch sizes (ends
kept). Parts the target GPU lacks are refused unless `borrow` names the GPU to scale them
from (vidur_borrow.py); the CPU table comes from the model's own rows or those of the
measured model nearest in shape, marked as borrowed either way it differs.
Building the profile from the split is vidur_import.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from prefixsim.costmodel.operators import LayerDims
from prefixsim.costmodel.profile_parts import Borrowed, SourceFile
from prefixsim.errors import InputError
from prefixsim.presets import ModelSpec
from prefixsim.profiles.fit import holdout_split
from prefixsim.profiles.vidur import (
    VIDUR_GPUS,
    VIDUR_MODELS,
    AttentionData,
    CollectiveData,
    MlpData,
    attention_path,
    check_geometry,
    cpu_path,
    find_root,
    mlp_path,
    read_attention,
    read_collective,
    read_cpu,
    read_mlp,
    upstream_of,
)
from prefixsim.profiles.vidur_borrow import RULES, BorrowRule, donor_points, leave_one_model_out


@dataclass(frozen=True)
class ImportOptions:
    """What to import: a model preset on a GPU preset at one TP, and the choices."""

    model: str
    gpu: str
    tp: int
    seed: int = 0
    holdout_fraction: float = 0.2
    borrow: str | None = None  # GPU preset to scale missing parts from
    cpu_overhead: bool = True  # False: leave the CPU table out (the run's default applies)


@dataclass
class Measured:
    """The split measurements (seconds) of one import."""

    root: Path
    compute: MlpData
    tokens_train: np.ndarray
    tokens_test: np.ndarray
    attention: AttentionData
    prefill_train: pd.DataFrame
    prefill_test: pd.DataFrame
    decode_train: pd.DataFrame
    decode_test: pd.DataFrame
    collectives: dict[str, dict[int, tuple[pd.Series, pd.Series, pd.Series]]]
    cpu: tuple[pd.Series, pd.Series, pd.Series] | None  # train, test, all (by batch size)
    cpu_measured_tp: int | None = None
    files: list[SourceFile] = field(default_factory=list)
    borrowed: list[Borrowed] = field(default_factory=list)
    borrow_heldout: dict[str, dict] = field(default_factory=dict)


def _relative(root: Path, path: Path) -> str:
    return str(path.relative_to(root))


def _source_file(root: Path, path: Path, rows: int, rows_used: int) -> SourceFile:
    """A file's record: its path here, rows, and where upstream it came from."""
    relative = _relative(root, path)
    commit, upstream = upstream_of(relative)
    return SourceFile(path=relative, rows=rows, rows_used=rows_used, upstream_commit=commit,
                      upstream_path=upstream)


def _split_series(series: pd.Series, fraction: float, rng: np.random.Generator):
    train, test = holdout_split(len(series), fraction, rng, keep=[0, len(series) - 1])
    return series.iloc[train], series.iloc[test], series


def _split_grid(frame: pd.DataFrame, key: str, x: str, fraction: float,
                rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    frame = frame.sort_values([key, x]).reset_index(drop=True)
    ends = frame.groupby(key)[x].agg(["idxmin", "idxmax"])
    keep = sorted(set(ends["idxmin"]) | set(ends["idxmax"]))
    train, test = holdout_split(len(frame), fraction, rng, keep=keep)
    return frame.iloc[train], frame.iloc[test]


def _other_gpu(options: ImportOptions, missing: list[str], root: Path) -> str:
    """The GPU to borrow from, or the refusal that names what is missing."""
    if options.borrow is None:
        others = ", ".join(g for g in VIDUR_GPUS if g != options.gpu)
        hint = " (or --no-cpu-overhead)" if all(m.startswith("CPU") for m in missing) else ""
        raise InputError(f"no {options.gpu} measurements of {'; '.join(missing)}: pass "
                         f"--borrow GPU ({others}) to scale another GPU's by the rules of "
                         f"docs/cost-models.md \"Borrow rules\"{hint}", file=str(root))
    if options.borrow not in VIDUR_GPUS or options.borrow == options.gpu:
        valid = ", ".join(g for g in VIDUR_GPUS if g != options.gpu)
        raise InputError(f"cannot borrow from {options.borrow!r} (valid: {valid})",
                         field="--borrow")
    return options.borrow


def measure(folder: str | Path, options: ImportOptions, spec: ModelSpec,
            dims_at_tp: LayerDims) -> Measured:
    """Read, borrow and split everything an import of `options` needs (see the module
    docstring); `dims_at_tp` are the target's per-GPU layer shapes."""
    root = find_root(folder)
    if options.model not in VIDUR_MODELS:
        raise InputError(f"no Vidur measurements map to {options.model!r} (valid: "
                         f"{', '.join(VIDUR_MODELS)})", field="--model")
    if options.gpu not in VIDUR_GPUS:
        raise InputError(f"no Vidur measurements map to {options.gpu!r} (valid: "
                         f"{', '.join(VIDUR_GPUS)})", field="--gpu")
    model_dir = VIDUR_MODELS[options.model]
    gpu_dir, net_dir, _ = VIDUR_GPUS[options.gpu]
    rng = np.random.default_rng(options.seed)
    frac = options.holdout_fraction
    missing = []
    own_mlp = mlp_path(root, gpu_dir, model_dir)
    own_attention = attention_path(root, gpu_dir)
    cpu_file = cpu_path(root) if options.cpu_overhead else None
    if options.cpu_overhead and cpu_file is None:
        raise InputError("no cpu_overhead*.csv here; pass --no-cpu-overhead",
                         file=str(root), field="--cpu-overhead")
    cpu_gpu = next((d for d, _, _ in VIDUR_GPUS.values() if cpu_file and d in cpu_file.name),
                   "a100")
    if not own_mlp.is_file():
        missing.append(f"{model_dir} (compute/{gpu_dir}/{model_dir}/mlp.csv)")
    if own_attention is None:
        missing.append("attention")
    if options.cpu_overhead and cpu_gpu != gpu_dir:
        missing.append(f"CPU overheads ({cpu_file.name if cpu_file else ''} is {cpu_gpu}'s)")
    borrow_dir = VIDUR_GPUS[_other_gpu(options, missing, root)][0] if missing else None
    files: list[SourceFile] = []
    borrowed: list[Borrowed] = []
    borrow_heldout: dict[str, dict] = {}
    rule: BorrowRule | None = None
    if borrow_dir is not None:
        points = donor_points(root, borrow_dir, gpu_dir, exclude=model_dir)
        rule = BorrowRule.from_points(points)
        borrow_heldout = leave_one_model_out(points)
        donors = ", ".join(rule.donors)
    # ------------------------------------------------------------------ layer kernels
    path = own_mlp if own_mlp.is_file() else mlp_path(root, borrow_dir, model_dir)
    compute = read_mlp(path, options.tp)
    check_geometry(compute, spec)
    files.append(_source_file(root, path, compute.rows, compute.rows_used))
    if not own_mlp.is_file():
        assert rule is not None
        compute = rule.scale_mlp(compute, dims_at_tp)
        borrowed.append(Borrowed(
            part="gemm, elementwise", source=f"{borrow_dir} {model_dir}",
            rule=f"{RULES['gemm']}; {RULES['elementwise']} (donors: {donors})"))
    tokens = compute.times_s.index.to_numpy()
    train, test = holdout_split(len(tokens), frac, rng, keep=[0, len(tokens) - 1])
    # ------------------------------------------------------------------- attention
    att_path = own_attention or attention_path(root, borrow_dir)
    if att_path is None:
        raise InputError("no attention.csv for any GPU here", file=str(root))
    attention = read_attention(att_path)
    files.append(_source_file(root, att_path, attention.rows, attention.rows))
    if own_attention is None:
        assert rule is not None
        attention = _scale_attention(attention, rule)
        borrowed.append(Borrowed(
            part="attention", source=f"{borrow_dir} {_relative(root, att_path)}",
            rule=f"prefill: {RULES['prefill_attention']}; decode: "
                 f"{RULES['decode_attention']} (donors: {donors})"))
    if (attention.num_heads, attention.num_kv_heads, attention.head_dim) != (
            dims_at_tp.num_heads, dims_at_tp.num_kv_heads, dims_at_tp.head_dim):
        borrowed.append(Borrowed(
            part="attention heads",
            source=f"grids of {attention.num_heads} query / {attention.num_kv_heads} KV heads "
                   f"per GPU, head dim {attention.head_dim}, scaled to "
                   f"{dims_at_tp.num_heads} / {dims_at_tp.num_kv_heads}, head dim "
                   f"{dims_at_tp.head_dim}",
            rule="time above the floor scales with query heads x head dim (prefill) and KV "
                 "heads x head dim (decode)"))
    prefill_train, prefill_test = _split_grid(attention.prefill, "prefill_chunk_size",
                                              "kv_cache_size", frac, rng)
    decode_train, decode_test = _split_grid(attention.decode, "batch_size", "kv_cache_size",
                                            frac, rng)
    # ----------------------------------------------------------------- collectives
    collectives: dict[str, dict[int, tuple[pd.Series, pd.Series, pd.Series]]] = {}
    for name in ("all_reduce", "send_recv"):
        data: CollectiveData = read_collective(root, net_dir, name)
        files.append(_source_file(root, data.path, data.rows, data.rows_used))
        collectives[name] = {n: _split_series(s, frac, rng)
                             for n, s in sorted(data.by_gpus.items())}
    # ----------------------------------------------------------------------- CPU
    cpu = None
    cpu_tp = None
    if cpu_file is not None:
        cpu, cpu_tp, note = _cpu_rows(root, cpu_file, cpu_gpu, model_dir, compute, options)
        files.append(_source_file(root, cpu_file, note[0], note[1]))
        if note[2]:
            borrowed.append(Borrowed(part="cpu overhead", source=note[2],
                                     rule="rows of the nearest measured model (hidden, then "
                                          "intermediate size, then TP); CPU time is the host's"))
        cpu = _split_series(cpu, frac, rng)
    return Measured(root, compute, tokens[train], tokens[test], attention, prefill_train,
                    prefill_test, decode_train, decode_test, collectives, cpu, cpu_tp, files,
                    borrowed, borrow_heldout)


def _scale_attention(data: AttentionData, rule: BorrowRule) -> AttentionData:
    """The other GPU's attention times the donors' ratios at the same work (module doc)."""
    prefill = data.prefill.copy()
    n, c = prefill["prefill_chunk_size"], prefill["kv_cache_size"]
    flops = 4.0 * data.num_heads * data.head_dim * (n * c + n * (n + 1) / 2)
    prefill["time_s"] = prefill["time_s"] * rule.prefill_ratio(flops.to_numpy())
    decode = data.decode.copy()
    kv_bytes = (decode["batch_size"] * decode["kv_cache_size"] * 2 * data.num_kv_heads
                * data.head_dim * 2)
    decode["time_s"] = decode["time_s"] * rule.decode_ratio(kv_bytes.to_numpy())
    return AttentionData(data.path, prefill, decode, data.num_heads, data.num_kv_heads,
                         data.head_dim, data.tp, data.rows)


def _cpu_rows(root: Path, path: Path, cpu_gpu: str, model_dir: str, compute: MlpData,
              options: ImportOptions) -> tuple[pd.Series, int, tuple[int, int, str]]:
    """CPU seconds by batch size for the target, the TP measured, (file rows, rows used,
    what was borrowed)."""
    raw = read_cpu(path)
    frame = (raw.groupby(["model_name", "tensor_parallel_degree", "batch_size"])["time_s"]
             .median().reset_index())
    names = sorted(frame["model_name"].unique())
    chosen = model_dir
    if model_dir not in names:
        def distance(name: str) -> tuple[int, int, int]:
            geometry = read_mlp(mlp_path(root, cpu_gpu, name), 1).geometry \
                if mlp_path(root, cpu_gpu, name).is_file() else None
            if geometry is None:
                return (10**9, 10**9, 10**9)
            tps = frame[frame["model_name"] == name]["tensor_parallel_degree"]
            return (abs(geometry["n_embd"] - compute.geometry["n_embd"]),
                    abs(geometry["n_expanded_embd"] - compute.geometry["n_expanded_embd"]),
                    int(min(abs(tps - options.tp))))
        chosen = min(names, key=distance)
    rows = frame[frame["model_name"] == chosen]
    tps = sorted(rows["tensor_parallel_degree"].unique(), key=lambda t: (abs(t - options.tp), t))
    measured_tp = int(tps[0])
    rows = rows[rows["tensor_parallel_degree"] == measured_tp]
    used = int(((raw["model_name"] == chosen)
                & (raw["tensor_parallel_degree"] == measured_tp)).sum())
    notes = []
    if chosen != model_dir:
        notes.append(f"{chosen}")
    if measured_tp != options.tp:
        notes.append(f"measured at tp {measured_tp}")
    if cpu_gpu != VIDUR_GPUS[options.gpu][0]:
        notes.append(f"{cpu_gpu} host")
    series = rows.set_index("batch_size")["time_s"].sort_index()
    series.index = series.index.astype(int)
    return series, measured_tp, (len(raw), used, ", ".join(notes))
