"""Whole-step roofline edges: known answers on a toy model and GPU with round figures
(worked by hand), every step formula against a naive restatement of the module docstring,
and the decode fast path against the step-by-step sum where both regimes and their crossing
occur within a few steps."""

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from prefixsim.costmodel import PrefillChunk, StepBatch, StepRoofline
from prefixsim.costmodel.step_roofline import StepRooflineParams, _sum_max_of_lines
from prefixsim.presets import get_gpu, get_model
from prefixsim.presets.specs import GPUSpec, ModelSpec

# One layer, one head of width 1, vocabulary 1: P = 12 - 2 (untied embeddings) = 10, so
# 20 GEMM FLOPs per token, 2·1·1 = 2 logit FLOPs per sequence, 4·1·1·1 = 4 attention FLOPs
# per (token, context token) pair, 2·1·1·2 = 4 KV bytes per token, 24 weight bytes.
TOY = ModelSpec("toy", 1, 1, 1, 1, 1, 1, 1, num_params=12, num_active_params=12)
# MoE: 4 experts, 1 per token, 8 expert parameters (16 bytes) of 20; P = 14 - 2 = 12.
TOY_MOE = ModelSpec("toy-moe", 1, 1, 1, 1, 1, 1, 1, num_params=20, num_active_params=14,
                    num_experts=4, experts_per_token=1, expert_params=8)
# 64 FLOP/s, 16 B/s; the all-reduce of one token moves 1·2·1·2 = 4 bytes over 4 B/s.
TOY_GPU = GPUSpec("toy-gpu", memory_bytes=1, hbm_bandwidth_bytes_s=16, bf16_flops=64,
                  fp8_flops=None, host_link_bytes_s=1, nvlink_bytes_s=4)
# GEMM at 32 FLOP/s, attention at 16 FLOP/s, HBM at 8 B/s (tp=1), 0.5 s per step
TOY_PARAMS = dict(gemm_efficiency=0.5, attention_efficiency=0.25, bandwidth_efficiency=0.5,
                  step_overhead_s=0.5)
# (3 new on 2 cached) + (1 new) prefills, decodes at 4 and 6: T = 6 tokens, S = 4 sequences,
# GEMM 20·6 + 2·4 = 128 FLOPs, attention 4·((3·2 + 3·4/2) + 1 + 10) = 92 FLOPs,
# bytes 24 + 4·(5 + 1 + 10) = 88.
MIXED = StepBatch((PrefillChunk(3, 2), PrefillChunk(1, 0)), decode_contexts=(4, 6))


def toy(model=TOY, tp=1, **params):
    return StepRoofline(model, TOY_GPU, tp=tp, **{**TOY_PARAMS, **params})


def test_a_mixed_compute_bound_step_by_hand():
    """HBM at 16 B/s: memory 88/16 = 5.5 s < compute 128/32 + 92/16 = 4 + 5.75 = 9.75 s;
    step = 9.75 + 0.5 s."""
    assert toy(bandwidth_efficiency=1.0).step_time_s(MIXED) == 10.25


def test_a_mixed_memory_bound_step_by_hand():
    """Compute at 64 FLOP/s: 128/64 + 92/64 = 3.4375 s < memory 88/8 = 11 s; step 11.5 s."""
    model = toy(gemm_efficiency=1.0, attention_efficiency=1.0)
    assert model.step_time_s(MIXED) == 11.5


def test_a_mixed_tensor_parallel_step_by_hand():
    """tp=2: GEMM 64, attention 32 FLOP/s, HBM 32 B/s: compute 2 + 2.875 = 4.875 s > memory
    2.75 s; the ring moves 2·1/2·4 = 4 bytes per token over 4 B/s, 1 s for each of the 6
    tokens; step = 4.875 + 6 + 0.5 s."""
    assert toy(tp=2, bandwidth_efficiency=1.0).step_time_s(MIXED) == 11.375


def test_moe_weights_read_by_hand():
    """Dense 40 - 16 = 24 bytes; T tokens touch 1 - (3/4)^T of the 16 expert bytes:
    T=1 -> 24 + 4, T=2 -> 24 + 7; no tokens (and dense models) read every weight."""
    model = toy(TOY_MOE)
    assert [model.weight_bytes_read(t) for t in (1, 2)] == [28.0, 31.0]
    assert model.weight_bytes_read(0) == 40
    assert model.weight_bytes_read(-1) == 40
    assert toy().weight_bytes_read(5) == 24


