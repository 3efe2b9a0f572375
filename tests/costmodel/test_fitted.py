"""The fitted cost model and its parts, without torch: features worked by hand, NNLS against
its optimality conditions, interpolation, the profile schema and the CostModel contract."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cli import app
from prefixsim.costmodel import COST_MODELS, PrefillChunk, StepBatch
from prefixsim.costmodel.fitted import FittedCostModel, GemmInterpolation
from prefixsim.costmodel.operators import (
    FEATURES,
    DecodeAttention,
    Gemm,
    LayerDims,
    PrefillAttention,
    layer_operators,
)
from prefixsim.costmodel.profile import (
    Profile,
    load_profile,
    profile_from_mapping,
    shipped_profiles,
)
from prefixsim.errors import InputError
from prefixsim.presets import GPUS, MODELS, model_from_mapping
from prefixsim.profiles.fit import (
    error_summary,
    fit_relative,
    holdout_split,
    nnls,
    relative_errors,
)

TINY = model_from_mapping({
    "name": "tiny", "num_layers": 2, "hidden_size": 8, "num_heads": 2, "num_kv_heads": 1,
    "head_dim": 4, "intermediate_size": 16, "vocab_size": 32, "num_params": 10_000,
    "num_active_params": 10_000,
})


def make_profile(coefficients=None, model=TINY, device="cpu", preset=None, tables=(),
                 bandwidth=None) -> Profile:
    """A hand-made profile: every coefficient 0 unless given."""
    coeffs = {cls: {f"s_per_{name}": 0.0 for name in names} for cls, names in FEATURES.items()}
    for cls, values in (coefficients or {}).items():
        coeffs[cls].update(values)
    dims = LayerDims.from_spec(model).to_dict()
    heldout = {"median_rel_error": 0.05, "p90_rel_error": 0.1, "n": 3}
    return profile_from_mapping({
        "schema": "prefixsim-profile/1",
        "provenance": {
            "device": device, "device_name": "test device", "hardware_preset": preset,
            "torch_version": "0", "backend": "test", "dtype": "fp32",
            "attention_dtype": "fp32", "date": "2026-01-01", "prefixsim_version": "0",
            "model": dims, "quick": True, "seed": 0, "passes": 1, "repeats": 1,
            "num_threads": 1, "wall_time_s": 1.0, "cpu_time_s": 1.0, "shapes": {},
        },
        "rules": {"gemm_dtype_bytes": 4, "attention_dtype_bytes": 4,
                  "prefill_skips_masked": device == "cuda"},
        "coefficients": coeffs,
        "gemm_tables": list(tables),
        "bandwidth": bandwidth,
        "heldout": {c: heldout for c in ("gemm", "prefill_attention", "decode_attention",
                                         "layer")},
    })


# ------------------------------------------------------------------- features
def test_features_worked_by_hand():
    """Gemm(2 tokens, 3 -> 4), 2-byte: flop 2*2*3*4 = 48, bytes (6 + 12 + 8) * 2 = 52.
    Prefill n=2 after c=3, Hq=2, Hkv=1, d=4, 4-byte: dense pairs 2*5 = 10 -> flop 4*2*4*10 =
    320; causal pairs 2*3 + 2*3/2 = 9 -> 288; bytes (2*2*2 + 2*1*5) * 4 * 4 = 288; mask 10.
    Decode contexts (3, 5): flop 4*2*4*8 = 256, bytes (2*1*8 + 2*2*2) * 4 * 4 = 384."""
    assert Gemm(2, 3, 4).features(2) == (48, 52, 1)
    prefill = PrefillAttention(2, 3, 2, 1, 4)
    assert prefill.features(4, skips_masked=False) == (320, 288, 10, 1)
    assert prefill.features(4, skips_masked=True) == (288, 288, 0, 1)
    assert PrefillAttention(2, 0, 2, 1, 4).features(4, False)[2] == 0  # c = 0: causal path
    assert DecodeAttention((3, 5), 2, 1, 4).features(4) == (256, 384, 2, 1)


def test_layer_operators_cover_the_step():
    """Tokens = 3 prefill + 2 decodes = 5 through 4 GEMMs; one prefill op, one decode op."""
    dims = LayerDims.from_spec(TINY)
    ops = layer_operators(dims, StepBatch((PrefillChunk(3, 7),), (4, 9)))
    gemms = [op for op in ops if isinstance(op, Gemm)]
    assert [(g.tokens, g.in_features, g.out_features) for g in gemms] == [
        (5, 8, 16), (5, 8, 8), (5, 8, 32), (5, 16, 8)]  # qkv = (2 + 2*1) * 4 = 16
    assert [op for op in ops if isinstance(op, PrefillAttention)] == [
        PrefillAttention(3, 7, 2, 1, 4)]
    assert [op for op in ops if isinstance(op, DecodeAttention)] == [
        DecodeAttention((4, 9), 2, 1, 4)]
    moe = LayerDims.from_spec(MODELS["mixtral-8x7b"])
    experts = [op for op in layer_operators(moe, StepBatch(decode_contexts=(5,)))
               if isinstance(op, Gemm) and op.in_features == 14336]
    assert len(experts) == 2 and experts[0].tokens == 1  # one token, top-2: two experts


# ------------------------------------------------------------------------- fit
def test_nnls_known_answers():
    assert np.allclose(nnls(np.eye(2), np.array([1.0, -1.0])), [1.0, 0.0])
    a = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    assert np.allclose(nnls(a, a @ np.array([0.5, 2.0])), [0.5, 2.0])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(3, 12), st.integers(1, 4))
def test_nnls_satisfies_kkt(seed, rows, cols):
    """Optimality of x >= 0: the gradient g = A'(Ax - b) is >= 0 where x = 0, ~0 where x > 0."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(rows, cols))
    b = rng.normal(size=rows)
    x = nnls(a, b)
    g = a.T @ (a @ x - b)
    scale = 1e-7 * (1 + np.abs(a).sum() * np.abs(b).sum())
    assert np.all(x >= 0)
    assert np.all(g[x == 0] >= -scale)
    assert np.all(np.abs(g[x > 0]) <= scale)


