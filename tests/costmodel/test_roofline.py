"""Known answers of the per-operator roofline (docs/cost-models.md), worked by hand on a toy
model and a slow toy GPU so that every term is in milliseconds:

TINY: 2 layers, hidden 64, 4 heads of 16 (2 KV heads), intermediate 128, vocab 1000.
SLOW: 1e9 FLOP/s bf16 (2e9 fp8), 1e7 B/s HBM, NVLink 2e7 B/s per direction.
"""

import dataclasses
import math

import pytest

from prefixsim.costmodel import PrefillChunk, Roofline, StepBatch, chunk_time_function
from prefixsim.costmodel.collectives import AllReduceCost
from prefixsim.presets import GPUSpec, ModelSpec, get_gpu, get_model, kv_pool_tokens

TINY = ModelSpec(name="tiny", num_layers=2, hidden_size=64, num_heads=4, num_kv_heads=2,
                 head_dim=16, intermediate_size=128, vocab_size=1000, num_params=300_000,
                 num_active_params=300_000)
SLOW = GPUSpec(name="slow", memory_bytes=2**30, hbm_bandwidth_bytes_s=1e7, bf16_flops=1e9,
               fp8_flops=2e9, host_link_bytes_s=1e6, nvlink_bytes_s=2e7)
PLAIN = {"gemm_efficiency": 1.0, "gemm_bandwidth_efficiency": 1.0, "gemm_floor_s": 0.0,
         "overlap_exponent": float("inf"), "prefill_attention_efficiency": 1.0,
         "decode_attention_efficiency": 1.0, "prefill_attention_floor_s": 0.0,
         "decode_attention_floor_s": 0.0, "decode_attention_s_per_seq": 0.0,
         "elementwise_floor_s": 0.0, "step_overhead_s": 0.0, "step_overhead_s_per_seq": 0.0}


def test_gemm_pads_rows_to_tiles_and_blends_compute_with_bytes():
    """100 rows through 64 -> 128, tile 64 (128 rows): compute 2*128*64*128 / (1e9 * 0.72)
    = 2.9127 ms; bytes (100*64 + 100*128)*2 + 64*128*2 = 54,784 -> / (1e7 * 0.9) = 6.0871 ms;
    p = 2: sqrt(2.9127^2 + 6.0871^2) = 6.7481 ms, + 5 us floor = 6.7531 ms."""
    ops = Roofline(TINY, SLOW).ops
    assert ops.gemm_s(100, 64, 128) == pytest.approx(6.7531e-3, rel=1e-4)
    compute = 2 * 128 * 64 * 128 / (1e9 * 0.72)
    memory = 54_784 / (1e7 * 0.9)
    assert ops.gemm_s(100, 64, 128) == pytest.approx(math.hypot(compute, memory) + 5e-6)
    plain = Roofline(TINY, SLOW, **PLAIN).ops
    assert plain.gemm_s(100, 64, 128) == pytest.approx(max(2 * 128 * 64 * 128 / 1e9,
                                                           54_784 / 1e7))
    assert plain.gemm_s(64, 64, 128) == pytest.approx(max(2 * 64 * 64 * 128 / 1e9,
                                                          ((64 * 64 + 64 * 128) * 2
                                                           + 64 * 128 * 2) / 1e7))


def test_layer_elementwise_known_answer():
    """10 tokens: norms 2 x (4*10*64 = 2,560 B at 0.4), rope 4*10*(4+2)*16 = 3,840 B at 0.5,
    activation 6*10*128 = 7,680 B at 0.6, residual 6*10*64 = 3,840 B at 1.0, KV write
    10 * 64 values * (2 + 2) = 2,560 B at 0.5; at 1e7 B/s: 1.28 + 0.768 + 1.28 + 0.384 + 0.512
    = 4.224 ms, + 6 kernels x 2 us."""
    ops = Roofline(TINY, SLOW).ops
    assert ops.layer_elementwise_s(10, 10, 128) == pytest.approx(4.224e-3 + 6 * 2e-6)


