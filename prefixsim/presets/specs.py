"""The spec records of presets: `LayerShape`, `ModelSpec` (with its KV sizes per token,
docs/cache-semantics.md R13, and per layer kind, docs/cost-models.md "Models"), `GPUSpec`.

Owns sizes only; the preset tables are tables.py's, custom specs custom.py's, Hugging Face
config.json reading hf_config.py's, cost formulas costmodel/'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefixsim.errors import InputError

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

    Layer kinds (docs/cost-models.md "Layer kinds"): of the num_layers layers,
    num_window_layers keep the KV of the last `sliding_window` tokens only (sliding-window
    attention) and num_state_layers keep a fixed state and no per-token KV (linear attention,
    Mamba); the rest are full attention. Both default to 0: every layer full attention.

    `max_model_len`: the longest prompt plus output a server of the model accepts, its
    context length (config.json's max_position_embeddings, which vLLM's --max-model-len
    defaults to); None: no limit but the KV pool.
    """

    num_params: int
    num_active_params: int
    tied_embeddings: bool = False
    num_experts: int | None = None
    experts_per_token: int | None = None
    expert_params: int = 0
    kv_lora_rank: int | None = None
    rope_dim: int | None = None
    sliding_window: int | None = None
    num_window_layers: int = 0
    num_state_layers: int = 0
    max_model_len: int | None = None
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
        self._check_layer_kinds()
        length = self.max_model_len
        if length is not None and (isinstance(length, bool) or not isinstance(length, int)
                                   or length < 1):
            raise InputError(f"must be an integer >= 1 or null, got {length!r}",
                             field="max_model_len")
        if self.linear_params_per_token < 1:
            raise InputError("active parameters do not exceed the embeddings",
                             field="num_active_params")

    def _check_layer_kinds(self) -> None:
        for f in ("num_window_layers", "num_state_layers"):
            value = getattr(self, f)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(f"must be an integer >= 0, got {value!r}", field=f)
        window = self.sliding_window
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                                   or window < 1):
            raise InputError(f"must be an integer >= 1 or null, got {window!r}",
                             field="sliding_window")
        if (window is None) != (self.num_window_layers == 0):
            raise InputError("sliding_window and num_window_layers > 0 go together",
                             field="num_window_layers")
        if self.num_kv_layers < 1 or self.num_full_attention_layers < 0:
            raise InputError("window and state layers leave no layer with per-token KV",
                             field="num_state_layers")

    @property
    def num_kv_layers(self) -> int:
        """Layers that keep per-token KV: full attention and sliding window."""
        return self.num_layers - self.num_state_layers

    @property
    def num_full_attention_layers(self) -> int:
        return self.num_layers - self.num_window_layers - self.num_state_layers

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
        """KV cache bytes per token over the layers that keep per-token KV (2 = bf16, 1 = fp8)
        (docs/cache-semantics.md R13): the KV pool counts a cached token in window layers too
        (docs/cost-models.md "Layer kinds")."""
        return int(self.num_kv_layers * self.kv_values_per_token_per_layer() * dtype_bytes)

    def kv_bytes_of_context(self, context_tokens: int, dtype_bytes: float = 2) -> int:
        """KV bytes one request of `context_tokens` needs: full-attention layers keep every
        token, window layers min(context, sliding_window), state layers none (their fixed
        state is not counted; docs/cost-models.md "Layer kinds")."""
        window = min(context_tokens, self.sliding_window or 0)
        tokens = self.num_full_attention_layers * context_tokens + self.num_window_layers * window
        return int(tokens * self.kv_values_per_token_per_layer() * dtype_bytes)

    def longest_context(self, pool_tokens: int) -> int | None:
        """The longest single request whose KV fits a pool of `pool_tokens` (a pool token is
        one token in every layer that keeps KV, as kv_bytes_per_token counts it; a request
        keeps every token in full-attention layers and min(context, sliding_window) in
        window layers, as `kv_bytes_of_context`); None: any (no full-attention layer, and
        the windows fit). What vLLM checks before it starts: one request of max_model_len
        must fit."""
        layer_tokens = pool_tokens * self.num_kv_layers  # the pool, in tokens of one layer
        window = self.num_window_layers * (self.sliding_window or 0)
        if self.num_full_attention_layers == 0:
            return None if window <= layer_tokens else 0
        return max(0, (layer_tokens - window) // self.num_full_attention_layers)

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
        return int(self.num_kv_layers * per_layer * dtype_bytes)

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
