"""Vidur imports at their edges, on folders the tests write (vidur_excerpt.py): where the
data may sit, every refusal word for word, units and layouts of each reader, the borrow
rule's curves and its leave-one-model-out error by hand, which CPU rows a model without its
own takes, and what the provenance says. Known answers throughout; no shared data."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from vidur_excerpt import (
    CPU_BATCHES,
    MODELS,
    TOKENS,
    collective_ms,
    cpu_ms,
    decode_ms,
    prefill_ms,
    write_attention,
    write_cpu,
    write_mlp,
    write_network,
    write_vidur_excerpt,
)

from prefixsim.costmodel.operators import Gemm, LayerDims
from prefixsim.errors import InputError
from prefixsim.presets import get_model
from prefixsim.profiles.fit import fit_relative
from prefixsim.profiles.vidur import (
    VIDUR_COMMIT,
    VIDUR_OLD_COMMIT,
    cpu_path,
    find_root,
    read_attention,
    read_collective,
    read_cpu,
    read_csv,
    read_mlp,
    upstream_of,
)
from prefixsim.profiles.vidur_blocks import (
    _rows_out,
    _top,
    other_model_gemms,
    top_range,
    whole_rows,
)
from prefixsim.profiles.vidur_borrow import (
    RULES,
    BorrowRule,
    _running,
    leave_one_model_out,
    size_columns,
    source_dims,
)
from prefixsim.profiles.vidur_import import _dims, import_vidur, validate_profile
from prefixsim.profiles.vidur_split import ImportOptions, _scale_attention, measure

A100_8B = ImportOptions("llama-3.1-8b", "a100-80g", 1)
ATTENTION = "compute/{}/meta-llama/Llama-2-70b-hf-attention-2024-05/attention.csv"
CPU_FILE = "cpu_overheads_a100_2024-05.csv"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return write_vidur_excerpt(tmp_path_factory.mktemp("vidur"))


@pytest.fixture
def excerpt(pristine, tmp_path):
    """A fresh copy of the excerpt a test may change."""
    return Path(shutil.copytree(pristine, tmp_path / "v"))


def _message(info) -> str:
    return str(info.value)


# ---------------------------------------------------------------------- where and what


@pytest.mark.parametrize("under", ["", "profiling", "data/profiling"])
def test_find_root_accepts_the_three_layouts(tmp_path, under):
    root = tmp_path / under if under else tmp_path
    (root / "compute").mkdir(parents=True)
    assert find_root(tmp_path) == root
    assert find_root(str(tmp_path)) == root


def test_find_root_refusal(tmp_path):
    with pytest.raises(InputError) as info:
        find_root(tmp_path)
    assert _message(info) == (f"{tmp_path}: no Vidur profiling data here (expected compute/ "
                              "under it, its profiling/ or data/profiling/)")


def test_upstream_of_names_the_commit_each_file_came_from():
    assert upstream_of(ATTENTION.format("a100")) == (VIDUR_OLD_COMMIT,
                                                     "data/profiling/a100/attention.csv")
    assert upstream_of(CPU_FILE) == (VIDUR_OLD_COMMIT, "data/profiling/a100/cpu_overheads.csv")
    assert upstream_of("network/a100_dgx/all_reduce.csv") == (
        VIDUR_COMMIT, "data/profiling/network/a100_dgx/all_reduce.csv")


def test_read_csv_refusals(tmp_path):
    path = tmp_path / "t.csv"
    with pytest.raises(InputError) as info:
        read_csv(path, ("a",))
    assert _message(info) == f"{path}: no such file"
    path.write_bytes(b"\xff\xfe\x00a,b\n")
    with pytest.raises(InputError) as info:
        read_csv(path, ("a",))
    assert _message(info).startswith(f"{path}: not a readable CSV ('utf-8' codec can't decode")
    assert "\n" not in _message(info) and _message(info).endswith(")")
    path.write_text("")
    with pytest.raises(InputError) as info:
        read_csv(path, ("a",))
    assert _message(info) == f"{path}: not a readable CSV (No columns to parse from file)"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(InputError) as info:
        read_csv(path, ("a", "c"))
    assert _message(info) == f"{path}:1: c: missing column"
    path.write_text("a,b\n1,2\n3,x\n")
    with pytest.raises(InputError) as info:
        read_csv(path, ("a", "b"), ("a", "b"))
    assert _message(info) == f"{path}:3: b: not a number >= 0: 'x'"
    path.write_text("a,b\n1,2\n-3,4\n")
    with pytest.raises(InputError) as info:
        read_csv(path, ("a", "b"), ("a", "b"))
    assert _message(info) == f"{path}:3: a: not a number >= 0: -3"
    assert read_csv(path, ("a",))["a"].tolist() == [1, -3]  # only `numeric` is checked


def test_read_mlp_gating_and_tp_refusal(excerpt):
    path = excerpt / "compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv"
    assert read_mlp(path, 1).geometry == {"n_head": 32, "n_kv_head": 8, "n_embd": 4096,
                                          "n_expanded_embd": 14336, "use_gated_mlp": True}
    frame = pd.read_csv(path)
    frame.assign(use_gated_mlp=False).to_csv(path, index=False)
    assert read_mlp(path, 1).geometry["use_gated_mlp"] is False
    frame.drop(columns="use_gated_mlp").to_csv(path, index=False)
    assert read_mlp(path, 1).geometry["use_gated_mlp"] is True  # Vidur's older files: gated
    with pytest.raises(InputError) as info:
        read_mlp(path, 4)
    assert _message(info) == (f"{path}: num_tensor_parallel_workers: no rows at tp 4 "
                              "(measured: 1, 2)")


def test_read_attention_units_heads_and_rows(excerpt):
    data = read_attention(excerpt / ATTENTION.format("a100"))
    prefill = data.prefill.set_index(["prefill_chunk_size", "kv_cache_size"])["time_s"]
    decode = data.decode.set_index(["batch_size", "kv_cache_size"])["time_s"]
    assert prefill.loc[(128, 64)] == pytest.approx(prefill_ms(128, 64) * 1e-3)
    assert decode.loc[(4, 256)] == pytest.approx(decode_ms(4, 256) * 1e-3)
    assert (len(prefill), len(decode), data.rows) == (18, 24, 42)
    # Llama-2-70B at TP 2: 64 / 2 query heads, 8 / 2 KV heads, 8192 / 64 per head
    assert (data.num_heads, data.num_kv_heads, data.head_dim, data.tp) == (32, 4, 128, 2)


@pytest.mark.parametrize("row, column, value, message", [
    (2, "time_stats.attn_prefill.median", "0", "not a time > 0"),
    (2, "time_stats.attn_prefill.median", "", "not a time > 0"),
    (2, "time_stats.attn_prefill.median", "slow", "not a time > 0"),
    (20, "time_stats.attn_decode.median", "0", "not a time > 0"),
    (1, "n_embd", "wide", "not a number >= 0: 'wide'"),
    (3, "kv_cache_size", "many", "not a number >= 0: 'many'"),
])
def test_read_attention_refusals_name_line_and_column(excerpt, row, column, value, message):
    path = excerpt / ATTENTION.format("a100")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[row, column] = value
    frame.to_csv(path, index=False)
    with pytest.raises(InputError) as info:
        read_attention(path)
    assert _message(info) == f"{path}:{row + 2}: {column}: {message}"


def test_read_attention_needs_both_time_columns(excerpt):
    path = excerpt / ATTENTION.format("a100")
    pd.read_csv(path).drop(columns="time_stats.attn_decode.median").to_csv(path, index=False)
    with pytest.raises(InputError) as info:
        read_attention(path)
    assert _message(info) == f"{path}:1: time_stats.attn_decode.median: missing column"


def test_read_collective_keeps_single_node_rows_in_seconds(excerpt):
    """all_reduce: 2, 4 and 8 GPUs each in one node (4 GPUs over 2 nodes dropped);
    send_recv: a pair in one node only, not the pair across two nodes (3x slower) nor four
    GPUs of one node."""
    net = excerpt / "network" / "a100_dgx"
    frame = pd.read_csv(net / "send_recv.csv")
    four = frame[frame["devices_per_node"] == 2].assign(num_workers=4, devices_per_node=4)
    pd.concat([frame, four]).to_csv(net / "send_recv.csv", index=False)
    reduce = read_collective(excerpt, "a100_dgx", "all_reduce")
    assert sorted(reduce.by_gpus) == [2, 4, 8] and (reduce.rows, reduce.rows_used) == (40, 30)
    assert reduce.by_gpus[4].loc[4096] == pytest.approx(collective_ms(4096, 4) * 1e-3)
    pair = read_collective(excerpt, "a100_dgx", "send_recv")
    assert sorted(pair.by_gpus) == [2] and (pair.rows, pair.rows_used) == (30, 10)
    assert pair.by_gpus[2].to_numpy() == pytest.approx(
        [collective_ms(s, 2) * 1e-3 for s in pair.by_gpus[2].index])


def test_cpu_files_found_at_the_root_or_one_folder_down(excerpt):
    assert cpu_path(excerpt) == excerpt / CPU_FILE
    (excerpt / "cpu").mkdir()
    (excerpt / CPU_FILE).rename(excerpt / "cpu" / "cpu_overheads.csv")
    assert cpu_path(excerpt) == excerpt / "cpu" / "cpu_overheads.csv"
    (excerpt / "cpu" / "cpu_overheads.csv").unlink()
    assert cpu_path(excerpt) is None


def test_read_cpu_sums_the_four_parts_in_seconds(excerpt):
    path = excerpt / CPU_FILE
    frame = read_cpu(path)
    assert frame["time_s"].to_numpy() == pytest.approx([cpu_ms(b) * 1e-3 for b in CPU_BATCHES])
    raw = pd.read_csv(path, dtype=str)
    raw.loc[1, "batch_size"] = "sixteen"
    raw.to_csv(path, index=False)
    with pytest.raises(InputError) as info:
        read_cpu(path)
    assert _message(info) == f"{path}:3: batch_size: not a number >= 0: 'sixteen'"


# -------------------------------------------------------------------------- borrowing


def test_source_dims_and_size_columns_by_hand():
    dims = LayerDims(name="t", num_layers=1, hidden_size=8, num_heads=2, num_kv_heads=1,
                     head_dim=4, intermediate_size=16, vocab_size=1)
    # qkv 8 x (2x4 + 2x1x4), o 8 x 8, gate_up 8 x 2x16, down 16 x 8; norms 8 wide, rope
    # (2 + 1) x 4, the activation both halves
    assert size_columns(dims) == {"qkv": 128, "o": 64, "gate_up": 256, "down": 128,
                                  "input_norm": 8, "post_attention_norm": 8,
                                  "residual_add": 8, "embedding": 8, "rope": 12,
                                  "activation": 32}
    ungated = size_columns(dims, gated=False)
    assert ungated["gate_up"] == 128 and ungated["activation"] == 16
    data = SimpleNamespace(geometry={"n_head": 64, "n_kv_head": 8, "n_embd": 8192,
                                     "n_expanded_embd": 28672})
    at8 = source_dims(data, 8)
    assert (at8.num_heads, at8.num_kv_heads, at8.head_dim, at8.intermediate_size) == (
        8, 1, 128, 3584)
    assert source_dims(data, 16).num_kv_heads == 1  # replicated, never 0


def _rule(**curves) -> BorrowRule:
    flat = (np.array([0.0, 1.0]), np.array([1.0, 1.0]))
    return BorrowRule(curves.get("by_tokens", {1: flat}), curves.get("elementwise", {}),
                      curves.get("by_flops", flat), curves.get("by_bytes", flat), ("a", "b"))


def test_gemm_ratio_reads_the_nearest_token_count():
    """Counts 1, 16, 64 with ratios 0.5, 0.7, 0.9 at every size: 10 tokens are nearest 16,
    40 nearest 64 (24 from it, 24 from 16: the first, 16), 500 beyond the largest: 64."""
    x = np.log([10.0, 1e6])
    rule = _rule(by_tokens={1: (x, np.array([0.5, 0.5])), 16: (x, np.array([0.7, 0.7])),
                            64: (x, np.array([0.9, 0.9]))})
    assert rule.gemm_ratio(np.array([1, 2, 10, 40, 41, 64, 500]), 1000).tolist() == [
        0.5, 0.5, 0.7, 0.7, 0.9, 0.9, 0.9]
    # over the weight size: log-linear between the curve's points, clamped outside
    sloped = _rule(by_tokens={8: (np.log([100.0, 10000.0]), np.array([0.4, 0.8]))})
    assert sloped.gemm_ratio(np.array([8, 8]), 1000).tolist() == pytest.approx([0.6, 0.6])
    assert sloped.gemm_ratio(np.array([8]), 10)[0] == pytest.approx(0.4)


def test_ratios_are_read_at_the_work_a_kernel_does():
    """Element-wise: at 2 x tokens x width elements; prefill: at the FLOPs (at least 1);
    decode: at the bytes (at least 1). Each curve runs 1 -> 2 over log work 0 .. log 4."""
    ramp = (np.array([0.0, np.log(4.0)]), np.array([1.0, 2.0]))
    rule = _rule(elementwise={"rope": ramp}, by_flops=ramp, by_bytes=ramp)
    assert rule.elementwise_ratio("rope", np.array([1]), 1)[0] == pytest.approx(1.5)  # 2
    assert rule.elementwise_ratio("rope", np.array([0.5]), 4)[0] == pytest.approx(2.0)  # 4
    assert rule.elementwise_ratio("rope", np.array([2]), 0.5)[0] == pytest.approx(1.5)  # 2
    assert rule.prefill_ratio(np.array([0.0, 0.5, 2.0]))[0] == pytest.approx(1.0)
    assert rule.prefill_ratio(np.array([2.0]))[0] == pytest.approx(1.5)
    assert rule.decode_ratio(np.array([0.0, 2.0])).tolist() == pytest.approx([1.0, 1.5])


def test_running_median_is_centred():
    x, y = _running(pd.Series([1.0, 2.0, 3.0, 4.0, 5.0]), pd.Series([1.0, 5.0, 2.0, 4.0, 3.0]),
                    3)
    assert x.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert y.tolist() == [3.0, 2.0, 4.0, 3.0, 3.5]
    # ratios at one x are merged by their median first
    x, y = _running(pd.Series([1.0, 1.0, 2.0]), pd.Series([1.0, 3.0, 7.0]), 1)
    assert x.tolist() == [1.0, 2.0] and y.tolist() == [2.0, 7.0]


def _points(ratios: dict[str, float], n: int = 20) -> pd.DataFrame:
    """Donor points: per model, GEMM rows at 8 tokens over n weight sizes at the model's
    ratio (b = ratio x a) and element-wise rope rows over n token counts at twice it."""
    rows = []
    for model, ratio in ratios.items():
        for i in range(n):
            size = 2 ** (i + 1)
            rows.append((model, 8, "qkv", size, 1.0, ratio, True, np.log(2 * 8 * size)))
            rows.append((model, 2**i, "rope", 16, 1.0, 2 * ratio, False,
                         np.log(2 * 2**i * 16)))
    frame = pd.DataFrame(rows, columns=["model", "tokens", "op", "size", "a_s", "b_s", "gemm",
                                        "log_work"])
    frame["tp"] = 1
    frame["ratio"] = frame["b_s"] / frame["a_s"]
    return frame


def test_rule_curves_are_running_medians_of_their_windows():
    """One donor whose ratio climbs with the work: a window of w points centred on a point
    of a ramp has the point's own ratio as its median where the window is whole, so the
    curves equal the ramp there (1 point by token count, 9 element-wise, 15 by work)."""
    points = _points({"d": 1.0})
    points["ratio"] = points.groupby("op").cumcount() / 10.0
    rule = BorrowRule.from_points(points)
    ramp = np.arange(20) / 10.0
    assert rule.gemm_by_tokens[8][1].tolist() == pytest.approx(ramp)  # window 1
    assert rule.gemm_by_tokens[8][0].tolist() == pytest.approx(np.log(2.0 ** np.arange(1, 21)))
    assert rule.elementwise["rope"][1][4:16].tolist() == pytest.approx(ramp[4:16])  # 9
    assert rule.elementwise["rope"][1][0] == pytest.approx(np.median(ramp[:5]))
    assert rule.gemm_by_flops[1][7:13].tolist() == pytest.approx(ramp[7:13])  # 15
    assert rule.elementwise_by_bytes[1][7:13].tolist() == pytest.approx(ramp[7:13])
    assert rule.gemm_by_flops[1][0] == pytest.approx(np.median(ramp[:8]))
    assert rule.donors == ("d",)


def test_leave_one_model_out_by_hand():
    """Donors a and b at GEMM ratio 0.5, c at 0.8. Leaving a out, b and c give 0.65: a errs
    |0.65 - 0.5| / 0.5 = 30%; so does b; leaving c out, 0.5 against 0.8 is 37.5%. The
    element-wise ratios, twice those, err alike (read off the GEMM curve, b would err
    |0.65 - 1| / 1 = 35%)."""
    errors = leave_one_model_out(_points({"a": 0.5, "b": 0.5, "c": 0.8}))
    assert errors["gemm:a"]["median_rel_error"] == pytest.approx(0.3)
    assert errors["gemm:c"]["median_rel_error"] == pytest.approx(0.375)
    assert errors["elementwise:b"]["median_rel_error"] == pytest.approx(0.3)
    assert errors["gemm"] == {"median_rel_error": pytest.approx(0.3),
                              "p90_rel_error": pytest.approx(0.375), "n": 60}
    assert set(errors) == {"gemm", "elementwise", *(f"{c}:{m}" for c in ("gemm", "elementwise")
                                                    for m in "abc")}
    assert leave_one_model_out(_points({"a": 0.5})) == {}  # nothing to leave one out from


# ------------------------------------------------------------------ what is borrowed


def test_missing_parts_are_refused_word_for_word(excerpt):
    options = ImportOptions("llama-2-7b", "h100-sxm", 1)
    with pytest.raises(InputError) as info:
        import_vidur(excerpt, options, "d")
    assert _message(info) == (
        f"{excerpt}: no h100-sxm measurements of attention; CPU overheads ({CPU_FILE} is "
        "a100's): pass --borrow GPU (a100-80g) to scale another GPU's by the rules of "
        f"docs/cost-models.md \"Borrow rules\"")
    write_attention(excerpt / ATTENTION.format("h100"))
    with pytest.raises(InputError) as info:
        import_vidur(excerpt, options, "d")
    assert _message(info).endswith(
        f"measurements of CPU overheads ({CPU_FILE} is a100's): pass --borrow GPU (a100-80g) "
        "to scale another GPU's by the rules of docs/cost-models.md \"Borrow rules\" (or "
        "--no-cpu-overhead)")
    for bad in ("tpu", "h100-sxm"):
        with pytest.raises(InputError) as info:
            import_vidur(excerpt, ImportOptions("llama-2-7b", "h100-sxm", 1, borrow=bad), "d")
        assert _message(info) == f"--borrow: cannot borrow from {bad!r} (valid: a100-80g)"


def test_unmapped_model_gpu_and_missing_files_are_refused(excerpt):
    spec = get_model("llama-3.1-8b")
    dims = _dims(spec, 1)
    with pytest.raises(InputError) as info:
        measure(excerpt, ImportOptions("llama-3.1-8b", "l4", 1), spec, dims)
    assert _message(info) == "--gpu: no Vidur measurements map to 'l4' (valid: a100-80g, h100-sxm)"
    with pytest.raises(InputError) as info:
        measure(excerpt, ImportOptions("qwen2.5-7b", "a100-80g", 1), spec, dims)
    assert _message(info) == ("--model: no Vidur measurements map to 'qwen2.5-7b' (valid: "
                              "llama-2-7b, llama-2-70b, codellama-34b, llama-3.1-8b, "
                              "llama-3.1-70b)")
    shutil.rmtree(excerpt / "compute/a100/meta-llama/Llama-2-70b-hf-attention-2024-05")
    with pytest.raises(InputError) as info:
        measure(excerpt, ImportOptions("llama-3.1-8b", "a100-80g", 1, borrow="h100-sxm"),
                spec, dims)
    assert _message(info) == f"{excerpt}: no attention.csv for any GPU here"
    (excerpt / CPU_FILE).unlink()
    with pytest.raises(InputError) as info:
        measure(excerpt, A100_8B, spec, dims)
    assert _message(info) == (f"{excerpt}: --cpu-overhead: no cpu_overhead*.csv here; pass "
                              "--no-cpu-overhead")


def test_no_donor_is_refused(excerpt):
    for donor in ("meta-llama/Llama-2-7b-hf", "codellama/CodeLlama-34b-Instruct-hf"):
        shutil.rmtree(excerpt / "compute" / "h100" / donor)
    with pytest.raises(InputError) as info:
        import_vidur(excerpt, ImportOptions("llama-3.1-8b", "h100-sxm", 1, borrow="a100-80g"),
                     "d")
    assert _message(info) == (
        f"{excerpt}: --borrow: no model is measured on both a100 and h100 at the same TP "
        "(compute/<gpu>/<org>/<model>/mlp.csv) to borrow from")


def test_a_donor_target_borrows_from_the_other_donors_only(excerpt):
    """Llama-2-7B is measured on both GPUs: borrowing its H100 attention and CPU rows, the
    rule's donors leave it out (CodeLlama-34B alone, so no leave-one-model-out error)."""
    profile = import_vidur(excerpt, ImportOptions("llama-2-7b", "h100-sxm", 1,
                                                  borrow="a100-80g"), "d")
    parts = {b.part: b for b in profile.source.borrowed}
    assert set(parts) == {"attention", "attention heads", "cpu overhead"}
    assert parts["attention"].rule == (
        f"prefill: {RULES['prefill_attention']}; decode: {RULES['decode_attention']} "
        "(donors: codellama/CodeLlama-34b-Instruct-hf)")
    assert parts["attention"].source == f"a100 {ATTENTION.format('a100')}"
    assert parts["cpu overhead"].source == "a100 host"
    assert profile.heldout_borrow_rule == {}
    assert profile.attention.rule.endswith(
        "(decode); times scaled from another GPU (source.borrowed)")
    assert profile.source.gpu == "h100"
    # GEMMs measured on the H100 itself: H100 = 0.5 x A100
    assert profile.gemm_tables[0].time_s[0] == pytest.approx(
        0.5 * (0.010 + 0.001) * 1e-3)