def test_moe_decode_step_by_hand():
    """Contexts 4 and 6: bytes 31 + 4·10 = 71 -> 8.875 s > compute (2·12 + 2)·2/32 +
    4·10/16 = 4.125 s; step 9.375 s."""
    assert toy(TOY_MOE).step_time_s(StepBatch(decode_contexts=(4, 6))) == 9.375


def test_mixtral_one_token_reads_a_quarter_of_the_experts():
    """2 of 8 experts: the bytes of 3/4 of the 32·8·3·4096·14336 expert parameters stay
    unread."""
    mixtral = get_model("mixtral-8x7b")
    model = StepRoofline(mixtral, get_gpu("h100-sxm"))
    unread = 32 * 8 * 3 * 4096 * 14336 * 2 * 3 / 4
    assert model.weight_bytes_read(1) == pytest.approx(mixtral.weight_bytes() - unread,
                                                       rel=1e-12)


def test_decode_run_lines_by_hand():
    """tp=2 (GEMM 64, attention 32 FLOP/s, HBM 16 B/s), 2 sequences, context sum 5:
    a1 = 2·22/64 + 4·5/32 = 1.3125, b1 = 4·2/32, a2 = (24 + 4·5)/16 = 2.75, b2 = 4·2/16,
    fixed = 2 tokens · 1 s of all-reduce + 0.5 s."""
    model = toy(tp=2)
    assert model.decode_run_lines(2, 5) == (1.3125, 0.25, 2.75, 0.5, 2.5)


def test_a_decode_run_that_turns_memory_bound_by_hand():
    """Four sequences at context 1, attention at 32 FLOP/s, HBM at 16 B/s: compute
    a1 = 4·22/32 + 4·4/32 = 3.25, b1 = 0.5; memory a2 = (24 + 16)/16 = 2.5, b2 = 1: steps
    max(3.25, 2.5) + max(3.75, 3.5) + max(4.25, 4.5) + max(4.75, 5.5) = 17 s, + 4·0.5 s."""
    model = toy(attention_efficiency=0.5, bandwidth_efficiency=1.0)
    assert model.decode_run_lines(4, 4)[:4] == (3.25, 0.5, 2.5, 1.0)
    assert model.decode_steps_time_s((1, 1, 1, 1), 4) == 19.0
    steps = [model.step_time_s(StepBatch(decode_contexts=(1 + j,) * 4)) for j in range(4)]
    assert steps == [3.75, 4.25, 5.0, 6.0]
    assert model.decode_steps_time_s((1, 1, 1, 1), 0) == 0.0


@pytest.mark.parametrize(("a1", "b1", "a2", "b2"), [(1, 1, 2, 1), (0, 2, 5, -1), (5, -1, 0, 2)])
@pytest.mark.parametrize("num_steps", [0, -1, -3])
def test_no_steps_sum_to_nothing(a1, b1, a2, b2, num_steps):
    assert _sum_max_of_lines(a1, b1, a2, b2, num_steps) == 0.0


@pytest.mark.parametrize("name", ["gemm_efficiency", "attention_efficiency",
                                  "bandwidth_efficiency"])
def test_efficiencies_lie_in_zero_to_one(name):
    assert getattr(StepRooflineParams(**{name: 1.0}), name) == 1.0
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match=rf"^{name} must be in \(0, 1\], got {bad}$"):
            StepRooflineParams(**{name: bad})


def test_step_overhead_may_be_zero_not_negative():
    assert StepRooflineParams(step_overhead_s=0.0).step_overhead_s == 0.0
    with pytest.raises(ValueError, match=r"^step_overhead_s must be >= 0, got -0.001$"):
        StepRooflineParams(step_overhead_s=-0.001)


