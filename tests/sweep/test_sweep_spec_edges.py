"""Sweep specs' edges, worked by hand: run-id slugs, the shape checks word for word, the plan
size and its refusal, points' ids, numbers and paths, and what a run id hashes
(prefixsim/sweep/spec.py; docs/results.md "Run ids")."""

from pathlib import Path

import pytest
import yaml

from prefixsim.config import build_config
from prefixsim.errors import InputError
from prefixsim.sweep.spec import (
    MAX_POINTS,
    SLUG_MAX_CHARS,
    _identity,
    _runs_as_before,
    _short_number,
    check_plan_size,
    column_name,
    expand,
    id_hash,
    load_spec,
    make_point,
    parse_spec,
    plan_size,
    slug,
    slug_part,
    spec_to_yaml,
    swept_keys,
    without_point,
)

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")
BASE = {"trace": {"path": DEMO}, "cache_only": True}


@pytest.mark.parametrize(("dotted", "value", "part"), [
    ("cache.capacity_tokens", None, "unbounded"),
    ("cache.capacity_tokens", 5000, "5k"),
    ("cache.capacity_tokens", 2_500_000, "2.5M"),
    ("cache.capacity_tokens", 512, "512"),
    ("cache.ttl_s", None, ""),
    ("cache.ttl_s", 10, "ttl10"),
    ("cache.ttl_s", 2.5, "ttl2.5"),
    ("cache_only", True, "cache-only"),
    ("cache_only", False, "timed"),
    ("engine.replicas", 2, "replicas2"),
    ("engine.chunked", True, "chunked"),
    ("engine.chunked", False, "no-chunked"),
    ("trace.max_tokens", 1500, "max1.5k"),   # another `_tokens` key: a short number
    ("trace.max_requests", 1500, "max_requests1500"),
    ("hardware.gpu_name", "h100", "h100"),
    ("router.name", "prefix-aware", "prefix-aware"),
    ("router.params", {"staleness_s": 5}, "params"),
    ("trace.paths", ["a", "b"], "paths"),
])
def test_slug_part_names_each_kind_of_value(dotted, value, part):
    assert slug_part(dotted, value) == part


@pytest.mark.parametrize(("value", "text"), [
    (0, "0"), (999, "999"), (1000, "1k"), (1500, "1.5k"), (999_999, "999.999k"),
    (1_000_000, "1M"), (2_500_000, "2.5M"), (1e9, "1G"), (3.5e9, "3.5G"), (-5000, "-5k"),
    (0.5, "0.5"),
])
def test_short_numbers(value, text):
    assert _short_number(value) == text


def test_slug_puts_the_mode_first_and_leaves_timed_keys_out_of_cache_only_runs():
    assert slug({"cache.policy": "lru", "cache.capacity_tokens": None,
                 "cache.ttl_s": 10}) == "lru-unbounded-ttl10"
    timed = {"cache.policy": "lru", "cache_only": False, "engine.replicas": 2,
             "router.name": "prefix-aware", "cache.capacity_tokens": 10000}
    assert slug(timed) == "timed-lru-replicas2-prefix-aware-10k"
    assert slug({**timed, "cache_only": True}) == "cache-only-lru-10k"
    # an empty part (no TTL) leaves no double dash; nothing at all is `run`
    assert slug({"cache.policy": "lru", "cache.ttl_s": None, "x.y": "a"}) == "lru-a"
    assert slug({}) == "run" and slug({"cache.ttl_s": None}) == "run"
    assert slug({"x.name": "--"}) == "run"


def test_slug_keeps_safe_characters_only_and_is_cut_at_its_limit():
    assert slug({"trace.path": "/data/my traces/a_b+c.jsonl"}) == "data-my-traces-a-b+c.jsonl"
    assert slug({"x.name": "__a__b__"}) == "a-b"
    assert slug({"x.name": "a" * 100}) == "a" * SLUG_MAX_CHARS
    # cut at the limit, then no trailing dash or dot
    assert slug({"x.name": "a" * (SLUG_MAX_CHARS - 1) + "-b"}) == "a" * (SLUG_MAX_CHARS - 1)
    assert slug({"x.name": "a" * (SLUG_MAX_CHARS - 1) + ".b"}) == "a" * (SLUG_MAX_CHARS - 1)


