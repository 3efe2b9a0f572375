"""Calibration with torch on the CPU, tiny shapes: the attention kernels timed are checked
against naive reference attention, and a whole calibrate/validate round trip runs."""

from __future__ import annotations

import builtins
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.costmodel.fitted import FittedCostModel
from prefixsim.costmodel.operators import DecodeAttention, LayerDims
from prefixsim.costmodel.profile import load_profile
from prefixsim.costmodel.protocol import PrefillChunk, StepBatch
from prefixsim.presets import model_from_mapping
from prefixsim.profiles.calibrate import (
    Bench,
    calibrate,
    decode_attention,
    decode_attention_varlen,
    guess_hardware_preset,
    prefill_attention,
    validate,
)
from prefixsim.profiles.shapes import ShapeRanges, plan_shapes

pytestmark = pytest.mark.heavy  # torch: .ci/run's second step
torch = pytest.importorskip("torch")

TINY_SPEC = {"name": "tiny", "num_layers": 2, "hidden_size": 32, "num_heads": 4,
             "num_kv_heads": 2, "head_dim": 8, "intermediate_size": 64, "vocab_size": 100,
             "num_params": 100_000, "num_active_params": 100_000}
TINY = LayerDims.from_spec(model_from_mapping(TINY_SPEC))
RANGES = ShapeRanges(max_tokens=16, gemms_per_weight=3, max_new=16, max_context=48,
                     max_pairs=1024, num_prefill=10, max_batch=4, max_kv_tokens=128,
                     num_decode=10, num_layer=3, passes=2, repeats=1)


def naive_attention(q, k, v, cached):
    """Loops over heads and query rows: query row i (position cached + i) attends to keys
    0 .. cached + i; query head h reads KV head h // (Hq / Hkv)."""
    _, hq, n, d = q.shape
    hkv = k.shape[1]
    out = torch.zeros_like(q)
    for h in range(hq):
        kh, vh = k[0, h // (hq // hkv)], v[0, h // (hq // hkv)]
        for i in range(n):
            visible = cached + i + 1
            scores = (kh[:visible] @ q[0, h, i]) / math.sqrt(d)
            out[0, h, i] = torch.softmax(scores, 0) @ vh[:visible]
    return out


@pytest.mark.parametrize("new, cached", [(5, 7), (4, 0), (1, 9), (6, 1)])
def test_prefill_attention_is_bottom_right_causal(new, cached):
    gen = torch.Generator().manual_seed(new * 100 + cached)
    q = torch.randn(1, 4, new, 8, generator=gen)
    k = torch.randn(1, 2, cached + new, 8, generator=gen)
    v = torch.randn(1, 2, cached + new, 8, generator=gen)
    expected = naive_attention(q, k, v, cached)
    assert torch.allclose(prefill_attention(torch, q, k, v), expected, atol=1e-5)
    if cached > 0 and new > 1:  # the top-left mask (is_causal=True) would be wrong here
        top_left = torch.nn.functional.scaled_dot_product_attention(
            q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), is_causal=True)
        assert not torch.allclose(top_left, expected, atol=1e-3)


def test_decode_attention_matches_naive():
    gen = torch.Generator().manual_seed(3)
    contexts = (3, 9, 1)
    q = torch.randn(len(contexts), 4, 8, generator=gen)
    keys = [torch.randn(2, n, 8, generator=gen) for n in contexts]
    values = [torch.randn(2, n, 8, generator=gen) for n in contexts]
    out = decode_attention(torch, q, keys, values, torch.empty_like(q))
    for i, n in enumerate(contexts):
        expected = naive_attention(q[i].view(1, 4, 1, 8), keys[i].unsqueeze(0),
                                   values[i].unsqueeze(0), n - 1)
        assert torch.allclose(out[i], expected.view(4, 8), atol=1e-5)


def reference_varlen(torch, q, k, v, cu_q, cu_k, max_k, out):
    """The varlen decode call as one SDPA call per sequence over its slice of packed K/V."""
    ends = [int(e) for e in cu_k]
    assert max_k == max(b - a for a, b in zip(ends[:-1], ends[1:], strict=True))
    assert [int(e) for e in cu_q] == list(range(len(ends)))
    keys = [k[a:b].transpose(0, 1) for a, b in zip(ends[:-1], ends[1:], strict=True)]
    values = [v[a:b].transpose(0, 1) for a, b in zip(ends[:-1], ends[1:], strict=True)]
    return decode_attention(torch, q, keys, values, out)


