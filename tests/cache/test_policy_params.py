"""A policy's own parameters (`parameters`, `cache.policy_params`): declared, checked, used."""

from pathlib import Path

import pytest
from radix_reference import RadixCache

import prefixsim
from prefixsim.cache import POLICIES, build_policy, check_policy_params
from prefixsim.config import load_config
from prefixsim.errors import InputError

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")


@pytest.mark.parametrize("name", POLICIES.names())
def test_every_policy_declares_its_parameters_and_rejects_others(name):
    """Each declared parameter has a description and the defaults build; an undeclared one
    is refused, naming the policy and its parameters."""
    declared = POLICIES.factory(name).parameters
    assert all(isinstance(text, str) and text for text in declared.values())
    check_policy_params(name, {})
    with pytest.raises(ValueError, match=f"{name} has no parameter 'no_such_knob'"):
        check_policy_params(name, {"no_such_knob": 1})


def victim(small_fraction):
    """Capacity 10 one-token pages. Insert X, hit X, insert Y, insert Z, free one page.
    0.1 (S budget 1 token): inserting Y pushes X (hit) to M; inserting Z makes Y due (never
    hit), so Y goes. 0.2 (budget 2): X and Y fit; inserting Z pushes X (hit) to M; Y and Z
    are within budget, so M's head X goes."""
    cache = Cache(10, build_policy("s3fifo", params={"small_fraction": small_fraction}))
    cache.insert(None, [1], [1], 0.0, 0)
    cache.touch(cache.match([1], 1.0).pages, 1.0, 1)
    cache.insert(None, [2], [1], 2.0, 2)
    cache.insert(None, [3], [1], 3.0, 3)
    before = {p.page_id for p in cache.pages()}
    assert cache.evict(10 - cache.resident_tokens + 1)
    cache.check_invariants()
    (gone,) = before - {p.page_id for p in cache.pages()}
    return gone


Cache = RadixCache  # set to each cache in turn by the `each_cache` fixture (tests/conftest.py)


@pytest.mark.usefixtures("each_cache")
def test_s3fifo_small_fraction_sets_the_small_queue_budget():
    assert victim(0.1) == 2
    assert victim(0.2) == 1


def test_policy_params_reach_the_run_and_the_default_is_the_paper_s():
    """On the demo trace at 20k tokens: 0.1 given explicitly equals the default; a larger
    small queue changes the hit rate."""
    def hit_rate(**params):
        return prefixsim.run(trace={"path": DEMO}, cache_only=True, cache={
            "policy": "s3fifo", "capacity_tokens": 20000, "bounds": True,
            "policy_params": params}).summary
    default, explicit, larger = hit_rate(), hit_rate(small_fraction=0.1), hit_rate(
        small_fraction=0.5)
    assert default["cache_hit_tokens"] == explicit["cache_hit_tokens"]
    assert larger["cache_hit_tokens"] != default["cache_hit_tokens"]
    assert larger["cache_belady_token_hit_rate"] == default["cache_belady_token_hit_rate"]


@pytest.mark.parametrize("policy, params, message", [
    ("lru", {"small_fraction": 0.2}, "lru has no parameter 'small_fraction'"),
    ("s3fifo", {"small_fraction": 1.5}, "expected a number in \\(0, 1\\)"),
    ("s3fifo", {"small_fraction": True}, "expected a number in \\(0, 1\\)"),
    ("s3fifo", {"smal_fraction": 0.2}, "its parameters: small_fraction"),
])
def test_bad_policy_params_are_input_errors_naming_the_key(policy, params, message):
    with pytest.raises(InputError, match=message) as error:
        load_config(overrides={"cache.policy": policy, "cache.policy_params": params})
    assert error.value.field == "cache.policy_params"
