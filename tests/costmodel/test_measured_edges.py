"""Element-wise, all-reduce and CPU tables read at their edges (costmodel/measured.py,
docs/cost-models.md "Reading the tables"), known answers worked by hand, written to kill the
mutants bench/mutation.sh left alive there: each kernel's row width, a table measured at
another width read at the same number of elements, an all-reduce of 0 and of 1 byte, and the
CPU table extended below its smallest batch."""

import pytest
from test_operator_times_edges import DIMS

from prefixsim.costmodel.measured import (
    AllReduceTimes,
    CpuTimes,
    ElementwiseTimes,
    elementwise_widths,
)
from prefixsim.costmodel.profile_parts import (
    ELEMENTWISE_OPS,
    Collectives,
    CollectiveTable,
    CpuOverhead,
    ElementwiseTable,
)


def test_each_kernel_touches_its_own_row_width():
    """Hidden 64 for norms, adds and the embedding; (4 + 2) x 16 = 96 for the rotary
    embedding; 2 x 128 = 256 for the activation."""
    assert elementwise_widths(DIMS) == {
        "input_norm": 64, "post_attention_norm": 64, "residual_add": 64, "embedding": 64,
        "rope": 96, "activation": 256}


def tables(scale: int) -> dict[str, ElementwiseTable]:
    """Every kernel 10 us at 1 token and 30 us at 5, measured at `scale` x the run's width."""
    widths = elementwise_widths(DIMS)
    return {op: ElementwiseTable(width=widths[op] * scale, tokens=[1, 5],
                                 time_s=[10e-6, 30e-6]) for op in ELEMENTWISE_OPS}


def test_a_table_at_another_width_is_read_at_the_same_elements():
    """At the run's width 4 tokens read 25 us (exact); measured at twice the width, 4 tokens
    are 2 of its tokens: 15 us (not 8 tokens: 30 us + the tail)."""
    same, double = ElementwiseTimes(tables(1), DIMS), ElementwiseTimes(tables(2), DIMS)
    assert same.exact and not double.exact
    assert same.op_s("rope", 4) == pytest.approx(25e-6)
    assert double.op_s("rope", 4) == pytest.approx(15e-6)


def test_an_all_reduce_of_no_bytes_is_free_and_of_one_byte_reads_the_table():
    """Tables on 4 and 2 GPUs; at tp 2: 10 us from 16 bytes (the first point, held below)."""
    collectives = Collectives(all_reduce=[
        CollectiveTable(num_gpus=4, bytes=[16, 1600], time_s=[20e-6, 40e-6]),
        CollectiveTable(num_gpus=2, bytes=[16, 1600], time_s=[10e-6, 20e-6])])
    times = AllReduceTimes(collectives, 2)
    assert times.measured_gpus == [2, 4] and times.measured
    assert times.time_s(0) == 0.0
    assert times.time_s(1) == pytest.approx(10e-6)
    assert not AllReduceTimes(collectives, 8).measured
    assert AllReduceTimes(None, 2).measured_gpus == []


def test_cpu_time_extends_the_first_segment_below_the_smallest_batch():
    """Batches 2 and 4 at 2 and 3 ms: batch 1 reads 1.5 ms on the same line."""
    cpu = CpuTimes(CpuOverhead(batch_sizes=[2, 4], time_s=[2e-3, 3e-3], measured_tp=1,
                               framework="test", components="all"))
    assert cpu.time_s(1) == pytest.approx(1.5e-3)
    assert cpu.time_s(3) == pytest.approx(2.5e-3)
