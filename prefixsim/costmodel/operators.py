"""The operators of one transformer layer and their features (FLOPs, bytes, calls), torch-free.

Both halves of calibration speak this vocabulary: profiles/calibrate.py times these operators
with torch, and the fitted cost model predicts each operator class as `coefficients . features`,
where the features of a class add up over the operators of a step. So a step's prediction is
one dot product per class, and the layer check (a whole torch layer against the sum of its
operator predictions) exercises exactly the decomposition `run` uses.

Classes and features (seconds per unit are the fitted coefficients):
- `gemm` (a linear layer, tokens x in -> out): flop = 2*m*k*n, byte = (m*k + k*n + m*n) *
  dtype bytes, call = 1.
- `prefill_attention` (n new tokens after c cached ones, bottom-right causal): flop =
  4*Hq*d*n*(n + c) where the kernel materialises the mask (CPU: no tiles skipped) or
  4*Hq*d*(n*c + n*(n+1)/2) where it skips masked tiles (CUDA); byte = (2*Hq*n + 2*Hkv*(n + c))
  * d * dtype bytes; mask_element = n*(n + c) where a lower-right mask is materialised (CPU,
  c > 0; with c = 0 the kernel's own causal path runs), else 0; call = 1.
- `decode_attention` (a batch of sequences with contexts L_i, each attending to L_i tokens):
  flop = sum 4*Hq*d*L_i, byte = sum (2*Hkv*L_i + 2*Hq) * d * dtype bytes, sequence = batch
  size, call = 1.

Leaves out: norms, rotary embeddings, residual adds and activations (element-wise; their time
shows in the layer check's error), sampling, and MLA's latent projections (an MLA model is
treated as multi-query attention with its head_dim). MoE layers route tokens evenly over the
experts a step touches.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from prefixsim.costmodel.protocol import StepBatch
from prefixsim.presets import LayerShape, ModelSpec

OPERATOR_CLASSES = ("gemm", "prefill_attention", "decode_attention")
Features = tuple[float, ...]  # in FEATURES order of the operator's class
FEATURES: dict[str, tuple[str, ...]] = {
    "gemm": ("flop", "byte", "call"),
    "prefill_attention": ("flop", "byte", "mask_element", "call"),
    "decode_attention": ("flop", "byte", "sequence", "call"),
}


@dataclass(frozen=True, slots=True)
class LayerDims(LayerShape):
    """The shapes of one transformer layer (per GPU when `tp` > 1), from a ModelSpec."""

    num_experts: int | None = None
    experts_per_token: int | None = None

    @classmethod
    def from_spec(cls, spec: ModelSpec, tp: int = 1) -> LayerDims:
        """The per-GPU layer of `spec` split `tp` ways (heads and intermediate divided)."""
        return cls(
            name=spec.name, num_layers=spec.num_layers, hidden_size=spec.hidden_size,
            num_heads=max(1, spec.num_heads // tp),
            num_kv_heads=max(1, spec.num_kv_heads // tp), head_dim=spec.head_dim,
            intermediate_size=max(1, spec.intermediate_size // tp),
            vocab_size=spec.vocab_size, num_experts=spec.num_experts,
            experts_per_token=spec.experts_per_token,
        )

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def weights(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of the layer's linear operators by name."""
        q_out = self.num_heads * self.head_dim
        kv_out = 2 * self.num_kv_heads * self.head_dim
        return {
            "qkv": (self.hidden_size, q_out + kv_out),
            "o": (q_out, self.hidden_size),
            "gate_up": (self.hidden_size, 2 * self.intermediate_size),
            "down": (self.intermediate_size, self.hidden_size),
        }


@dataclass(frozen=True, slots=True)
class Gemm:
    """`tokens` rows through a linear layer of `in_features` -> `out_features`."""

    tokens: int
    in_features: int
    out_features: int

    def features(self, dtype_bytes: float) -> Features:
        m, k, n = self.tokens, self.in_features, self.out_features
        return (2.0 * m * k * n, (m * k + k * n + m * n) * dtype_bytes, 1.0)


@dataclass(frozen=True, slots=True)
class PrefillAttention:
    """`new_tokens` queries over `cached_tokens + new_tokens` keys, bottom-right causal."""

    new_tokens: int
    cached_tokens: int
    num_heads: int
    num_kv_heads: int
    head_dim: int

    def features(self, dtype_bytes: float, skips_masked: bool) -> Features:
        n, c, d = self.new_tokens, self.cached_tokens, self.head_dim
        pairs = n * c + n * (n + 1) / 2 if skips_masked else n * (n + c)
        flop = 4.0 * self.num_heads * d * pairs
        byte = (2 * self.num_heads * n + 2 * self.num_kv_heads * (n + c)) * d * dtype_bytes
        mask = 0.0 if skips_masked or c == 0 else float(n * (n + c))
        return (flop, byte, mask, 1.0)


