"""A tune's constraints parsed and evaluated by hand: every refusal word for word with the
field it names, the text kept with its spaces tidied, dotted keys through values that are
not mappings, violations of both directions and of values that cannot count."""

from __future__ import annotations

import math

import pytest

from prefixsim.errors import InputError
from prefixsim.tune.constraints import dotted, parse_constraint


def _error(message: str, field: str) -> InputError:
    return InputError(message, file="spec.yaml", field=field)


def _refusal(text) -> str:
    with pytest.raises(InputError) as info:
        parse_constraint(text, "constraints[0]", _error)
    return str(info.value)


@pytest.mark.parametrize("text, message", [
    (5, "expected 'KEY [+ KEY ...] <= NUMBER' (or >=), e.g. 'p99_ttft_ms <= 2000'"),
    (None, "expected 'KEY [+ KEY ...] <= NUMBER' (or >=), e.g. 'p99_ttft_ms <= 2000'"),
    ("p99_ttft_ms < 2000", "expected 'KEY [+ KEY ...] <= NUMBER' (or >=), e.g. "
                           "'p99_ttft_ms <= 2000'"),
    ("p99_ttft_ms <= 1.2.3", "not a number: '1.2.3'"),
    ("p99_ttft_ms + Cache.x <= 3", "not a key: 'Cache.x'"),
    ("p99_ttft_ms + <= 3", "not a key: ''"),
    ("no_such_metric >= 0.5", "no_such_metric: not a summary key (see docs/results.md)"),
])
def test_refusals_name_the_field(text, message):
    assert _refusal(text) == f"spec.yaml: constraints[0]: {message}"


def test_text_is_kept_with_its_spaces_tidied():
    c = parse_constraint("  cache.capacity_tokens +   cache.host_capacity_tokens<=4e4 ",
                         "constraints[1]", _error)
    assert c.text == "cache.capacity_tokens + cache.host_capacity_tokens<=4e4"
    assert c.terms == ("cache.capacity_tokens", "cache.host_capacity_tokens")
    assert (c.op, c.bound, c.before_run) == ("<=", 40000.0, True)


def test_dotted_keys_through_values_that_are_not_mappings():
    tree = {"cache": {"capacity_tokens": 100, "tiers": [1, 2]}, "n": 3}
    assert dotted(tree, "cache.capacity_tokens") == 100
    assert dotted(tree, "cache.tiers.first") is None
    assert dotted(tree, "n.m") is None
    assert dotted(tree, "missing.key") is None


def test_violations_by_hand():
    le = parse_constraint("cache.a + cache.b <= 10", "c", _error)
    ge = parse_constraint("cache_token_hit_rate >= 0.5", "c", _error)
    config = {"cache": {"a": 4, "b": 3.5}}
    assert le.violation(config, None) == -2.5
    assert ge.violation({}, {"cache_token_hit_rate": 0.75}) == -0.25
    assert ge.violation({}, {"cache_token_hit_rate": 0.25}) == 0.25
    for missing in ({"cache": {"a": 4}}, {"cache": {"a": 4, "b": None}},
                    {"cache": {"a": 4, "b": True}}, {"cache": {"a": 4, "b": math.nan}}):
        assert le.violation(missing, None) == math.inf
    assert ge.violation({}, None) == math.inf and not ge.before_run
