"""Per-operator times at their edges (costmodel/operator_times.py, docs/cost-models.md
"Per-operator roofline"), known answers worked by hand, written to kill the mutants
bench/mutation.sh left alive there: each parameter check at its boundary with its message,
the p-norm blend for a p other than 2 and infinity, rows padded up to whole tiles,
grouped GEMMs of one group or of one token, element-wise kernels of 0 and 1 byte, and the
prefill vs decode attention floor."""

import dataclasses
import math

import pytest
from test_roofline import SLOW

from prefixsim.costmodel.operator_times import OperatorParams, OperatorTimes, _tiles
from prefixsim.costmodel.operators import LayerDims

DIMS = LayerDims(name="t", num_layers=1, hidden_size=64, num_heads=4, num_kv_heads=2,
                 head_dim=16, intermediate_size=128, vocab_size=1000)
FAST_HBM = dataclasses.replace(SLOW, hbm_bandwidth_bytes_s=1e12)  # GEMMs compute-bound
EXACT = {"gemm_efficiency": 1.0, "gemm_bandwidth_efficiency": 1.0, "gemm_floor_s": 0.0,
         "overlap_exponent": math.inf}


def times(gpu=FAST_HBM, **params) -> OperatorTimes:
    return OperatorTimes(DIMS, gpu, OperatorParams(**params), 2, 2, 64)


@pytest.mark.parametrize(("params", "message"), [
    ({"gemm_efficiency": 0.0}, "gemm_efficiency must be in (0, 1], got 0.0"),
    ({"gemm_floor_s": math.inf}, "gemm_floor_s must be a finite number >= 0"),
    ({"overlap_exponent": 0.99}, "overlap_exponent must be >= 1, got 0.99"),
    ({"attention_causal_factor": 0.0}, "attention_causal_factor must be > 0"),
    ({"gemm_tile_tokens": 0}, "gemm_tile_tokens must be >= 1"),
])
def test_each_parameter_check_names_the_parameter(params, message):
    with pytest.raises(ValueError) as raised:
        OperatorParams(**params)
    assert str(raised.value) == message


def test_the_boundaries_of_the_checks_are_accepted():
    """p = 1 (the sum) and 1.5, a causal factor of 0.5 (below 1), one-token tiles."""
    for params in ({"overlap_exponent": 1.0}, {"overlap_exponent": 1.5},
                   {"attention_causal_factor": 0.5}, {"gemm_tile_tokens": 1},
                   {"attention_tile_tokens": 1}, {"gemm_floor_s": 0.0}):
        assert OperatorParams(**params) is not None


@pytest.mark.parametrize(("p", "expected"), [(3.0, 91 ** (1 / 3)), (1.0, 7.0), (2.0, 5.0),
                                             (math.inf, 4.0)])
def test_blend_is_the_p_norm(p, expected):
    """(3^p + 4^p)^(1/p): p = 3 -> 91^(1/3) = 4.498, p = 1 -> 7, p = 2 -> 5, inf -> 4."""
    assert times(overlap_exponent=p).blend(3.0, 4.0) == pytest.approx(expected, rel=1e-12)


def test_rows_pad_up_to_whole_tiles():
    assert [_tiles(r, 64) for r in (0, 1, 64, 65, 100, 128)] == [0, 64, 64, 128, 128, 128]


def test_a_compute_bound_gemm_counts_padded_rows():
    """100 rows through 64 -> 128 at 1e9 FLOP/s, tile 64: 2 x 128 x 64 x 128 = 2,097,152
    FLOP -> 2.097152 ms (the memory time, 1e12 B/s, is under 0.1 us)."""
    assert times(**EXACT).gemm_s(100, 64, 128) == pytest.approx(2.097152e-3, rel=1e-12)


def test_grouped_gemms_spread_rows_over_groups():
    """4 groups, 100 tokens: 25 rows each, one tile of 64: 2 x 4 x 64 x 64 x 128 = 4,194,304
    FLOP -> 4.194304 ms (not 400 rows: 448 padded). One group is the plain GEMM, also for a
    single token; no tokens or no groups take nothing."""
    ops = times(**EXACT)
    assert ops.grouped_gemm_s(4, 100, 64, 128) == pytest.approx(4.194304e-3, rel=1e-12)
    blended = times(gpu=SLOW)
    for tokens in (1, 3, 100):
        assert blended.grouped_gemm_s(1, tokens, 64, 128) == pytest.approx(
            blended.gemm_s(tokens, 64, 128), rel=1e-12)
    assert blended.grouped_gemm_s(0, 5, 64, 128) == blended.grouped_gemm_s(2, 0, 64, 128) == 0


def test_elementwise_kernels_of_no_byte_and_of_one_byte():
    """0 bytes: no kernel; 1 byte of a residual add (full bandwidth, 1e7 B/s): 0.1 us + the
    2 us floor."""
    ops = times(gpu=SLOW)
    assert ops.elementwise_s("norm", 0) == 0.0
    assert ops.elementwise_s("residual", 1) == pytest.approx(1e-7 + 2e-6, rel=1e-12)


def test_a_step_with_a_prefill_pays_the_prefill_floor():
    ops = times(prefill_attention_floor_s=7e-6, decode_attention_floor_s=3e-6)
    assert (ops.attention_floor_s(True), ops.attention_floor_s(False)) == (7e-6, 3e-6)
