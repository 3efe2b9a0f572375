"""Presets match docs/cost-models.md; derived sizes worked by hand; custom specs from YAML."""

import dataclasses

import pytest

from prefixsim.errors import InputError
from prefixsim.presets import (
    GIB,
    GPUS,
    MODELS,
    get_gpu,
    get_model,
    kv_pool_tokens,
    load_custom_presets,
    model_from_mapping,
)

# docs/cost-models.md "KV bytes/token bf16" column.
KV_BF16 = {
    "llama-3.1-8b": 131_072, "llama-3.1-70b": 327_680, "llama-3.1-405b": 516_096,
    "qwen2.5-7b": 57_344, "qwen2.5-72b": 327_680, "mistral-7b": 131_072,
    "mixtral-8x7b": 131_072, "deepseek-v3": 70_272,
    # not in the reference table: 2 x layers x kv_heads x 128 x 2 bytes, worked by hand
    "llama-2-7b": 524_288, "llama-2-70b": 327_680, "codellama-34b": 196_608,
    # config.json presets: 2 x layers keeping per-token KV (window ones too) x kv_heads x
    # head_dim x 2 bytes: 2*48*4*128*2, 2*36*8*64*2, 2*62*16*128*2
    "qwen3-coder-30b-a3b": 98_304, "gpt-oss-120b": 73_728, "gemma-3-27b": 507_904,
}


def test_every_reference_row_is_a_preset():
    assert set(MODELS) == set(KV_BF16)
    assert set(GPUS) == {"h100-sxm", "h100-pcie", "h200", "a100-80g", "a100-40g", "l40s", "l4",
                         "b200", "mi300x"}


@pytest.mark.parametrize("name", sorted(KV_BF16))
def test_kv_bytes_per_token_match_reference(name):
    model = MODELS[name]
    assert model.kv_bytes_per_token(2) == KV_BF16[name]
    assert model.kv_bytes_per_token(1) == KV_BF16[name] // 2  # fp8 KV halves it


def test_llama_linear_params_by_hand():
    """Per layer: q,o 2*4096^2 + k,v 2*4096*1024 + MLP 3*4096*14336 = 218,103,808; x32 layers
    = 6,979,321,856. Preset: 8.03e9 - 2*128256*4096 embeddings = 6,979,326,848 (0.0001% off)."""
    model = get_model("llama-3.1-8b")
    by_shape = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    assert abs(model.linear_params_per_token - by_shape) / by_shape < 1e-5


def test_h100_figures():
    gpu = get_gpu("h100-sxm")
    assert gpu.memory_bytes == 80 * GIB
    assert gpu.hbm_bandwidth_bytes_s == 3.35e12
    assert gpu.bf16_flops == 989e12 and gpu.fp8_flops == 1979e12
    assert gpu.nvlink_bytes_s == 450e9  # 900 GB/s bidirectional total
    assert get_gpu("a100-80g").fp8_flops is None
    assert get_gpu("a100-80g").peak_flops(1) == 312e12  # no FP8: bf16 rate


def test_kv_pool_by_hand():
    """0.9 * 85,899,345,920 = 77,309,411,328; - 16,060,000,000 weight bytes
    - 2,147,483,648 reserve = 59,101,927,680 bytes; / 131,072 per token = 450,911 tokens."""
    tokens = kv_pool_tokens(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))
    expected = int((0.9 * 80 * GIB - 16.06e9 - 2 * GIB) // 131_072)
    assert tokens == expected
    assert tokens == 450_911
    # tensor parallel splits the weights: 70B fits on 4 GPUs, not on 1.
    assert kv_pool_tokens(get_model("llama-3.1-70b"), get_gpu("h100-sxm"), tp=1) == 0
    assert kv_pool_tokens(get_model("llama-3.1-70b"), get_gpu("h100-sxm"), tp=4) > 400_000


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(InputError, match="llama-3.1-8b") as info:
        get_model("gpt-5")
    assert info.value.field == "model.name"
    with pytest.raises(InputError, match="h100-sxm"):
        get_gpu("tpu")


def test_custom_presets_from_yaml(tmp_path):
    path = tmp_path / "custom.yaml"
    path.write_text(
        "models:\n"
        "  - {name: tiny, num_layers: 2, hidden_size: 64, num_heads: 4, num_kv_heads: 2,\n"
        "     head_dim: 16, intermediate_size: 128, vocab_size: 100, num_params: 200000,\n"
        "     num_active_params: 200000}\n"
        "gpus:\n"
        "  - {name: toy, memory_bytes: 1000000000, hbm_bandwidth_bytes_s: 1.0e11,\n"
        "     bf16_flops: 1.0e13, fp8_flops: null, host_link_bytes_s: 1.0e10}\n"
    )
    models, gpus = load_custom_presets(path)
    assert models["tiny"].kv_bytes_per_token(2) == 2 * 2 * 2 * 16 * 2
    assert gpus["toy"].interconnect_bytes_s == 1e10


def test_custom_preset_errors_name_the_field():
    with pytest.raises(InputError) as info:
        model_from_mapping({"name": "x", "num_layers": 2}, prefix="model")
    assert info.value.field.startswith("model.")
    good = {f: getattr(MODELS["mistral-7b"], f) for f in
            MODELS["mistral-7b"].__dataclass_fields__}
    with pytest.raises(InputError, match="unknown key") as info:
        model_from_mapping({**good, "bogus": 1}, prefix="model")
    assert info.value.field == "model.bogus"
    with pytest.raises(InputError) as info:
        model_from_mapping({**good, "num_layers": 0}, prefix="model")
    assert info.value.field == "model.num_layers"


# docs/cost-models.md "context (max_model_len)" column: each config.json's
# max_position_embeddings
CONTEXT = {
    "llama-3.1-8b": 131_072, "llama-3.1-70b": 131_072, "llama-3.1-405b": 131_072,
    "llama-2-7b": 4_096, "llama-2-70b": 4_096, "codellama-34b": 16_384,
    "qwen2.5-7b": 32_768, "qwen2.5-72b": 32_768, "mistral-7b": 32_768,
    "mixtral-8x7b": 32_768, "deepseek-v3": 163_840, "qwen3-coder-30b-a3b": 262_144,
    "gpt-oss-120b": 131_072, "gemma-3-27b": 131_072,
}


def test_every_preset_has_its_context_length():
    assert {name: MODELS[name].max_model_len for name in MODELS} == CONTEXT


def test_the_docs_table_lists_each_context_length():
    from pathlib import Path
    text = (Path(__file__).parents[1] / "docs" / "cost-models.md").read_text()
    for name, context in CONTEXT.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        assert row.rstrip(" |").endswith(f"{context:,}"), name


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "4096"])
def test_a_bad_context_length_names_its_field(value):
    with pytest.raises(InputError) as info:
        dataclasses.replace(get_model("llama-3.1-8b"), max_model_len=value)
    assert info.value.field == "max_model_len"