def test_small_helpers():
    assert id_hash("lru-unbounded-ttl10-abcdef12") == "abcdef12"
    assert id_hash("abcdef12") == "abcdef12"
    assert column_name("cache.tier.capacity") == "cache_tier_capacity"
    assert without_point("must be >= 0 (in the point cache.ttl_s=-1)") == "must be >= 0"
    assert without_point("must be >= 0") == "must be >= 0"


@pytest.mark.parametrize(("data", "message", "field"), [
    ([1], "expected a mapping with base:, grid: and runs:", None),
    ({"grid": {"a": [1]}, "extra": 1}, "unknown key (valid: name, base, grid, runs)", "extra"),
    ({"base": [1], "grid": {"a": [1]}}, "expected a run config mapping", "base"),
    ({"grid": [1]}, "expected a mapping of dotted keys to lists", "grid"),
    ({"grid": {"a": 1}}, "expected a non-empty list of values", "grid.a"),
    ({"grid": {"a": []}}, "expected a non-empty list of values", "grid.a"),
    ({"runs": {"a": 1}}, "expected a list of mappings of dotted keys", "runs"),
    ({"runs": [{"a": 1}, 2]}, "expected a list of mappings of dotted keys", "runs"),
    ({"base": BASE}, "nothing to run: give grid: or runs:", None),
    ({"grid": {}, "runs": []}, "nothing to run: give grid: or runs:", None),
])
def test_spec_shape_refusals_word_for_word(data, message, field):
    with pytest.raises(InputError) as error:
        parse_spec(data, source="spec.yaml")
    assert error.value.message == message
    assert error.value.field == field and error.value.file == "spec.yaml"


def test_parse_spec_names_and_keys():
    spec = parse_spec({"grid": {1: [2]}, "runs": [{3: 4}]}, name="fallback")
    assert spec.name == "fallback" and spec.base == {} and spec.root is None
    assert spec.grid == {"1": [2]} and spec.runs == [{"3": 4}]
    assert parse_spec({"name": 7, "grid": {"a": [1]}}).name == "7"
    assert parse_spec({"name": "", "grid": {"a": [1]}}).name == "sweep"
    assert parse_spec({"base": None, "grid": None, "runs": [{"a": 1}]}).grid == {}


def test_load_spec_takes_its_name_and_root_from_the_file(tmp_path):
    path = tmp_path / "sub" / "my-sweep.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({"base": {"trace": {"path": "t.jsonl"}},
                                    "grid": {"cache.ttl_s": [1]}}))
    spec = load_spec(path)
    assert (spec.name, spec.root) == ("my-sweep", path.parent)
    point = make_point(spec.base, {"cache.ttl_s": 1}, root=spec.root)
    assert point.config.trace.path == path.parent / "t.jsonl"
    # without a root a relative path starts in the current folder; an absolute one stays
    here = make_point({"trace": {"path": "t.jsonl"}}, {})
    assert here.config.trace.path == Path.cwd() / "t.jsonl"
    assert make_point(BASE, {}).config.trace.path == Path(DEMO)
    # the id keeps the path as written, wherever the spec's folder is
    assert point.run_id.rsplit("-", 1)[1] == make_point(
        {"trace": {"path": "t.jsonl"}}, {"cache.ttl_s": 1}).run_id.rsplit("-", 1)[1]


