"""Known answers for the all-reduce time at its edges (docs/cost-models.md), written to kill
the mutants bench/mutation.sh left alive in costmodel/collectives.py: the ring factor
2 (tp - 1) / tp away from tp = 2 (where it is 1 whatever the order of the operations), and
the boundary between no bytes (no all-reduce at all) and one byte (a whole latency).
"""

import pytest

from prefixsim.costmodel.collectives import (
    ACTIVATION_BYTES,
    AllReduceCost,
    allreduce_s_per_token,
)
from prefixsim.presets import GPUS, MODELS


@pytest.mark.parametrize(("tp", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_the_ring_moves_two_times_tp_minus_one_over_tp_of_the_activations(tp, factor):
    """llama-3.1-8b: 32 layers x 2 all-reduces x 4096 x 2 bytes = 524,288 bytes a token;
    the seconds are factor x that / the NVLink bandwidth (tp 4: 1.5, tp 8: 1.75)."""
    model, gpu = MODELS["llama-3.1-8b"], GPUS["h100-sxm"]
    per_token = model.num_layers * 2 * model.hidden_size * ACTIVATION_BYTES
    assert per_token == 524_288
    assert allreduce_s_per_token(model, gpu, tp) == pytest.approx(
        factor * per_token / gpu.interconnect_bytes_s)


def test_no_gpu_or_one_gpu_has_no_all_reduce():
    assert allreduce_s_per_token(MODELS["llama-3.1-8b"], None, 8) == 0.0


def test_no_bytes_take_no_time_and_one_byte_a_whole_latency():
    """tp 2, ring 100 us + 2 (1/2) bytes / 1e9 B/s, one-shot 10 us + bytes / 1e9 B/s."""
    cost = AllReduceCost(tp=2, ring_bus_bytes_s=1e9, ring_latency_s=100e-6,
                         small_latency_s=10e-6, small_bytes_s=1e9)
    assert cost.time_s(0) == 0.0
    assert cost.time_s(1) == pytest.approx(10e-6 + 1e-9)
    ring_only = AllReduceCost(tp=4, ring_bus_bytes_s=1e9, ring_latency_s=100e-6,
                              small_latency_s=None)
    assert ring_only.time_s(1e6) == pytest.approx(100e-6 + 1.5 * 1e6 / 1e9)
    assert AllReduceCost(tp=1, ring_bus_bytes_s=1e9).time_s(1e6) == 0.0
