"""A tune spec's parts by hand (prefixsim/tune/spec.py): objectives in every form, the
sampler's defaults and its one-objective rule, the spec's text when none is given, a knob's
error naming the field it broke, constraints over config keys (knobs, the config's own
keys, keys that do not exist), an offline policy in a shared pool, and the dotted-key
walk."""

from __future__ import annotations

import pytest
import yaml
from cli_helpers import DEMO

from prefixsim.errors import InputError
from prefixsim.tune import parse_tune_spec
from prefixsim.tune.spec import Objective, SamplerSpec, _has_dotted

HIT = "cache_token_hit_rate"
BASE = {"trace": {"path": str(DEMO)}, "cache_only": True}


def spec(**parts):
    return parse_tune_spec({"base": BASE, "space": {"cache.policy": ["lru", "s3fifo"]},
                            "objectives": {HIT: "maximize"}, **parts})


def refused(**parts) -> tuple[str | None, str]:
    with pytest.raises(InputError) as info:
        spec(**parts)
    return info.value.field, info.value.message


# ------------------------------------------------------------------------- objectives
def test_objectives_in_every_form():
    assert spec(objectives=HIT).objectives == [Objective(HIT, "maximize")]
    assert spec(objectives={HIT: "MAXIMISE", "cache_peak_tokens": "Min"}).objectives == [
        Objective(HIT, "maximize"), Objective("cache_peak_tokens", "minimize")]
    for bad in ({}, [], [HIT], None, 3):
        assert refused(objectives=bad) == (
            "objectives", "expected a mapping of summary keys to maximize or minimize")


# ---------------------------------------------------------------------------- sampler
def test_the_sampler_by_default_by_name_and_with_options():
    assert spec().sampler == SamplerSpec("tpe", 0, {})
    assert spec(sampler={"seed": 5}).sampler == SamplerSpec("tpe", 5, {})
    assert spec(sampler="NSGA2").sampler == SamplerSpec("nsga2", 0, {})
    assert spec(sampler={"name": "tpe", "seed": 2, "n_startup_trials": 4}).sampler == \
        SamplerSpec("tpe", 2, {"n_startup_trials": 4})


def test_cma_es_takes_one_objective_the_others_several():
    two = {HIT: "maximize", "cache_peak_tokens": "minimize"}
    assert spec(sampler="cmaes").sampler.name == "cmaes"  # one objective: fine
    assert spec(sampler="tpe", objectives=two).sampler.name == "tpe"
    assert refused(sampler="cmaes", objectives=two) == (
        "sampler", "cmaes optimises one objective; use nsga2 or tpe")


# ------------------------------------------------------------------------------- text
def test_a_spec_given_as_a_mapping_is_written_back_in_its_own_order():
    data = {"trials": 3, "base": BASE, "space": {"cache.policy": ["lru"]},
            "objectives": {HIT: "maximize"}}
    parsed = parse_tune_spec(data, name="mine")
    assert parsed.text == yaml.safe_dump({"name": "mine", **data}, sort_keys=False)
    assert parsed.text.splitlines()[:2] == ["name: mine", "trials: 3"]
    named = parse_tune_spec({"name": "theirs", **data}, name="mine")
    assert named.name == "theirs" and named.text.startswith("name: theirs\n")


# ------------------------------------------------------------------- errors at a knob
def test_a_knobs_error_names_the_value_and_any_other_field_it_broke():
    assert refused(space={"cache.ttl_s": [10, -5]}) == (
        "space.cache.ttl_s", "must be > 0, got -5 (at cache.ttl_s=-5)")
    assert refused(space={"cache.policy_params.x": [1]}) == (
        "space.cache.policy_params.x", "cache.policy_params: lru has no parameter 'x' (its "
        "parameters: none) (at cache.policy_params.x=1)")


# ---------------------------------------------------------------------- constraints
def test_constraints_over_config_keys():
    assert spec(constraints=["cache.capacity_tokens <= 10"]).constraints  # the config's key
    conditional = {"cache.policy": ["lru", "s3fifo"],
                   "cache.policy_params.small_fraction": {
                       "float": [0.1, 0.3], "when": {"cache.policy": "s3fifo"}}}
    # a knob's key counts although the base's config has no such key
    assert spec(space=conditional, constraints=["cache.policy_params.small_fraction <= 0.3"])
    assert refused(constraints=["cache.nosuch <= 10"]) == (
        "constraints.0", "cache.nosuch: not a config key")
    assert refused(constraints=["p99_ttft_ms <= 9", "cache.ttl_s.x <= 1"]) == (
        "constraints.1", "cache.ttl_s.x: not a config key")


# -------------------------------------------------------------------- offline policies
def test_an_offline_policy_in_a_shared_pool_is_refused():
    pooled = {**BASE, "cache": {"pool": {"policy": "belady", "capacity_tokens": 1000}}}
    assert refused(base=pooled) == (
        "base", "cache.pool.policy=belady is an offline policy (it knows the future): a "
        "bound to compare against, not a tuning candidate")
    online = {**BASE, "cache": {"pool": {"policy": "lru", "capacity_tokens": 1000}}}
    assert spec(base=online).base == online


# ----------------------------------------------------------------------- dotted keys
@pytest.mark.parametrize("dotted, found", [
    ("a", True), ("a.b", True), ("a.b.c", False), ("a.c", False), ("x", False),
    ("a.d", True), ("a.d.e", False),
])
def test_the_dotted_key_walk(dotted, found):
    assert _has_dotted({"a": {"b": 1, "d": None}}, dotted) is found
