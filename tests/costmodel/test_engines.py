"""Serving engines as named choices (docs/cost-models.md "Serving engines"): their figures
reach the cost models, an overlapping engine times a step as the longer of its CPU and GPU
work, and decode runs keep summing to their single steps."""

import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prefixsim.config import load_config
from prefixsim.config.serving import ServingConfig
from prefixsim.costmodel import PrefillChunk, Roofline, StepBatch
from prefixsim.costmodel.engines import ENGINES, get_engine, overlapped_run_s
from prefixsim.pipeline.build import build_cost_model
from prefixsim.presets import get_gpu, get_model

MODEL, GPU = get_model("llama-3.1-8b"), get_gpu("h100-sxm")


def test_config_names_are_the_engines():
    literal = typing.get_args(ServingConfig.model_fields["engine"].annotation)
    assert set(literal) == set(ENGINES)
    with pytest.raises(ValueError, match="valid: vllm-v1"):
        get_engine("vllm-v2")


def test_engine_figures_are_the_defaults_and_params_win():
    v0 = Roofline(MODEL, GPU, engine="vllm-v0")
    assert v0.cpu_s(10, 10) == pytest.approx(0.0008 + 10 * 0.000043)
    assert Roofline(MODEL, GPU).cpu_s(10, 10) == pytest.approx(0.0005 + 10 * 0.000005)
    mine = Roofline(MODEL, GPU, engine="vllm-v0", step_overhead_s=0.001)
    assert mine.cpu_s(10, 10) == pytest.approx(0.001 + 10 * 0.000043)
    assert v0.serving_overheads.frontend_delay_s(1000) == pytest.approx(0.0064 + 0.0032)


def test_an_overlapping_engine_takes_the_longer_of_cpu_and_gpu():
    """A one-sequence decode of an 8B model is GPU-bound (~6 ms against 0.5 ms of CPU): the
    overlapped step is the GPU time alone; with 1 s of CPU per step it is the CPU time."""
    batch = StepBatch((), (1000,))
    sync, overlapped = Roofline(MODEL, GPU), Roofline(MODEL, GPU, engine="sglang")
    cpu = sync.cpu_s(1, 1)
    assert overlapped.step_time_s(batch) == pytest.approx(sync.step_time_s(batch) - cpu)
    slow = Roofline(MODEL, GPU, engine="sglang", step_overhead_s=1.0)
    assert slow.step_time_s(batch) == pytest.approx(1.0 + 0.000005)
    chunk = StepBatch((PrefillChunk(500, 0, True),), (100, 200))
    assert overlapped.step_time_s(chunk) == pytest.approx(
        sync.step_time_s(chunk) - sync.cpu_s(3, 502))


@given(first=st.floats(0, 10), growth=st.floats(0, 1), cpu=st.floats(0, 20),
       steps=st.integers(0, 60))
def test_overlapped_run_is_the_sum_of_its_steps(first, growth, cpu, steps):
    naive = sum(max(first + j * growth, cpu) for j in range(steps))
    assert overlapped_run_s(first, growth, cpu, steps) == pytest.approx(naive, rel=1e-9,
                                                                        abs=1e-9)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("cpu_where", ["default", "crossing"])
def test_decode_runs_sum_to_their_steps_for_every_engine(engine, cpu_where):
    """"crossing": the CPU time halfway between the run's first and last GPU times, so an
    overlapping engine's run is CPU-bound first and GPU-bound after."""
    contexts = (3000, 50_000, 120_000)
    params = {}
    if cpu_where == "crossing":
        gpu = Roofline(MODEL, GPU, engine="sglang", step_overhead_s=0.0,
                       step_overhead_s_per_seq=0.0)
        first = gpu.step_time_s(StepBatch((), contexts))
        last = gpu.step_time_s(StepBatch((), tuple(c + 39 for c in contexts)))
        params = {"step_overhead_s": (first + last) / 2, "step_overhead_s_per_seq": 0.0}
    rf = Roofline(MODEL, GPU, engine=engine, **params)
    naive = sum(rf.step_time_s(StepBatch((), tuple(c + k for c in contexts)))
                for k in range(40))
    assert rf.decode_steps_time_s(contexts, 40) == pytest.approx(naive, rel=1e-12)


def test_serving_engine_reaches_the_cost_model_from_the_config():
    config = load_config(overrides={"serving.engine": "vllm-v0"})
    model = build_cost_model(config, MODEL, GPU)
    assert model.engine.name == "vllm-v0" and model.cpu_s(1, 1) == pytest.approx(0.000843)
    assert build_cost_model(load_config(), MODEL, GPU).engine.name == "vllm-v1"


def test_expert_parallel_reaches_the_roofline_and_only_it():
    from prefixsim.errors import InputError
    config = load_config(overrides={"model.name": "qwen3-coder-30b-a3b", "hardware.tp": 4,
                                    "hardware.expert_parallel": True})
    model = get_model("qwen3-coder-30b-a3b")
    assert build_cost_model(config, model, GPU).expert_parallel == 4
    fitted = load_config(overrides={"model.name": "qwen3-coder-30b-a3b",
                                    "hardware.expert_parallel": True,
                                    "cost_model.name": "step_roofline"})
    with pytest.raises(InputError, match="roofline cost model only"):
        build_cost_model(fitted, model, GPU)


def test_expert_parallel_on_a_dense_model_names_the_flag():
    from prefixsim.errors import InputError
    config = load_config(overrides={"hardware.expert_parallel": True})
    with pytest.raises(InputError, match="hardware.expert_parallel.*no experts"):
        build_cost_model(config, MODEL, GPU)
