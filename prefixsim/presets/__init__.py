"""Model and GPU presets (docs/cost-models.md tables), custom ones from YAML, models from a
Hugging Face config.json; this package face holds the lookups and the KV pool size and
re-exports the records (specs.py), tables (tables.py), custom specs (custom.py) and the
config.json reader (hf_config.py).

A `ModelSpec` holds the architecture figures the cost model and the KV pool need; a `GPUSpec`
holds the datasheet figures of one accelerator. `MODELS` and `GPUS` map preset names (exactly
what `--model` / `--gpu` accept) to specs; `get_model` / `get_gpu` raise `InputError` listing
the valid names. Custom specs come from YAML mappings with the same field names
(`model_from_mapping`, `gpu_from_mapping`, `load_custom_presets`).

Conventions: HBM sizes are binary (a datasheet "80 GB" H100 shows 81,559 MiB in nvidia-smi,
so GB of HBM are taken as GiB); bandwidths and FLOP/s are decimal (TB/s = 1e12). Link
bandwidths are per direction. Figures marked uncertain in docs/cost-models.md say so in `notes`.
Cost formulas live in costmodel/; this module computes only sizes.
"""


from __future__ import annotations

from prefixsim.errors import InputError
from prefixsim.presets.custom import gpu_from_mapping, load_custom_presets, model_from_mapping
from prefixsim.presets.hf_config import load_hf_config, model_from_hf_config
from prefixsim.presets.specs import GB_S, GIB, TFLOPS, GPUSpec, LayerShape, ModelSpec
from prefixsim.presets.tables import GPUS, MODELS
from prefixsim.registry import unknown_name

__all__ = [
    "GB_S", "GIB", "GPUS", "MODELS", "TFLOPS", "GPUSpec", "LayerShape", "ModelSpec",
    "check_tensor_parallel", "get_gpu", "get_model", "gpu_from_mapping", "kv_pool_tokens",
    "load_custom_presets", "load_hf_config", "model_from_hf_config", "model_from_mapping",
]


# ------------------------------------------------------------------------ lookup
def check_tensor_parallel(model: ModelSpec, tp: int) -> None:
    """`tp` GPUs must split `model`'s attention heads evenly, and its KV heads too, or, when
    there are fewer KV heads than GPUs, be a multiple of them: each KV head is then replicated
    on tp / num_kv_heads GPUs, as vLLM does (an MLA latent, one "KV head", is on every GPU).
    Raises InputError naming `hardware.tp` and the head counts otherwise."""
    kv = model.num_kv_heads
    kv_ok = kv % tp == 0 if tp <= kv else tp % kv == 0
    if model.num_heads % tp or not kv_ok:
        raise InputError(
            f"tp {tp} does not split {model.name}'s {model.num_heads} attention heads and "
            f"{kv} KV heads evenly (tp must divide the attention heads, and divide the KV "
            "heads or be a multiple of them)", field="hardware.tp")


def get_model(name: str, field: str = "model.name") -> ModelSpec:
    """The model preset `name`; InputError listing the valid names otherwise."""
    if name not in MODELS:
        raise InputError(unknown_name("model", name, MODELS), field=field)
    return MODELS[name]


def get_gpu(name: str, field: str = "hardware.gpu") -> GPUSpec:
    """The GPU preset `name`; InputError listing the valid names otherwise."""
    if name not in GPUS:
        raise InputError(unknown_name("gpu", name, GPUS), field=field)
    return GPUS[name]


# ------------------------------------------------------------------ KV pool
def kv_pool_tokens(
    model: ModelSpec,
    gpu: GPUSpec,
    tp: int = 1,
    memory_utilization: float = 0.9,
    activation_reserve_bytes: int = 2 * GIB,
    weight_dtype_bytes: float = 2,
    kv_dtype_bytes: float = 2,
) -> int:
    """Tokens of KV one replica (tp GPUs) can hold: the HBM left for KV on each GPU (memory x
    utilisation - weights/tp - activation reserve) over each GPU's share of a token (KV heads
    split across them; replicated heads and MLA's latent in full on each)."""
    pool = (gpu.memory_bytes * memory_utilization
            - model.weight_bytes(weight_dtype_bytes) / tp - activation_reserve_bytes)
    per_gpu = max(0, int(pool))
    return int(per_gpu // model.kv_bytes_per_token_per_gpu(tp, kv_dtype_bytes))
