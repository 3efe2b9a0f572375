"""Edges of the per-operator roofline (costmodel/roofline.py, docs/cost-models.md
"Per-operator roofline"), written to kill the mutants bench/mutation.sh left alive there:
the parameter checks and their messages, the all-reduce figures reaching the model, uneven
tp splits, which steps each engine graphs, the sum of a decode step's operators (plain and
with window or state layers), zero- and one-token chunks, and empty or zero-step runs.
Known answers by hand on the toy model and slow GPU of test_roofline.py."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_roofline import PLAIN, SLOW, TINY

from prefixsim.costmodel import PrefillChunk, Roofline, StepBatch
from prefixsim.costmodel.collectives import AllReduceCost
from prefixsim.costmodel.roofline import ServingParams

TINY_WINDOW = dataclasses.replace(TINY, name="tiny-window", sliding_window=32,
                                  num_window_layers=1)
TINY_STATE = dataclasses.replace(TINY, name="tiny-state", num_state_layers=1)
TINY_MOE = dataclasses.replace(TINY, name="tiny-moe", num_experts=8, experts_per_token=2)


@pytest.mark.parametrize("name", ["weight_dtype_bytes", "kv_dtype_bytes"])
def test_a_zero_dtype_width_is_refused_by_name(name):
    """0 passes the finite-and-non-negative check of every field; the widths must be > 0."""
    with pytest.raises(ValueError, match=rf"^{name} must be > 0$"):
        ServingParams(**{name: 0})
    with pytest.raises(ValueError, match=rf"^{name} must be > 0$"):
        Roofline(TINY, SLOW, **{name: 0})
    assert getattr(ServingParams(**{name: 0.5}), name) == 0.5


@pytest.mark.parametrize("name", ["allreduce_ring_bus_bytes_s", "allreduce_small_bytes_s",
                                  "allreduce_two_shot_bytes_s"])
def test_a_zero_all_reduce_bandwidth_is_refused_by_name(name):
    """An all-reduce bandwidth of 0 would divide by zero mid-run: refused when the
    parameters are read, naming the parameter; unset (None) keeps the GPU's default."""
    with pytest.raises(ValueError, match=rf"^{name} must be > 0, got 0$"):
        ServingParams(**{name: 0.0})
    with pytest.raises(ValueError, match=rf"^{name} must be > 0, got 0$"):
        Roofline(TINY, SLOW, 2, **{name: 0.0})
    assert getattr(ServingParams(**{name: 1e9}), name) == 1e9
    assert getattr(ServingParams(), name) is None


def test_an_unknown_parameter_lists_every_valid_name_sorted():
    with pytest.raises(TypeError, match=r"'gemm_efficency' \(valid: allreduce_graph_latency_s, "
                       r"allreduce_ring_bus_bytes_s, .*, emission_s, frontend_s, .*, "
                       r"step_overhead_s_per_token, weight_dtype_bytes\)$"):
        Roofline(TINY, SLOW, gemm_efficency=0.5)


def test_expert_parallel_errors_say_how_many_experts():
    with pytest.raises(ValueError, match=r"tp 2 GPUs: tiny has no experts$"):
        Roofline(TINY, SLOW, 2, expert_parallel=True)
    with pytest.raises(ValueError, match=r"tp 3 GPUs: tiny-moe has 8 experts$"):
        Roofline(TINY_MOE, SLOW, 3, expert_parallel=True)


def test_every_all_reduce_figure_reaches_the_model():
    """Each `allreduce_*` parameter overrides its AllReduceCost field; the others keep
    SLOW's defaults (NVLink 2e7 B/s, nearer the A100's link than the H100's: the two-GPU
    ring at the A100's 42.5 us and 0.56 of it; one-shot 9 us, 6 us in a graph, 0.85 of it
    from each peer; two-shot 12 us and 0.45 of it)."""
    figures = {"allreduce_ring_latency_s": 1e-3, "allreduce_ring_bus_bytes_s": 1e9,
               "allreduce_small_latency_s": 2e-6, "allreduce_small_bytes_s": 1e10,
               "allreduce_graph_latency_s": 1e-6, "allreduce_two_shot_latency_s": 3e-6,
               "allreduce_two_shot_bytes_s": 2e10}
    assert Roofline(TINY, SLOW, 2, **figures).allreduce == AllReduceCost(
        tp=2, ring_bus_bytes_s=1e9, ring_latency_s=1e-3, small_latency_s=2e-6,
        small_bytes_s=1e10, graph_latency_s=1e-6, two_shot_latency_s=3e-6,
        two_shot_bytes_s=2e10)
    assert Roofline(TINY, SLOW, 2).allreduce == AllReduceCost(
        tp=2, ring_bus_bytes_s=0.56 * 2e7, ring_latency_s=42.5e-6, small_latency_s=9e-6,
        small_bytes_s=0.85 * 2e7, graph_latency_s=6e-6, two_shot_latency_s=12e-6,
        two_shot_bytes_s=0.45 * 2e7)
    for name, value in figures.items():
        field = name.removeprefix("allreduce_")
        assert getattr(Roofline(TINY, SLOW, 2, **{name: value}).allreduce, field) == value


