"""Config sections of the timed mode: errors name the dotted key; custom presets run."""

import pytest

from prefixsim.config import config_to_yaml, load_config
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate


@pytest.mark.parametrize("overrides,field", [
    ({"engine.replicaz": 2}, "engine.replicaz"),
    ({"engine.replicas": 0}, "engine.replicas"),
    ({"hardware.memory_utilization": 1.5}, "hardware.memory_utilization"),
    ({"model.kv_dtype": "int4"}, "model.kv_dtype"),
    ({"cost_model.name": "magic"}, "cost_model.name"),
    ({"router.name": "random"}, "router.name"),
    ({"scheduler.max_num_seqs": 9000, "scheduler.max_batched_tokens": 8192}, "scheduler"),
])
def test_bad_keys_name_the_field(overrides, field):
    with pytest.raises(InputError) as info:
        load_config(None, overrides)
    assert info.value.field.startswith(field)


def test_defaults_are_written_into_the_effective_config():
    """The scheduler limits stay unset there (null: the serving engine's on the GPU, which
    the run's summary states)."""
    text = config_to_yaml(load_config(None, {}))
    for line in ("name: llama-3.1-8b", "gpu: h100-sxm", "max_batched_tokens: null",
                 "max_num_seqs: null", "engine: vllm-v1", "name: prefix_aware",
                 "name: roofline", "replicas: 1"):
        assert line in text


def test_a_limit_above_the_engines_budget_fails_the_run_naming_the_field():
    """9000 running requests against vllm-v1's 8192-token budget on an H100: the config
    loads (the budget is the engine's, known with the GPU), the run is refused."""
    config = load_config(None, {"scheduler.max_num_seqs": 9000, "trace.path":
                                "traces/demo_chat.jsonl"})
    with pytest.raises(InputError) as info:
        simulate(config)
    assert info.value.field == "scheduler.max_num_seqs"
    assert "9000 > 8192" in info.value.message


def test_custom_model_and_gpu_from_yaml(tmp_path):
    """A toy model on a toy GPU: KV 2·2·2·16·2 = 256 bytes/token; pool = 0.9·1 GiB - 0.4 MB
    weights - 0 reserve = 965,969,347 bytes -> 3,773,317 tokens."""
    presets = tmp_path / "presets.yaml"
    presets.write_text(
        "models:\n"
        "  - {name: toy, num_layers: 2, hidden_size: 64, num_heads: 4, num_kv_heads: 2,\n"
        "     head_dim: 16, intermediate_size: 128, vocab_size: 100, num_params: 200000,\n"
        "     num_active_params: 200000}\n"
        "gpus:\n"
        "  - {name: toy-gpu, memory_bytes: 1073741824, hbm_bandwidth_bytes_s: 1.0e+11,\n"
        "     bf16_flops: 1.0e+13, fp8_flops: null, host_link_bytes_s: 1.0e+10}\n")
    config = load_config(None, {
        "trace.path": "traces/demo_chat.jsonl", "trace.max_requests": 10,
        "model.name": "toy", "model.presets_file": str(presets),
        "hardware.gpu": "toy-gpu", "hardware.presets_file": str(presets),
        "hardware.activation_reserve_gib": 0,
    })
    summary = simulate(config).summary
    assert summary["model"] == "toy" and summary["gpu"] == "toy-gpu"
    assert summary["kv_pool_tokens_per_replica"] == int((0.9 * 2**30 - 400_000) // 256)
    assert summary["completed"] == 10


def test_unknown_custom_name_lists_presets(tmp_path):
    presets = tmp_path / "p.yaml"
    presets.write_text("models: []\n")
    config = load_config(None, {"trace.path": "traces/demo_chat.jsonl",
                                "model.name": "nope", "model.presets_file": str(presets)})
    with pytest.raises(InputError, match="llama-3.1-8b"):
        simulate(config)


def test_request_classes_and_pricing_apply_in_timed_mode():
    """min_cacheable_tokens above every prompt: nothing is matched or inserted, every KV token
    stays private; pricing is reported for the timed run too."""
    base = {"trace.path": "traces/demo_chat.jsonl", "trace.max_requests": 40,
            "engine.check_invariants": True}
    cached = simulate(load_config(None, {**base, "cache.pricing": "anthropic"})).summary
    bypass = simulate(load_config(None, {**base, "cache.min_cacheable_tokens": 10**9})).summary
    assert cached["cache_hit_tokens"] > 0 and "cost_total_usd" in cached
    assert bypass["cache_hit_tokens"] == 0 and bypass["cache_inserted_tokens"] == 0
    assert bypass["completed"] == 40
    assert bypass["mean_ttft_ms"] > cached["mean_ttft_ms"]
