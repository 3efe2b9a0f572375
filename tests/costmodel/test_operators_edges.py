"""The operators of a layer at their edges (costmodel/operators.py, docs/cost-models.md
"Fitted model"), known answers worked by hand, written to kill the mutants bench/mutation.sh
left alive: a split that does not divide evenly, two KV heads (one hides `2 * kv` against
`2 / kv`), the masked-tile rule reaching the features, the MoE default of `layer_gemms`, and
the zero-token edges (no GEMMs, no attention for a chunk of no new tokens, no LM head)."""

import dataclasses

from test_roofline import TINY

from prefixsim.costmodel import PrefillChunk, StepBatch
from prefixsim.costmodel.operators import (
    DecodeAttention,
    FeatureRules,
    Gemm,
    LayerDims,
    PrefillAttention,
    layer_gemms,
    layer_operators,
    lm_head,
)

DIMS = LayerDims(name="two-kv", num_layers=1, hidden_size=8, num_heads=2, num_kv_heads=2,
                 head_dim=4, intermediate_size=16, vocab_size=10)
MOE = dataclasses.replace(DIMS, num_experts=4, experts_per_token=2)


def test_a_split_rounds_down_and_keeps_at_least_one():
    """10 heads, 6 KV heads, intermediate 10: tp 4 gives 2, 1, 2 (not 2.5, 1.5, 2.5); tp 8
    gives 1, max(1, 0) = 1 and 1 (not 2)."""
    spec = dataclasses.replace(TINY, num_heads=10, num_kv_heads=6, intermediate_size=10)
    four, eight = LayerDims.from_spec(spec, 4), LayerDims.from_spec(spec, 8)
    assert (four.num_heads, four.num_kv_heads, four.intermediate_size) == (2, 1, 2)
    assert all(type(v) is int for v in (four.num_heads, four.num_kv_heads,
                                        four.intermediate_size))
    assert (eight.num_heads, eight.num_kv_heads, eight.intermediate_size) == (1, 1, 1)


def test_two_kv_heads_double_the_kv_work():
    """2 heads and 2 KV heads of 4: QKV out (2 + 2*2) * 4 = 24. Prefill of 2 after 3 cached,
    2-byte values: bytes (2*2*2 + 2*2*5) * 4 * 2 = 224; decode of contexts 3 and 5: flop
    4*2*4*8 = 256, bytes (2*2*8 + 2*2*2) * 4 * 2 = 320."""
    assert DIMS.weights()["qkv"] == (8, 24)
    assert PrefillAttention(2, 3, 2, 2, 4).features(2, False) == (320, 224, 10, 1)
    assert DecodeAttention((3, 5), 2, 2, 4).features(2) == (256, 320, 2, 1)


def test_rules_pass_their_mask_rule_and_sizes_to_each_operator():
    """Skipping masked tiles: pairs 2*3 + 2*3/2 = 9, flop 4*2*4*9 = 288, no mask elements;
    materialising the mask: pairs 2*5 = 10, flop 320, 10 mask elements. A GEMM of 3 x 4 -> 5
    in 1-byte weights: flop 120, bytes 12 + 20 + 15 = 47; two of them sum per class."""
    prefill, gemm = PrefillAttention(2, 3, 2, 2, 4), Gemm(3, 4, 5)
    skips = FeatureRules(gemm_dtype_bytes=1, attention_dtype_bytes=2, prefill_skips_masked=True)
    masks = dataclasses.replace(skips, prefill_skips_masked=False)
    assert skips.features(prefill) == (288, 224, 0, 1)
    assert masks.features(prefill) == (320, 224, 10, 1)
    assert skips.features(gemm) == (120, 47, 1)
    assert skips.class_sums([gemm, prefill, gemm]) == {
        "gemm": (240, 94, 2), "prefill_attention": (288, 224, 0, 1)}


def test_layer_gemms_route_experts_unless_told_not_to():
    """4 experts, top 2, 3 tokens: 6 routed rows over min(4, 6) = 4 experts, ceil(6/4) = 2
    rows each; dense: the 3 tokens through 8 -> 32 and 16 -> 8."""
    attention = [Gemm(3, 8, 24), Gemm(3, 8, 8)]
    assert layer_gemms(MOE, 3) == attention + [Gemm(2, 8, 32)] * 4 + [Gemm(2, 16, 8)] * 4
    assert layer_gemms(MOE, 3, moe=False) == attention + [Gemm(3, 8, 32), Gemm(3, 16, 8)]
    assert layer_gemms(MOE, 0) == layer_gemms(DIMS, 0) == layer_gemms(MOE, -1) == []


def test_layer_operators_skip_empty_chunks_and_honour_moe_false():
    """A chunk of no new tokens (its prompt done by an earlier chunk) makes no attention call;
    one of a single new token does. Tokens 0 + 1 + 1 decode = 2, dense MLP with moe=False."""
    batch = StepBatch((PrefillChunk(0, 5, False), PrefillChunk(1, 9)), (4,))
    assert layer_operators(MOE, batch, moe=False) == [
        Gemm(2, 8, 24), Gemm(2, 8, 8), Gemm(2, 8, 32), Gemm(2, 16, 8),
        PrefillAttention(1, 9, 2, 2, 4), DecodeAttention((4,), 2, 2, 4)]


def test_the_lm_head_of_no_sequence_is_no_gemm():
    assert lm_head(DIMS, 0) == []
    assert lm_head(DIMS, 3) == [Gemm(3, 8, 10)]
