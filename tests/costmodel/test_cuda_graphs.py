"""CUDA graphs and all-reduce latency (docs/cost-models.md "Serving engines"): known answers
worked by hand for which steps each engine graphs and what that saves."""

from __future__ import annotations

import pytest

from prefixsim.costmodel import PrefillChunk, Roofline, StepBatch
from prefixsim.costmodel.collectives import AllReduceCost
from prefixsim.costmodel.engines import get_engine
from prefixsim.presets import get_gpu, get_model


def test_a_graphed_one_shot_all_reduce_drops_the_copy_latency():
    """tp 4 on H100, 64 KB one-shot: 3 peers x 65,536 B / (0.85 x 450e9 = 382.5e9 B/s) =
    0.5140 us after 6 us in a graph (6.5140 us), after 9 us eager (9.5140 us). 64 MB takes
    the ring either way (308.16 us); without NVLink the ring serves both; tp 1 costs
    nothing."""
    cost = AllReduceCost.for_gpu(get_gpu("h100-sxm"), 4)
    assert cost.time_s(65_536, graphed=True) == pytest.approx(6.5140e-6, rel=1e-4)
    assert cost.time_s(65_536) == pytest.approx(9.5140e-6, rel=1e-4)
    assert cost.time_s(2**26, graphed=True) == cost.time_s(2**26)
    pcie = AllReduceCost.for_gpu(get_gpu("l40s"), 2)
    assert pcie.time_s(65_536, graphed=True) == pcie.time_s(65_536)
    assert AllReduceCost.for_gpu(get_gpu("h100-sxm"), 1).time_s(1e6, graphed=True) == 0.0


@pytest.mark.parametrize(("engine", "tokens", "decode_only", "graphed"), [
    ("vllm-v1", 512, False, True), ("vllm-v1", 513, False, False),
    ("vllm-v1", 513, True, False), ("vllm-v1-async", 1, False, True),
    ("vllm-v0", 256, True, True), ("vllm-v0", 257, True, False),
    ("vllm-v0", 8, False, False), ("sglang", 160, True, True),
    ("sglang", 161, True, False), ("sglang", 100, False, False),
])
def test_each_engine_graphs_its_own_steps(engine, tokens, decode_only, graphed):
    """vLLM V1: every step up to 512 tokens (piecewise graphs); vLLM v0: decode-only
    batches up to 256; SGLang: decode batches up to 160."""
    assert get_engine(engine).graphed(tokens, decode_only) is graphed


def test_graphs_save_the_copy_latency_of_every_all_reduce_of_a_decode_step():
    """Llama-2-70B on 4 x H100, 16 decodes: 80 layers x 2 all-reduces of 16 x 8192 x 2 =
    262,144 bytes, one-shot (ring: 25 us + 1.5 x 262,144 / 355.5e9 = 26.1 us, slower), so
    graphing saves 80 x 2 x (9 - 6) us = 0.48 ms, exactly the step's difference from a
    model whose graph latency is the eager one."""
    model, gpu = get_model("llama-2-70b"), get_gpu("h100-sxm")
    graphed = Roofline(model, gpu, tp=4)
    eager = Roofline(model, gpu, tp=4, allreduce_graph_latency_s=9e-6)
    batch = StepBatch(decode_contexts=(700,) * 16)
    assert eager.step_time_s(batch) - graphed.step_time_s(batch) == pytest.approx(
        80 * 2 * 3e-6, rel=1e-9)
    # the same through a decode run: 10 steps save 10 x 0.48 ms
    assert (eager.decode_run_time_s(16, 16 * 700, 10)
            - graphed.decode_run_time_s(16, 16 * 700, 10)) == pytest.approx(
        10 * 80 * 2 * 3e-6, rel=1e-9)


def test_mixed_steps_are_graphed_by_vllm_v1_only():
    """A step of 2 decodes and a 10-token chunk (12 tokens, 196,608-byte all-reduces,
    one-shot: 9 + 1.54 us against the ring's 25.8 us): vllm-v1 graphs it, saving 80 x 2 x
    3 us; vllm-v0 runs it eagerly (no saving); a 1,000-token chunk is eager on both."""
    model, gpu = get_model("llama-2-70b"), get_gpu("h100-sxm")
    mixed = StepBatch(decode_contexts=(700,) * 2, prefills=(PrefillChunk(10, 0, True),))
    big = StepBatch(prefills=(PrefillChunk(1000, 0, True),))
    for engine, saving in (("vllm-v1", 80 * 2 * 3e-6), ("vllm-v0", 0.0)):
        graphed = Roofline(model, gpu, tp=4, engine=engine)
        eager = Roofline(model, gpu, tp=4, engine=engine, allreduce_graph_latency_s=9e-6)
        assert eager.step_time_s(mixed) - graphed.step_time_s(mixed) == pytest.approx(
            saving, rel=1e-9, abs=1e-12)
        assert eager.step_time_s(big) == graphed.step_time_s(big)


def test_tp1_steps_do_not_change():
    """No all-reduce at tp 1: the graph latency changes nothing (the bundled runs)."""
    model, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
    batch = StepBatch(decode_contexts=(300,) * 32)
    assert (Roofline(model, gpu).step_time_s(batch)
            == Roofline(model, gpu, allreduce_graph_latency_s=9e-6).step_time_s(batch))