def test_borrowed_layers_and_the_rule_error(excerpt):
    profile = import_vidur(excerpt, ImportOptions("llama-3.1-8b", "h100-sxm", 1,
                                                  borrow="a100-80g"), "d")
    assert set(profile.heldout_borrow_rule) == {"gemm", "elementwise"}
    parts = {b.part: b for b in profile.source.borrowed}
    assert parts["gemm, elementwise"].source == "a100 meta-llama/Meta-Llama-3-8B"
    assert parts["gemm, elementwise"].rule == (
        f"{RULES['gemm']}; {RULES['elementwise']} (donors: codellama/CodeLlama-34b-Instruct-hf, "
        "meta-llama/Llama-2-7b-hf)")
    assert "model" not in profile.heldout_blocks  # the layer kernels are borrowed


def test_attention_borrowed_at_the_work_it_does(excerpt):
    """Prefill times scale by the GEMM ratio at 4 x heads x head dim x (n c + n(n+1)/2)
    FLOPs, decode times by the element-wise ratio at batch x context x 2 x KV heads x head
    dim x 2 bytes: curves that double over a decade tell each apart."""
    data = read_attention(excerpt / ATTENTION.format("a100"))
    flops = [4.0 * 32 * 128 * (n * c + n * (n + 1) / 2)
             for n, c in zip(data.prefill["prefill_chunk_size"], data.prefill["kv_cache_size"],
                             strict=True)]
    kv = [b * c * 2 * 4 * 128 * 2
          for b, c in zip(data.decode["batch_size"], data.decode["kv_cache_size"], strict=True)]
    by_flops = (np.log([min(flops), max(flops)]), np.array([1.0, 2.0]))
    by_bytes = (np.log([min(kv), max(kv)]), np.array([3.0, 5.0]))
    scaled = _scale_attention(data, _rule(by_flops=by_flops, by_bytes=by_bytes))
    want_pre = data.prefill["time_s"] * np.interp(np.log(flops), *by_flops)
    want_dec = data.decode["time_s"] * np.interp(np.log(kv), *by_bytes)
    assert scaled.prefill["time_s"].to_numpy() == pytest.approx(want_pre.to_numpy())
    assert scaled.decode["time_s"].to_numpy() == pytest.approx(want_dec.to_numpy())
    assert (scaled.num_heads, scaled.num_kv_heads, scaled.head_dim, scaled.tp, scaled.rows) == (
        32, 4, 128, 2, 42)


