"""Importing Vidur's profiling data, on a tiny excerpt the tests write themselves
(vidur_excerpt.py): parsing, duplicate merging, unit conversion, per-GPU shapes, the
hold-out, borrowing with known ratios, refusals naming file, line and field, determinism."""

from __future__ import annotations

import json

import pytest
from vidur_excerpt import (
    TOKENS,
    cpu_ms,
    decode_ms,
    elementwise_ms,
    gemm_ms,
    write_mlp,
    write_vidur_excerpt,
)

from prefixsim.costmodel.fitted import FittedCostModel
from prefixsim.errors import InputError
from prefixsim.presets import GPUS, MODELS
from prefixsim.profiles.vidur import find_root, read_mlp
from prefixsim.profiles.vidur_import import import_vidur, validate_profile
from prefixsim.profiles.vidur_split import ImportOptions

A100_8B = ImportOptions("llama-3.1-8b", "a100-80g", 1)
H100_8B = ImportOptions("llama-3.1-8b", "h100-sxm", 1, borrow="a100-80g")


@pytest.fixture(scope="module")
def excerpt(tmp_path_factory):
    return write_vidur_excerpt(tmp_path_factory.mktemp("vidur"))


@pytest.fixture(scope="module")
def a100(excerpt):
    return import_vidur(excerpt, A100_8B, "2026-01-01")


def test_read_mlp_merges_duplicates_and_converts_to_seconds(excerpt):
    """Tokens 8 at TP 1 appear twice, at 0.5x and 1.5x the formula: the median of the two
    is the formula. QKV at 8 tokens: 0.010 + 0.001 x 8 = 0.018 ms = 1.8e-5 s."""
    data = read_mlp(excerpt / "compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv", 1)
    assert list(data.times_s.index) == list(TOKENS)
    assert data.times_s.loc[8, "qkv"] == pytest.approx(gemm_ms("attn_pre_proj", 8, 1) * 1e-3)
    assert data.times_s.loc[2, "rope"] == pytest.approx(elementwise_ms(2, 1) * 1e-3)
    assert data.rows_used == len(TOKENS) + 1
    assert data.geometry["n_kv_head"] == 8


def test_profile_tables_are_the_training_points_at_per_gpu_shapes(a100):
    """Llama-3.1-8B at TP 1: QKV 4096 -> (32 + 2 x 8) x 128 = 6144; gate/up 4096 -> 28672.
    The smallest and largest token counts are never held out; 20% of 11 counts = 2 are."""
    shapes = [(t.in_features, t.out_features) for t in a100.gemm_tables]
    assert shapes == [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096)]
    tokens = a100.gemm_tables[0].tokens
    assert len(tokens) == len(TOKENS) - 2 and tokens[0] == 1 and tokens[-1] == 64
    qkv = dict(zip(tokens, a100.gemm_tables[0].time_s, strict=True))
    assert qkv[64] == pytest.approx(gemm_ms("attn_pre_proj", 64, 1) * 1e-3)
    assert a100.elementwise["activation"].width == 2 * 14336
    assert a100.elementwise["rope"].width == (32 + 8) * 128
    assert a100.covers_tp == [1]
    cpu = dict(zip(a100.cpu_overhead.batch_sizes, a100.cpu_overhead.time_s, strict=True))
    assert cpu[8] == pytest.approx(cpu_ms(8) * 1e-3)
    decode = a100.attention.decode
    assert (decode.num_heads, decode.num_kv_heads) == (32, 4)  # Llama-2-70B at TP 2
    assert decode.floor_s == pytest.approx(decode_ms(1, 32) * 1e-3)


def test_heldout_errors_of_linear_data_are_rounding_only(a100):
    """Times linear in tokens (GEMM, element-wise, CPU) interpolate exactly: every held-out
    error is the 5-digit rounding of the stored times."""
    for cls in ("gemm", "elementwise", "layer", "cpu_overhead", "step", "decode_attention"):
        assert a100.heldout[cls].p90_rel_error < 1e-4, cls
    assert a100.heldout["gemm"].n == 4 * 2 and a100.heldout["elementwise"].n == 6 * 2


def test_source_names_files_rows_and_borrowed_parts(a100):
    source = a100.source
    assert source.commit.startswith("7d47513") and source.repo == "microsoft/vidur"
    files = {f.path: f for f in source.files}
    assert files["compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv"].rows_used == 12
    assert files["network/a100_dgx/all_reduce.csv"].rows == 40
    assert files["network/a100_dgx/all_reduce.csv"].rows_used == 30  # 4 on 2 nodes dropped
    parts = {b.part: b for b in source.borrowed}
    assert set(parts) == {"attention heads", "cpu overhead"}
    assert parts["cpu overhead"].source == "meta-llama/Llama-2-7b-hf"  # hidden 4096 too