def test_uneven_tp_rounds_kv_heads_and_vocabulary_up():
    """3 KV heads on tp 2: each GPU holds 2 (vLLM pads, it does not hold 1.5 or 1), so the
    QKV GEMM writes (3 + 2 x 2) x 16 = 112 columns; a vocabulary of 1,001 splits into LM-head
    slices of 501 columns (a chunk that samples costs one 501-column row more)."""
    model = dataclasses.replace(TINY, num_heads=6, num_kv_heads=3, vocab_size=1001)
    rf = Roofline(model, SLOW, 2)
    assert rf.dims.num_kv_heads == 2
    assert rf._vocab_per_gpu == 501
    ops = rf.ops
    assert rf.layer_s(8, False) == pytest.approx(
        ops.gemm_s(8, 64, 112) + ops.gemm_s(8, 48, 64) + ops.gemm_s(8, 64, 128)
        + ops.gemm_s(8, 64, 64) + ops.layer_elementwise_s(8, 8, 64)
        + 2 * rf.allreduce.time_s(8 * 64 * 2, True), rel=1e-12)
    last = rf.step_time_s(StepBatch((PrefillChunk(100, 0, emits_token=True),)))
    middle = rf.step_time_s(StepBatch((PrefillChunk(100, 0, emits_token=False),)))
    assert last - middle == pytest.approx(ops.gemm_s(1, 64, 501), rel=1e-9)
    assert ops.gemm_s(1, 64, 501) != ops.gemm_s(1, 64, 500.5)


def test_layer_known_answer_at_tp1():
    """PLAIN figures, 8 tokens: the QKV GEMM 64 -> (4 + 2 x 2) x 16 = 128 columns, rows
    padded to 64: compute 2*64*64*128 / 1e9 = 1.0486 ms, bytes (8*64 + 8*128)*2 + 64*128*2
    = 19,456 -> 1.9456 ms, the larger. No all-reduce on one GPU."""
    rf = Roofline(TINY, SLOW, **PLAIN)
    ops = rf.ops
    assert ops.gemm_s(8, 64, 128) == pytest.approx(1.9456e-3)
    assert rf.layer_s(8) == pytest.approx(
        ops.gemm_s(8, 64, 128) + ops.gemm_s(8, 64, 64) + rf._mlp_s(8)
        + ops.layer_elementwise_s(8, 8, 128), rel=1e-12)


def test_moe_activation_runs_over_the_routed_rows():
    """4 tokens, top 2: the activation kernel reads 4 x 2 = 8 routed rows of 128, not 4 /
    2 = 2: the 6 rows more are 3 x 2 x 6 x 128 = 4,608 B, 0.768 ms at 1e7 B/s x 0.6."""
    rf = Roofline(TINY_MOE, SLOW)
    ops = rf.ops
    assert ops.layer_elementwise_s(4, 8, 128) - ops.layer_elementwise_s(4, 2, 128) == \
        pytest.approx(4608 / 6e6)
    assert rf.layer_s(4) == pytest.approx(
        ops.gemm_s(4, 64, 128) + ops.gemm_s(4, 64, 64) + rf._mlp_s(4)
        + ops.layer_elementwise_s(4, 8, 128), rel=1e-12)


