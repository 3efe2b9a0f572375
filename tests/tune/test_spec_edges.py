"""Tune specs at their edges, parsed directly: every refusal word for word with the file, the
line of the offending key and the field; the shorthands (an objective as a bare key, a
sampler as a bare name, direction spellings); the lines `key_lines` finds; an offline
policy refused in the base or the space; `with_base`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from prefixsim.errors import InputError, key_lines
from prefixsim.tune.spec import load_tune_spec, parse_tune_spec, with_base

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")
BASE = {"trace": {"path": DEMO}, "cache_only": True}
GOOD = {"base": BASE, "space": {"cache.policy": ["lru", "s3fifo"]},
        "objectives": {"cache_token_hit_rate": "maximize"}, "trials": 3}


def _refusal(tmp_path: Path, **changes) -> str:
    """The one-line error of the spec GOOD with `changes`, written to spec.yaml and loaded."""
    data = {**GOOD, **changes}
    data = {k: v for k, v in data.items() if v is not ...}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(InputError) as info:
        load_tune_spec(path)
    return str(info.value).replace(str(path), "spec.yaml")


# GOOD written out: base (lines 1-4), space (5, its knob 6-8), objectives (9, 10), trials (11)
@pytest.mark.parametrize("changes, message", [
    ({"trails": 3}, "spec.yaml:12: trails: unknown key (valid: name, base, space, objectives, "
                    "constraints, trials, sampler)"),
    ({"base": [1]}, "spec.yaml:1: base: expected a run config mapping"),
    ({"space": {}}, "spec.yaml:5: space: expected a mapping of dotted keys to a list or a "
                    "range"),
    ({"objectives": []}, "spec.yaml:9: objectives: expected a mapping of summary keys to "
                         "maximize or minimize"),
    ({"objectives": {"cache_hitrate": "max"}},
     "spec.yaml:10: objectives.cache_hitrate: unknown objective: not a summary key (see "
     "docs/results.md)"),
    ({"objectives": {"cache_token_hit_rate": "up"}},
     "spec.yaml:10: objectives.cache_token_hit_rate: expected maximize or minimize, got 'up'"),
    ({"constraints": "p99_ttft_ms <= 5"},
     "spec.yaml:12: constraints: expected a list of constraints such as 'p99_ttft_ms <= "
     "2000'"),
    ({"constraints": ["cache.capacity_tokns <= 5"]},
     "spec.yaml:13: constraints.0: cache.capacity_tokns: not a config key"),
    ({"trials": 0}, "spec.yaml:11: trials: must be an integer >= 1, got 0"),
    ({"trials": True}, "spec.yaml:11: trials: must be an integer >= 1, got True"),
    ({"trials": 2.5}, "spec.yaml:11: trials: must be an integer >= 1, got 2.5"),
    ({"sampler": [1]}, "spec.yaml:12: sampler: expected a sampler name or a mapping with "
                       "name: and seed:"),
    ({"sampler": "bayes"}, "spec.yaml:12: sampler: unknown sampler 'bayes' (valid: cmaes, "
                           "grid, nsga2, random, tpe)"),
    ({"sampler": {"name": "tpe", "seed": -1}},
     "spec.yaml:12: sampler: must be an integer >= 0, got -1"),
    ({"sampler": {"name": "tpe", "seed": True}},
     "spec.yaml:12: sampler: must be an integer >= 0, got True"),
    ({"sampler": "cmaes", "objectives": {"cache_token_hit_rate": "max",
                                         "cache_evictions": "min"}},
     "spec.yaml:13: sampler: cmaes optimises one objective; use nsga2 or tpe"),
])
def test_refusals_name_file_line_and_field(tmp_path, changes, message):
    assert _refusal(tmp_path, **changes) == message


def test_a_spec_that_is_not_a_mapping(tmp_path):
    with pytest.raises(InputError) as info:
        parse_tune_spec([1, 2], source="s.yaml")
    assert str(info.value) == "s.yaml: expected a mapping with base:, space: and objectives:"


def test_base_errors_name_the_base_key(tmp_path):
    message = _refusal(tmp_path, base={**BASE, "cache": {"capacity_tokens": -5}})
    assert message == "spec.yaml:6: base.cache.capacity_tokens: must be >= 0, got -5"
    message = _refusal(tmp_path, base={**BASE, "seed": 7})  # the sampler's seed is its own
    assert message == ("spec.yaml:5: base.seed: unknown key (a run has no randomness of its "
                       "own; the workload's modelled randomness is trace.seed)")


@pytest.mark.parametrize("where", ["base", "space"])
def test_an_offline_policy_is_a_bound_not_a_candidate(tmp_path, where):
    if where == "base":
        message = _refusal(tmp_path, base={**BASE, "cache": {"policy": "belady"}},
                           space={"cache.capacity_tokens": [1000, 2000]})
        field = "spec.yaml:1: base"
    else:
        message = _refusal(tmp_path, space={"cache.policy": ["lru", "belady"]})
        field = "spec.yaml:6: space.cache.policy"
    assert message == (f"{field}: cache.policy=belady is an offline policy (it knows the "
                       "future): a bound to compare against, not a tuning candidate")


def test_shorthands_and_defaults():
    spec = parse_tune_spec({**GOOD, "objectives": "cache_token_hit_rate", "sampler": "RANDOM"})
    assert [(o.key, o.direction) for o in spec.objectives] == [("cache_token_hit_rate",
                                                                "maximize")]
    assert (spec.sampler.name, spec.sampler.seed, spec.sampler.options) == ("random", 0, {})
    assert spec.name == "tune" and spec.root is None
    assert yaml.safe_load(spec.text)["name"] == "tune"
    for word, direction in (("maximise", "maximize"), ("MAX", "maximize"), ("min", "minimize"),
                            ("Minimise", "minimize"), ("minimize", "minimize")):
        objectives = parse_tune_spec({**GOOD, "objectives": {"cache_evictions": word}}).objectives
        assert objectives[0].direction == direction, word
    spec = parse_tune_spec({**GOOD, "sampler": {"name": "tpe", "n_startup_trials": 3},
                            "name": "mine", "trials": 1}, name="ignored")
    assert (spec.sampler.seed, spec.sampler.options, spec.name, spec.trials) == (
        0, {"n_startup_trials": 3}, "mine", 1)
    assert parse_tune_spec({**GOOD, "sampler": None}).sampler.name == "tpe"
    assert parse_tune_spec({k: v for k, v in GOOD.items() if k != "trials"}).trials == 50


def test_a_loaded_spec_keeps_its_text_name_and_folder(tmp_path):
    path = tmp_path / "my-tune.yaml"
    text = yaml.safe_dump(GOOD, sort_keys=False)
    path.write_text(text)
    spec = load_tune_spec(path)
    assert (spec.name, spec.root, spec.text) == ("my-tune", tmp_path, text)


def test_key_lines_of_mappings_and_lists():
    text = "name: x\nspace:\n  cache.policy: [lru]\n  cache.ttl_s:\n    float: [1, 2]\n" \
           "constraints:\n  - a <= 1\n  - b <= 2\n"
    assert key_lines(text) == {"name": 1, "space": 2, "space.cache.policy": 3,
                               "space.cache.policy.0": 3, "space.cache.ttl_s": 4,
                               "space.cache.ttl_s.float": 5, "space.cache.ttl_s.float.0": 5,
                               "space.cache.ttl_s.float.1": 5, "constraints": 6,
                               "constraints.0": 7, "constraints.1": 8}
    assert key_lines("a: [") == {} and key_lines("- 1\n- 2\n") == {"0": 1, "1": 2}


def test_with_base_sets_a_nested_key_on_a_copy():
    spec = parse_tune_spec(GOOD)
    changed = with_base(spec, "trace.window.end_s", 60)
    assert changed.base["trace"] == {"path": DEMO, "window": {"end_s": 60}}
    assert spec.base["trace"] == {"path": DEMO}  # the original is left alone
    assert with_base(spec, "seed", 3).base["seed"] == 3