def test_prefill_attention_counts_padded_rows_and_causal_factor():
    """10 new after 100 cached, 4 heads of 16: rows pad to 64; flop = 4*4*16*64*(100 +
    1.2*10) = 1,835,008 -> / (1e9 * 0.44) = 4.1705 ms; bytes = 2*4*16*10*2 + 110*64*2
    = 16,640 -> / (1e7 * 0.85) = 1.9576 ms; p = 2 -> 4.6071 ms."""
    ops = Roofline(TINY, SLOW).ops
    assert ops.prefill_attention_s(10, 100) == pytest.approx(4.6071e-3, rel=1e-4)


def test_cached_prefix_costs_its_attention_alone():
    """docs/cost-models.md "What a cached prefix still costs": 10 new tokens after 100 cached
    against the same 10 uncached differ only in attention (GEMMs, KV write, LM head and CPU
    see the 10 new tokens alone). Uncached: flop 4*4*16*64*(1.2*10) = 196,608 -> 0.44684 ms;
    bytes 2,560 + 10*64*2 = 3,840 -> 0.45176 ms; p = 2 -> 0.63542 ms. Cached: 4.6071 ms
    (above). 2 layers x (4.6071 - 0.63542) = 7.9434 ms."""
    model = Roofline(TINY, SLOW)
    cached = model.step_time_s(StepBatch((PrefillChunk(10, 100),)))
    uncached = model.step_time_s(StepBatch((PrefillChunk(10, 0),)))
    assert model.ops.prefill_attention_s(10, 0) == pytest.approx(0.63542e-3, rel=1e-4)
    assert cached - uncached == pytest.approx(7.9434e-3, rel=1e-4)


def test_decode_attention_is_memory_bound_with_floors():
    """3 sequences with contexts 100, 200, 300 on one layer: KV 600 tokens * 64 values * 2 B
    = 76,800 B, queries/outputs 3 * 2*4*16*2 = 768 B, at 1e7 * 0.85 B/s = 9.0259 ms; + 3 x
    0.1 us per sequence + one 15 us call floor (decode-only)."""
    model = Roofline(TINY, SLOW)
    ops = model.ops
    attention = (ops.attention_floor_s(False) + ops.decode_attention_fixed_s(3)
                 + 600 * ops.decode_attention_s_per_context_token())
    assert attention == pytest.approx(77_568 / 8.5e6 + 3e-7 + 15e-6)


def test_allreduce_alpha_beta_picks_the_faster_algorithm():
    """tp 4 on H100 (NVLink 450 GB/s per direction; the 4-GPU ring: 25 us, 0.79 of it =
    355.5 GB/s): 64 KB one-shot, outside a CUDA graph = 9 us + 3 peers x 65,536 / (0.85 x
    450e9 = 382.5e9) = 9.5140 us (ring: 25 us + 1.5 * 65,536 / 355.5e9 = 25.277 us); 64 MB
    (over vLLM's 8 MiB custom limit) ring = 25 us + 1.5 * 67,108,864 / 355.5e9 = 308.16 us
    (Vidur measured 318 us). Without NVLink: ring only, 35 us, 0.65."""
    cost = AllReduceCost.for_gpu(get_gpu("h100-sxm"), 4)
    assert cost.time_s(65_536) == pytest.approx(9.5140e-6, rel=1e-4)
    assert cost.time_s(2**26) == pytest.approx(308.16e-6, rel=1e-4)
    pcie = AllReduceCost.for_gpu(get_gpu("l40s"), 2)
    assert pcie.small_latency_s is None
    assert pcie.time_s(65_536) == pytest.approx(35e-6 + 65_536 / (0.65 * 32e9))
    assert AllReduceCost.for_gpu(get_gpu("h100-sxm"), 1).time_s(1e9) == 0.0


def test_step_adds_two_allreduces_per_layer_only_with_tp():
    """The same step on tp 2 minus tp 1 includes L x 2 all-reduces of T*h*2 bytes (a
    decode step of 8 sequences: inside vllm-v1's CUDA graphs)."""
    batch = StepBatch(decode_contexts=(100,) * 8)
    two = Roofline(TINY, SLOW, tp=2)
    allreduce = two.allreduce.time_s(8 * 64 * 2, graphed=True)
    assert allreduce > 0
    assert two.layer_s(8) == pytest.approx(
        two.ops.gemm_s(8, 64, (2 + 2 * 1) * 16) + two.ops.gemm_s(8, 2 * 16, 64)
        + two.ops.gemm_s(8, 64, 2 * 64) + two.ops.gemm_s(8, 64, 64)
        + two.ops.layer_elementwise_s(8, 8, 64) + 2 * allreduce)
    assert two.step_time_s(batch) > 0


