"""Edges of the serving engines (docs/cost-models.md "Serving engines"), written to kill the
mutants bench/mutation.sh left alive in costmodel/engines.py: the error naming every valid
engine, and a decode run of no steps taking no time whatever its figures."""

import math

import pytest

from prefixsim.costmodel.engines import ENGINES, get_engine, overlapped_run_s


def test_an_unknown_engine_lists_every_valid_name_comma_separated():
    with pytest.raises(ValueError) as raised:
        get_engine("tgi")
    assert str(raised.value) == (
        "unknown serving engine 'tgi' (valid: vllm-v1, vllm-v1-async, vllm-v0, sglang)")
    assert list(ENGINES) == ["vllm-v1", "vllm-v1-async", "vllm-v0", "sglang"]


@pytest.mark.parametrize("figures", [(1.0, 0.5, math.inf), (1.0, math.inf, 2.0),
                                     (0.0, 0.0, 0.0)])
def test_no_steps_take_no_time_whatever_the_figures(figures):
    """0 steps: the sum is empty, 0.0 (not 0 x inf = NaN from the closed form)."""
    first, growth, cpu = figures
    assert overlapped_run_s(first, growth, cpu, 0) == 0.0
    assert overlapped_run_s(first, growth, cpu, -3) == 0.0


def test_known_run_crossing_the_cpu_time():
    """GPU 1, 2, 3, 4 s against 2.5 s of CPU: 2.5 + 2.5 + 3 + 4 = 12 s; exactly at the CPU
    time (first = cpu = 2): 2 + 3 + 4 = 9 s."""
    assert overlapped_run_s(1.0, 1.0, 2.5, 4) == pytest.approx(12.0)
    assert overlapped_run_s(2.0, 1.0, 2.0, 3) == pytest.approx(9.0)
