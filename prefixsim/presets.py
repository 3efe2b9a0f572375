"""Model and GPU presets (docs/cost-models.md tables) and custom ones from YAML.

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

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefixsim.errors import InputError, read_yaml

GIB = 2**30
GB_S = 1e9
TFLOPS = 1e12


@dataclass(frozen=True, slots=True)
class LayerShape:
    """The shape of a model's layer stack, as a preset (ModelSpec) and a per-GPU layer
    (costmodel/operators.py LayerDims) both describe it."""

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int


@dataclass(frozen=True, slots=True)
class ModelSpec(LayerShape):
    """Architecture figures of one model (a row of docs/cost-models.md "Models").

    num_params / num_active_params include embeddings (and the LM head when untied);
    `linear_params_per_token` is the reference's P: active parameters without embeddings.
    MoE models set num_experts, experts_per_token and expert_params (parameters in all routed
    experts together). MLA models (DeepSeek) set kv_lora_rank and rope_dim; their KV cache is
    the latent (num_kv_heads = 1: one latent shared by all heads).
    """

    num_params: int
    num_active_params: int
    tied_embeddings: bool = False
    num_experts: int | None = None
    experts_per_token: int | None = None
    expert_params: int = 0
    kv_lora_rank: int | None = None
    rope_dim: int | None = None
    notes: str = ""

    def __post_init__(self) -> None:
        for f in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim",
                  "intermediate_size", "vocab_size", "num_params", "num_active_params"):
            value = getattr(self, f)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"must be an integer >= 1, got {value!r}", field=f)
        if self.num_active_params > self.num_params:
            raise InputError("must not exceed num_params", field="num_active_params")
        if (self.num_experts is None) != (self.experts_per_token is None):
            raise InputError("num_experts and experts_per_token go together",
                             field="experts_per_token")
        if self.num_experts is not None and not 1 <= self.experts_per_token <= self.num_experts:
            raise InputError("must be between 1 and num_experts", field="experts_per_token")
        if (self.kv_lora_rank is None) != (self.rope_dim is None):
            raise InputError("kv_lora_rank and rope_dim go together", field="rope_dim")
        if self.linear_params_per_token < 1:
            raise InputError("active parameters do not exceed the embeddings",
                             field="num_active_params")

    @property
    def is_moe(self) -> bool:
        return self.num_experts is not None

    @property
    def uses_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def embedding_params(self) -> int:
        """Input embedding plus (untied) LM head parameters."""
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    @property
    def linear_params_per_token(self) -> int:
        """P of the cost formulas: active parameters per token without embeddings."""
        return self.num_active_params - self.embedding_params

    def kv_values_per_token_per_layer(self) -> int:
        """KV elements stored per token per layer (R13)."""
        if self.uses_mla:
            return self.kv_lora_rank + self.rope_dim
        return 2 * self.num_kv_heads * self.head_dim

    def kv_bytes_per_token(self, dtype_bytes: float = 2) -> int:
        """KV cache bytes per token over all layers (2 = bf16, 1 = fp8) (docs/cache-semantics.md
        R13)."""
        return int(self.num_layers * self.kv_values_per_token_per_layer() * dtype_bytes)

    def kv_heads_per_gpu(self, tp: int = 1) -> int:
        """KV heads each of `tp` GPUs holds: split evenly, or one replicated on every GPU
        when tp exceeds the KV heads (as vLLM does). MLA's latent counts as one head."""
        return max(1, -(-self.num_kv_heads // tp))

    def kv_bytes_per_token_per_gpu(self, tp: int = 1, dtype_bytes: float = 2) -> int:
        """KV bytes per token on each of `tp` GPUs (docs/cache-semantics.md R13): the heads of
        `kv_heads_per_gpu`; MLA's latent is replicated on every GPU, not sharded."""
        if self.uses_mla:
            per_layer = self.kv_lora_rank + self.rope_dim
        else:
            per_layer = 2 * self.kv_heads_per_gpu(tp) * self.head_dim
        return int(self.num_layers * per_layer * dtype_bytes)

    def weight_bytes(self, dtype_bytes: float = 2) -> int:
        """Bytes of all weights (every expert) at `dtype_bytes` per parameter."""
        return int(self.num_params * dtype_bytes)


@dataclass(frozen=True, slots=True)
class GPUSpec:
    """Datasheet figures of one accelerator (a row of docs/cost-models.md "Hardware"), dense FLOP/s.

    nvlink_bytes_s is the per-direction GPU-to-GPU bandwidth for tensor-parallel all-reduce
    (None: no NVLink, all-reduce goes over the host link). fp8_flops None: no FP8 units.
    """

    name: str
    memory_bytes: int
    hbm_bandwidth_bytes_s: float
    bf16_flops: float
    fp8_flops: float | None
    host_link_bytes_s: float
    nvlink_bytes_s: float | None = None
    notes: str = ""

    def __post_init__(self) -> None:
        for f in ("memory_bytes", "hbm_bandwidth_bytes_s", "bf16_flops", "host_link_bytes_s"):
            value = getattr(self, f)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise InputError(f"must be a number > 0, got {value!r}", field=f)
        for f in ("fp8_flops", "nvlink_bytes_s"):
            value = getattr(self, f)
            if value is not None and (not isinstance(value, int | float) or not value > 0):
                raise InputError(f"must be a number > 0 or null, got {value!r}", field=f)

    @property
    def interconnect_bytes_s(self) -> float:
        """Per-direction bandwidth between GPUs of one replica (NVLink, else the host link)."""
        return self.nvlink_bytes_s if self.nvlink_bytes_s is not None else self.host_link_bytes_s

    def peak_flops(self, dtype_bytes: float = 2) -> float:
        """Dense peak for bf16 (2 bytes) or fp8 (1 byte; bf16 rate where there is no FP8)."""
        if dtype_bytes <= 1 and self.fp8_flops is not None:
            return self.fp8_flops
        return self.bf16_flops


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
        _gpu("b200", 180, 8.0, 2250, 4500, 64, 1800,
             "HBM bandwidth ~8 TB/s is uncertain (a projected figure); NVLink 5 1.8 TB/s total is "
             "from the datasheet"),
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


MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        _model("llama-3.1-8b", (32, 4096, 32, 8, 128, 14336, 128256), 8.03),
        _model("llama-3.1-70b", (80, 8192, 64, 8, 128, 28672, 128256), 70.6),
        _model("llama-3.1-405b", (126, 16384, 128, 8, 128, 53248, 128256), 405.9),
        _model("llama-2-7b", (32, 4096, 32, 32, 128, 11008, 32000), 6.74,
               notes="Llama-2-7B config.json: multi-head attention (32 KV heads)"),
        _model("llama-2-70b", (80, 8192, 64, 8, 128, 28672, 32000), 68.98,
               notes="Llama-2-70B config.json: GQA with 8 KV heads"),
        _model("codellama-34b", (48, 8192, 64, 8, 128, 22016, 32000), 33.74,
               notes="CodeLlama-34B config.json: GQA with 8 KV heads, vocab 32000"),
        _model("qwen2.5-7b", (28, 3584, 28, 4, 128, 18944, 152064), 7.62),
        _model("qwen2.5-72b", (80, 8192, 64, 8, 128, 29568, 152064), 72.7),
        _model("mistral-7b", (32, 4096, 32, 8, 128, 14336, 32768), 7.25),
        _model("mixtral-8x7b", (32, 4096, 32, 8, 128, 14336, 32000), 46.7, 12.9,
               num_experts=8, experts_per_token=2,
               expert_params=32 * 8 * 3 * 4096 * 14336),
        _model("deepseek-v3", (61, 7168, 128, 1, 128, 18432, 129280), 671, 37,
               num_experts=256, experts_per_token=8,
               expert_params=58 * 256 * 3 * 7168 * 2048,
               kv_lora_rank=512, rope_dim=64,
               notes="MLA: KV is the 512-wide latent + 64 rope values per layer; attention "
                     "FLOPs use head_dim 128 per head (approximate); ~37B active is approximate; "
                     "routed experts (58 MoE layers x 256, intermediate 2048) plus a shared one"),
    )
}


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
        raise InputError(f"unknown model {name!r} (valid: {', '.join(sorted(MODELS))})",
                         field=field)
    return MODELS[name]