@pytest.mark.parametrize(("engine", "decodes", "graphed"), [
    ("vllm-v0", 8, True), ("sglang", 8, True), ("vllm-v1", 8, True), ("vllm-v0", 300, False),
])
def test_decode_steps_run_in_graphs_on_every_engine(engine, decodes, graphed):
    """tp 2 on SLOW (NVLink 2e7 B/s): a one-shot all-reduce of d x 64 x 2 bytes (9 us eager,
    6 us in a graph, + bytes / 1.7e7) beats the ring (19.5 us + bytes / 1.32e7). A
    decode-only step of up to 256 (vllm-v0) or 160 (sglang) sequences runs as graphs: 2
    layers x 2 all-reduces save 3 us each against a model whose graph latency is the eager
    one; 300 decodes do not."""
    rf = Roofline(TINY, SLOW, 2, engine=engine)
    eager = Roofline(TINY, SLOW, 2, engine=engine, allreduce_graph_latency_s=9e-6)
    saving = 2 * 3e-6 if graphed else 0.0
    assert rf.layer_s(decodes) == pytest.approx(rf.layer_s(decodes, True), rel=1e-12)
    assert eager.layer_s(decodes) - rf.layer_s(decodes) == pytest.approx(saving, abs=1e-12)
    batch = StepBatch((), (100,) * decodes)
    assert eager.step_time_s(batch) - rf.step_time_s(batch) == pytest.approx(
        2 * saving, abs=1e-12)
    assert (eager.decode_run_time_s(decodes, 100 * decodes, 3)
            - rf.decode_run_time_s(decodes, 100 * decodes, 3)) == pytest.approx(
        3 * 2 * saving, abs=1e-11)


@pytest.mark.parametrize("model", [TINY, TINY_WINDOW, TINY_STATE])
@pytest.mark.parametrize(("engine", "saving"), [("vllm-v1", 2 * 2 * 3e-6),
                                                 ("vllm-v0", 0.0)])
def test_mixed_steps_of_every_layer_kind_are_graphed_by_vllm_v1_only(model, engine, saving):
    """2 decodes and a 10-token chunk on tp 2: vllm-v1 graphs the step (2 layers x 2
    all-reduces at 3 us less), vllm-v0 runs it eagerly."""
    batch = StepBatch((PrefillChunk(10, 0),), (50, 60))
    rf = Roofline(model, SLOW, 2, engine=engine)
    eager = Roofline(model, SLOW, 2, engine=engine, allreduce_graph_latency_s=9e-6)
    assert eager.step_time_s(batch) - rf.step_time_s(batch) == pytest.approx(saving,
                                                                            abs=1e-12)


@pytest.mark.parametrize(("model", "attention_layers"), [(TINY, 2), (TINY_WINDOW, 2),
                                                          (TINY_STATE, 1)])
def test_each_attention_layer_pays_the_per_sequence_decode_time(model, attention_layers):
    """decode_attention_s_per_seq of 1 ms: 3 decodes cost 3 ms more per attention layer
    (2 layers; 1 when the other is a state layer)."""
    batch = StepBatch((), (10, 20, 40))
    slow = Roofline(model, SLOW, decode_attention_s_per_seq=1e-3)
    fast = Roofline(model, SLOW, decode_attention_s_per_seq=0.0)
    assert slow.step_time_s(batch) - fast.step_time_s(batch) == pytest.approx(
        attention_layers * 3e-3, rel=1e-9)


@pytest.mark.parametrize("model", [TINY_WINDOW, TINY_STATE])
def test_a_hybrid_decode_step_is_the_sum_of_its_operators(model):
    """Both layers' GEMMs and element-wise kernels, one attention call per attention layer
    (decode floor and per-sequence part), the KV reads of each kind, the LM head over the
    3 decodes with embedding and final norm, and the CPU time (0.5 ms + 3 x 5 us)."""
    rf = Roofline(model, SLOW)
    ops, kinds = rf.ops, rf.kinds
    contexts = (10, 20, 40)
    per_token = ops.decode_attention_s_per_context_token()
    row = 2 * 3 * 64
    expected = (2 * rf.layer_s(3)
                + kinds.attention * (ops.attention_floor_s(False)
                                     + ops.decode_attention_fixed_s(3))
                + per_token * (kinds.full * 70 + kinds.window * (10 + 20 + 32))
                + ops.gemm_s(3, 64, 1000) + ops.elementwise_s("embedding", 2 * row)
                + ops.elementwise_s("norm", 2 * row) + 0.0005 + 3 * 5e-6)
    assert rf.step_time_s(StepBatch((), contexts)) == pytest.approx(expected, rel=1e-12)
    assert rf.decode_steps_time_s(contexts, 1) == pytest.approx(expected, rel=1e-12)