@dataclass(frozen=True, slots=True)
class DecodeAttention:
    """One query token per sequence over its `contexts[i]` keys (its own included)."""

    contexts: tuple[int, ...]
    num_heads: int
    num_kv_heads: int
    head_dim: int

    def features(self, dtype_bytes: float) -> Features:
        total = float(sum(self.contexts))
        count = len(self.contexts)
        d = self.head_dim
        flop = 4.0 * self.num_heads * d * total
        byte = (2 * self.num_kv_heads * total + 2 * self.num_heads * count) * d * dtype_bytes
        return (flop, byte, float(count), 1.0)


Operator = Gemm | PrefillAttention | DecodeAttention


def operator_class(op: Operator) -> str:
    """The class name of `op` (a key of FEATURES)."""
    if isinstance(op, Gemm):
        return "gemm"
    if isinstance(op, PrefillAttention):
        return "prefill_attention"
    return "decode_attention"


@dataclass(frozen=True, slots=True)
class FeatureRules:
    """How features are computed for one profile: element sizes and the attention mask rule."""

    gemm_dtype_bytes: float
    attention_dtype_bytes: float
    prefill_skips_masked: bool

    def features(self, op: Operator) -> Features:
        if isinstance(op, Gemm):
            return op.features(self.gemm_dtype_bytes)
        if isinstance(op, PrefillAttention):
            return op.features(self.attention_dtype_bytes, self.prefill_skips_masked)
        return op.features(self.attention_dtype_bytes)

    def class_sums(self, ops: Iterable[Operator]) -> dict[str, Features]:
        """Features summed per class over `ops` (classes without operators are absent)."""
        sums: dict[str, Features] = {}
        for op in ops:
            cls = operator_class(op)
            vec = self.features(op)
            sums[cls] = vec if cls not in sums else tuple(a + b for a, b in zip(sums[cls], vec,
                                                                                strict=True))
        return sums


def _moe_gemms(dims: LayerDims, tokens: int) -> list[Gemm]:
    """Expert MLP GEMMs: tokens x top-k spread evenly over the experts they touch."""
    assert dims.num_experts is not None and dims.experts_per_token is not None
    routed = tokens * dims.experts_per_token
    active = min(dims.num_experts, routed)
    per_expert = math.ceil(routed / active)
    k_up, n_up = dims.weights()["gate_up"]
    k_down, n_down = dims.weights()["down"]
    return ([Gemm(per_expert, k_up, n_up)] * active) + ([Gemm(per_expert, k_down, n_down)]
                                                          * active)


def layer_gemms(dims: LayerDims, tokens: int, moe: bool = True) -> list[Gemm]:
    """The GEMMs of one layer over `tokens` (QKV, O, then the MLP's; none for zero)."""
    if tokens <= 0:
        return []
    w = dims.weights()
    gemms = [Gemm(tokens, *w["qkv"]), Gemm(tokens, *w["o"])]
    if moe and dims.num_experts is not None:
        return gemms + _moe_gemms(dims, tokens)
    return gemms + [Gemm(tokens, *w["gate_up"]), Gemm(tokens, *w["down"])]


def layer_operators(dims: LayerDims, batch: StepBatch, moe: bool = True) -> list[Operator]:
    """The operators of one layer over `batch` (`moe=False` treats an MoE MLP as dense)."""
    tokens = batch.num_tokens
    if tokens == 0:
        return []
    ops: list[Operator] = list(layer_gemms(dims, tokens, moe))
    heads = (dims.num_heads, dims.num_kv_heads, dims.head_dim)
    ops += [PrefillAttention(c.new_tokens, c.cached_tokens, *heads)
            for c in batch.prefills if c.new_tokens > 0]
    if batch.decode_contexts:
        ops.append(DecodeAttention(tuple(batch.decode_contexts), *heads))
    return ops


def lm_head(dims: LayerDims, num_sequences: int) -> list[Operator]:
    """The LM head GEMM for `num_sequences` next-token logits (none for zero)."""
    if num_sequences <= 0:
        return []
    return [Gemm(num_sequences, dims.hidden_size, dims.vocab_size)]

