"""The run config: defaults, validation errors naming the dotted key, YAML + overrides,
immutability, and the effective config round-tripping through config.yaml."""

from __future__ import annotations

import pydantic
import pytest
import yaml

from prefixsim.cache import TTLMode
from prefixsim.config import RunConfig, build_config, config_to_yaml, load_config
from prefixsim.costmodel.roofline import param_names as roofline_params
from prefixsim.errors import InputError, validation_message
from prefixsim.pipeline.inputs import resolve_trace_defaults


def test_defaults_unbounded_no_ttl_lru():
    config = RunConfig()
    assert config.cache.policy == "lru"
    assert config.cache.capacity_tokens is None and config.cache.ttl_s is None
    assert config.cache.ttl_mode is TTLMode.SLIDING
    assert config.trace.path is None and config.trace.block_size is None
    assert config.cache_only is False


def test_config_is_frozen():
    config = RunConfig()
    with pytest.raises(pydantic.ValidationError):
        config.cache_only = True
    with pytest.raises(pydantic.ValidationError):
        config.cache.capacity_tokens = 5


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"cache": {"capacty_tokens": 5}}, "cache.capacty_tokens", "unknown key"),
        ({"cahce": {}}, "cahce", "unknown key"),
        ({"trace": {"path": "x", "blocksize": 5}}, "trace.blocksize", "unknown key"),
        ({"cache": {"capacity_tokens": -1}}, "cache.capacity_tokens", "-1"),
        ({"cache": {"capacity_tokens": "lots"}}, "cache.capacity_tokens", "lots"),
        ({"cache": {"ttl_s": -0.5}}, "cache.ttl_s", "-0.5"),
        ({"cache": {"ttl_s": float("nan")}}, "cache.ttl_s", ""),
        ({"cache": {"ttl_s": float("inf")}}, "cache.ttl_s", ""),
        ({"cache": {"ttl_mode": "rolling"}}, "cache.ttl_mode", "rolling"),
        ({"cache": {"policy": "mru"}}, "cache.policy", "valid:"),
        ({"trace": {"format": "csvish"}}, "trace.format", "csvish"),
        ({"trace": {"block_size": 0}}, "trace.block_size", "0"),
        ({"trace": {"max_requests": 0}}, "trace.max_requests", "0"),
        ({"cache_only": "maybe"}, "cache_only", "maybe"),
    ],
)
def test_bad_values_name_the_dotted_key(data, field, words):
    with pytest.raises(InputError) as info:
        build_config(data, source="run.yaml")
    assert info.value.field == field
    assert info.value.file == "run.yaml"
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_policy_lists_the_valid_names():
    with pytest.raises(InputError) as info:
        build_config({"cache": {"policy": "mru"}})
    assert "lru" in info.value.message


