"""A `ModelSpec` from a Hugging Face `config.json` on disk (no hub access): dense, MoE
(Qwen3-MoE, Mixtral, gpt-oss, DeepSeek), MLA, sliding-window (Gemma 3, gpt-oss, Mistral) and
hybrid models (attention mixed with linear-attention or Mamba layers); docs/cost-models.md
"Models from a config.json".

Keys read (a multimodal config's `text_config` overrides the top level): hidden_size,
num_hidden_layers, num_attention_heads, num_key_value_heads (default: the attention heads),
head_dim (default hidden / heads), intermediate_size, vocab_size, tie_word_embeddings
(default true, as in transformers); MoE: num_experts / num_local_experts / n_routed_experts,
num_experts_per_tok, moe_intermediate_size, n_shared_experts or
shared_expert_intermediate_size, which layers have experts (first_k_dense_replace,
mlp_only_layers, decoder_sparse_step, expert_layer_period / _offset); MLA: kv_lora_rank,
qk_rope_head_dim, qk_nope_head_dim, v_head_dim, q_lora_rank; layer kinds, the first key
present deciding: layer_types (full_attention, sliding_attention, linear_attention,
mamba); Llama 4's attention_chunk_size (layers with RoPE per no_rope_layers, else all but
every no_rope_layer_interval-th, keep a window of one chunk); hybrid_override_pattern
(Nemotron-H: refused, not read as all attention); full_attention_interval (every Nth layer
full, the rest linear attention: Qwen3-Next, Qwen3.5); attn_type_list (MiniMax: 1 softmax,
0 linear attention); sliding_window_pattern (every Nth layer full; 2 for model_type gemma2,
whose config leaves it out); attn_layer_period / attn_layer_offset (the rest Mamba);
sliding_window on every layer (unless use_sliding_window is false). Llama 4 also: its
interleave_moe_layer_step, intermediate_size_mlp (dense layers) and one shared expert per
MoE layer (model_type llama4). The context length:
max_position_embeddings (vLLM's default --max-model-len; absent: no limit).

Parameter counts come from the geometry (h hidden, a heads, k KV heads, d head dim, V vocab,
L layers; biases and norms are left out, a fraction of a percent):
  attention per layer  h*a*d + 2*h*k*d + a*d*h                    (q, k, v, o)
  MLA per layer        q: h*a*(n+r) or h*q_lora + q_lora*a*(n+r); kv: h*(c+r) + c*a*(n+v);
                       o: a*v*h   (c kv_lora_rank, r rope dim, n nope dim, v value dim)
  state layers         counted as attention layers (an approximation)
  dense MLP per layer  3*h*i                                       (gate, up, down)
  MoE MLP per layer    E*3*h*i_e + shared*3*h*i_e + h*E            (experts, shared, router)
  embeddings           V*h, twice when untied (input and LM head)
  active               total - routed experts' parameters * (1 - top_k / E)
Leaves out the preset tables (tables.py) and the fixed state of linear/Mamba layers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefixsim.errors import InputError
from prefixsim.presets.specs import ModelSpec

FULL, WINDOW, STATE = "full", "window", "state"
LAYER_KINDS = {
    "full_attention": FULL, "attention": FULL, "sliding_attention": WINDOW,
    "linear_attention": STATE, "mamba": STATE, "mamba2": STATE,
}


class _Keys:
    """The config's keys, with one-line errors naming the file and the key."""

    def __init__(self, data: dict[str, Any], source: str | None) -> None:
        text = data.get("text_config")
        self.data = {**data, **text} if isinstance(text, dict) else data
        self.source = source

    def error(self, key: str, message: str) -> InputError:
        return InputError(message, file=self.source, field=key)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def int(self, key: str, default: int | None = None, least: int = 1) -> int:
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise self.error(key, "missing key")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {value!r}")
        if value < least:
            raise self.error(key, f"must be an integer >= {least}, got {value}")
        return value

    def first_int(self, keys: tuple[str, ...]) -> int | None:
        found = [key for key in keys if self.has(key)]
        return self.int(found[0], least=0) if found else None