def packed_bench(varlen: bool, seed: int = 0) -> Bench:
    """A CPU bench with CUDA's packed K/V layout; `varlen` routes decodes to the varlen call."""
    bench = Bench(torch, TINY, "cpu", "fp32", "fp32", seed=seed, threads=1)
    bench.packed_kv, bench.varlen_decode = True, varlen
    return bench


@pytest.mark.parametrize("batch", [StepBatch((), (3, 9, 1)),
                                   StepBatch((PrefillChunk(4, 5),), (2, 7)),
                                   StepBatch((PrefillChunk(6, 0), PrefillChunk(2, 3)), (4,))])
def test_varlen_decode_reads_the_same_cache_as_per_sequence_calls(batch, monkeypatch):
    """CUDA's decode path (one varlen call over packed K/V) must see each decode sequence's
    own keys, the KV it wrote this step included: offsets, cu_k and max_k checked here with a
    per-sequence reference standing in for the CUDA kernel."""
    import prefixsim.profiles.calibrate as calibrate_module

    monkeypatch.setattr(calibrate_module, "decode_attention_varlen", reference_varlen)
    per_sequence = packed_bench(varlen=False).layer(batch)()
    varlen = packed_bench(varlen=True).layer(batch)()
    assert torch.allclose(varlen, per_sequence, atol=1e-6)
    op = DecodeAttention(batch.decode_contexts, TINY.num_heads, TINY.num_kv_heads,
                         TINY.head_dim)
    assert torch.allclose(packed_bench(varlen=True).operator(op)(),
                          packed_bench(varlen=False).operator(op)(), atol=1e-6)


def test_layer_runs_every_step_kind():
    bench = Bench(torch, TINY, "cpu", "fp32", "fp32", seed=0, threads=1)
    for batch in (StepBatch((PrefillChunk(5, 7),)), StepBatch((), (3, 9)),
                  StepBatch((PrefillChunk(4, 0),), (2,))):
        out = bench.layer(batch)()
        assert out.shape == (batch.num_tokens, TINY.hidden_size)
        assert torch.isfinite(out).all()


def test_layer_stays_finite_over_repeated_calls():
    """Timing calls a layer many times, so a call must be a pure function of its inputs.
    Two bugs broke that: the KV writes aliased the input (same fp32 pool), and decode
    attention never ran, leaving its rows of the output uninitialised."""
    for seed in range(20):
        bench = Bench(torch, TINY, "cpu", "fp32", "fp32", seed=seed, threads=1)
        for batch in (StepBatch((PrefillChunk(5, 7),)), StepBatch((), (3, 9)),
                      StepBatch((PrefillChunk(4, 0),), (2,))):
            run = bench.layer(batch)
            first = run().clone()
            for _ in range(10):
                out = run()
            assert torch.equal(out, first), "a layer call changed its own inputs"


def test_bf16_linear_layers_with_fp32_attention_on_cpu():
    bench = Bench(torch, TINY, "cpu", "bf16", "fp32", seed=0, threads=1)
    out = bench.layer(StepBatch((PrefillChunk(3, 4),), (5,)))()
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_requested_without_cuda_exits_2():
    result = CliRunner().invoke(app, ["calibrate", "--model", "llama-3.1-8b", "--device",
                                      "cuda"])
    assert result.exit_code == 2 and "CUDA is not available" in result.output


def test_plan_is_reproducible_and_within_ranges():
    plan = plan_shapes(TINY, RANGES, np.random.default_rng(5))
    again = plan_shapes(TINY, RANGES, np.random.default_rng(5))
    assert plan == again
    assert all(op.new_tokens * (op.new_tokens + op.cached_tokens) <= RANGES.max_pairs
               for op in plan.ops["prefill_attention"])
    assert all(sum(op.contexts) <= RANGES.max_kv_tokens for op in plan.ops["decode_attention"])
    tokens = {op.tokens for op in plan.ops["gemm"]}
    assert {1, RANGES.max_tokens} <= tokens


@pytest.fixture(scope="module")
def tiny_profile():
    return calibrate(TINY, "cpu", quick=True, seed=1, ranges=RANGES)


