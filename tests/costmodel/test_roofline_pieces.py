"""The roofline's per-step pieces read fields made once (the model's GEMM terms, the
element-wise efficiencies, the attention floors, whether all-reduces count): each must give
exactly, to the bit, what the general operator methods give for the same shapes
(docs/cost-models.md "Per-operator roofline")."""

from __future__ import annotations

import pytest

from prefixsim.costmodel.collectives import ACTIVATION_BYTES
from prefixsim.costmodel.operator_times import ELEMENTWISE_EFFICIENCY, GemmTerms
from prefixsim.costmodel.roofline import Roofline
from prefixsim.presets import get_gpu, get_model

TOKENS = (1, 7, 63, 64, 65, 200, 511, 2048, 8191, 8192)


def _roofline(name: str, tp: int, **params: float) -> Roofline:
    return Roofline(get_model(name), get_gpu("h100-sxm"), tp, **params)


@pytest.mark.parametrize("name, tp", [("llama-3.1-8b", 1), ("llama-3.1-70b", 4),
                                      ("qwen2.5-7b", 2)])
def test_layer_is_the_sum_of_its_operators(name, tp):
    """layer_s against the shapes looked up by gemm_s, elementwise_s by kind and the
    all-reduce called even on one GPU (where it adds 0.0), in the source's order."""
    model = _roofline(name, tp)
    ops, d = model.ops, model.dims
    h, inter = d.hidden_size, d.intermediate_size
    q_out, kv_out = d.num_heads * d.head_dim, 2 * d.num_kv_heads * d.head_dim
    heads = (d.num_heads + d.num_kv_heads) * d.head_dim
    for tokens in TOKENS:
        elementwise = (2 * ops.elementwise_s("norm", 2 * 2 * tokens * h)
                       + ops.elementwise_s("rope", 2 * 2 * tokens * heads)
                       + ops.elementwise_s("activation", 3 * 2 * tokens * inter)
                       + ops.elementwise_s("residual", 3 * 2 * tokens * h)
                       + ops.elementwise_s("kv_write",
                                           tokens * ops.kv_values * (2 + ops.kv_bytes)))
        expected = (ops.gemm_s(tokens, h, q_out + kv_out) + ops.gemm_s(tokens, q_out, h)
                    + (ops.gemm_s(tokens, h, 2 * inter) + ops.gemm_s(tokens, inter, h))
                    + elementwise
                    + 2 * model.allreduce.time_s(tokens * h * ACTIVATION_BYTES,
                                                 model.engine.graphed(tokens, False)))
        assert ops.layer_elementwise_s(tokens, tokens, inter) == elementwise
        assert model.layer_s(tokens, decode_only=False) == expected, tokens
    assert (model.allreduce.time_s(1 << 20) > 0) is (tp > 1)


def test_lm_head_and_decode_pieces_match_the_general_methods():
    model = _roofline("llama-3.1-8b", 1, decode_attention_s_per_seq=3e-7,
                      prefill_attention_floor_s=11e-6, decode_attention_floor_s=7e-6)
    ops, d = model.ops, model.dims
    for tokens, sampled in ((1, 1), (300, 4), (8192, 1), (64, 64)):
        row = ACTIVATION_BYTES * tokens * d.hidden_size
        assert model._head_s(tokens, sampled) == (
            ops.gemm_s(sampled, d.hidden_size, -(-d.vocab_size // 1))
            + ops.elementwise_s("embedding", 2 * row) + ops.elementwise_s("norm", 2 * row))
        q_bytes = 2 * d.num_heads * d.head_dim * 2 * tokens
        assert ops.decode_attention_fixed_s(tokens) == (
            q_bytes * ops._attn_byte_s + 3e-7 * tokens)
    assert ops.attention_floor_s(True) == 11e-6 and ops.attention_floor_s(False) == 7e-6


def test_gemm_terms_are_made_once_and_give_gemm_s():
    ops = _roofline("llama-3.1-8b", 1).ops
    terms = ops.gemm_terms(4096, 14336)
    assert isinstance(terms, GemmTerms) and ops.gemm_terms(4096, 14336) is terms
    for tokens in (0, -1, 1, 64.0, 65, 1000.5):
        assert ops.gemm_with(terms, tokens) == ops.gemm_s(tokens, 4096, 14336)
    assert ops.gemm_with(terms, 0) == 0.0
    # the terms: compute per padded row, bytes per token row, the weight's bytes
    assert terms.per_row == 2.0 * 4096 * 14336 * ops._gemm_flop_s
    assert terms.weight == 4096 * 14336 * ops.weight_bytes * ops._gemm_byte_s


def test_the_efficiency_fields_are_the_table():
    ops = _roofline("llama-3.1-8b", 1).ops
    for kind, efficiency in ELEMENTWISE_EFFICIENCY.items():
        assert getattr(ops, f"_eff_{kind}") == efficiency
        assert ops.moved_s(1e6, efficiency) == ops.elementwise_s(kind, 1e6)
    assert ops.moved_s(0, 0.5) == 0.0