def test_h100_needs_borrow_and_borrowing_applies_the_ratio(excerpt):
    """H100 lacks Llama-3-8B, attention and CPU overheads: refused without --borrow. With
    it, the donors' H100 = 0.5 x A100 (GEMMs) and 0.7 x A100 (element-wise) give exactly
    those ratios, and the leave-one-model-out check of the rule errs by 0."""
    with pytest.raises(InputError) as info:
        import_vidur(excerpt, ImportOptions("llama-3.1-8b", "h100-sxm", 1), "d")
    assert "--borrow" in str(info.value) and "attention" in str(info.value)
    assert info.value.file == str(find_root(excerpt))
    h100 = import_vidur(excerpt, H100_8B, "2026-01-01")
    qkv = dict(zip(h100.gemm_tables[0].tokens, h100.gemm_tables[0].time_s, strict=True))
    assert qkv[64] == pytest.approx(0.5 * gemm_ms("attn_pre_proj", 64, 1) * 1e-3)
    norm = h100.elementwise["input_norm"]
    assert norm.time_s[0] == pytest.approx(0.7 * elementwise_ms(1, 1) * 1e-3)
    assert h100.heldout_borrow_rule["gemm"].median_rel_error == pytest.approx(0, abs=1e-12)
    assert {b.part for b in h100.source.borrowed} >= {"gemm, elementwise", "attention"}
    assert h100.attention.decode.floor_s == pytest.approx(0.7 * decode_ms(1, 32) * 1e-3)
    info = FittedCostModel(MODELS["llama-3.1-8b"], GPUS["h100-sxm"], 1,
                           profile=h100).describe()
    assert "attention: a100 compute/a100" in info["cost_model_borrowed"]


def test_bad_inputs_name_file_line_and_field(tmp_path):
    root = write_vidur_excerpt(tmp_path / "v")
    mlp = root / "compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv"
    with pytest.raises(InputError, match=r"no rows at tp 4 \(measured: 1, 2\)"):
        import_vidur(root, ImportOptions("llama-3.1-8b", "a100-80g", 4), "d")
    write_mlp(mlp, (64, 8, 8192, 28672, 128256), "a100")  # 70B geometry under 8B's name
    with pytest.raises(InputError) as info:
        import_vidur(root, A100_8B, "d")
    assert (info.value.file, info.value.line, info.value.field) == (str(mlp), 2, "n_head")
    lines = mlp.read_text().splitlines()
    cells = lines[3].split(",")
    cells[3] = "fast"  # the QKV median of the third data row, file line 4
    cells[-10] = "slow"  # and the element-wise "add" median of the same row
    mlp.write_text("\n".join([*lines[:3], ",".join(cells), *lines[4:]]) + "\n")
    with pytest.raises(InputError) as info:
        read_mlp(mlp, 1)
    assert (info.value.line, info.value.field) == (4, "time_stats.attn_pre_proj.median")
    cells[3] = "0.02"
    mlp.write_text("\n".join([*lines[:3], ",".join(cells), *lines[4:]]) + "\n")
    with pytest.raises(InputError) as info:
        read_mlp(mlp, 1)
    assert (info.value.line, info.value.field) == (4, "time_stats.add.median")
    mlp.write_text("num_tokens\n1\n")
    with pytest.raises(InputError) as info:
        read_mlp(mlp, 1)
    assert info.value.line == 1 and info.value.field == "n_head"
    with pytest.raises(InputError, match="no Vidur profiling data"):
        import_vidur(tmp_path / "nothing", A100_8B, "d")
    with pytest.raises(InputError, match="valid: llama-2-7b"):
        import_vidur(root, ImportOptions("qwen2.5-7b", "a100-80g", 1), "d")


def test_no_cpu_overhead_option(excerpt):
    profile = import_vidur(excerpt, ImportOptions("llama-3.1-8b", "a100-80g", 1,
                                                  cpu_overhead=False), "d")
    assert profile.cpu_overhead is None and "cpu_overhead" not in profile.heldout
    model = FittedCostModel(MODELS["llama-3.1-8b"], profile=profile)
    assert model.cpu_s(4, 4) == pytest.approx(0.0005 + 4 * 0.000005)  # roofline's default


def test_import_is_deterministic_except_the_date(excerpt, a100):
    again = import_vidur(excerpt, A100_8B, "2026-01-01")
    assert again.to_json() == a100.to_json()
    later = import_vidur(excerpt, A100_8B, "2027-06-30").to_json().splitlines()
    differ = [i for i, (x, y) in enumerate(zip(a100.to_json().splitlines(), later,
                                               strict=True)) if x != y]
    assert len(differ) == 1 and '"date"' in later[differ[0]]
    other_seed = import_vidur(excerpt, ImportOptions("llama-3.1-8b", "a100-80g", 1, seed=1),
                              "2026-01-01")
    assert other_seed.gemm_tables[0].tokens != a100.gemm_tables[0].tokens


def test_validate_recomputes_the_stored_errors(excerpt, a100):
    errors, linear = validate_profile(a100, excerpt)
    for cls, summary in errors.items():
        assert summary["median_rel_error"] == pytest.approx(
            a100.heldout[cls].median_rel_error, abs=1e-15), cls
    assert set(linear) == {"gemm", "prefill_attention", "decode_attention"}
    data = json.loads(a100.to_json())
    assert data["source"]["seed"] == 0