def test_plan_size_and_its_refusal_word_for_word():
    grid = {"a": list(range(100)), "b": list(range(100))}
    spec = parse_spec({"grid": grid})
    assert plan_size(spec) == MAX_POINTS == check_plan_size(spec)
    assert plan_size(parse_spec({"runs": [{"a": 1}] * 3})) == 3
    assert plan_size(parse_spec({"grid": {"a": [1, 2], "b": [1, 2, 3]},
                                 "runs": [{"a": 1}]})) == 7
    over = parse_spec({"grid": grid, "runs": [{"a": 1}]})
    with pytest.raises(InputError) as error:
        check_plan_size(over, source="big.yaml")
    assert error.value.message == ("asks for 10,001 runs (grid 100 x 100, plus 1 runs:), "
                                   "more than 10,000; split it into smaller sweeps")
    assert (error.value.field, error.value.file) == ("grid", "big.yaml")
    with pytest.raises(InputError, match=r"\(grid 0, plus 10001 runs:\)"):
        check_plan_size(parse_spec({"runs": [{"a": 1}] * (MAX_POINTS + 1)}))
    with pytest.raises(InputError, match="10,001 runs"):
        expand(over)  # refused before a single point is validated (`a` is no config key)


def test_expand_orders_dedupes_and_names_every_swept_key():
    spec = parse_spec({"base": BASE,
                       "grid": {"cache.policy": ["lru", "fifo"], "cache.ttl_s": [None, 30]},
                       "runs": [{"cache.ttl_s": 30, "cache.policy": "fifo"},   # a grid point
                                {"cache.capacity_tokens": 5000}]})
    assert swept_keys(spec) == ["cache.policy", "cache.ttl_s", "cache.capacity_tokens"]
    points = expand(spec)
    assert [p.params for p in points] == [
        {"cache.policy": "lru", "cache.ttl_s": None}, {"cache.policy": "lru", "cache.ttl_s": 30},
        {"cache.policy": "fifo", "cache.ttl_s": None},
        {"cache.policy": "fifo", "cache.ttl_s": 30},
        {"cache.capacity_tokens": 5000}]
    slugs = [p.run_id.rsplit("-", 1)[0] for p in points]
    # the explicit run leaves the policy at its default and the TTL unset: still `lru`
    # in the order of the swept keys: policy, TTL (none: nothing), capacity
    assert slugs == ["lru-unbounded", "lru-ttl30-unbounded", "fifo-unbounded",
                     "fifo-ttl30-unbounded", "lru-5k"]
    assert all(len(id_hash(p.run_id)) == 8 for p in points)
    assert len({id_hash(p.run_id) for p in points}) == 5


def test_a_point_keeps_numbers_of_values_given_with_units():
    point = make_point(BASE, {"cache.capacity_tokens": "200k", "cache.ttl_s": "5m",
                              "cache.policy": "lru", "trace.path": DEMO})
    assert point.params == {"cache.capacity_tokens": 200000, "cache.ttl_s": 300.0,
                            "cache.policy": "lru", "trace.path": DEMO}
    assert point.run_id.startswith("200k-ttl300-lru-")
    # the same values as numbers are the same run
    same = make_point(BASE, {"cache.capacity_tokens": 200000, "cache.ttl_s": 300,
                             "cache.policy": "lru", "trace.path": DEMO})
    assert id_hash(same.run_id) == id_hash(point.run_id)


def test_a_bad_point_names_itself_and_its_field():
    with pytest.raises(InputError) as error:
        make_point(BASE, {"cache.policy": "lru", "cache.ttl_s": -1}, source="s.yaml")
    assert error.value.message.endswith(" (in the point cache.policy=lru, cache.ttl_s=-1)")
    assert without_point(error.value.message) + \
        " (in the point cache.policy=lru, cache.ttl_s=-1)" == error.value.message
    assert error.value.field == "cache.ttl_s" and error.value.file == "s.yaml"


def test_spec_to_yaml_reads_back_as_the_same_spec():
    spec = parse_spec({"name": "n", "base": BASE, "grid": {"cache.ttl_s": [None, 5]},
                       "runs": [{"cache.policy": "lru"}]})
    text = spec_to_yaml(spec)
    assert text.index("name:") < text.index("base:") < text.index("grid:") < text.index("runs:")
    assert parse_spec(yaml.safe_load(text)) == spec


