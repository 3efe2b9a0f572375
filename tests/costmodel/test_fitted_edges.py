"""The fitted cost model at its edges (costmodel/fitted.py, docs/cost-models.md "The fitted
cost model"), written to kill the mutants bench/mutation.sh left alive there: the whole TP
fallback line for each mix of measured blocks, the summary keys, the error messages, the
ring all-reduce spread over the layers, chunks of 0 and 1 new tokens on both attention
paths, empty decode runs, and transfers capped by the slower measured direction."""

import json

import pytest
from test_fitted import TINY, make_profile
from test_fitted_measured import measured_profile

from prefixsim.costmodel import PrefillChunk, StepBatch
from prefixsim.costmodel.collectives import allreduce_s_per_token
from prefixsim.costmodel.fitted import PARAMS, FittedCostModel
from prefixsim.costmodel.profile import profile_from_mapping
from prefixsim.presets import GPUS, MODELS

US = 1e-6
H100 = GPUS["h100-sxm"]
GEMMS = "GEMMs: {} of 4 layer weights have a table, the rest use the fitted coefficients"


def covering(profile, tps):
    data = json.loads(profile.to_json())
    data["covers_tp"] = tps
    return profile_from_mapping(data)


def test_the_tp_fallback_line_names_each_fallback():
    measured = FittedCostModel(TINY, H100, 2, profile=measured_profile())
    assert measured.tp_fallback() == (
        "profile covers tp 1; at tp 2: " + GEMMS.format(2) + "; element-wise tables read at "
        "the same number of elements; attention grids scaled by heads per GPU; CPU overhead "
        "as measured at tp 1")
    ring = FittedCostModel(TINY, H100, 2, profile=measured_profile(collectives=None),
                           step_overhead_s=1e-4)
    assert ring.tp_fallback() == (
        "profile covers tp 1; at tp 2: " + GEMMS.format(2) + "; element-wise tables read at "
        "the same number of elements; attention grids scaled by heads per GPU; all-reduce "
        "by the ring formula")
    bare = FittedCostModel(TINY, None, 1, profile=covering(make_profile(), [2, 4]))
    assert bare.tp_fallback() == "profile covers tp 2, 4; at tp 1: " + GEMMS.format(0)


def test_the_summary_keys_without_a_gpu():
    """Two warnings (another model's shapes, another TP) joined by '; '; two borrowed parts."""
    profile = measured_profile(source={
        "kind": "vidur", "repo": "r", "commit": "c", "model": "m", "gpu": "a100", "tp": 1,
        "seed": 0, "holdout_fraction": 0.2, "files": [],
        "borrowed": [{"part": "attention", "source": "a100 grids", "rule": "ratio"},
                     {"part": "cpu", "source": "vllm", "rule": "as is"}]})
    other = MODELS["llama-3.1-8b"]
    info = FittedCostModel(other, None, 2, profile=profile).describe()
    assert info["cost_model_profile_device"] == "cpu: test device"
    assert info["cost_model_profile_model"] == "tiny"
    assert info["cost_model_warning"].startswith(
        "profile measured with tiny shapes is used for llama-3.1-8b; profile covers tp 1; ")
    assert info["cost_model_borrowed"] == "attention: a100 grids; cpu: vllm"


def test_errors_name_what_is_wrong():
    with pytest.raises(TypeError) as raised:
        FittedCostModel(TINY, profile=make_profile(), gemm_efficiency=0.5)
    assert str(raised.value) == (
        f"unknown fitted parameter 'gemm_efficiency' (valid: {', '.join(PARAMS)})")
    with pytest.raises(ValueError, match=r"^tp must be >= 1, got 0$"):
        FittedCostModel(TINY, tp=0, profile=make_profile())
    with pytest.raises(ValueError) as raised:
        FittedCostModel(TINY, profile=make_profile(), engine="sglang")
    assert str(raised.value).endswith(
        "the fitted cost model times the CPU after the GPU (use the roofline)")


def test_kv_heads_are_replicated_up_not_rounded_down():
    """8 KV heads over 3 GPUs: 3 each (vLLM pads), not 8 // 3 = 2."""
    model = FittedCostModel(MODELS["llama-3.1-8b"], None, 3, profile=make_profile())
    assert model.dims.num_kv_heads == 3


def test_the_ring_all_reduce_is_spread_over_the_layers():
    """All coefficients 0: a layer is its share of the step's ring all-reduces, per token
    allreduce_s_per_token / 2 layers."""
    model = FittedCostModel(TINY, H100, 2, profile=make_profile())
    per_token = allreduce_s_per_token(TINY, H100, 2)
    assert per_token > 0
    assert model.layer_s(10) == pytest.approx(10 * per_token / 2)


CHUNKS = StepBatch((PrefillChunk(0, 5, False), PrefillChunk(1, 9)), ())


def test_chunks_of_no_new_token_make_no_attention_call():
    """Coefficients: 1 s a prefill call: one call for the 1-token chunk. Grids: the floor (5
    us) + row 4 at 9 cached (flat beyond 8: 18 us) less the floor = 18 us; with decodes of
    3 and 7 (batch 2 at mean 5: 10 us) 28 us."""
    coefficients = make_profile({"prefill_attention": {"s_per_call": 1.0}})
    assert FittedCostModel(TINY, profile=coefficients).attention_s(CHUNKS) == 1.0
    grids = FittedCostModel(TINY, profile=measured_profile())
    assert grids.attention_s(CHUNKS) == pytest.approx(18 * US)
    both = StepBatch(CHUNKS.prefills, (3, 7))
    assert grids.attention_s(both) == pytest.approx(28 * US)


def test_empty_decode_runs_take_no_time_and_runs_pay_the_cpu_per_token():
    grids = FittedCostModel(TINY, profile=measured_profile())
    assert grids.decode_steps_time_s((), 5) == 0.0
    assert grids.decode_steps_time_s((3,), 0) == 0.0
    per_token = FittedCostModel(TINY, profile=measured_profile(), step_overhead_s=1e-4,
                                step_overhead_s_per_token=1e-6)
    steps = sum(per_token.step_time_s(StepBatch((), (3 + k, 7 + k))) for k in range(3))
    assert per_token.decode_steps_time_s((3, 7), 3) == pytest.approx(steps, rel=1e-12)


def test_transfers_take_the_slowest_of_link_and_measured_directions():
    bandwidth = {"hbm_copy_bytes_s": 1e12, "host_to_device_bytes_s": 1e10,
                 "device_to_host_bytes_s": 5e9}
    model = FittedCostModel(TINY, profile=make_profile(bandwidth=bandwidth))
    assert model.transfer_time_s(0, 1e9) == 0.0
    assert model.transfer_time_s(1, 1e9) == pytest.approx(1e-9)
    assert model.transfer_time_s(10**6, 1e9) == pytest.approx(1e-3)  # the link is slower
    assert model.transfer_time_s(10**6, 2e10) == pytest.approx(2e-4)  # device to host