def test_cpu_overhead_grows_with_sequences_and_tokens():
    """0.5 ms + 5 us per sequence by default; a step of 4 decodes and a 100-token chunk
    schedules 5 sequences and 104 tokens: 0.5 + 0.025 ms (+ 2 us per token when asked)."""
    model = Roofline(TINY, SLOW, step_overhead_s_per_token=2e-6)
    assert model.cpu_s(5, 104) == pytest.approx(0.0005 + 5 * 5e-6 + 104 * 2e-6)
    base = Roofline(TINY, SLOW, step_overhead_s=0.0, step_overhead_s_per_seq=0.0)
    batch = StepBatch((PrefillChunk(100, 0),), (50,) * 4)
    assert model.step_time_s(batch) - base.step_time_s(batch) == pytest.approx(
        0.0005 + 5 * 5e-6 + 104 * 2e-6)


def test_step_is_the_sum_of_its_operators():
    """A mixed step: L x (layer over 104 tokens + attention call) + LM head over the 4 decodes
    and the finishing chunk + embedding and final norm + CPU."""
    model = Roofline(TINY, SLOW)
    ops = model.ops
    batch = StepBatch((PrefillChunk(100, 20),), (50, 60, 70, 80))
    attention = (ops.attention_floor_s(True) + ops.prefill_attention_s(100, 20)
                 + ops.decode_attention_fixed_s(4))
    row = 2 * 104 * 64
    head = (ops.gemm_s(5, 64, 1000) + ops.elementwise_s("embedding", 2 * row)
            + ops.elementwise_s("norm", 2 * row))
    expected = (2 * (model.layer_s(104) + attention)
                + 2 * 260 * ops.decode_attention_s_per_context_token() + head
                + model.cpu_s(5, 104))
    assert model.step_time_s(batch) == pytest.approx(expected, rel=1e-12)


def test_logits_only_for_chunks_that_sample_and_no_embedding_table_read():
    """A chunk that does not finish its prompt computes no logits: it costs one LM-head row
    less, and then nothing in the step depends on the vocabulary size (the embedding is a
    gather of the step's rows, not a read of the table)."""
    model = Roofline(TINY, SLOW)
    last = model.step_time_s(StepBatch((PrefillChunk(100, 0, emits_token=True),)))
    middle = model.step_time_s(StepBatch((PrefillChunk(100, 0, emits_token=False),)))
    assert last - middle == pytest.approx(model.ops.gemm_s(1, 64, 1000))
    big_vocab = dataclasses.replace(TINY, vocab_size=100_000, num_params=30_000_000,
                                    num_active_params=30_000_000)
    other = Roofline(big_vocab, SLOW)
    assert other.step_time_s(StepBatch((PrefillChunk(100, 0, emits_token=False),))) == \
        pytest.approx(middle)


def test_attention_runs_at_the_kv_dtype_not_the_weights():
    """fp8 weights (1 byte) double the GEMM peak on SLOW but leave bf16 attention alone;
    an fp8 KV cache moves attention to the fp8 peak and halves its KV bytes."""
    bf16 = Roofline(TINY, SLOW).ops
    fp8_weights = Roofline(TINY, SLOW, weight_dtype_bytes=1).ops
    fp8_kv = Roofline(TINY, SLOW, kv_dtype_bytes=1).ops
    assert fp8_weights.prefill_attention_s(10, 100) == bf16.prefill_attention_s(10, 100)
    assert fp8_weights.gemm_s(4096, 64, 128) < bf16.gemm_s(4096, 64, 128)
    assert fp8_kv.decode_attention_s_per_context_token() == pytest.approx(
        bf16.decode_attention_s_per_context_token() / 2)
    assert fp8_kv.prefill_attention_s(4096, 0) < bf16.prefill_attention_s(4096, 0)