def load_hf_config(path: str | Path, name: str | None = None) -> ModelSpec:
    """The ModelSpec of a Hugging Face config.json at `path`, named `name` (default: the
    file's folder name). InputError naming the file (and the key) on bad input."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not JSON: {exc}", file=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", file=str(path))
    return model_from_hf_config(data, name or path.resolve().parent.name, str(path))


def model_from_hf_config(data: dict[str, Any], name: str,
                         source: str | None = None) -> ModelSpec:
    """The ModelSpec of a config.json's mapping `data` (the module docstring's keys and
    formulas)."""
    keys = _Keys(data, source)
    layers, hidden = keys.int("num_hidden_layers"), keys.int("hidden_size")
    heads = keys.int("num_attention_heads")
    kv_heads = keys.int("num_key_value_heads", heads)
    head_dim = keys.int("head_dim", hidden // heads)
    vocab, inter = keys.int("vocab_size"), keys.int("intermediate_size")
    tied = keys.data.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise keys.error("tie_word_embeddings", f"must be true or false, got {tied!r}")
    kinds = _layer_kinds(keys, layers)
    extra: dict[str, Any] = {}
    if keys.has("kv_lora_rank"):
        attention = _mla_params(keys, hidden, heads)
        head_dim = keys.int("v_head_dim", head_dim)
        kv_heads = 1
        extra.update(kv_lora_rank=keys.int("kv_lora_rank"),
                     rope_dim=keys.int("qk_rope_head_dim"))
    else:
        attention = hidden * heads * head_dim * 2 + 2 * hidden * kv_heads * head_dim
    mlp, routed, mlp_inter = _mlp_params(keys, layers, hidden, inter, extra)
    total = layers * attention + mlp + vocab * hidden * (1 if tied else 2)
    active = total - routed + (routed * extra["experts_per_token"] // extra["num_experts"]
                               if routed else 0)
    window = kinds.count(WINDOW)
    try:
        return ModelSpec(
            name=name, num_layers=layers, hidden_size=hidden, num_heads=heads,
            num_kv_heads=kv_heads, head_dim=head_dim, intermediate_size=mlp_inter,
            vocab_size=vocab, num_params=total, num_active_params=active, tied_embeddings=tied,
            sliding_window=_window_tokens(keys) if window else None,
            num_window_layers=window, num_state_layers=kinds.count(STATE),
            max_model_len=(keys.int("max_position_embeddings")
                           if keys.has("max_position_embeddings") else None),
            notes=f"from config.json {source or name}; parameters computed from the geometry",
            **extra)
    except InputError as exc:
        raise keys.error(exc.field or "config", exc.message) from None


def _mla_params(keys: _Keys, hidden: int, heads: int) -> int:
    """Parameters of one MLA attention layer (module docstring)."""
    latent, rope = keys.int("kv_lora_rank"), keys.int("qk_rope_head_dim")
    nope, value = keys.int("qk_nope_head_dim"), keys.int("v_head_dim")
    q_lora = keys.int("q_lora_rank", 0, least=0)
    q_out = heads * (nope + rope)
    q = hidden * q_out if q_lora == 0 else hidden * q_lora + q_lora * q_out
    return q + hidden * (latent + rope) + latent * heads * (nope + value) + heads * value * hidden


def _mlp_params(keys: _Keys, layers: int, hidden: int, inter: int,
                extra: dict[str, Any]) -> tuple[int, int, int]:
    """(MLP parameters of all layers, routed experts' parameters, the spec's
    intermediate_size: one expert's for MoE); sets the MoE fields of `extra`."""
    experts = keys.first_int(("num_experts", "num_local_experts", "n_routed_experts"))
    if not experts:
        return layers * 3 * hidden * inter, 0, inter
    top_k = keys.int("num_experts_per_tok")
    if top_k > experts:
        raise keys.error("num_experts_per_tok", f"must not exceed the {experts} experts, "
                         f"got {top_k}")
    expert_inter = keys.int("moe_intermediate_size", inter)
    inter = keys.int("intermediate_size_mlp", inter)  # Llama 4's dense layers
    moe_layers = sum(map(_moe_layer(keys), range(layers)))
    dense_layers = layers - moe_layers
    shared = keys.int("n_shared_experts", 1 if _is_llama4(keys) else 0,
                      least=0) * 3 * hidden * expert_inter
    shared += 3 * hidden * keys.int("shared_expert_intermediate_size", 0, least=0)
    routed = moe_layers * experts * 3 * hidden * expert_inter
    mlp = dense_layers * 3 * hidden * inter + routed + moe_layers * (shared + hidden * experts)
    extra.update(num_experts=experts, experts_per_token=top_k, expert_params=routed)
    return mlp, routed, expert_inter


def _moe_layer(keys: _Keys) -> Callable[[int], bool]:
    """Whether layer i has the experts: not among the first `first_k_dense_replace` nor in
    `mlp_only_layers`, every `decoder_sparse_step`th (Qwen-MoE), and i % expert_layer_period
    == expert_layer_offset (Jamba)."""
    first_dense = keys.int("first_k_dense_replace", 0, least=0)
    only = keys.data.get("mlp_only_layers") or []
    if not isinstance(only, list):
        raise keys.error("mlp_only_layers", f"must be a list, got {only!r}")
    step = keys.int("decoder_sparse_step", keys.int("interleave_moe_layer_step", 1))
    period = keys.int("expert_layer_period", 1)
    offset = keys.int("expert_layer_offset", 0, least=0)
    return lambda i: (i >= first_dense and i not in only and (i + 1) % step == 0
                      and i % period == offset % period)


def _layer_kinds(keys: _Keys, layers: int) -> list[str]:
    """FULL, WINDOW or STATE for each layer (module docstring: which key decides)."""
    types = keys.data.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise keys.error("layer_types", f"must be a list of {layers} layer types")
        for i, kind in enumerate(types):
            if kind not in LAYER_KINDS:
                raise keys.error(f"layer_types[{i}]", f"unknown layer kind {kind!r} (known: "
                                 f"{', '.join(LAYER_KINDS)})")
        return [LAYER_KINDS[kind] for kind in types]
    if keys.has("attention_chunk_size"):
        return _chunked_layers(keys, layers)
    if keys.has("hybrid_override_pattern"):
        raise keys.error("hybrid_override_pattern", "Nemotron-H's layout of separate Mamba, "
                         "attention and MLP blocks is not read (a prefixsim layer is one "
                         "mixer and one MLP); approximate it with a --presets model "
                         "(docs/cost-models.md \"Models from a config.json\")")
    if keys.has("full_attention_interval"):
        every = keys.int("full_attention_interval")
        return [FULL if (i + 1) % every == 0 else STATE for i in range(layers)]
    if keys.data.get("attn_type_list") is not None:
        return _attention_type_list(keys, layers)
    if keys.has("sliding_window") and (keys.has("sliding_window_pattern")
                                       or keys.data.get("model_type") in WINDOW_PATTERNS):
        every = keys.int("sliding_window_pattern",
                         WINDOW_PATTERNS.get(keys.data.get("model_type")))
        return [FULL if (i + 1) % every == 0 else WINDOW for i in range(layers)]
    if keys.has("attn_layer_period"):
        period = keys.int("attn_layer_period")
        offset = keys.int("attn_layer_offset", 0, least=0)
        return [FULL if i % period == offset else STATE for i in range(layers)]
    if keys.has("sliding_window") and keys.data.get("use_sliding_window", True):
        return [WINDOW] * layers
    return [FULL] * layers


def _attention_type_list(keys: _Keys, layers: int) -> list[str]:
    """MiniMax's `attn_type_list`: per layer 1 for softmax (full) attention, 0 for its
    linear (lightning) attention."""
    types = keys.data["attn_type_list"]
    if not isinstance(types, list) or len(types) != layers:
        raise keys.error("attn_type_list", f"must be a list of {layers} values 0 or 1")
    for i, kind in enumerate(types):
        if isinstance(kind, bool) or kind not in (0, 1):
            raise keys.error(f"attn_type_list[{i}]", f"must be 0 (linear attention) or 1 "
                             f"(softmax attention), got {kind!r}")
    return [FULL if kind == 1 else STATE for kind in types]


# Models whose config.json leaves out the layer pattern their code fixes: Gemma 2
# alternates sliding-window and global layers (transformers' Gemma2Config derives
# layer_types so), as a sliding_window_pattern of 2.
WINDOW_PATTERNS = {"gemma2": 2}
LLAMA4_TYPES = ("llama4", "llama4_text")
LLAMA4_NOPE_INTERVAL = 4  # transformers' Llama4TextConfig default no_rope_layer_interval


def _is_llama4(keys: _Keys) -> bool:
    """Llama 4 (model_type llama4 / llama4_text): every MoE layer has one shared expert of
    the experts' size, which its config.json does not spell out."""
    return keys.data.get("model_type") in LLAMA4_TYPES


def _window_tokens(keys: _Keys) -> int:
    """Tokens a window layer keeps: sliding_window, else Llama 4's attention_chunk_size (a
    chunked layer attends within its chunk: at most that many tokens)."""
    return keys.int("sliding_window") if keys.has("sliding_window") \
        else keys.int("attention_chunk_size")


def _chunked_layers(keys: _Keys, layers: int) -> list[str]:
    """Llama 4: layers with RoPE attend within chunks of attention_chunk_size tokens (kept
    as a window of that size, as vLLM keeps a chunk's KV only), the NoPE layers globally.
    `no_rope_layers` lists 1 (RoPE, chunked) or 0 (NoPE, full) per layer; empty or absent,
    every `no_rope_layer_interval`th layer (default 4) is NoPE, as transformers derives."""
    flags = keys.data.get("no_rope_layers") or []
    if not isinstance(flags, list) or (flags and len(flags) != layers):
        raise keys.error("no_rope_layers", f"must be a list of {layers} values 0 or 1")
    for i, flag in enumerate(flags):
        if isinstance(flag, bool) or flag not in (0, 1):
            raise keys.error(f"no_rope_layers[{i}]", f"must be 0 (NoPE, full attention) or 1 "
                             f"(RoPE, chunked attention), got {flag!r}")
    if not flags:
        every = keys.int("no_rope_layer_interval", LLAMA4_NOPE_INTERVAL)
        flags = [int((i + 1) % every != 0) for i in range(layers)]
    return [WINDOW if flag else FULL for flag in flags]