def get_gpu(name: str, field: str = "hardware.gpu") -> GPUSpec:
    """The GPU preset `name`; InputError listing the valid names otherwise."""
    if name not in GPUS:
        raise InputError(f"unknown gpu {name!r} (valid: {', '.join(sorted(GPUS))})",
                         field=field)
    return GPUS[name]


# ---------------------------------------------------------------------- custom
def _number(value: Any) -> Any:
    """YAML 1.1 reads `1.0e11` (no exponent sign) as a string: accept it as a number."""
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() else number
    return value


def _from_mapping(cls: type, data: Any, source: str | None, prefix: str):
    if not isinstance(data, dict):
        raise InputError("expected a mapping", file=source, field=prefix or None)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            raise InputError("unknown key", file=source, field=f"{prefix}.{key}".strip("."))
    missing = [f.name for f in dataclasses.fields(cls)
               if f.name not in data and f.default is dataclasses.MISSING]
    if missing:
        raise InputError("missing key", file=source, field=f"{prefix}.{missing[0]}".strip("."))
    values = {key: _number(value) if key not in ("name", "notes") else value
              for key, value in data.items()}
    try:
        return cls(**values)
    except InputError as exc:
        raise InputError(exc.message, file=source,
                         field=f"{prefix}.{exc.field}".strip(".")) from None
    except TypeError as exc:
        raise InputError(str(exc), file=source, field=prefix or None) from None


def model_from_mapping(data: Any, source: str | None = None, prefix: str = "") -> ModelSpec:
    """A custom ModelSpec from a mapping with ModelSpec's field names."""
    return _from_mapping(ModelSpec, data, source, prefix)


def gpu_from_mapping(data: Any, source: str | None = None, prefix: str = "") -> GPUSpec:
    """A custom GPUSpec from a mapping with GPUSpec's field names (bytes, bytes/s, FLOP/s)."""
    return _from_mapping(GPUSpec, data, source, prefix)


def load_custom_presets(path: str | Path) -> tuple[dict[str, ModelSpec], dict[str, GPUSpec]]:
    """Read `models:` and `gpus:` lists of custom specs from a YAML file (not registered)."""
    path = Path(path)
    data = read_yaml(path) or {}
    if not isinstance(data, dict) or set(data) - {"models", "gpus"}:
        raise InputError("expected a mapping with keys models and/or gpus", file=str(path))
    models = {}
    for i, item in enumerate(data.get("models") or []):
        spec = model_from_mapping(item, str(path), f"models.{i}")
        models[spec.name] = spec
    gpus = {}
    for i, item in enumerate(data.get("gpus") or []):
        spec = gpu_from_mapping(item, str(path), f"gpus.{i}")
        gpus[spec.name] = spec
    return models, gpus


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