def test_calibrate_writes_a_complete_profile(tiny_profile, tmp_path):
    profile = tiny_profile
    prov = profile.provenance
    assert prov.device == "cpu" and prov.attention_dtype == "fp32" and prov.num_threads == 1
    assert "thread CPU time" in prov.backend
    assert prov.torch_version == torch.__version__ and prov.model.name == "tiny"
    assert set(profile.heldout) == {"gemm", "prefill_attention", "decode_attention", "layer"}
    assert profile.heldout["prefill_attention"].n == 2  # 20% of 10
    assert profile.heldout["layer"].n == RANGES.num_layer
    assert len(prov.shapes["decode_attention"]) == RANGES.num_decode
    held = [s for s in prov.shapes["gemm"] if s["heldout"]]
    assert held and all(s["tokens"] not in (1, RANGES.max_tokens) for s in held)
    assert profile.gemm_tables and "gemm" in profile.heldout_linear
    path = tmp_path / "tiny.json"
    path.write_text(profile.to_json())
    assert load_profile(path) == profile
    spec = model_from_mapping(TINY_SPEC)
    assert FittedCostModel(spec, profile=path).step_time_s(StepBatch((), (10,))) > 0


def test_validate_measures_fresh_shapes(tiny_profile):
    errors = validate(tiny_profile, seed=2, ranges=RANGES)
    assert set(errors) == {"gemm", "prefill_attention", "decode_attention", "layer"}
    assert errors["decode_attention"]["n"] == RANGES.num_decode  # all shapes are fresh


def test_cli_calibrate_and_validate(tmp_path, monkeypatch):
    presets = tmp_path / "models.yaml"
    presets.write_text(json.dumps({"models": [TINY_SPEC]}))
    monkeypatch.setattr("prefixsim.profiles.calibrate.shape_ranges", lambda *a: RANGES)
    out = tmp_path / "p.json"
    result = CliRunner().invoke(app, ["calibrate", "--model", "tiny", "--presets",
                                      str(presets), "--quick", "-o", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "held-out" in result.output and "prefill_attention" in result.output
    assert load_profile(out).provenance.model.name == "tiny"
    result = CliRunner().invoke(app, ["calibrate", "--validate", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "validation" in result.output
    # the profile says its shapes: a --model beside --validate ran 38 s and was ignored
    result = CliRunner().invoke(app, ["calibrate", "--validate", str(out), "--model",
                                      "llama-2-7b", "--quiet"])
    assert result.exit_code == 2
    assert result.output.strip() == "prefixsim: error: --model: --validate re-measures the " \
        "shapes the profile was fitted on, so --model is not read: leave it out"


def test_cli_without_torch_says_how_to_install(monkeypatch):
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("no torch")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    result = CliRunner().invoke(app, ["calibrate", "--model", "llama-3.1-8b"])
    assert result.exit_code == 2
    assert "pip install 'prefixsim[calibrate]'" in result.output


def test_cli_bad_model_exits_2():
    result = CliRunner().invoke(app, ["calibrate", "--model", "gpt-9"])
    assert result.exit_code == 2 and "unknown model" in result.output


@pytest.mark.parametrize("name, preset", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-80GB", "a100-80g"),
    ("NVIDIA A100-SXM4-40GB", "a100-40g"), ("NVIDIA L40S", "l40s"), ("NVIDIA L4", "l4"),
    ("AMD EPYC 9654", None),
])
def test_guess_hardware_preset(name, preset):
    assert guess_hardware_preset(name) == preset


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_calibration_measures_bandwidth():
    profile = calibrate(TINY, "cuda", quick=True, seed=1, ranges=RANGES)
    assert profile.bandwidth is not None and profile.rules.prefill_skips_masked


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_varlen_decode_matches_per_sequence_sdpa():
    """The flash varlen kernel against one SDPA call per sequence, bf16, GQA heads."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    contexts = (3, 40, 17, 1)
    cu_k = torch.tensor(np.cumsum([0, *contexts]), dtype=torch.int32, device="cuda")
    cu_q = torch.arange(len(contexts) + 1, dtype=torch.int32, device="cuda")
    q = torch.randn(len(contexts), 8, 64, generator=gen, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(sum(contexts), 2, 64, generator=gen, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(sum(contexts), 2, 64, generator=gen, device="cuda", dtype=torch.bfloat16)
    got = decode_attention_varlen(torch, q, k, v, cu_q, cu_k, max(contexts),
                                  torch.empty_like(q))
    expected = reference_varlen(torch, q, k, v, cu_q, cu_k, max(contexts), torch.empty_like(q))
    assert torch.allclose(got.float(), expected.float(), atol=2e-2)
    bench = Bench(torch, TINY, "cuda", "bf16", "bf16", seed=0)
    assert bench.varlen_decode, bench.backend()