def test_the_table_ends_are_never_held_out(excerpt):
    spec = get_model("llama-3.1-8b")
    for seed in range(6):
        m = measure(excerpt, ImportOptions("llama-3.1-8b", "a100-80g", 1, seed=seed), spec,
                    _dims(spec, 1))
        assert m.tokens_train[0] == 1 and m.tokens_train[-1] == 64
        assert len(m.tokens_test) == 2
        for frame, key in ((m.prefill_train, "prefill_chunk_size"),
                           (m.decode_train, "batch_size")):
            full = pd.concat([m.prefill_train, m.prefill_test]) if key.startswith(
                "prefill") else pd.concat([m.decode_train, m.decode_test])
            for row, group in full.groupby(key):
                kept = frame[frame[key] == row]["kv_cache_size"]
                assert kept.min() == group["kv_cache_size"].min()
                assert kept.max() == group["kv_cache_size"].max()
        for tables in m.collectives.values():
            for train, _, full in tables.values():
                assert train.index[0] == full.index[0] and train.index[-1] == full.index[-1]


def test_a_cpu_file_without_a_gpu_in_its_name_is_the_a100s(excerpt):
    (excerpt / CPU_FILE).rename(excerpt / "cpu_overheads.csv")
    profile = import_vidur(excerpt, ImportOptions("llama-2-7b", "a100-80g", 1), "d")
    assert profile.cpu_overhead is not None
    assert {b.part for b in profile.source.borrowed} == {"attention heads"}