def test_a_mixed_window_step_adds_the_window_layers_reads():
    """With a 10-token chunk in the step, one decode at context 20 instead of 10 reads 10
    more tokens in the full layer and 10 more in the window layer (both under the 32-token
    window): 2 x 10 x 64 x 2 B at 1e7 B/s (PLAIN) = 0.256 ms; at 50 instead of 40 the
    window layer reads 32 either way: 0.128 ms; at 40 instead of 30, 2 more: 0.1536 ms."""
    rf = Roofline(TINY_WINDOW, SLOW, **PLAIN)

    def step(context):
        return rf.step_time_s(StepBatch((PrefillChunk(10, 0),), (context,)))

    assert step(20) - step(10) == pytest.approx(2 * 10 * 64 * 2 / 1e7, rel=1e-9)
    assert step(50) - step(40) == pytest.approx(10 * 64 * 2 / 1e7, rel=1e-9)
    assert step(40) - step(30) == pytest.approx(12 * 64 * 2 / 1e7, rel=1e-9)


@pytest.mark.parametrize("model", [TINY, TINY_WINDOW])
def test_a_zero_token_chunk_costs_only_its_scheduling(model):
    """A chunk of no new tokens (after 100 cached, not sampling) in a step with a 10-token
    chunk makes no attention work: the step costs one sequence's CPU time (5 us) more."""
    rf = Roofline(model, SLOW)
    alone = StepBatch((PrefillChunk(10, 0),), (30,))
    with_empty = StepBatch((PrefillChunk(0, 100, emits_token=False), PrefillChunk(10, 0)),
                           (30,))
    assert rf.step_time_s(with_empty) - rf.step_time_s(alone) == pytest.approx(5e-6,
                                                                              rel=1e-9)


@pytest.mark.parametrize("model", [TINY, TINY_WINDOW])
def test_a_one_token_chunk_pays_its_attention(model):
    """1 new token after 100 cached against after 0: the step differs by each attention
    layer's work for that chunk (the layers' GEMMs see one token either way)."""
    rf = Roofline(model, SLOW)
    kinds, ops = rf.kinds, rf.ops
    cached = rf.step_time_s(StepBatch((PrefillChunk(1, 100),)))
    uncached = rf.step_time_s(StepBatch((PrefillChunk(1, 0),)))
    assert cached - uncached == pytest.approx(
        kinds.prefill_attention_s(ops, 1, 100) - kinds.prefill_attention_s(ops, 1, 0),
        rel=1e-9)
    assert cached > uncached


@pytest.mark.parametrize("model", [TINY, TINY_WINDOW, TINY_STATE])
def test_no_work_costs_nothing(model):
    """An empty step, a step of one empty chunk, an empty or zero-step (or negative) decode
    run: 0 s, not a step's CPU time or fixed GPU time."""
    rf = Roofline(model, SLOW)
    assert rf.step_time_s(StepBatch()) == 0.0
    assert rf.step_time_s(StepBatch((PrefillChunk(0, 50),))) == 0.0
    for contexts, steps in (((), 5), ((10, 20), 0), ((10, 20), -1)):
        assert rf.decode_steps_time_s(contexts, steps) == 0.0
        assert rf.decode_run_timer(contexts)(contexts, steps) == 0.0
    assert rf.decode_run_time_s(0, 0, 5) == 0.0
    assert rf.decode_run_time_s(2, 30, 0) == 0.0


@settings(max_examples=30, deadline=None)
@given(contexts=st.lists(st.integers(0, 80), min_size=1, max_size=5),
       steps=st.integers(1, 12),
       model=st.sampled_from([TINY, TINY_STATE, TINY_MOE]),
       engine=st.sampled_from(["vllm-v1", "vllm-v1-async", "vllm-v0", "sglang"]),
       tp=st.sampled_from([1, 2]), cpu=st.sampled_from([None, 0.05]))
def test_closed_form_decode_runs_sum_their_steps(contexts, steps, model, engine, tp, cpu):
    """decode_steps_time_s == the naive sum of step_time_s over the growing batch, for every
    engine (overlapping the CPU or not), on one or two GPUs."""
    params = {} if cpu is None else {"step_overhead_s": cpu}
    rf = Roofline(model, SLOW, tp, engine=engine, **params)
    naive = math.fsum(rf.step_time_s(StepBatch((), tuple(c + k for c in contexts)))
                      for k in range(steps))
    assert rf.decode_steps_time_s(contexts, steps) == pytest.approx(naive, rel=1e-9)
    assert rf.decode_run_timer(tuple(contexts))(contexts, steps) == pytest.approx(
        naive, rel=1e-9)
