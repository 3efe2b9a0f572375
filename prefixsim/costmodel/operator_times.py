"""Per-operator roofline times of one GPU of a replica (docs/cost-models.md "Per-operator
roofline").

Every operator of a step is timed on its own, as a kernel is: a GEMM or an attention kernel
takes the p-norm blend of its compute time and its memory time,
`(compute^p + memory^p)^(1/p)` (p = `overlap_exponent`; p -> infinity is the plain max), plus
a per-kernel floor; an element-wise kernel moves its bytes at a measured fraction of HBM
bandwidth, plus a floor. GEMM compute counts the token rows rounded up to `gemm_tile_tokens`
(tensor-core tiles); prefill attention counts query rows rounded up to
`attention_tile_tokens`, the cached keys in full and the causal block within the chunk as
`attention_causal_factor` x its rows (the kernel does not skip masked tiles at full
efficiency); decode attention is memory-bound: the KV bytes it reads, plus a cost per
sequence. All operators of one layer sum; nothing overlaps (a prefill chunk's compute no
longer hides under the decode batch's weight reads).

Shapes are per GPU (heads, intermediate and vocabulary split `tp` ways; KV heads replicated
when tp exceeds them; MLA's latent in full). Leaves out: communication (collectives.py),
CPU time (roofline.py adds it), MoE routing kernels, sampling kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, hypot

from prefixsim.costmodel.operators import LayerDims
from prefixsim.presets import GPUSpec

ACT_BYTES = 2  # bf16 activations
# Element-wise kernels of a layer: bytes moved per token (as a function of the layer's
# per-GPU dims) and the fraction of HBM bandwidth each reached in Vidur's H100 and A100
# measurements (median fits over Llama-2-7B/70B, CodeLlama-34B, InternLM-20B, Qwen-72B at
# TP 1-8; docs/cost-models.md "Defaults and their sources").
ELEMENTWISE_EFFICIENCY = {"norm": 0.4, "rope": 0.5, "activation": 0.6, "residual": 1.0,
                          "kv_write": 0.5, "embedding": 0.2}


@dataclass(frozen=True, slots=True)
class OperatorParams:
    """Efficiencies (fractions of the datasheet peak) and per-kernel floors, in seconds."""

    gemm_efficiency: float = 0.72
    gemm_bandwidth_efficiency: float = 0.9
    gemm_floor_s: float = 5e-6
    gemm_tile_tokens: int = 64
    overlap_exponent: float = 2.0
    prefill_attention_efficiency: float = 0.44
    attention_causal_factor: float = 1.2
    attention_tile_tokens: int = 64
    prefill_attention_floor_s: float = 20e-6
    decode_attention_efficiency: float = 0.85
    decode_attention_floor_s: float = 15e-6
    decode_attention_s_per_seq: float = 1e-7
    elementwise_floor_s: float = 2e-6

    def __post_init__(self) -> None:
        for name in ("gemm_efficiency", "gemm_bandwidth_efficiency",
                     "prefill_attention_efficiency", "decode_attention_efficiency"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        for name in ("gemm_floor_s", "prefill_attention_floor_s", "decode_attention_floor_s",
                     "decode_attention_s_per_seq", "elementwise_floor_s"):
            if not 0 <= getattr(self, name) < float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0")
        if not self.overlap_exponent >= 1:
            raise ValueError(f"overlap_exponent must be >= 1, got {self.overlap_exponent}")
        if not self.attention_causal_factor > 0:
            raise ValueError("attention_causal_factor must be > 0")
        for name in ("gemm_tile_tokens", "attention_tile_tokens"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1")


def _tiles(rows: int, tile: int) -> int:
    return -(-rows // tile) * tile


class GemmTerms:
    """One weight matrix's GEMM time terms: seconds per padded row (compute), per row of
    activation bytes and for the weight's bytes (memory). Made once per matrix
    (`OperatorTimes.gemm_terms`); a roofline keeps its model's so a step reads them rather
    than looking the shape up (a C object compiled, operator_times.pxd)."""

    __slots__ = ("per_row", "per_token", "weight")

    def __init__(self, per_row: float, per_token: float, weight: float) -> None:
        self.per_row = per_row
        self.per_token = per_token
        self.weight = weight


class OperatorTimes:
    """Times of one layer's operators on one GPU of `dims` (per-GPU shapes)."""

    def __init__(self, dims: LayerDims, gpu: GPUSpec, params: OperatorParams,
                 weight_dtype_bytes: float, kv_dtype_bytes: float,
                 kv_values_per_token_per_layer: int) -> None:
        self.dims = dims
        self.params = params
        self.weight_bytes = weight_dtype_bytes
        self.kv_bytes = kv_dtype_bytes
        self.kv_values = kv_values_per_token_per_layer  # per GPU
        p = params
        self._gemm_flop_s = 1.0 / (gpu.peak_flops(weight_dtype_bytes) * p.gemm_efficiency)
        self._gemm_byte_s = 1.0 / (gpu.hbm_bandwidth_bytes_s * p.gemm_bandwidth_efficiency)
        # attention runs in the KV cache's dtype: bf16 with fp8 weights unless the KV is fp8
        self._attn_flop_s = 1.0 / (gpu.peak_flops(kv_dtype_bytes)
                                   * p.prefill_attention_efficiency)
        self._attn_byte_s = 1.0 / (gpu.hbm_bandwidth_bytes_s * p.decode_attention_efficiency)
        self._hbm_s = 1.0 / gpu.hbm_bandwidth_bytes_s
        self._p = p.overlap_exponent
        self._weights: dict[tuple[int, int], tuple[float, float, float]] = {}
        # the figures the per-step methods read, as fields (C fields of operator_times.pxd)
        self._gemm_tile = p.gemm_tile_tokens
        self._gemm_floor_s = p.gemm_floor_s
        self._attn_tile = p.attention_tile_tokens
        self._causal = p.attention_causal_factor
        self._elementwise_floor_s = p.elementwise_floor_s
        self._num_heads, self._head_dim = dims.num_heads, dims.head_dim
        self._hidden = dims.hidden_size
        self._qkv_width = (dims.num_heads + dims.num_kv_heads) * dims.head_dim  # q, k rotated
        self._s_per_seq = p.decode_attention_s_per_seq
        self._prefill_floor_s = p.prefill_attention_floor_s
        self._decode_floor_s = p.decode_attention_floor_s
        eff = ELEMENTWISE_EFFICIENCY  # each kind's, read as a field by the per-step methods
        self._eff_norm, self._eff_rope = eff["norm"], eff["rope"]
        self._eff_activation, self._eff_residual = eff["activation"], eff["residual"]
        self._eff_kv_write, self._eff_embedding = eff["kv_write"], eff["embedding"]

    def blend(self, compute_s: float, memory_s: float) -> float:
        """The p-norm of compute and memory time (their max when p is infinite)."""
        p = self._p
        if p == 2.0:
            return hypot(compute_s, memory_s)
        if p == float("inf"):
            return max(compute_s, memory_s)
        return (compute_s**p + memory_s**p) ** (1.0 / p)

    def gemm_s(self, tokens: float, in_features: int, out_features: int) -> float:
        """One GEMM of `tokens` rows through an `in_features` x `out_features` weight."""
        if tokens <= 0:
            return 0.0
        return self.gemm_with(self.gemm_terms(in_features, out_features), tokens)

    def gemm_terms(self, in_features: int, out_features: int) -> GemmTerms:
        """The time terms of an `in_features` x `out_features` weight (made once)."""
        shape = (in_features, out_features)
        terms = self._weights.get(shape)
        if terms is None:  # seconds per padded row, per row of bytes, for the weight's bytes
            terms = self._weights[shape] = GemmTerms(
                2.0 * in_features * out_features * self._gemm_flop_s,
                (in_features + out_features) * ACT_BYTES * self._gemm_byte_s,
                in_features * out_features * self.weight_bytes * self._gemm_byte_s)
        return terms

    def gemm_with(self, terms: GemmTerms, tokens: float) -> float:
        """`gemm_s` of the weight whose `terms` are given."""
        if tokens <= 0:
            return 0.0
        rows = _tiles(ceil(tokens), self._gemm_tile)
        return (self.blend(terms.per_row * rows, terms.per_token * tokens + terms.weight)
                + self._gemm_floor_s)

    def grouped_gemm_s(self, groups: float, tokens: float, in_features: int,
                       out_features: int) -> float:
        """One grouped GEMM (an MoE layer's fused expert kernel): `tokens` rows spread evenly
        over `groups` weights of `in_features` x `out_features`, in one kernel launch. Each
        group's rows fill whole tiles; every group's weight is read once; one floor."""
        if tokens <= 0 or groups <= 0:
            return 0.0
        rows = _tiles(ceil(tokens / groups), self.params.gemm_tile_tokens)
        compute = 2.0 * groups * rows * in_features * out_features * self._gemm_flop_s
        memory = ((in_features + out_features) * ACT_BYTES * tokens
                  + groups * in_features * out_features * self.weight_bytes) * self._gemm_byte_s
        return self.blend(compute, memory) + self.params.gemm_floor_s

    def elementwise_s(self, kind: str, num_bytes: float) -> float:
        """An element-wise kernel moving `num_bytes` (ELEMENTWISE_EFFICIENCY[kind])."""
        return self.moved_s(num_bytes, ELEMENTWISE_EFFICIENCY[kind])

    def moved_s(self, num_bytes: float, efficiency: float) -> float:
        """An element-wise kernel moving `num_bytes` at `efficiency` x HBM bandwidth."""
        if num_bytes <= 0:
            return 0.0
        return num_bytes * self._hbm_s / efficiency + self._elementwise_floor_s

    def layer_elementwise_s(self, tokens: int, routed_rows: float, intermediate: int) -> float:
        """Norms (two), rotary embedding, activation, residual add and the KV-cache write of
        one layer over `tokens` (the activation over `routed_rows` rows of `intermediate`)."""
        h = self._hidden
        heads = self._qkv_width
        return (2 * self.moved_s(2 * ACT_BYTES * tokens * h, self._eff_norm)
                + self.moved_s(2 * ACT_BYTES * tokens * heads, self._eff_rope)
                + self.moved_s(3 * ACT_BYTES * routed_rows * intermediate, self._eff_activation)
                + self.moved_s(3 * ACT_BYTES * tokens * h, self._eff_residual)
                + self.moved_s(tokens * self.kv_values * (ACT_BYTES + self.kv_bytes),
                               self._eff_kv_write))

    def prefill_attention_s(self, new_tokens: int, cached_tokens: int,
                            window: int | None = None) -> float:
        """The work of one chunk inside the step's attention call (no floor). With a
        sliding `window`, each query reads at most the window's keys: the keys term is
        capped at causal factor x window and only the window's cached KV is read."""
        heads, head_dim = self._num_heads, self._head_dim
        rows = _tiles(new_tokens, self._attn_tile)
        keys = cached_tokens + self._causal * new_tokens
        if window is not None:
            keys = min(keys, self._causal * window)
            cached_tokens = min(cached_tokens, window)
        flop = 4.0 * heads * head_dim * rows * keys
        byte = (2 * heads * head_dim * new_tokens * ACT_BYTES
                + (new_tokens + cached_tokens) * self.kv_values * self.kv_bytes)
        return self.blend(flop * self._attn_flop_s, byte * self._attn_byte_s)

    def decode_attention_s_per_context_token(self) -> float:
        """Seconds per context token a decode reads (its KV bytes at the decode efficiency)."""
        return self.kv_values * self.kv_bytes * self._attn_byte_s

    def decode_attention_fixed_s(self, num_seqs: int) -> float:
        """The context-independent part of decoding `num_seqs` sequences (no floor): their
        queries and outputs, and the per-sequence cost."""
        q_bytes = 2 * self._num_heads * self._head_dim * ACT_BYTES * num_seqs
        return q_bytes * self._attn_byte_s + self._s_per_seq * num_seqs

    def attention_floor_s(self, has_prefill: bool) -> float:
        """One attention call per layer and step (prefill chunks and decodes together)."""
        return self._prefill_floor_s if has_prefill else self._decode_floor_s