# ------------------------------------------------------------------ whose CPU rows


def _cpu_case(excerpt: Path, models: tuple[tuple[str, int], ...],
              extra: dict[str, tuple[int, ...]]) -> None:
    for name, geometry in extra.items():
        write_mlp(excerpt / "compute" / "a100" / name / "mlp.csv", geometry, "a100")
    write_cpu(excerpt / CPU_FILE, models)


def _cpu_borrowed(excerpt: Path, model: str, tp: int) -> tuple[str | None, object]:
    profile = import_vidur(excerpt, ImportOptions(model, "a100-80g", tp), "d")
    parts = {b.part: b.source for b in profile.source.borrowed}
    files = {f.path: f for f in profile.source.files}
    return parts.get("cpu overhead"), (profile, files[CPU_FILE])


def test_own_cpu_rows_need_no_note(excerpt):
    source, (profile, file) = _cpu_borrowed(excerpt, "llama-2-7b", 1)
    assert source is None and profile.cpu_overhead.measured_tp == 1
    assert (file.rows, file.rows_used) == (8, 8)


def test_cpu_rows_of_the_model_nearest_in_hidden_then_intermediate_size(excerpt):
    """CodeLlama-34B (hidden 8192, intermediate 22016) has no CPU rows. Candidates: wide-a
    (8192, 24000: 1,984 away), wide-b (8192, 16000: 6,016), Llama-2-7B (hidden 4096) and a
    model without an mlp.csv (unknown shape, last). wide-a is measured at TP 1 and 2: TP 2,
    the target's, is taken."""
    _cpu_case(excerpt, (("meta-llama/Llama-2-7b-hf", 2), ("test/no-mlp", 2),
                        ("test/wide-a", 1), ("test/wide-a", 2), ("test/wide-b", 2)),
              {"test/wide-a": (64, 8, 8192, 24000, 32000),
               "test/wide-b": (64, 8, 8192, 16000, 32000)})
    source, (profile, file) = _cpu_borrowed(excerpt, "codellama-34b", 2)
    assert source == "test/wide-a" and profile.cpu_overhead.measured_tp == 2
    assert (file.rows, file.rows_used) == (40, 8)