def test_kv_heads_replicated_beyond_tp_and_mla_latent_on_every_gpu():
    """llama-3.1-8b has 8 KV heads: at tp 16 each GPU holds one (replicated), 32 layers x 2 x
    1 x 128 x 2 B = 16,384 B per token per GPU, so the pool is per-GPU bytes // 16,384, not
    16 x per-GPU // 131,072 (which assumed half a head each). deepseek-v3's latent (512 + 64
    values per layer) is on every GPU at any tp: 61 x 576 x 2 = 70,272 B."""
    llama = get_model("llama-3.1-8b")
    assert llama.kv_heads_per_gpu(16) == 1 and llama.kv_heads_per_gpu(4) == 2
    assert llama.kv_bytes_per_token_per_gpu(16) == 16_384
    assert llama.kv_bytes_per_token_per_gpu(2) == 65_536
    h200 = get_gpu("h200")
    per_gpu = int(h200.memory_bytes * 0.9 - llama.weight_bytes() / 16 - 2 * 2**30)
    assert kv_pool_tokens(llama, h200, tp=16) == per_gpu // 16_384
    deepseek = get_model("deepseek-v3")
    assert deepseek.kv_bytes_per_token_per_gpu(8) == 70_272 == deepseek.kv_bytes_per_token()
    model = Roofline(deepseek, get_gpu("h200"), tp=8, weight_dtype_bytes=1)
    assert model.ops.kv_values == 576


def test_unknown_parameter_is_named():
    with pytest.raises(TypeError, match="gemm_efficency"):
        Roofline(TINY, SLOW, gemm_efficency=0.5)
    with pytest.raises(ValueError, match="gemm_efficiency"):
        Roofline(TINY, SLOW, gemm_efficiency=1.5)
    with pytest.raises(ValueError, match="frontend_s"):
        Roofline(TINY, SLOW, frontend_s=-1)


def test_defaults_on_h100_llama_8b_decode_one_sequence():
    """One sequence at context 240 on h100-sxm, llama-3.1-8b: the weights (~15 GB through
    the GEMMs at 0.9 x 3.35 TB/s, ~5.4 ms) dominate; the whole step with floors, attention,
    LM head and 0.5 ms of CPU is about 7.1 ms, the TPOT the bundled vLLM runs measured at
    1 request/s (7.13 ms)."""
    model = Roofline(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))
    assert model.step_time_s(StepBatch(decode_contexts=(240,))) == pytest.approx(7.1e-3,
                                                                                 rel=0.03)


TINY_MOE = dataclasses.replace(TINY, name="tiny-moe", num_experts=8, experts_per_token=2)


def test_moe_experts_run_as_two_grouped_gemms_with_one_floor_each():
    """8 experts, top 2, 4 tokens: touched = 8*(1 - (6/8)^4) = 5.46875 experts, 8 routed
    rows, 8/5.46875 = 1.4629 rows each, padded to one tile of 64. Gate/up (64 -> 256):
    compute 2*5.46875*64*64*256 / (1e9*0.72) = 15.929 ms; bytes (64+256)*2*8 + 5.46875*64*256*2
    = 184,320 -> / (1e7*0.9) = 20.480 ms; p = 2: 25.946 ms + 5 us. Down (128 -> 64): compute
    7.9644 ms, bytes (128+64)*2*8 + 5.46875*128*64*2 = 92,672 -> 10.297 ms; 13.018 ms + 5 us.
    One kernel each: a per-expert GEMM would pay 5.47 floors and its own tiles."""
    rf = Roofline(TINY_MOE, SLOW)
    touched = 8 * (1 - (6 / 8) ** 4)
    up = math.hypot(2 * touched * 64 * 64 * 256 / (1e9 * 0.72),
                    ((64 + 256) * 2 * 8 + touched * 64 * 256 * 2) / (1e7 * 0.9))
    down = math.hypot(2 * touched * 64 * 128 * 64 / (1e9 * 0.72),
                      ((128 + 64) * 2 * 8 + touched * 128 * 64 * 2) / (1e7 * 0.9))
    assert up == pytest.approx(25.946e-3, rel=1e-4)
    assert down == pytest.approx(13.018e-3, rel=1e-4)
    assert rf._mlp_s(4) == pytest.approx(up + down + 2 * 5e-6)
    assert rf.ops.grouped_gemm_s(0, 8, 64, 256) == 0.0 == rf.ops.grouped_gemm_s(4, 0, 64, 256)


