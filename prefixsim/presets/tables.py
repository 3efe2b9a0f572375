"""The preset tables `MODELS` and `GPUS` (docs/cost-models.md "Models" and "Hardware").

Figures marked uncertain in docs/cost-models.md say so in `notes`. The newer presets are the
published config.json values (written from the model cards, not fetched: hub access is not
assumed) read by hf_config.py, so their parameter counts follow its formulas. Leaves out
lookups and the KV pool (presets/__init__.py), custom specs (custom.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from prefixsim.presets.hf_config import model_from_hf_config
from prefixsim.presets.specs import GB_S, GIB, TFLOPS, GPUSpec, ModelSpec


def _gpu(name, mem_gib, tb_s, bf16, fp8, host_gb_s, nvlink_total_gb_s=None, notes=""):
    return GPUSpec(
        name=name,
        memory_bytes=int(mem_gib * GIB),
        hbm_bandwidth_bytes_s=tb_s * 1e12,
        bf16_flops=bf16 * TFLOPS,
        fp8_flops=None if fp8 is None else fp8 * TFLOPS,
        host_link_bytes_s=host_gb_s * GB_S,
        nvlink_bytes_s=None if nvlink_total_gb_s is None else nvlink_total_gb_s / 2 * GB_S,
        notes=notes,
    )


_PCIE5 = "host link PCIe Gen5 x16, 64 GB/s nominal per direction"
_PCIE4 = "host link PCIe Gen4 x16, 32 GB/s nominal per direction"

GPUS: dict[str, GPUSpec] = {
    g.name: g
    for g in (
        _gpu("h100-sxm", 80, 3.35, 989, 1979, 64, 900, _PCIE5 + " (~50 GB/s achieved)"),
        _gpu("h100-pcie", 80, 2.0, 756, 1513, 64, None, _PCIE5),
        _gpu("h200", 141, 4.8, 989, 1979, 64, 900, _PCIE5),
        _gpu("a100-80g", 80, 2.039, 312, None, 32, 600, _PCIE4 + " (~25 GB/s achieved)"),
        _gpu("a100-40g", 40, 1.555, 312, None, 32, 600, _PCIE4),
        _gpu("l40s", 48, 0.864, 362, 733, 32, None, _PCIE4),
        _gpu("l4", 24, 0.300, 121, 242, 32, None, _PCIE4),
        _gpu("b200", 180, 7.7, 2250, 4500, 64, 1800,
             "HBM 7.7 TB/s: NVIDIA's Blackwell datasheet (a 7,680-bit bus at 3,996 MHz DDR, as the "
             "driver reports it; the 8 TB/s first published was a projection); NVLink 5 1.8 TB/s "
             "total is from the datasheet"),
        _gpu("mi300x", 192, 5.3, 1307, 2615, 64, 896,
             "Infinity Fabric 896 GB/s total is from the datasheet"),
    )
}


def _model(name: str, shape: tuple[int, int, int, int, int, int, int], params_b: float,
           active_b: float | None = None, **extra: Any) -> ModelSpec:
    """A preset: `shape` is (layers, hidden, heads, KV heads, head dim, intermediate, vocab),
    ModelSpec's fields in order; parameters in billions (`active_b`: MoE's active ones)."""
    layers, hidden, heads, kv_heads, head_dim, inter, vocab = shape
    return ModelSpec(
        name=name, num_layers=layers, hidden_size=hidden, num_heads=heads,
        num_kv_heads=kv_heads, head_dim=head_dim, intermediate_size=inter, vocab_size=vocab,
        num_params=int(params_b * 1e9), num_active_params=int((active_b or params_b) * 1e9),
        **extra,
    )


# Context lengths (max_model_len): each model card's config.json max_position_embeddings,
# which vLLM's --max-model-len defaults to (docs/cost-models.md "Models").
_LLAMA_31_CONTEXT = 131072
MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        _model("llama-3.1-8b", (32, 4096, 32, 8, 128, 14336, 128256), 8.03,
               max_model_len=_LLAMA_31_CONTEXT),
        _model("llama-3.1-70b", (80, 8192, 64, 8, 128, 28672, 128256), 70.6,
               max_model_len=_LLAMA_31_CONTEXT),
        _model("llama-3.1-405b", (126, 16384, 128, 8, 128, 53248, 128256), 405.9,
               max_model_len=_LLAMA_31_CONTEXT),
        _model("llama-2-7b", (32, 4096, 32, 32, 128, 11008, 32000), 6.74, max_model_len=4096,
               notes="Llama-2-7B config.json: multi-head attention (32 KV heads)"),
        _model("llama-2-70b", (80, 8192, 64, 8, 128, 28672, 32000), 68.98, max_model_len=4096,
               notes="Llama-2-70B config.json: GQA with 8 KV heads"),
        _model("codellama-34b", (48, 8192, 64, 8, 128, 22016, 32000), 33.74,
               max_model_len=16384,
               notes="CodeLlama-34B config.json: GQA with 8 KV heads, vocab 32000"),
        _model("qwen2.5-7b", (28, 3584, 28, 4, 128, 18944, 152064), 7.62,
               max_model_len=32768),
        _model("qwen2.5-72b", (80, 8192, 64, 8, 128, 29568, 152064), 72.7,
               max_model_len=32768),
        _model("mistral-7b", (32, 4096, 32, 8, 128, 14336, 32768), 7.25,
               max_model_len=32768),
        _model("mixtral-8x7b", (32, 4096, 32, 8, 128, 14336, 32000), 46.7, 12.9,
               num_experts=8, experts_per_token=2,
               expert_params=32 * 8 * 3 * 4096 * 14336, max_model_len=32768),
        _model("deepseek-v3", (61, 7168, 128, 1, 128, 18432, 129280), 671, 37,
               num_experts=256, experts_per_token=8,
               expert_params=58 * 256 * 3 * 7168 * 2048,
               kv_lora_rank=512, rope_dim=64, max_model_len=163840,
               notes="MLA: KV is the 512-wide latent + 64 rope values per layer; attention "
                     "FLOPs use head_dim 128 per head (approximate); ~37B active is approximate; "
                     "routed experts (58 MoE layers x 256, intermediate 2048) plus a shared one"),
    )
}


def _from_card(name: str, source: str, notes: str, **config: Any) -> ModelSpec:
    """A preset from the config.json values of the model card `source`."""
    spec = model_from_hf_config(config, name, source)
    return dataclasses.replace(spec, notes=f"{source} config.json; {notes}")


_HF_PRESETS = (
    _from_card(
        "qwen3-coder-30b-a3b", "Qwen/Qwen3-Coder-30B-A3B-Instruct",
        "MoE 128 experts, 8 active, per-expert intermediate 768, no shared expert; norms left "
        "out of the parameter counts",
        hidden_size=2048, num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4,
        head_dim=128, intermediate_size=6144, moe_intermediate_size=768, num_experts=128,
        num_experts_per_tok=8, vocab_size=151936, tie_word_embeddings=False,
        sliding_window=None, use_sliding_window=False, max_position_embeddings=262144),
    _from_card(
        "gpt-oss-120b", "openai/gpt-oss-120b",
        "MoE 128 experts, 4 active; layers alternate a 128-token sliding window and full "
        "attention; attention sinks and biases left out; weights ship in MXFP4 (set "
        "model.weight_dtype); the card's 5.1B active is counted without embeddings "
        "(uncertain)",
        hidden_size=2880, num_hidden_layers=36, num_attention_heads=64, num_key_value_heads=8,
        head_dim=64, intermediate_size=2880, num_local_experts=128, num_experts_per_tok=4,
        vocab_size=201088, tie_word_embeddings=False, sliding_window=128,
        layer_types=["sliding_attention", "full_attention"] * 18,
        max_position_embeddings=131072),
    _from_card(
        "gemma-3-27b", "google/gemma-3-27b-it",
        "text model only (the vision tower, ~0.4B, left out); 5 local layers with a "
        "1024-token window per global layer (sliding_window_pattern 6); tied embeddings",
        text_config={
            "hidden_size": 5376, "num_hidden_layers": 62, "num_attention_heads": 32,
            "num_key_value_heads": 16, "head_dim": 128, "intermediate_size": 21504,
            "vocab_size": 262208, "sliding_window": 1024, "sliding_window_pattern": 6,
            "max_position_embeddings": 131072},
        tie_word_embeddings=True),
)
MODELS.update((m.name, m) for m in _HF_PRESETS)