def test_cpu_rows_nearest_in_tp_when_shapes_tie(excerpt):
    twin = (64, 8, 8192, 22016, 32000)
    _cpu_case(excerpt, (("test/twin-1", 1), ("test/twin-2", 2)),
              {"test/twin-1": twin, "test/twin-2": twin})
    assert _cpu_borrowed(excerpt, "codellama-34b", 2)[0] == "test/twin-2"
    assert _cpu_borrowed(excerpt, "codellama-34b", 1)[0] == "test/twin-1"


def test_cpu_rows_of_a_model_of_unknown_shape_come_last(excerpt):
    _cpu_case(excerpt, (("test/no-mlp", 2), ("meta-llama/Llama-2-7b-hf", 1)), {})
    source, (profile, file) = _cpu_borrowed(excerpt, "codellama-34b", 2)
    assert source == "meta-llama/Llama-2-7b-hf, measured at tp 1"
    assert profile.cpu_overhead.measured_tp == 1 and file.rows_used == 8
    assert profile.cpu_overhead.time_s[0] == pytest.approx(cpu_ms(CPU_BATCHES[0]) * 1e-3)


# ----------------------------------------------------------------------- provenance


def test_provenance_says_what_was_measured(pristine):
    profile = import_vidur(pristine, ImportOptions("llama-3.1-8b", "a100-80g", 2), "d")
    prov = profile.provenance
    assert prov.device == "cuda" and prov.device_name == (
        "NVIDIA A100-SXM4-80GB (Vidur's profiling data)")
    assert prov.backend == ("sarathi-serve layers: cuBLAS GEMMs, FlashAttention, NCCL "
                            "(CUDA-event and Kineto timings, kernel time only)")
    assert (prov.dtype, prov.attention_dtype, prov.date) == ("fp16", "fp16", "d")
    rules = profile.rules
    assert (rules.gemm_dtype_bytes, rules.attention_dtype_bytes) == (2, 2)
    assert rules.prefill_skips_masked is True
    assert profile.cpu_overhead.framework == (
        "vLLM of 2024-05 (about v0.4) on an A100 host, Vidur's cpu_overheads profile")
    assert profile.cpu_overhead.components == (
        "schedule + prepare_inputs_e2e + sampler_e2e + process_model_outputs (medians)")
    assert profile.attention.rule == (
        "grids of Llama-2-70b-hf-attention-2024-05 at TP 2 (32 query / 4 KV heads per GPU, "
        "head dim 128); other heads scale the time above the floor by query heads (prefill) "
        "and KV heads (decode)")
    files = {f.path: (f.upstream_commit, f.upstream_path) for f in profile.source.files}
    assert files[ATTENTION.format("a100")] == (VIDUR_OLD_COMMIT,
                                               "data/profiling/a100/attention.csv")
    assert files["network/a100_dgx/send_recv.csv"] == (
        VIDUR_COMMIT, "data/profiling/network/a100_dgx/send_recv.csv")
    parts = {b.part: b for b in profile.source.borrowed}
    assert parts["attention heads"].rule == (
        "time above the floor scales with query heads x head dim (prefill) and KV heads x "
        "head dim (decode)")
    assert parts["cpu overhead"].rule == (
        "rows of the nearest measured model (hidden, then intermediate size, then TP); CPU "
        "time is the host's")
    assert parts["cpu overhead"].source == "meta-llama/Llama-2-7b-hf, measured at tp 1"
    # linear data at TP 2: a layer, and the step (with its two all-reduces a layer), are
    # exact to rounding
    assert profile.heldout["layer"].p90_rel_error < 1e-4
    assert profile.heldout["step"].p90_rel_error < 1e-4
    assert profile.heldout["step"].n == 2


