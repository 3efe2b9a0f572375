"""The run config: defaults, validation errors naming the dotted key, YAML + overrides,
immutability, and the effective config round-tripping through config.yaml."""

from __future__ import annotations

import pydantic
import pytest
import yaml

from prefixsim.cache import TTLMode
from prefixsim.config import RunConfig, build_config, config_to_yaml, load_config
from prefixsim.errors import InputError
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