def test_yaml_file_with_overrides_on_top(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("trace:\n  path: a.jsonl\ncache:\n  capacity_tokens: 1000\n  ttl_s: 60\n")
    config = load_config(path, {"cache.capacity_tokens": 5000, "cache.ttl_s": None,
                                "cache_only": True})
    assert config.cache.capacity_tokens == 5000  # flag wins
    assert config.cache.ttl_s == 60  # an absent flag (None) leaves the file's value
    assert config.cache_only is True
    assert str(config.trace.path) == "a.jsonl"


def test_override_into_a_missing_section(tmp_path):
    config = load_config(None, {"trace.block_size": 16, "cache.policy": "lru"})
    assert config.trace.block_size == 16


def test_empty_yaml_is_the_defaults(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("# nothing\n")
    assert load_config(path) == RunConfig()


@pytest.mark.parametrize("text", ["- a\n- b\n", "just words\n"])
def test_yaml_that_is_not_a_mapping(tmp_path, text):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_config(path)
    assert info.value.file == str(path)


def test_a_plain_number_with_an_exponent_is_a_number(tmp_path):
    """PyYAML follows YAML 1.1, which reads `1e300` and `5e-3` as strings: `rate: 1e300`
    was refused as `expected a number, got '1e300'` rather than by its range."""
    path = tmp_path / "run.yaml"
    path.write_text("cache: {ttl_s: 3e2, capacity_tokens: 2E6}\n"
                    "engine: {time_scale: 5e-1}\n")
    config = load_config(path)
    assert config.cache.ttl_s == 300.0 and config.cache.capacity_tokens == 2_000_000
    assert config.engine.time_scale == 0.5
    for text, words in [("load: {type: poisson, rate: 1e300}",
                         "load.rate: must be <= 1000000000, got 1e+300"),
                        ("engine: {time_scale: 1e-300}",
                         "engine.time_scale: must be >= 1e-06, got 1e-300"),
                        ("cache: {capacity_tokens: .nan}",
                         "cache.capacity_tokens: must be a finite number, got nan"),
                        ("engine: {time_scale: .nan}",
                         "engine.time_scale: must be a finite number, got nan"),
                        ("cache: {ttl_s: 1e400}", "cache.ttl_s: must be a finite number, got inf"),
                        ('load: {type: poisson, rate: "1e3"}',  # quoted: a string, as before
                         "load.rate: expected a number, got '1e3'")]:
        path.write_text(text + "\n")
        with pytest.raises(InputError) as info:
            load_config(path)
        assert str(info.value) == f"{path}:1: {words}"


def test_bad_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("cache:\n  policy: lru\n   ttl_s: 3\n")
    with pytest.raises(InputError) as info:
        load_config(path)
    assert info.value.file == str(path) and info.value.line == 3


def test_effective_config_round_trips(tmp_path):
    config = load_config(None, {"trace.path": "t.jsonl", "cache.capacity_tokens": 7,
                                "cache.ttl_s": 2.5, "cache.ttl_mode": "fixed",
                                "cache_only": True})
    text = config_to_yaml(config)
    assert build_config(yaml.safe_load(text)) == config
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert load_config(path) == config


def test_trace_defaults_are_resolved_into_the_effective_config(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n')
    config = resolve_trace_defaults(load_config(None, {"trace.path": str(trace)}))
    assert config.trace.format == "mooncake"
    assert config.trace.block_size == 512
    explicit = resolve_trace_defaults(
        load_config(None, {"trace.path": str(trace), "trace.block_size": 8}))
    assert explicit.trace.block_size == 8


# ------------------------------------------------------------------ refusals word for word
@pytest.mark.parametrize(("data", "text"), [
    ({"cache": {"ttl_s": "5parsecs"}},  # a validator's message, without pydantic's prefix
     "run.yaml: cache.ttl_s: expected a number, or one with a unit (300s, 5m, 1h; units: ms, "
     "s, m, min, h, d), got '5parsecs'"),
    ({"cache": {"capacity_tokens": -1}},  # pydantic's own check: the value is appended
     "run.yaml: cache.capacity_tokens: must be >= 0, got -1"),
    ({"cache": {"capacty_tokens": 5}}, "run.yaml: cache.capacty_tokens: unknown key (did you mean "
     "'cache.capacity_tokens'?)"),
    ({"seed": 1}, "run.yaml: seed: unknown key (a run has no randomness of its own; the "
                  "workload's modelled randomness is trace.seed)"),
    ({"hardware": {"gpu": "h1000"}},  # a section's own check names the field at fault
     "run.yaml: hardware.gpu: unknown gpu 'h1000' (did you mean 'h200'? valid: a100-40g, "
     "a100-80g, b200, h100-pcie, h100-sxm, h200, l4, l40s, mi300x)"),
    ({"scheduler": {"max_num_seqs": 10000, "max_batched_tokens": 8192}},
     "run.yaml: scheduler.max_num_seqs: must not exceed max_batched_tokens (10000 > 8192)"),
    ({"hardware": {"tp": 3}},  # across sections: the preset model's heads
     "run.yaml: hardware.tp: tp 3 does not split llama-3.1-8b's 32 attention heads and 8 KV "
     "heads evenly (tp must divide the attention heads, and divide the KV heads or be a "
     "multiple of them)"),
    ({"router": {"params": {"staleness_s": -1}}},  # the router is built to check its values
     "run.yaml: router.params: staleness_s must be >= 0, got -1"),
    ({"router": {"params": {"bogus": 1}}},
     "run.yaml: router.params.bogus: router 'prefix_aware' takes no such parameter "
     "(parameters: load_weight, staleness_s, event_delay_s, tier_weights)"),
    ({"cost_model": {"params": {"tp": 2}}},  # tp comes from hardware.tp, not the params
     "run.yaml: cost_model.params.tp: cost model 'roofline' takes no such parameter "
     "(parameters: engine, expert_parallel, " + ", ".join(roofline_params()) + ")"),
    ({"cost_model": {"name": "step_roofline", "params": {"frontend_s": 0.1}}},
     "run.yaml: cost_model.params.frontend_s: cost model 'step_roofline' takes no such "
     "parameter (parameters: attention_efficiency, bandwidth_efficiency, gemm_efficiency, "
     "kv_dtype_bytes, step_overhead_s, weight_dtype_bytes)"),
    ({"cost_model": {"profile": "cpu-llama-3.1-8b", "params": {"gemm_efficiency": 0.5}}},
     "run.yaml: cost_model.params.gemm_efficiency: cost model 'fitted' takes no such "
     "parameter (parameters: profile, engine, emission_s, frontend_s, "
     "frontend_s_per_prompt_token, idle_wakeup_s, step_overhead_s, step_overhead_s_per_seq, "
     "step_overhead_s_per_token)"),
    ({"cache_only": True, "load": {"type": "concurrency", "users": 2}},
     "run.yaml: load.type: a concurrency load reacts to finished requests, so it needs a "
     "timed run (not cache_only)"),
])
def test_refusals_word_for_word(data, text):
    with pytest.raises(InputError) as info:
        build_config(data, source="run.yaml")
    assert str(info.value) == text


def test_a_roofline_parameter_is_taken_and_a_misspelt_one_refused_at_load():
    assert build_config({"cost_model": {"params": {"gemm_efficiency": 0.5}}}) \
        .cost_model.params == {"gemm_efficiency": 0.5}
    with pytest.raises(InputError) as info:  # before, only building the model refused it
        build_config({"cost_model": {"params": {"gemm_efficency": 0.5}}})
    assert info.value.field == "cost_model.params.gemm_efficency"


@pytest.mark.parametrize("model", [
    {"name": "llama-3.1-8b", "presets_file": "custom.yaml"},  # the file may redefine it
    {"config_path": "some/config.json"},  # its heads are read when the run builds it
])
def test_tensor_parallel_is_checked_at_load_only_for_a_shipped_preset(model):
    config = build_config({"model": model, "hardware": {"tp": 3}})
    assert config.hardware.tp == 3


def test_a_flag_into_a_section_the_file_wrote_as_a_value_names_file_and_section(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("cache:\n  pool: 5\n")
    with pytest.raises(InputError) as info:
        load_config(path, {"cache.pool.ttl_s": 60})
    assert str(info.value) == f"{path}: cache.pool: expected a mapping of keys, got 5"
    path.write_text("cache: 5\n")  # the first section on the way is the one at fault
    with pytest.raises(InputError) as info:
        load_config(path, {"cache.pool.ttl_s": 60})
    assert info.value.field == "cache"
    path.write_text("engine: [1, 2]\n")
    with pytest.raises(InputError) as info:
        load_config(path, unset=("engine.sample_interval_s",))
    assert str(info.value) == f"{path}: engine: expected a mapping of keys, got [1, 2]"


def test_an_unset_key_is_null_and_the_file_is_named_in_its_own_errors(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("engine: {sample_interval_s: 5}\n")
    assert load_config(path, unset=("engine.sample_interval_s",)).engine.sample_interval_s \
        is None
    with pytest.raises(InputError) as info:  # the flag's value, not the file's
        load_config(path, {"cache.ttl_s": -1})
    assert info.value.file is None and info.value.field == "cache.ttl_s"
    path.write_text("engine: {sample_interval_s: 5}\ncache: {ttl_s: -1}\n")
    with pytest.raises(InputError) as info:  # the file's value beside an unset key
        load_config(path, unset=("engine.sample_interval_s",))
    assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, "cache.ttl_s")
    with pytest.raises(InputError) as info:  # flags alone: no file to name
        load_config(None, {"cache.ttl_s": -1})
    assert info.value.file is None and str(info.value).startswith("cache.ttl_s: ")


def test_not_a_mapping_word_for_word(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("- a\n")
    with pytest.raises(InputError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: expected a mapping of config sections"


def test_the_effective_config_keeps_the_sections_in_their_order():
    text = config_to_yaml(RunConfig())
    tops = [line.split(":")[0] for line in text.splitlines() if not line.startswith(" ")]
    assert tops == ["trace", "cache", "cache_only", "model", "hardware", "scheduler",
                    "router", "cost_model", "serving", "engine", "load"]


def test_a_registered_name_is_checked_and_none_passes():
    # the section is made here, not at import, so that the validator is made by this test
    from prefixsim.config.section import Section, registered
    from prefixsim.router import ROUTERS

    class Named(Section):
        name: str | None = None
        _known = registered(ROUTERS, "name")

    assert Named(name=None).name is None and Named(name="round_robin").name == "round_robin"
    with pytest.raises(pydantic.ValidationError, match="did you mean 'round_robin'"):
        Named(name="round-robin")


def test_schema_errors_are_worded_as_the_readers_word_theirs():
    def error(kind: str, value: object, **ctx: object) -> dict:
        return {"type": kind, "input": value, "ctx": ctx, "msg": "pydantic's own words"}

    assert validation_message(error("greater_than_equal", 0, ge=1)) == "must be >= 1, got 0"
    assert validation_message(error("greater_than", -5.0, gt=0.0)) == "must be > 0, got -5.0"
    assert validation_message(error("less_than_equal", 2.5, le=1.5)) == "must be <= 1.5, got 2.5"
    assert validation_message(error("less_than", 9, lt=8)) == "must be < 8, got 9"
    assert validation_message({"type": "value_error", "input": 3,
                               "msg": "Value error, a check's own text"}) == "a check's own text"
    assert validation_message({"type": "int_type", "input": "x", "msg": "Input should be a "
                               "valid integer"}) == "Input should be a valid integer (got 'x')"
    assert validation_message({"type": "model_type", "input": {"a": 1},
                               "msg": "Input should be an object"}) == "Input should be an object"


def beside_a_config(folder, key_yaml: str, name: str, content: str = ""):
    """A run config in `folder` naming the file `name` (written there) under `key_yaml`."""
    folder.mkdir()
    (folder / name).write_text(content)
    config = folder / "run.yaml"
    config.write_text(key_yaml)
    return config


def test_a_trace_beside_the_config_but_not_in_the_current_folder_is_named(tmp_path,
                                                                         monkeypatch):
    """A run config's relative trace path is read from the current folder (the config.yaml
    a run writes repeats it from there); a file found only beside the config is named in
    the refusal (it said only 'no such file or folder'). Found in the current folder, or
    given as a flag, nothing is said."""
    folder = tmp_path / "cfg"
    config = beside_a_config(folder, "trace:\n  path: t.jsonl\ncache_only: true\n", "t.jsonl")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as refused:
        load_config(config)
    assert str(refused.value) == (
        f"{config}:2: trace.path: t.jsonl is not in the current folder ({tmp_path}), where a "
        f"run config's relative paths are read from; {folder / 't.jsonl'} is beside the "
        "config: give that path")
    assert load_config(config, {"trace.path": "elsewhere.jsonl"}).trace.path.name == \
        "elsewhere.jsonl"
    monkeypatch.chdir(folder)
    assert load_config(config).trace.path.name == "t.jsonl"
    (folder / "t.jsonl").unlink()
    assert load_config(config).trace.path.name == "t.jsonl"  # missing everywhere: the reader says


def test_a_model_config_beside_the_run_config_is_named_too(tmp_path, monkeypatch):
    config = beside_a_config(tmp_path / "cfg", "model:\n  config_path: config.json\n",
                             "config.json", "{}")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as refused:
        load_config(config)
    assert str(refused.value).startswith(
        f"{config}:2: model.config_path: config.json is not in the current folder")