def test_models_in_the_excerpt_match_the_presets():
    for preset, folder in (("llama-2-7b", "meta-llama/Llama-2-7b-hf"),
                           ("codellama-34b", "codellama/CodeLlama-34b-Instruct-hf")):
        spec = get_model(preset)
        assert MODELS[folder][1:4] == (spec.num_kv_heads, spec.hidden_size,
                                       spec.intermediate_size)


def test_write_network_layouts_are_what_the_readers_expect(tmp_path):
    write_network(tmp_path)
    frame = pd.read_csv(tmp_path / "all_reduce.csv")
    assert set(zip(frame["num_workers"], frame["devices_per_node"], strict=True)) == {
        (2, 2), (4, 4), (8, 8), (4, 2)}


def test_elementwise_and_attention_refusals_name_the_file(excerpt):
    path = excerpt / "compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv"
    frame = pd.read_csv(path, dtype=str)
    frame.loc[2, "time_stats.add.median"] = "slow"
    frame.to_csv(path, index=False)
    with pytest.raises(InputError) as info:
        read_mlp(path, 1)
    assert _message(info) == f"{path}:4: time_stats.add.median: not a number >= 0: 'slow'"
    write_mlp(path, (64, 8, 8192, 28672, 128256), "a100")  # 70B geometry under 8B's name
    with pytest.raises(InputError) as info:
        import_vidur(excerpt, A100_8B, "d")
    assert _message(info) == f"{path}:2: n_head: 64 does not match llama-3.1-8b's 32"
    net = excerpt / "network" / "a100_dgx" / "all_reduce.csv"
    frame = pd.read_csv(net, dtype=str)
    frame.loc[0, "size"] = "big"
    frame.to_csv(net, index=False)
    with pytest.raises(InputError) as info:
        read_collective(excerpt, "a100_dgx", "all_reduce")
    assert _message(info) == f"{net}:2: size: not a number >= 0: 'big'"