def test_fit_relative_recovers_noiseless_coefficients():
    rng = np.random.default_rng(1)
    features = np.column_stack([rng.uniform(1e6, 1e9, 30), rng.uniform(1e5, 1e8, 30),
                                np.ones(30)])
    truth = np.array([1e-11, 5e-10, 2e-5])
    assert np.allclose(fit_relative(features, features @ truth), truth, rtol=1e-6)


def test_errors_and_split():
    errors = relative_errors(np.array([1.1, 0.8, 3.0]), np.array([1.0, 1.0, 2.0]))
    assert np.allclose(errors, [0.1, 0.2, 0.5])
    summary = error_summary(np.array([0.1, 0.2, 0.3, 0.4, 0.5]))
    assert summary == {"median_rel_error": 0.3, "p90_rel_error": pytest.approx(0.46), "n": 5}
    train, test = holdout_split(10, 0.2, np.random.default_rng(0), keep=[0, 9])
    assert len(test) == 2 and not set(test) & {0, 9}
    assert sorted([*train, *test]) == list(range(10))


def test_gemm_interpolation():
    """Points (1, 1 ms), (4, 2 ms), (8, 6 ms): m=2 -> 1 + 1/3 ms; m=6 -> 4 ms; beyond 8 the
    slope from the largest point at or below 8/2 = 4: (6 - 2) / (8 - 4) = 1 ms/token."""
    table = GemmInterpolation([4, 1, 8], [0.002, 0.001, 0.006])
    assert table.time_s(2) == pytest.approx(0.001 + 0.001 / 3)
    assert table.time_s(6) == pytest.approx(0.004)
    assert table.time_s(10) == pytest.approx(0.008)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(1, 4096), st.floats(1e-6, 1.0), min_size=2, max_size=12),
       st.floats(1, 8192))
def test_gemm_interpolation_through_points_and_between_neighbours(points, tokens):
    table = GemmInterpolation(list(points), list(points.values()))
    for m, t in points.items():
        assert table.time_s(m) == pytest.approx(t)
    xs = sorted(points)
    if xs[0] <= tokens <= xs[-1]:
        below = max(m for m in xs if m <= tokens)
        above = min(m for m in xs if m >= tokens)
        low, high = sorted((points[below], points[above]))
        assert low - 1e-12 <= table.time_s(tokens) <= high + 1e-12
    elif tokens > xs[-1]:
        assert table.time_s(tokens) >= points[xs[-1]]


