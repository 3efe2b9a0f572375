"""Each serving engine's scheduler limits on a GPU (docs/cost-models.md "Serving engines",
"Scheduler limits"): the defaults a replica runs with where `scheduler.max_num_seqs` and
`scheduler.max_batched_tokens` are unset, set values winning, and a mix that breaks
max_num_seqs <= max_batched_tokens refused naming the field."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.config import load_config
from prefixsim.costmodel.engines import (
    ENGINES,
    BatchLimits,
    sglang_limits,
    vllm_v0_limits,
    vllm_v1_limits,
)
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate
from prefixsim.pipeline.build import build
from prefixsim.presets import GPUS, get_gpu
from prefixsim.presets.specs import GIB
from prefixsim.trace.record import Request


def _gpu(name: str, memory_gib: float):
    return dataclasses.replace(get_gpu("h100-sxm"), name=name,
                               memory_bytes=int(memory_gib * GIB))


@pytest.mark.parametrize(("gpu", "limits"), [
    # vLLM V1: 70 GiB or more and not an A100 -> 1024 requests, 8192 tokens
    ("h100-sxm", BatchLimits(1024, 8192)), ("h100-pcie", BatchLimits(1024, 8192)),
    ("h200", BatchLimits(1024, 8192)), ("b200", BatchLimits(1024, 8192)),
    ("mi300x", BatchLimits(1024, 8192)),
    ("a100-80g", BatchLimits(256, 2048)), ("a100-40g", BatchLimits(256, 2048)),
    ("l40s", BatchLimits(256, 2048)), ("l4", BatchLimits(256, 2048)),
])
def test_vllm_v1_defaults_by_gpu(gpu, limits):
    assert vllm_v1_limits(get_gpu(gpu)) == limits
    assert ENGINES["vllm-v1"].batch_limits(get_gpu(gpu)) == limits
    assert ENGINES["vllm-v1-async"].batch_limits(get_gpu(gpu)) == limits


def test_vllm_v1_rule_edges_memory_and_name():
    assert vllm_v1_limits(_gpu("big", 70)) == BatchLimits(1024, 8192)  # 70 GiB is enough
    assert vllm_v1_limits(_gpu("big", 69.99)) == BatchLimits(256, 2048)
    assert vllm_v1_limits(_gpu("My-A100-custom", 80)) == BatchLimits(256, 2048)  # any case


def test_vllm_v0_is_256_and_2048_everywhere():
    for gpu in GPUS.values():
        assert vllm_v0_limits(gpu) == BatchLimits(256, 2048)
        assert ENGINES["vllm-v0"].batch_limits(gpu) == BatchLimits(256, 2048)


@pytest.mark.parametrize(("memory_gib", "budget"), [
    (24, 2048), (34.99, 2048), (35, 8192), (80, 8192), (141, 8192), (159.99, 8192),
    (160, 16384), (192, 16384)])
def test_sglang_chunk_size_by_memory(memory_gib, budget):
    assert sglang_limits(_gpu("g", memory_gib)) == BatchLimits(2048, budget)
    assert ENGINES["sglang"].batch_limits(_gpu("g", memory_gib)) == BatchLimits(2048, budget)


def test_every_engine_names_its_source_and_keeps_seqs_within_budget():
    for engine in ENGINES.values():
        assert engine.limits_source
        for gpu in GPUS.values():
            limits = engine.batch_limits(gpu)
            assert 1 <= limits.max_num_seqs <= limits.max_batched_tokens


def _config(**scheduler):
    overrides = {f"scheduler.{key}": value for key, value in scheduler.items()
                 if key not in ("gpu", "engine")}
    overrides["hardware.gpu"] = scheduler.get("gpu", "h100-sxm")
    overrides["serving.engine"] = scheduler.get("engine", "vllm-v1")
    return load_config(overrides=overrides, unset=("engine.sample_interval_s",))


def test_config_takes_the_engine_defaults_where_unset_and_set_values_win():
    h100, a100 = get_gpu("h100-sxm"), get_gpu("a100-80g")
    assert _config().scheduler.limits("vllm-v1", h100) == BatchLimits(1024, 8192)
    assert _config().scheduler.limits("vllm-v1", a100) == BatchLimits(256, 2048)
    assert _config().scheduler.limits("vllm-v0", h100) == BatchLimits(256, 2048)
    assert _config(max_num_seqs=300).scheduler.limits("vllm-v1", a100) == BatchLimits(300, 2048)
    assert (_config(max_batched_tokens=4096).scheduler.limits("vllm-v1", h100)
            == BatchLimits(1024, 4096))
    assert (_config(max_num_seqs=8, max_batched_tokens=64).scheduler.limits("sglang", h100)
            == BatchLimits(8, 64))


def test_a_set_value_above_the_engines_budget_is_refused_naming_the_field():
    with pytest.raises(InputError) as info:
        _config(max_batched_tokens=512).scheduler.limits("vllm-v1", get_gpu("h100-sxm"))
    assert info.value.field == "scheduler.max_num_seqs"
    assert info.value.message == ("must not exceed max_batched_tokens (1024 > 512; "
                                  "max_num_seqs from vllm-v1's defaults on h100-sxm)")
    with pytest.raises(InputError) as info:
        _config(max_num_seqs=4096).scheduler.limits("vllm-v1", get_gpu("a100-80g"))
    assert info.value.message == ("must not exceed max_batched_tokens (4096 > 2048; "
                                  "max_batched_tokens from vllm-v1's defaults on a100-80g)")


def test_the_replica_runs_with_the_resolved_limits():
    """build() hands the replica's scheduler the engine's defaults on its GPU."""
    requests = [Request(0, 0.0, 32, 4, (1, 2), 16)]
    for gpu, engine, limits in (("h100-sxm", "vllm-v1", (1024, 8192)),
                                ("a100-80g", "vllm-v1", (256, 2048)),
                                ("h100-sxm", "sglang", (2048, 8192))):
        fleet = build(_config(gpu=gpu, engine=engine), requests).fleet
        assert (fleet.scheduler.max_num_seqs, fleet.scheduler.max_batched_tokens) == limits


def test_more_than_256_requests_run_at_once_on_an_h100():
    """600 short requests at t = 0 on one H100: vLLM V1's 1024 running requests admit every
    one in the first step (each prompt is 16 tokens, 9,600 in all: two steps of the 8192
    budget), where a limit of 256 holds the rest for three more rounds of decoding."""
    requests = [Request(i, 0.0, 16, 64, (i + 1,), 16) for i in range(600)]

    def last_first_token_ms(config):
        rows = simulate(config, requests).requests
        assert (rows["status"] == "completed").all()
        return float(rows["ttft_ms"].max())

    wide = last_first_token_ms(_config())
    narrow = last_first_token_ms(_config(max_num_seqs=256))
    assert wide < narrow / 3


@pytest.mark.parametrize(("call", "limits"), [
    # without chunked prefill a whole prompt must fit a step: at least max_model_len
    (lambda g: vllm_v1_limits(g, chunked=False, max_model_len=131072), (1024, 131072)),
    (lambda g: vllm_v1_limits(g, chunked=False, max_model_len=512), (1024, 8192)),
    # at most max_num_seqs x max_model_len
    (lambda g: vllm_v1_limits(g, max_model_len=4), (1024, 4096)),
    (lambda g: vllm_v1_limits(g, max_num_seqs=2, max_model_len=512), (2, 1024)),
    (lambda g: vllm_v1_limits(g, max_num_seqs=300), (300, 8192)),
    (lambda g: vllm_v0_limits(g, chunked=False, max_model_len=4096), (256, 4096)),
    (lambda g: vllm_v0_limits(g, chunked=False, max_model_len=1024), (256, 2048)),
    (lambda g: sglang_limits(g, chunked=False, max_model_len=131072), (2048, 16384)),
])
def test_budget_follows_chunking_and_context(call, limits):
    assert call(get_gpu("h100-sxm")) == BatchLimits(*limits)


def test_without_chunked_prefill_the_budget_holds_the_context():
    """Llama-3.1-8B (131,072 tokens of context) on an H100 with chunked prefill off: the
    budget is the context, as vLLM sets it; `scheduler.max_model_len` shortens it; a set
    budget wins."""
    h100 = get_gpu("h100-sxm")
    off = _config(chunked_prefill=False)
    assert off.scheduler.limits("vllm-v1", h100, 131072) == BatchLimits(1024, 131072)
    short = _config(chunked_prefill=False, max_model_len=2048)
    assert short.scheduler.limits("vllm-v1", h100, 131072) == BatchLimits(1024, 8192)
    fixed = _config(chunked_prefill=False, max_batched_tokens=4096)
    assert fixed.scheduler.limits("vllm-v1", h100, 131072) == BatchLimits(1024, 4096)


def test_whole_prompts_batch_together_up_to_the_context():
    """Six 3,000-token prompts at t = 0, chunked prefill off (and no tokenizer queue, so
    all reach the scheduler at once): with the budget at the context all six prefill in
    the first step (one first-token time); at a budget of 8192 two go per step, so the last
    waits for two more steps."""
    requests = [Request(i, 0.0, 3000, 8, tuple(range(i * 200 + 1, i * 200 + 189)), 16)
                for i in range(6)]

    def first_tokens_ms(config):
        config = config.model_copy(update={"cost_model": config.cost_model.model_copy(
            update={"params": {"frontend_s_per_prompt_token": 0.0}})})
        rows = simulate(config, requests).requests
        return sorted(rows["ttft_ms"].round(6).unique())

    assert len(first_tokens_ms(_config(chunked_prefill=False))) == 1
    assert len(first_tokens_ms(_config(chunked_prefill=False, max_batched_tokens=8192))) == 3


@settings(max_examples=120, deadline=None)
@given(engine=st.sampled_from(sorted(ENGINES)),
       memory_gib=st.floats(1, 300), a100=st.booleans(),
       seqs=st.none() | st.integers(1, 5000), budget=st.none() | st.integers(1, 200_000),
       chunked=st.booleans(), context=st.none() | st.integers(1, 1_000_000))
def test_resolved_limits_keep_their_rules(engine, memory_gib, a100, seqs, budget, chunked,
                                          context):
    """Whatever is set: a set value is kept; a refusal happens exactly when the running
    requests exceed the budget; without chunked prefill an unset vLLM budget is the
    engine's chunked one raised to the context, capped at max_num_seqs x max_model_len."""
    gpu = _gpu("a100-like" if a100 else "g", memory_gib)
    if seqs is not None and budget is not None and seqs > budget:
        with pytest.raises(InputError):  # both set and inconsistent: refused at load
            _config(max_num_seqs=seqs, max_batched_tokens=budget)
        return
    given_values = {k: v for k, v in (("max_num_seqs", seqs), ("max_batched_tokens", budget))
                    if v is not None}
    config = _config(**given_values, chunked_prefill=chunked)
    base = ENGINES[engine].batch_limits(gpu, seqs)  # chunked, no context: the plain default
    want_seqs = base.max_num_seqs
    if budget is not None:
        want_budget = budget
    elif context is None or engine == "sglang":
        want_budget = ENGINES[engine].batch_limits(gpu, seqs, chunked).max_batched_tokens
    else:
        raised = base.max_batched_tokens if chunked else max(context, base.max_batched_tokens)
        want_budget = min(want_seqs * context, raised)
    if want_seqs > want_budget:
        with pytest.raises(InputError) as info:
            config.scheduler.limits(engine, gpu, context)
        assert info.value.field == "scheduler.max_num_seqs"
        return
    assert config.scheduler.limits(engine, gpu, context) == BatchLimits(want_seqs, want_budget)
