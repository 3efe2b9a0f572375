"""Models from a Hugging Face config.json (presets/hf_config.py, docs/cost-models.md "Models
from a config.json"): one small config of each kind loads, sizes worked by hand, runs timed;
bad files fail in one line naming the file and the key."""

import json

import pytest
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.errors import InputError
from prefixsim.presets import MODELS, load_hf_config, model_from_hf_config

# h 256, 4 heads of 64, 2 KV heads: 2 x 2 x 64 = 256 KV values per token per layer.
BASE = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
        "vocab_size": 1000, "tie_word_embeddings": False}
KINDS = {
    "dense": {"model_type": "llama"},
    "moe": {"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2},
    "mla": {"model_type": "deepseek_v3", "kv_lora_rank": 64, "qk_rope_head_dim": 16,
            "qk_nope_head_dim": 32, "v_head_dim": 32, "n_routed_experts": 4,
            "num_experts_per_tok": 2, "moe_intermediate_size": 128, "n_shared_experts": 1,
            "first_k_dense_replace": 1},
    "window": {"model_type": "mistral", "sliding_window": 64},
    "chunked": {"model_type": "llama4_text", "attention_chunk_size": 64,
                "num_local_experts": 4, "num_experts_per_tok": 1, "intermediate_size_mlp": 1024,
                "interleave_moe_layer_step": 2},
    "hybrid": {"model_type": "qwen3_next", "num_hidden_layers": 8,
               "layer_types": ["linear_attention"] * 3 + ["full_attention"]
               + ["linear_attention"] * 3 + ["full_attention"]},
}
# bf16 KV bytes per token, by hand: layers keeping per-token KV x values x 2 bytes.
KV_BYTES = {
    "dense": 4 * 256 * 2,          # 2,048
    "moe": 4 * 256 * 2,            # experts do not change the KV
    "mla": 4 * (64 + 16) * 2,      # 640: the latent + the rope values, one "KV head"
    "window": 4 * 256 * 2,         # the pool counts a cached token in window layers too
    "chunked": 4 * 256 * 2,        # Llama 4: chunked layers as window layers
    "hybrid": 2 * 256 * 2,         # 1,024: 2 full-attention layers, 6 state layers keep none
}


def write_config(tmp_path, kind: str, **changes):
    folder = tmp_path / f"tiny-{kind}"
    folder.mkdir(exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps({**BASE, **KINDS[kind], **changes}))
    return path


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_loads_with_kv_bytes_by_hand(tmp_path, kind):
    model = load_hf_config(write_config(tmp_path, kind))
    assert model.name == f"tiny-{kind}"
    assert model.kv_bytes_per_token(2) == KV_BYTES[kind]


def test_dense_and_moe_parameters_by_hand(tmp_path):
    """Dense per layer: q, o 2 x 256 x 256 + k, v 2 x 256 x 128 = 196,608; MLP 3 x 256 x 512
    = 393,216; x 4 layers = 2,359,296; + untied embeddings 2 x 1000 x 256 = 512,000:
    2,871,296. MoE: 4 x (196,608 + router 256 x 4) + experts 4 x 4 x 3 x 256 x 512
    (6,291,456) + 512,000 = 7,593,984; active = total - experts / 2 = 4,448,256."""
    dense = load_hf_config(write_config(tmp_path, "dense"))
    assert dense.num_params == dense.num_active_params == 2_871_296
    moe = load_hf_config(write_config(tmp_path, "moe"))
    assert (moe.num_params, moe.num_active_params) == (7_593_984, 4_448_256)
    assert moe.expert_params == 6_291_456 and moe.intermediate_size == 512


def test_layer_kinds_and_kv_of_one_context(tmp_path):
    """Window layers keep min(context, W) tokens: 4 layers x 64 x 256 values x 2 bytes =
    131,072 for a 100-token context; 4 x 10 x 256 x 2 = 20,480 for 10 tokens."""
    window = load_hf_config(write_config(tmp_path, "window"))
    assert (window.num_window_layers, window.num_full_attention_layers) == (4, 0)
    assert window.kv_bytes_of_context(100) == 131_072
    assert window.kv_bytes_of_context(10) == 20_480
    hybrid = load_hf_config(write_config(tmp_path, "hybrid"))
    assert (hybrid.num_state_layers, hybrid.num_full_attention_layers) == (6, 2)
    gemma2 = load_hf_config(write_config(tmp_path, "dense", model_type="gemma2",
                                         sliding_window=64))  # every 2nd layer global
    assert (gemma2.num_window_layers, gemma2.num_full_attention_layers) == (2, 2)
    assert gemma2.kv_bytes_of_context(100) == (2 * 100 + 2 * 64) * 256 * 2
    qwen2 = load_hf_config(write_config(tmp_path, "dense", sliding_window=4096,
                                        use_sliding_window=False))
    assert qwen2.num_window_layers == 0


def test_hybrid_layouts_without_layer_types(tmp_path):
    """Qwen3-Next's config.json gives `full_attention_interval` (transformers derives
    layer_types from it: layer i full where (i + 1) % interval == 0), MiniMax's
    `attn_type_list` (1 softmax, 0 linear attention); read as all attention they would keep
    4x the KV. 8 layers, interval 4: layers 3 and 7 full; KV 2 x 256 values x 2 bytes."""
    qwen3_next = load_hf_config(write_config(tmp_path, "dense", num_hidden_layers=8,
                                             full_attention_interval=4))
    assert (qwen3_next.num_state_layers, qwen3_next.num_full_attention_layers) == (6, 2)
    assert qwen3_next.kv_bytes_per_token(2) == 1_024
    minimax = load_hf_config(write_config(tmp_path, "dense",
                                          attn_type_list=[0, 0, 0, 1]))
    assert (minimax.num_state_layers, minimax.num_full_attention_layers) == (3, 1)
    assert minimax.kv_bytes_per_token(2) == 512
    # layer_types, where a config has both, decides (Qwen3.5's text_config)
    both = load_hf_config(write_config(tmp_path, "hybrid", full_attention_interval=2))
    assert both.num_full_attention_layers == 2


def test_llama4_chunked_attention_and_interleaved_moe(tmp_path):
    """Llama 4 (tiny, 8 layers): no no_rope_layers, so every 4th layer (3, 7) is NoPE and
    global, the rest attend within 64-token chunks (kept as a 64-token window). MoE every
    2nd layer (1, 3, 5, 7): 4 experts x 3 x 256 x 512 = 1,572,864 + one shared expert
    393,216 + router 1,024 = 1,967,104 each; dense layers 3 x 256 x 1024 = 786,432 each;
    attention 8 x 196,608 = 1,572,864; embeddings 512,000: total 13,099,008, active total -
    routed 6,291,456 x 3/4 = 8,380,416. KV of 100 tokens: (2 x 100 + 6 x 64) x 256 x 2 =
    299,008 bytes."""
    llama4 = load_hf_config(write_config(
        tmp_path, "dense", model_type="llama4_text", num_hidden_layers=8,
        intermediate_size_mlp=1024, num_local_experts=4, num_experts_per_tok=1,
        interleave_moe_layer_step=2, attention_chunk_size=64, no_rope_layers=[]))
    assert (llama4.num_full_attention_layers, llama4.num_window_layers) == (2, 6)
    assert llama4.sliding_window == 64
    assert (llama4.num_params, llama4.num_active_params) == (13_099_008, 8_380_416)
    assert llama4.kv_bytes_of_context(100) == 299_008
    listed = load_hf_config(write_config(
        tmp_path, "dense", model_type="llama4_text", attention_chunk_size=64,
        no_rope_layers=[1, 0, 1, 0]))  # listed per layer: 1 RoPE (chunked), 0 NoPE
    assert (listed.num_full_attention_layers, listed.num_window_layers) == (2, 2)


def test_llama4_scout_and_maverick_sizes():
    """The model cards' config.json values: Scout 107.8B parameters (the card's 109B counts
    the vision encoder), 17.2B active; Maverick (128 experts, MoE every 2nd layer) 400.7B,
    17.2B active; 12 of 48 layers global."""
    text = {"model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
            "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
            "intermediate_size": 8192, "intermediate_size_mlp": 16384,
            "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
            "attention_chunk_size": 8192, "vocab_size": 202048, "tie_word_embeddings": False}
    scout = model_from_hf_config({"model_type": "llama4", "text_config": text}, "scout")
    assert (scout.num_params, scout.num_active_params) == (107_769_364_480, 17_172_398_080)
    assert (scout.num_full_attention_layers, scout.sliding_window) == (12, 8192)
    maverick = model_from_hf_config({"model_type": "llama4", "text_config": {
        **text, "num_local_experts": 128, "interleave_moe_layer_step": 2}}, "maverick")
    assert round(maverick.num_params / 1e9, 1) == 400.7
    assert round(maverick.num_active_params / 1e9, 1) == 17.2


def test_gemma_preset_kv_of_one_context():
    """Gemma-3-27B: 10 global layers keep 4,096 tokens, 52 local ones 1,024: (40,960 +
    53,248) x 2 x 16 x 128 values x 2 bytes = 771,751,936."""
    gemma = MODELS["gemma-3-27b"]
    assert (gemma.num_full_attention_layers, gemma.num_window_layers) == (10, 52)
    assert gemma.kv_bytes_of_context(4096) == 771_751_936
    assert MODELS["gpt-oss-120b"].num_window_layers == 18


def test_deepseek_v3_config_matches_the_preset():
    """DeepSeek-V3's config.json values: 58 MoE layers (3 dense first) x 256 experts x 3 x
    7168 x 2048 routed parameters and 61 x (512 + 64) x 2 = 70,272 KV bytes per token, as the
    hand-made preset; about 671B parameters and 37.6B active, the report's 671B / 37B."""
    config = {
        "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
        "num_key_value_heads": 128, "intermediate_size": 18432, "vocab_size": 129280,
        "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
        "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512,
        "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
        "v_head_dim": 128, "tie_word_embeddings": False}
    model, preset = model_from_hf_config(config, "ds"), MODELS["deepseek-v3"]
    assert model.expert_params == preset.expert_params
    assert model.kv_bytes_per_token(2) == preset.kv_bytes_per_token(2) == 70_272
    assert round(model.num_params / 1e9) == 671
    assert round(model.num_active_params / 1e9, 1) == 37.6


def test_context_length_from_max_position_embeddings(tmp_path):
    assert load_hf_config(write_config(tmp_path, "dense")).max_model_len is None
    long = load_hf_config(write_config(tmp_path, "dense", max_position_embeddings=8192))
    assert long.max_model_len == 8192
    gemma = model_from_hf_config({**BASE, "text_config": {"max_position_embeddings": 2048}},
                                 "multimodal")
    assert gemma.max_model_len == 2048  # a multimodal config's text_config first


def test_longest_context_a_pool_holds(tmp_path):
    """A pool token is one token in each of the layers keeping KV. Dense, 4 full layers:
    the pool's own count. Window model (4 layers, window 64): every layer keeps at most 64
    tokens, so any context fits a pool of 64 tokens, none one of 63. Gemma 3 27B's 10 full
    layers and 52 windowed ones (1024): (62 x 41,633 - 52 x 1,024) // 10 = 252,799."""
    dense = load_hf_config(write_config(tmp_path, "dense"))
    assert dense.longest_context(5000) == 5000
    window = load_hf_config(write_config(tmp_path, "window"))
    assert window.longest_context(64) is None and window.longest_context(63) == 0
    hybrid = load_hf_config(write_config(tmp_path, "hybrid"))  # 2 full of 2 KV layers
    assert hybrid.longest_context(1000) == 1000
    assert MODELS["gemma-3-27b"].longest_context(41_633) == 252_799


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_runs_timed(tmp_path, kind):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "run", "--trace", "traces/demo_chat.jsonl", "--max-requests", "50", "--replicas", "1",
        "--gpu", "h100-sxm", "--model-config", str(write_config(tmp_path, kind)),
        "-o", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 50


@pytest.mark.parametrize(("change", "key"), [
    ({"hidden_size": None}, "hidden_size: missing key"),
    ({"num_hidden_layers": "four"}, "num_hidden_layers: must be an integer"),
    ({"layer_types": ["conv"] * 4}, "layer_types[0]: unknown layer kind 'conv'"),
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings: must be true or false"),
    ({"full_attention_interval": 0}, "full_attention_interval: must be an integer >= 1"),
    ({"attn_type_list": [1, 0]}, "attn_type_list: must be a list of 4 values 0 or 1"),
    ({"attn_type_list": [1, 0, 2, 1]}, "attn_type_list[2]: must be 0 (linear attention)"),
    ({"attn_type_list": [1, 0, True, 1]}, "attn_type_list[2]: must be 0"),
    ({"hybrid_override_pattern": "M-M*"}, "hybrid_override_pattern: Nemotron-H's layout"),
    ({"attention_chunk_size": 64, "no_rope_layers": [1, 0]},
     "no_rope_layers: must be a list of 4 values 0 or 1"),
    ({"attention_chunk_size": 64, "no_rope_layers": [1, 0, 2, 1]}, "no_rope_layers[2]: must"),
    ({"attention_chunk_size": 0}, "attention_chunk_size: must be an integer >= 1"),
    ({"num_experts_per_tok": 9, "num_local_experts": 4}, "num_experts_per_tok: must not"),
    ({"max_position_embeddings": 0}, "max_position_embeddings: must be an integer >= 1"),
])
def test_bad_config_fails_in_one_line_naming_file_and_key(tmp_path, change, key):
    path = write_config(tmp_path, "dense", **change)
    with pytest.raises(InputError) as error:
        load_hf_config(path)
    assert str(error.value).startswith(f"{path}: {key}")
    result = CliRunner().invoke(app, [
        "run", "--trace", "traces/demo_chat.jsonl", "--max-requests", "5",
        "--model-config", str(path), "-o", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2
    assert key in result.output and str(path) in result.output
    assert len(result.output.strip().splitlines()) == 1


# ----------------------------------------------------- every key, worked by hand
def tiny(tmp_path, drop=(), **changes):
    """BASE with `changes`, without the keys in `drop`, loaded."""
    config = {k: v for k, v in {**BASE, **changes}.items() if k not in drop}
    folder = tmp_path / "tiny"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return load_hf_config(folder / "config.json")


def kinds(model):
    return (model.num_full_attention_layers, model.num_window_layers, model.num_state_layers)


def test_defaults_of_absent_keys(tmp_path):
    """No KV heads: multi-head (4), so 4 layers x 2 x 4 x 64 x 2 bytes = 4,096 per token; no
    head_dim: hidden / heads = 64, an integer; no tie_word_embeddings: tied, as transformers.
    Parameters: attention 4 x (2 x 256 x 256 + 2 x 256 x 256) = 1,048,576, MLP 4 x 393,216
    = 1,572,864, one embedding 256,000: 2,877,440."""
    model = tiny(tmp_path, drop=("num_key_value_heads", "head_dim", "tie_word_embeddings"))
    assert (model.num_kv_heads, model.head_dim, model.tied_embeddings) == (4, 64, True)
    assert type(model.head_dim) is int
    assert model.kv_bytes_per_token(2) == 4_096
    assert model.num_params == 2_877_440
    assert model.notes == (f"from config.json {tmp_path / 'tiny' / 'config.json'}; "
                           "parameters computed from the geometry")
    assert model_from_hf_config(BASE, "by-name").notes == \
        "from config.json by-name; parameters computed from the geometry"
    untied = tiny(tmp_path)
    assert untied.tied_embeddings is False and untied.num_params == 2_871_296


def test_qwen_moe_keys(tmp_path):
    """Qwen-MoE spelling: num_experts, a shared expert of shared_expert_intermediate_size,
    decoder_sparse_step 2 (layers 1, 3) less mlp_only_layers [3]: one MoE layer. Routed 4 x
    3 x 256 x 128 = 393,216; shared 3 x 256 x 256 = 196,608; router 1,024; 3 dense layers
    1,179,648; attention 786,432; embeddings 512,000: 3,068,928, all active (top-k = all
    4 experts, allowed)."""
    model = tiny(tmp_path, num_experts=4, num_experts_per_tok=4, moe_intermediate_size=128,
                 shared_expert_intermediate_size=256, decoder_sparse_step=2,
                 mlp_only_layers=[3])
    assert (model.num_params, model.num_active_params) == (3_068_928, 3_068_928)
    assert (model.expert_params, model.intermediate_size) == (393_216, 128)
    # 5 layers, every 3rd: layer 2 only; a shared expert of size 0 given is none
    sparse = tiny(tmp_path, num_hidden_layers=5, num_experts=4, num_experts_per_tok=2,
                  moe_intermediate_size=128, decoder_sparse_step=3,
                  shared_expert_intermediate_size=0)
    assert sparse.expert_params == 4 * 3 * 256 * 128
    dense = tiny(tmp_path, num_local_experts=0, num_experts_per_tok=1)  # 0 experts: dense
    assert dense.num_experts is None and dense.num_params == 2_871_296


def test_jamba_keys(tmp_path):
    """Jamba: attention every attn_layer_period-th layer from attn_layer_offset (8 layers,
    4 and 2: layers 2 and 6), the rest Mamba; experts every expert_layer_period-th from
    expert_layer_offset (2 and 1: layers 1, 3, 5, 7). Routed 4 x 4 x 3 x 256 x 512 =
    6,291,456, routers 4,096, dense 4 x 393,216, attention 8 x 196,608, embeddings 512,000:
    9,953,280; active (2 of 4 experts) 6,807,552."""
    model = tiny(tmp_path, num_hidden_layers=8, attn_layer_period=4, attn_layer_offset=2,
                 num_experts=4, num_experts_per_tok=2, expert_layer_period=2,
                 expert_layer_offset=1)
    assert kinds(model) == (2, 0, 6)
    assert (model.num_params, model.num_active_params) == (9_953_280, 6_807_552)
    # offsets default to 0 (5 layers, period 4: layers 0 and 4; 7 layers, period 2: 0, 2, 4,
    # 6) and may be given as 0; an offset past the period wraps (3 of 2: layers 1, 3, 5)
    assert kinds(tiny(tmp_path, num_hidden_layers=5, attn_layer_period=4)) == (2, 0, 3)
    assert kinds(tiny(tmp_path, num_hidden_layers=5, attn_layer_period=4,
                      attn_layer_offset=0)) == (2, 0, 3)
    assert kinds(tiny(tmp_path, num_hidden_layers=5, attn_layer_period=4,
                      attn_layer_offset=2)) == (1, 0, 4)  # layer 2 only
    moe = {"num_hidden_layers": 7, "num_experts": 4, "num_experts_per_tok": 2,
           "expert_layer_period": 2}
    routed_layer = 4 * 3 * 256 * 512
    assert tiny(tmp_path, **moe).expert_params == 4 * routed_layer
    assert tiny(tmp_path, **moe, expert_layer_offset=0).expert_params == 4 * routed_layer
    assert tiny(tmp_path, **moe, expert_layer_offset=3).expert_params == 3 * routed_layer


@pytest.mark.parametrize(("changes", "expected"), [
    # 7 layers, every 4th: only layer 3 (a pattern counted from layer 0 or 2 gives two)
    ({"sliding_window": 16, "sliding_window_pattern": 4}, (1, 6, 0)),
    ({"full_attention_interval": 4}, (1, 0, 6)),
    ({"model_type": "llama4_text", "attention_chunk_size": 16}, (1, 6, 0)),
    ({"model_type": "llama4_text", "attention_chunk_size": 16, "no_rope_layer_interval": 2},
     (3, 4, 0)),
    ({"attn_type_list": [0, 1, 0, 0, 1, 0, 0]}, (2, 0, 5)),
    ({"layer_types": ["sliding_attention", "attention", "mamba", "mamba2", "full_attention",
                      "linear_attention", "sliding_attention"], "sliding_window": 16},
     (2, 2, 3)),
])
def test_layer_patterns_of_seven_layers(tmp_path, changes, expected):
    assert kinds(tiny(tmp_path, num_hidden_layers=7, **changes)) == expected


def test_mla_without_a_query_latent(tmp_path):
    """DeepSeek-V2-Lite style MLA, no q_lora_rank: q 256 x 4 x (32 + 16) = 49,152, latent
    256 x (64 + 16) = 20,480, up 64 x 4 x (32 + 32) = 16,384, o 4 x 32 x 256 = 32,768:
    118,784 a layer, x 4 = 475,136; first layer dense 393,216, 3 MoE layers of routed 4 x 3
    x 256 x 128 (1,179,648 in all), a shared expert 98,304 and a router 1,024 each
    (297,984); embeddings 512,000: 2,857,984; active (2 of 4) 2,268,160. The attention's
    head dim is v_head_dim and one latent "KV head" is kept."""
    mla = dict(KINDS["mla"])
    mla.pop("model_type")
    model = tiny(tmp_path, **mla)
    assert (model.num_params, model.num_active_params) == (2_857_984, 2_268_160)
    assert (model.head_dim, model.num_kv_heads) == (32, 1)
    explicit = tiny(tmp_path, **mla, q_lora_rank=0)  # 0 given: no query latent either
    assert explicit.num_params == 2_857_984
    zero = tiny(tmp_path, **{**mla, "first_k_dense_replace": 0, "n_shared_experts": 0})
    assert zero.expert_params == 4 * 4 * 3 * 256 * 128  # all 4 layers routed, no shared


def test_load_refusals_name_the_file(tmp_path):
    missing = tmp_path / "absent" / "config.json"
    with pytest.raises(InputError) as error:
        load_hf_config(missing)
    assert str(error.value) == f"{missing}: cannot read: No such file or directory"
    for text, message in (("{not json", "not JSON: "), ("[1, 2]", "expected a JSON object")):
        path = tmp_path / "config.json"
        path.write_text(text)
        with pytest.raises(InputError) as error:
            load_hf_config(path)
        assert str(error.value).startswith(f"{path}: {message}")
        assert error.value.file == str(path)


@pytest.mark.parametrize(("change", "message"), [
    ({"layer_types": ["full_attention"] * 3}, "layer_types: must be a list of 4 layer types"),
    ({"layer_types": "full_attention"}, "layer_types: must be a list of 4 layer types"),
    ({"layer_types": ["full_attention"] * 3 + ["conv"]},
     "layer_types[3]: unknown layer kind 'conv' (known: full_attention, attention, "
     "sliding_attention, linear_attention, mamba, mamba2)"),
    ({"num_local_experts": 4, "num_experts_per_tok": 2, "mlp_only_layers": 3},
     "mlp_only_layers: must be a list, got 3"),
    ({"hybrid_override_pattern": "M*M-"},
     "hybrid_override_pattern: Nemotron-H's layout of separate Mamba, attention and MLP "
     "blocks is not read (a prefixsim layer is one mixer and one MLP); approximate it with a "
     "--presets model (docs/cost-models.md \"Models from a config.json\")"),
])
def test_refusals_word_for_word(tmp_path, change, message):
    path = write_config(tmp_path, "dense", **change)
    with pytest.raises(InputError) as error:
        load_hf_config(path)
    assert str(error.value) == f"{path}: {message}"