# ----------------------------------------------------------------- cost model
def test_step_time_known_answer():
    """Only a 1 ms per-call GEMM cost: a dense step runs 4 GEMMs per layer x 2 layers plus the
    LM head = 9 ms; attention costs nothing here; the profile has no CPU table, so the
    roofline's default CPU time applies: 0.5 ms + 2 sequences x 5 us = 0.51 ms."""
    model = FittedCostModel(TINY, profile=make_profile({"gemm": {"s_per_call": 1e-3}}))
    assert model.step_time_s(StepBatch((PrefillChunk(5, 0),), (3,))) == pytest.approx(9.51e-3)
    assert model.step_time_s(StepBatch()) == 0.0
    bare = FittedCostModel(TINY, profile=model.profile, step_overhead_s=0,
                           step_overhead_s_per_seq=0)
    assert bare.step_time_s(StepBatch((PrefillChunk(5, 0),), (3,))) == pytest.approx(9e-3)


def test_tables_replace_the_linear_form_for_measured_matrices():
    """The qkv matrix (8 -> 16) has a table: 2 ms at 1 token, 4 ms at 5; other GEMMs cost
    1 ms a call. A 3-token decode batch: (3 ms + 3 x 1 ms) x 2 layers + 1 ms LM head."""
    table = {"in_features": 8, "out_features": 16, "tokens": [1, 5], "time_s": [0.002, 0.004]}
    model = FittedCostModel(TINY, profile=make_profile({"gemm": {"s_per_call": 1e-3}},
                                                       tables=[table]), step_overhead_s=0,
                            step_overhead_s_per_seq=0)
    assert model.step_time_s(StepBatch((), (4, 4, 4))) == pytest.approx(0.013)