def test_attention_at_tp_8_keeps_one_kv_head(excerpt):
    path = excerpt / ATTENTION.format("a100")
    pd.read_csv(path).assign(num_tensor_parallel_workers=8).to_csv(path, index=False)
    data = read_attention(path)
    assert (data.num_heads, data.num_kv_heads, data.head_dim, data.tp) == (8, 1, 128, 8)


def test_unknown_model_and_gpu_name_their_option(pristine):
    with pytest.raises(InputError) as info:
        import_vidur(pristine, ImportOptions("nope", "a100-80g", 1), "d")
    assert _message(info).startswith("--model: unknown model 'nope' (valid: ")
    with pytest.raises(InputError) as info:
        import_vidur(pristine, ImportOptions("llama-3.1-8b", "nope", 1), "d")
    assert _message(info).startswith("--gpu: unknown gpu 'nope' (valid: ")


def test_validate_reads_a_borrowed_import_again(pristine):
    options = ImportOptions("llama-3.1-8b", "h100-sxm", 1, borrow="a100-80g")
    profile = import_vidur(pristine, options, "d")
    errors, linear = validate_profile(profile, pristine)
    assert set(errors) == set(profile.heldout) and "cpu_overhead" in errors
    for cls, summary in errors.items():
        assert summary["median_rel_error"] == pytest.approx(
            profile.heldout[cls].median_rel_error, abs=1e-15), cls
    assert set(linear) == set(profile.heldout_linear) == {"gemm", "prefill_attention",
                                                          "decode_attention"}
    with pytest.raises(ValueError, match="^not an imported profile$"):
        validate_profile(profile.model_copy(update={"source": None}), pristine)


def test_without_cpu_rows_the_step_takes_the_default_cpu_time(pristine):
    profile = import_vidur(pristine, ImportOptions("llama-3.1-8b", "a100-80g", 1,
                                                   cpu_overhead=False), "d")
    assert profile.heldout["step"].p90_rel_error < 1e-4
    errors, _ = validate_profile(profile, pristine)
    assert set(errors) == set(profile.heldout) and "cpu_overhead" not in errors
    for cls, summary in errors.items():
        assert summary["p90_rel_error"] == pytest.approx(profile.heldout[cls].p90_rel_error,
                                                         rel=1e-9, abs=1e-15), cls