def test_moe_decode_reads_only_the_experts_its_tokens_touch():
    """One token touches its top-k experts: the grouped GEMMs read 2 of 8 expert weights, so
    a one-token MoE MLP moves 2 expert weights and 2 routed rows of activations."""
    moe = Roofline(TINY_MOE, SLOW, **PLAIN)
    assert moe._mlp_s(1) == pytest.approx(
        ((64 + 256) * 2 * 2 + 2 * 64 * 256 * 2) / 1e7
        + ((128 + 64) * 2 * 2 + 2 * 128 * 64 * 2) / 1e7)


def test_expert_parallel_splits_whole_experts_over_the_gpus():
    """8 experts, top 2, intermediate 128, tp 2, 4 tokens. Tensor-parallel experts: every GPU
    runs the 5.46875 touched experts at intermediate 64 over all 8 routed rows. Expert
    parallel: every GPU holds 4 whole experts and runs its 2.734 touched ones at
    intermediate 128 over 4 routed rows: the same FLOPs and expert bytes (the whole
    intermediate over half the experts), half the activation rows, the same tiles per
    expert."""
    tp_rf = Roofline(TINY_MOE, SLOW, 2, **PLAIN)
    ep_rf = Roofline(TINY_MOE, SLOW, 2, expert_parallel=True, **PLAIN)
    touched = 8 * (1 - (6 / 8) ** 4)
    up = max(2 * (touched / 2) * 64 * 64 * 256 / 1e9,
             ((64 + 256) * 2 * 4 + touched / 2 * 64 * 256 * 2) / 1e7)
    down = max(2 * (touched / 2) * 64 * 128 * 64 / 1e9,
               ((128 + 64) * 2 * 4 + touched / 2 * 128 * 64 * 2) / 1e7)
    assert ep_rf._mlp_s(4) == pytest.approx(up + down)
    assert tp_rf._mlp_s(4) == pytest.approx(
        max(2 * touched * 64 * 64 * 128 / 1e9, ((64 + 128) * 2 * 8 + touched * 64 * 128 * 2)
            / 1e7)
        + max(2 * touched * 64 * 64 * 64 / 1e9, ((64 + 64) * 2 * 8 + touched * 64 * 64 * 2)
              / 1e7))
    with pytest.raises(ValueError, match="experts"):
        Roofline(TINY, SLOW, 2, expert_parallel=True)


@pytest.mark.parametrize("name, tp", [("llama-3.1-8b", 1), ("llama-2-70b", 4),
                                      ("mixtral-8x7b", 2), ("qwen3-coder-30b-a3b", 4),
                                      ("gemma-3-27b", 2), ("gpt-oss-120b", 2)])
@pytest.mark.parametrize("engine", ["vllm-v1", "vllm-v1-async", "vllm-v0"])
def test_chunk_time_is_the_one_chunk_step_to_the_bit(name, tp, engine):
    """`chunk_time_s(new, cached)` (the prefill pricing's and gdsf's question) is the float
    `step_time_s` gives for a batch of that chunk alone: dense, MoE, window models (which
    take the batch's road), CPU time after or under the GPU's; tile edges, chunk-budget
    sizes and odd ones, with and without a cached prefix."""
    model = Roofline(get_model(name), get_gpu("h100-sxm"), tp, engine=engine)
    for new in (1, 2, 63, 64, 65, 511, 2048, 8191, 8192, 12_345):
        for cached in (0, 1, 16, 999, 65_536, 131_071):
            alone = model.step_time_s(StepBatch((PrefillChunk(new, cached),)))
            assert model.chunk_time_s(new, cached) == alone, (new, cached)
    assert model.chunk_time_s(0, 5) == 0.0 == model.step_time_s(StepBatch((PrefillChunk(0, 5),)))
    assert chunk_time_function(model) == model.chunk_time_s  # what pricing and gdsf ask


def test_a_model_without_chunk_time_is_asked_for_the_one_chunk_step():
    """A cost model written to the protocol alone (no CostModelBase): `chunk_time_function`
    asks its `step_time_s` for the batch of that chunk."""
    class Steps:
        def step_time_s(self, batch):
            (chunk,) = batch.prefills
            assert batch.decode_contexts == () and chunk.emits_token
            return chunk.new_tokens + chunk.cached_tokens / 1000

    assert chunk_time_function(Steps())(7, 3000) == 10.0