contexts = st.lists(st.integers(1, 5000), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(contexts, st.integers(1, 40))
def test_decode_steps_equal_the_sum_of_steps(ctx, steps):
    coefficients = {"gemm": {"s_per_flop": 1e-11, "s_per_call": 1e-5},
                    "decode_attention": {"s_per_byte": 3e-10, "s_per_sequence": 2e-6,
                                         "s_per_call": 1e-6}}
    model = FittedCostModel(MODELS["llama-3.1-8b"],
                            profile=make_profile(coefficients, MODELS["llama-3.1-8b"]))
    stepwise = sum(model.step_time_s(StepBatch((), tuple(c + k for c in ctx)))
                   for k in range(steps))
    assert model.decode_steps_time_s(ctx, steps) == pytest.approx(stepwise, rel=1e-9)


def test_registered_and_built_like_the_engine_builds_it():
    assert "fitted" in COST_MODELS
    model = COST_MODELS.build("fitted", model=MODELS["llama-3.1-8b"], gpu=GPUS["h100-sxm"],
                              tp=2, profile=make_profile({"gemm": {"s_per_call": 1e-3}},
                                                         MODELS["llama-3.1-8b"]))
    single = FittedCostModel(MODELS["llama-3.1-8b"], GPUS["h100-sxm"], 1,
                             profile=model.profile)
    batch = StepBatch(decode_contexts=(10,))
    assert model.step_time_s(batch) > single.step_time_s(batch)  # + the all-reduces


def test_transfer_capped_by_measured_copy_rate():
    plain = FittedCostModel(TINY, profile=make_profile())
    assert plain.transfer_time_s(100, 50.0) == 2.0
    measured = FittedCostModel(TINY, profile=make_profile(bandwidth={
        "hbm_copy_bytes_s": 1e3, "host_to_device_bytes_s": 25.0,
        "device_to_host_bytes_s": 40.0}, device="cuda"))
    assert measured.transfer_time_s(100, 50.0) == 4.0


def test_describe_names_profile_and_warns_on_other_device():
    llama = MODELS["llama-3.1-8b"]
    cpu = FittedCostModel(llama, GPUS["h100-sxm"], profile=make_profile(model=llama))
    info = cpu.describe()
    assert info["cost_model"] == "fitted" and info["cost_model_profile"] == "(in memory)"
    assert "h100-sxm" in info["cost_model_warning"]
    same = FittedCostModel(llama, GPUS["h100-sxm"],
                           profile=make_profile(model=llama, device="cuda", preset="h100-sxm"))
    assert "cost_model_warning" not in same.describe()
    other = FittedCostModel(MODELS["qwen2.5-7b"], GPUS["h100-sxm"],
                            profile=make_profile(model=llama, device="cuda", preset="h100-sxm"))
    assert "qwen2.5-7b" in other.describe()["cost_model_warning"]


# -------------------------------------------------------------------- profiles
def test_profile_json_round_trip(tmp_path):
    profile = make_profile({"gemm": {"s_per_flop": 1e-11}})
    path = tmp_path / "p.json"
    path.write_text(profile.to_json())
    assert load_profile(path) == profile


@pytest.mark.parametrize("change, field", [
    (lambda d: d["heldout"].pop("layer"), None),
    (lambda d: d["coefficients"]["gemm"].pop("s_per_call"), None),
    (lambda d: d["coefficients"]["gemm"].update(s_per_flop=-1.0), None),
    (lambda d: d["provenance"].update(device="tpu"), "provenance.device"),
    (lambda d: d.update(extra=1), "extra"),
])
def test_bad_profiles_name_the_problem(tmp_path, change, field):
    data = json.loads(make_profile().to_json())
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as info:
        load_profile(path)
    assert info.value.file == str(path)
    if field:
        assert info.value.field == field


def test_missing_and_malformed_profile_files(tmp_path):
    with pytest.raises(InputError, match="shipped"):
        load_profile(tmp_path / "nope.json")
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(InputError, match="JSON"):
        load_profile(tmp_path / "x.json")


TARGETS = {"gemm": 0.10, "prefill_attention": 0.10, "decode_attention": 0.10, "layer": 0.15}


@pytest.mark.parametrize("name", sorted(shipped_profiles()))
def test_shipped_profiles_load_and_met_their_targets(name):
    profile = load_profile(name)
    assert profile.provenance.model.name in MODELS
    for cls, target in TARGETS.items():
        assert profile.heldout[cls].median_rel_error <= target, cls
    model = FittedCostModel(MODELS[profile.provenance.model.name], profile=name)
    step = model.step_time_s(StepBatch((PrefillChunk(512, 1024),), (2048,) * 4))
    assert 0 < step < math.inf


# ------------------------------------------------------------------ timed runs
DEMO = Path(__file__).parents[2] / "traces" / "demo_chat.jsonl"


def _run(tmp_path, *extra):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "--trace", str(DEMO), "--max-requests", "30",
                                      "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                                      "-o", str(out), *extra])
    summary = json.loads((out / "summary.json").read_text()) if out.exists() else None
    return result, summary


def test_timed_run_with_a_profile_and_with_the_roofline(tmp_path):
    coefficients = {"gemm": {"s_per_flop": 2e-15, "s_per_byte": 3e-13, "s_per_call": 5e-6},
                    "prefill_attention": {"s_per_flop": 4e-15, "s_per_call": 5e-6},
                    "decode_attention": {"s_per_byte": 3e-13, "s_per_call": 5e-6}}
    profile = tmp_path / "p.json"
    profile.write_text(make_profile(coefficients, MODELS["llama-3.1-8b"]).to_json())
    result, fitted = _run(tmp_path / "a", "--profile", str(profile))
    assert result.exit_code == 0, result.output
    assert fitted["cost_model"] == "fitted" and fitted["cost_model_profile"] == str(profile)
    assert "h100-sxm" in fitted["cost_model_warning"]
    assert "warning: profile measured on cpu" in result.output
    assert fitted["completed"] == 30
    result, roofline = _run(tmp_path / "b")
    assert result.exit_code == 0, result.output
    assert roofline["cost_model"] == "roofline" and "cost_model_profile" not in roofline
    assert roofline["completed"] == 30 and roofline["duration"] != fitted["duration"]


def test_fitted_without_profile_and_missing_profile_exit_2(tmp_path):
    result, _ = _run(tmp_path / "a", "--cost-model", "fitted")
    assert result.exit_code == 2 and "cost_model.profile" in result.output
    result, _ = _run(tmp_path / "b", "--profile", str(tmp_path / "nope.json"))
    assert result.exit_code == 2 and "nope.json" in result.output