def naive_step_time(spec, gpu, tp, params, batch):
    """The module docstring's formula, written out again."""
    p = StepRooflineParams(**params)
    prefills = [(c.new_tokens, c.cached_tokens) for c in batch.prefills]
    contexts = batch.decode_contexts
    tokens = sum(n for n, _ in prefills) + len(contexts)
    if tokens == 0:
        return 0.0
    seqs = len(prefills) + len(contexts)
    gemm = 2 * spec.linear_params_per_token * tokens + 2 * spec.hidden_size * spec.vocab_size * seqs
    pairs = sum(n * c + n * (n + 1) / 2 for n, c in prefills) + sum(contexts)
    attn = 4 * spec.num_layers * spec.num_heads * spec.head_dim * pairs
    expert = spec.expert_params * p.weight_dtype_bytes
    weights = spec.weight_bytes(p.weight_dtype_bytes) - expert
    if spec.is_moe:
        weights += expert * (1 - (1 - spec.experts_per_token / spec.num_experts) ** tokens)
    else:
        weights += expert
    kv = sum(n + c for n, c in prefills) + sum(contexts)
    num_bytes = weights + spec.kv_bytes_per_token(p.kv_dtype_bytes) * kv
    peak = gpu.peak_flops(p.weight_dtype_bytes) * tp
    compute = gemm / (peak * p.gemm_efficiency) + attn / (peak * p.attention_efficiency)
    memory = num_bytes / (gpu.hbm_bandwidth_bytes_s * tp * p.bandwidth_efficiency)
    ring = 0.0
    if tp > 1:
        ring = 2 * (tp - 1) / tp * spec.num_layers * 2 * spec.hidden_size * 2 / (
            gpu.interconnect_bytes_s) * tokens
    return max(compute, memory) + ring + p.step_overhead_s


params_st = st.fixed_dictionaries({
    "gemm_efficiency": st.floats(0.05, 1), "attention_efficiency": st.floats(0.05, 1),
    "bandwidth_efficiency": st.floats(0.05, 1), "step_overhead_s": st.floats(0, 2),
    "weight_dtype_bytes": st.sampled_from([1, 2]), "kv_dtype_bytes": st.sampled_from([1, 2])})
gpu_st = st.builds(GPUSpec, name=st.just("g"), memory_bytes=st.just(1),
                   hbm_bandwidth_bytes_s=st.floats(1, 1e3), bf16_flops=st.floats(1, 1e4),
                   fp8_flops=st.one_of(st.none(), st.floats(1, 1e4)),
                   host_link_bytes_s=st.floats(1, 100),
                   nvlink_bytes_s=st.one_of(st.none(), st.floats(1, 100)))
spec_st = st.sampled_from([TOY, TOY_MOE, get_model("llama-3.1-8b"), get_model("mixtral-8x7b")])
batch_st = st.builds(
    StepBatch,
    st.lists(st.builds(PrefillChunk, st.integers(1, 40), st.integers(0, 40)), max_size=3
             ).map(tuple),
    decode_contexts=st.lists(st.integers(1, 60), max_size=5).map(tuple))

# explain=False: the explain phase traces the failing example's lines, which is slow and
# only annotates the report; every example is still generated, checked and shrunk.
NO_EXPLAIN = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]


@settings(max_examples=300, deadline=None, phases=NO_EXPLAIN)
@given(spec_st, gpu_st, st.sampled_from([1, 2, 4]), params_st, batch_st)
def test_step_time_is_the_docstring_formula(spec, gpu, tp, params, batch):
    model = StepRoofline(spec, gpu, tp=tp, **params)
    assert model.step_time_s(batch) == pytest.approx(
        naive_step_time(spec, gpu, tp, params, batch), rel=1e-12, abs=0)


@settings(max_examples=300, deadline=None, phases=NO_EXPLAIN)
@given(spec_st, gpu_st, st.sampled_from([1, 2, 4]), params_st,
       st.lists(st.integers(1, 60), min_size=1, max_size=6), st.integers(0, 30))
def test_toy_decode_runs_equal_their_steps(spec, gpu, tp, params, contexts, steps):
    """Random GPUs put either line on top, and their crossing within the run."""
    model = StepRoofline(spec, gpu, tp=tp, **params)
    naive = sum(model.step_time_s(StepBatch(decode_contexts=tuple(c + j for c in contexts)))
                for j in range(steps))
    assert model.decode_steps_time_s(contexts, steps) == pytest.approx(naive, rel=1e-9, abs=0)