def test_a_run_id_hashes_later_keys_only_off_their_defaults():
    plain = _identity(build_config(BASE))
    for dotted in ("load", "serving"):
        assert dotted not in plain
    assert "config_path" not in plain["model"] and "max_pages" not in plain["trace"]
    assert "max_model_len" not in plain["scheduler"]
    served = _identity(build_config({**BASE, "serving": {"engine": "vllm-v0"}}))
    assert served["serving"]["engine"] == "vllm-v0"
    capped = _identity(build_config({**BASE, "scheduler": {"max_model_len": 4096}}))
    assert capped["scheduler"]["max_model_len"] == 4096


def test_unset_limits_hash_as_the_fixed_ones_only_where_the_run_uses_them():
    # a cache-only run on an H100 uses the 8192-token budget: hashed as before
    cache_only = build_config(BASE)
    assert _runs_as_before(cache_only)
    assert _identity(cache_only)["scheduler"]["max_batched_tokens"] == 8192
    assert _identity(cache_only)["scheduler"]["max_num_seqs"] == 256
    # a timed H100 run takes vLLM v1's 1024 running requests: new limits, hashed unset
    timed = build_config({**BASE, "cache_only": False})
    assert not _runs_as_before(timed)
    assert _identity(timed)["scheduler"]["max_num_seqs"] is None
    assert _runs_as_before(build_config({**BASE, "cache_only": False,
                                         "scheduler": {"max_num_seqs": 256}}))
    # a set limit is hashed as set; only the unset one takes the fixed figure
    half = _identity(build_config({**BASE, "scheduler": {"max_num_seqs": 64}}))
    assert half["scheduler"]["max_num_seqs"] == 64
    assert half["scheduler"]["max_batched_tokens"] == 8192
    # an A100's budget is 2048: not as before, cache-only or not
    assert not _runs_as_before(build_config({**BASE, "hardware": {"gpu": "a100-80g"}}))
    # limits the run would refuse, a budget set elsewhere, a presets file: not as before
    assert not _runs_as_before(build_config({**BASE, "scheduler": {"max_num_seqs": 9000}}))
    assert not _runs_as_before(build_config({**BASE,
                                             "scheduler": {"max_batched_tokens": 100}}))
    hardware = cache_only.hardware.model_copy(update={"presets_file": Path("gpus.yaml")})
    assert not _runs_as_before(cache_only.model_copy(update={"hardware": hardware}))
    model = cache_only.model.model_copy(update={"config_path": Path("config.json")})
    assert not _runs_as_before(cache_only.model_copy(update={"model": model}))


def test_slug_edges_at_the_cut_and_the_strips():
    # a leading character made a dash is stripped before the cut, so 60 remain
    assert slug({"x.name": "_" + "a" * 70}) == "a" * SLUG_MAX_CHARS
    assert slug({"x.name": "a_-b"}) == "a-b"          # a dash run left by the sub collapses
    assert slug({"x.name": "aX"}) == "aX" and slug({"x.name": "Xa"}) == "Xa"
    # the leaf of a key three deep; a `_name` key keeps the rest of its name
    assert slug_part("cache.pool.ttl_s", 10) == "ttl10"
    assert slug_part("x.router_name", 2) == "router2"


def test_a_named_key_the_config_lacks_names_nothing():
    point = make_point(BASE, {}, named=["nothing.here", "cache.policy"])
    assert point.run_id.startswith("lru-") and len(id_hash(point.run_id)) == 8


def test_make_point_keeps_where_the_error_is():
    with pytest.raises(InputError) as error:   # a key below a value that is no mapping
        make_point({**BASE, "cache": {"ttl_s": 5}}, {"cache.ttl_s.x": 1}, source="s.yaml")
    assert error.value.file == "s.yaml"


def test_only_values_written_with_units_become_numbers():
    point = make_point(BASE, {"cache.ttl_s": 300, "cache.capacity_tokens": 5000})
    assert type(point.params["cache.ttl_s"]) is int      # as written, not the config's 300.0
    assert point.params == {"cache.ttl_s": 300, "cache.capacity_tokens": 5000}


def test_a_token_budget_from_the_context_length_is_not_the_fixed_one():
    # without chunked prefill vLLM v1's budget is the model's context (131,072 tokens)
    assert not _runs_as_before(build_config({**BASE, "scheduler": {"chunked_prefill": False}}))
