"""The fitted model over a profile's measured blocks (element-wise tables, attention grids,
all-reduce and CPU tables): known answers worked by hand, the attention reading rules, the
decode fast path against step-by-step sums, TP fallbacks and the summary keys."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fitted import TINY, make_profile

from prefixsim.costmodel import PrefillChunk, StepBatch
from prefixsim.costmodel.attention_grid import DecodeTimes, PrefillTimes
from prefixsim.costmodel.fitted import FittedCostModel
from prefixsim.costmodel.measured import elementwise_widths
from prefixsim.costmodel.operators import LayerDims
from prefixsim.costmodel.profile import load_profile, profile_from_mapping
from prefixsim.costmodel.profile_parts import ELEMENTWISE_OPS, AttentionGrid
from prefixsim.errors import InputError
from prefixsim.presets import GPUS

US, MS = 1e-6, 1e-3


def measured_profile(**changes):
    """TINY (2 layers, hidden 8, 2 heads, 1 KV head, head dim 4, intermediate 16) at TP 1:
    every GEMM 1 ms at 1 token and 2 ms at 3; every element-wise kernel 10 us at 1 token and
    30 us at 3 (at its TP-1 width); prefill rows 4 and 8 over cached 0..8 (floor 5 us);
    decode rows 1 and 2 over contexts 1..9; all-reduce on 2 GPUs 10 us at 16 B, 20 us at
    1600 B; CPU 1 ms at batch 1, 2 ms at batch 3."""
    base = json.loads(make_profile().to_json())
    dims = LayerDims.from_spec(TINY)
    base["gemm_tables"] = [{"in_features": k, "out_features": n, "tokens": [1, 3],
                            "time_s": [1 * MS, 2 * MS]} for k, n in dims.weights().values()]
    widths = elementwise_widths(dims)
    base["elementwise"] = {op: {"width": widths[op], "tokens": [1, 3],
                                "time_s": [10 * US, 30 * US]} for op in ELEMENTWISE_OPS}
    geometry = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 4, "floor_s": 5 * US}
    base["attention"] = {
        "prefill": {**geometry, "rows": [
            {"key": 4, "x": [0, 8], "time_s": [10 * US, 18 * US]},
            {"key": 8, "x": [0, 8], "time_s": [20 * US, 36 * US]}]},
        "decode": {**geometry, "rows": [
            {"key": 1, "x": [1, 9], "time_s": [5 * US, 9 * US]},
            {"key": 2, "x": [1, 9], "time_s": [6 * US, 14 * US]}]},
        "rule": "test grids"}
    base["collectives"] = {"all_reduce": [{"num_gpus": 2, "bytes": [16, 1600],
                                           "time_s": [10 * US, 20 * US]}]}
    base["cpu_overhead"] = {"batch_sizes": [1, 3], "time_s": [1 * MS, 2 * MS],
                            "measured_tp": 1, "framework": "test", "components": "all"}
    base.update(changes)
    return profile_from_mapping(base)


def test_decode_step_known_answer():
    """Decode of contexts (3, 7), T = 2: GEMMs read 1.5 ms each, 6 ms a layer; element-wise
    20 us each, 2 norms + rope + activation + 2 adds = 120 us; decode attention at batch 2,
    mean context 5: 6 + 8 x 4/8 = 10 us. Two layers: 2 x 6.13 = 12.26 ms; the LM head
    (8 -> 32, the gate/up matrix's shape, so its table) at 2 tokens 1.5 ms; embedding and
    final norm 40 us; CPU at batch 2: 1.5 ms. Total 15.30 ms."""
    model = FittedCostModel(TINY, profile=measured_profile())
    assert model.step_time_s(StepBatch((), (3, 7))) == pytest.approx(15.30 * MS)


def test_prefill_step_known_answer():
    """A chunk of 6 after 4 cached, T = 6: GEMMs beyond their last point, 2 ms + 3 tokens x
    0.5 ms (the slope from 1 to 3 tokens) = 3.5 ms each, 14 ms a layer; element-wise 30 +
    3 x 10 = 60 us each, 360 us; prefill between rows 4 (14 us at 4 cached) and 8 (28 us),
    21 us = the floor 5 + 16 above it. Two layers 28.762 ms; the LM head at 1 token 1 ms;
    embedding and final norm 120 us; CPU at batch 1: 1 ms. Total 30.882 ms."""
    model = FittedCostModel(TINY, profile=measured_profile())
    assert model.step_time_s(StepBatch((PrefillChunk(6, 4),))) == pytest.approx(30.882 * MS)


def test_two_chunks_pay_one_prefill_floor():
    """Two chunks of 4 after 0: 10 us each, 5 us above the floor; one call: 5 + 5 + 5."""
    model = FittedCostModel(TINY, profile=measured_profile())
    batch = StepBatch((PrefillChunk(4, 0), PrefillChunk(4, 0)))
    assert model.attention_s(batch) == pytest.approx(15 * US)


def test_measured_all_reduce_at_tp2():
    """At TP 2 a layer over T = 2 tokens adds 2 all-reduces of 2 x 8 x 2 = 32 B: 10 us +
    10 us x 16 / 1584 each (without a table and without a GPU preset: none)."""
    measured = FittedCostModel(TINY, None, 2, profile=measured_profile())
    without = FittedCostModel(TINY, None, 2, profile=measured_profile(collectives=None))
    assert measured.layer_s(2) - without.layer_s(2) == pytest.approx(
        2 * (10 + 10 * 16 / 1584) * US)


def test_prefill_grid_rules():
    """Chunks above the largest row split in halves: 16 after 0 = (8 after 0) + (8 after
    8) - floor = 20 + 36 - 5 = 51 us. Twice the query heads double the time above the floor.
    A short row's tail slope is the largest measured row's, scaled by the chunk size."""
    grid = AttentionGrid(num_heads=2, num_kv_heads=1, head_dim=4, floor_s=5 * US, rows=[
        {"key": 4, "x": [0, 128, 256, 512], "time_s": [10 * US, 20 * US, 30 * US, 50 * US]},
        {"key": 8, "x": [0, 8], "time_s": [20 * US, 36 * US]}])
    times = PrefillTimes(grid, num_heads=2, head_dim=4)
    assert times.chunk_s(8, 0) == pytest.approx(20 * US)
    # row 4 measured its slope from 256 to 512: 20 us / 256; row 8 borrows twice that
    assert times.chunk_s(8, 8 + 256) == pytest.approx((36 + 2 * 20 * 256 / 256) * US)
    assert times.chunk_s(16, 0) == pytest.approx(times.chunk_s(8, 0) + times.chunk_s(8, 8)
                                                 - 5 * US)
    doubled = PrefillTimes(grid, num_heads=4, head_dim=4)
    assert doubled.chunk_s(8, 0) == pytest.approx((5 + 2 * 15) * US)
    assert times.chunk_s(1, 0) == times.chunk_s(4, 0)  # below the smallest row: read it


def test_decode_grid_rules():
    """Batch 4 beyond the largest row (2): 2x the time above the floor at batch 2; KV heads
    x 3: 3x the time above the floor."""
    grid = AttentionGrid(num_heads=2, num_kv_heads=1, head_dim=4, floor_s=5 * US, rows=[
        {"key": 1, "x": [1, 9], "time_s": [5 * US, 9 * US]},
        {"key": 2, "x": [1, 9], "time_s": [6 * US, 14 * US]}])
    times = DecodeTimes(grid, num_kv_heads=1, head_dim=4)
    assert times.batch_s(2, 5) == pytest.approx(10 * US)
    assert times.batch_s(4, 5) == pytest.approx((5 + 2 * 5) * US)
    assert DecodeTimes(grid, 3, 4).batch_s(2, 5) == pytest.approx((5 + 3 * 5) * US)


contexts = st.lists(st.integers(1, 40), min_size=1, max_size=5)


@settings(max_examples=50, deadline=None)
@given(contexts, st.integers(1, 30), st.sampled_from([1, 2]))
def test_decode_steps_equal_the_sum_of_steps(ctx, steps, tp):
    """The decode fast path (attention summed with numpy) against one step at a time, with
    contexts beyond the grid, batches beyond its rows and the all-reduce of TP 2."""
    model = FittedCostModel(TINY, GPUS["h100-sxm"], tp, profile=measured_profile())
    stepwise = sum(model.step_time_s(StepBatch((), tuple(c + k for c in ctx)))
                   for k in range(steps))
    assert model.decode_steps_time_s(ctx, steps) == pytest.approx(stepwise, rel=1e-9)


def test_cpu_table_params_and_serving_overheads():
    """A step_overhead_* parameter replaces the CPU table by the formula; the serving
    overheads default to the vllm-v1 engine's (6.4 + 7 ms, 3.2 us per prompt token, 6 ms)
    and take params; an engine that overlaps CPU and GPU is refused (the profile's CPU table
    is timed after the GPU); an unknown parameter is a TypeError naming it."""
    profile = measured_profile()
    table = FittedCostModel(TINY, profile=profile)
    formula = FittedCostModel(TINY, profile=profile, step_overhead_s=0.25 * MS)
    assert table.cpu_s(2, 2) == pytest.approx(1.5 * MS)
    assert formula.cpu_s(2, 2) == pytest.approx(0.25 * MS + 2 * 5 * US)
    assert table.serving_overheads.frontend_s == 0.0064
    assert table.serving_overheads.frontend_s_per_prompt_token == 3.2e-6
    assert FittedCostModel(TINY, profile=profile, engine="vllm-v0").cpu_s(2, 2) \
        == pytest.approx(1.5 * MS)  # the profile's measured CPU table still wins
    with pytest.raises(ValueError, match="overlaps"):
        FittedCostModel(TINY, profile=profile, engine="sglang")
    assert table.serving_overheads.idle_wakeup_s == 0.006
    assert FittedCostModel(TINY, profile=profile, emission_s=0.001).serving_overheads \
        .emission_s == 0.001
    with pytest.raises(TypeError, match="gemm_efficiency"):
        FittedCostModel(TINY, profile=profile, gemm_efficiency=0.5)


def test_tp_fallback_and_borrowed_parts_in_the_summary():
    profile = measured_profile(source={
        "kind": "vidur", "repo": "r", "commit": "c", "model": "m", "gpu": "a100", "tp": 1,
        "seed": 0, "holdout_fraction": 0.2, "files": [],
        "borrowed": [{"part": "attention", "source": "a100 grids", "rule": "ratio"}]})
    same = FittedCostModel(TINY, GPUS["h100-sxm"], 1, profile=profile).describe()
    assert "tp" not in same.get("cost_model_warning", "")
    assert same["cost_model_borrowed"] == "attention: a100 grids"
    other = FittedCostModel(TINY, GPUS["h100-sxm"], 2, profile=profile).describe()
    # at TP 2 gate/up (8 x 16) and down (8 x 8) have the shapes of the TP-1 QKV and O tables
    assert "profile covers tp 1; at tp 2: GEMMs: 2 of 4 layer weights have a table" in \
        other["cost_model_warning"]
    assert "element-wise tables read at the same number of elements" in \
        other["cost_model_warning"]
    assert "CPU overhead as measured at tp 1" in other["cost_model_warning"]


def test_measured_blocks_round_trip_and_are_checked(tmp_path):
    profile = measured_profile()
    path = tmp_path / "p.json"
    path.write_text(profile.to_json())
    assert load_profile(path) == profile
    assert "[1, 3]" in path.read_text()  # number lists on one line
    data = json.loads(profile.to_json())
    data["elementwise"].pop("rope")
    with pytest.raises(InputError, match="elementwise needs exactly"):
        profile_from_mapping(data)
    data = json.loads(profile.to_json())
    data["attention"]["decode"]["rows"][0]["x"] = [9, 1]
    with pytest.raises(InputError) as info:
        profile_from_mapping(data)
    assert info.value.field == "attention.decode.rows.0"
    data = json.loads(profile.to_json())
    del data["provenance"]["torch_version"]  # a calibration profile needs its fields
    with pytest.raises(InputError, match="torch_version"):
        profile_from_mapping(data)