def test_gemm_coefficients_fit_the_features_the_predictor_reads(pristine):
    """The linear GEMM form (the fallback for shapes without a table) is the relative NNLS
    fit of the training points' features as the profile's rules compute them (2 bytes)."""
    profile = import_vidur(pristine, A100_8B, "d")
    spec = get_model("llama-3.1-8b")
    weights = _dims(spec, 1).weights()
    features, times = [], []
    for table, name in zip(profile.gemm_tables, ("qkv", "o", "gate_up", "down"), strict=True):
        assert (table.in_features, table.out_features) == weights[name]
        for tokens, time_s in zip(table.tokens, table.time_s, strict=True):
            features.append(Gemm(tokens, *weights[name]).features(2))
            times.append(time_s)
    want = fit_relative(np.array(features), np.array(times))
    got = [profile.coefficients["gemm"][f"s_per_{n}"] for n in ("flop", "byte", "call")]
    assert got == pytest.approx(want, rel=1e-3, abs=0)  # coefficients are ~1e-14


# ------------------------------------------------------------------------- blocks


@pytest.fixture
def measured(pristine):
    spec = get_model("llama-3.1-8b")
    return measure(pristine, A100_8B, spec, _dims(spec, 1))


def test_top_of_distinct_values_by_hand():
    ten = np.arange(1, 11)
    assert _top(ten, 0.2).tolist() == [False] * 8 + [True] * 2
    assert _top(ten, 0.01).tolist() == [False] * 9 + [True]  # at least one
    assert _top(ten, 0.9).sum() == 8  # two always kept
    assert _top(np.array([1, 1, 2, 3, 3]), 0.2).tolist() == [False, False, False, True, True]
    two = _top(np.array([5, 7, 7]), 0.5)
    assert two.dtype == bool and two.tolist() == [False, False, False]


def test_top_range_holds_out_the_top_cpu_batches_and_grid_rows(measured):
    split = top_range(measured)
    train, test, full = split.cpu
    assert test.index.tolist() == [96, 128] and train.index.tolist() == [8, 16, 24, 32, 48, 64]
    assert full.index.tolist() == list(CPU_BATCHES)
    # each prefill row keeps 6 KV sizes: the top one (round(0.2 x 6) = 1) is held out
    assert split.prefill_test.groupby("prefill_chunk_size").size().tolist() == [1, 1, 1]
    assert set(split.prefill_test["kv_cache_size"]) == {512}
    assert list(split.prefill_test.columns) == list(measured.prefill_train.columns)
    assert list(split.decode_train.columns) == list(measured.decode_train.columns)
    assert split.tokens_test.tolist() == [56, 64]


def test_whole_rows_never_hold_out_the_end_rows(measured):
    for seed in range(8):
        split = whole_rows(measured, seed)
        assert set(split.prefill_test["prefill_chunk_size"]) == {128}  # of 64, 128, 256
        held = set(split.decode_test["batch_size"])
        assert len(held) == 1 and held <= {2, 4}  # of 1, 2, 4, 8
        assert list(split.decode_test.columns) == list(measured.decode_train.columns)
    two_rows = pd.DataFrame({"batch_size": [1, 1, 2, 2], "time_s": [1.0, 2.0, 3.0, 4.0]})
    train, test = _rows_out(two_rows, "batch_size", 0.5, np.random.default_rng(0))
    assert len(train) == 4 and test.empty


def test_the_model_block_fits_the_other_models_gemms(excerpt):
    """Llama-3-8B's own GEMMs are judged against a fit to Llama-2-7B's and CodeLlama-34B's
    (4 GEMMs x 11 token counts each); an ungated model's up projection is hidden x
    intermediate, a gated one's hidden x 2 intermediate."""
    path = excerpt / "compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv"
    pd.read_csv(path).assign(use_gated_mlp=False).to_csv(path, index=False)
    spec = get_model("llama-3.1-8b")
    m = measure(excerpt, A100_8B, spec, _dims(spec, 1))
    (other_x, other_t), (own_x, own_t) = other_model_gemms(m, 1)
    assert (len(other_x), len(other_t), len(own_x), len(own_t)) == (88, 88, 44, 44)
    # a model not measured at this TP adds nothing; one listed after this model still counts
    tp2_only = excerpt / "compute/a100/aaa/tp2-only/mlp.csv"
    write_mlp(tp2_only, MODELS["meta-llama/Llama-2-7b-hf"], "a100")
    frame = pd.read_csv(tp2_only)
    frame[frame["num_tensor_parallel_workers"] == 2].to_csv(tp2_only, index=False)
    write_mlp(excerpt / "compute/a100/zzz/later/mlp.csv", MODELS["meta-llama/Llama-2-7b-hf"],
              "a100")
    assert len(other_model_gemms(m, 1)[0][0]) == 132
    # rows run model by model (CodeLlama-34B first), GEMM by GEMM, over the token counts
    tokens = [*TOKENS] * 8
    sizes = [round(f[0] / 2 / t) for f, t in zip(other_x, tokens, strict=True)]
    up = sizes[2 * len(TOKENS)::4 * len(TOKENS)]
    assert up == [8192 * 2 * 22016, 4096 * 11008]
    k, n = 8192, (64 + 2 * 8) * 128  # CodeLlama-34B's QKV at 1 token
    assert other_x[0] == (2 * k * n, (k + k * n + n) * 2, 1)
    assert other_t[0] == pytest.approx(0.011e-3)
