"""Request classes (per-class TTL and priority) and the minimum cacheable prompt."""

from __future__ import annotations

import pytest

from prefixsim.cache.classes import CacheRules, RequestClass, unit_hash
from prefixsim.config import load_config
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate
from prefixsim.trace import Request


def req(i, t, ids, session=None, tokens=None):
    return Request(i, t, tokens or len(ids), 1, tuple(ids), 1, session)


def run(trace, **cache):
    overrides = {"cache_only": True, **{f"cache.{k}": v for k, v in cache.items()}}
    return simulate(load_config(overrides=overrides), trace)


def test_class_ttl_outlives_the_default():
    """Default TTL 300 s; sessions matching ^vip get 1 h. At t=1000 the vip prefix [1,2] is
    alive (deadline 3600) and hits 2 tokens; the other session's [5,6] expired at 300."""
    trace = [req(0, 0.0, [1, 2], "vip-1"), req(1, 0.0, [5, 6], "x"),
             req(2, 1000.0, [1, 2, 3], "vip-1"), req(3, 1000.0, [5, 6, 7], "x")]
    result = run(trace, ttl_s=300.0,
                 classes=[{"name": "long", "ttl_s": 3600.0, "session_regex": "^vip"}])
    assert list(result.requests["cached_tokens"]) == [0, 0, 2, 0]


def test_class_ttl_without_a_default_ttl():
    trace = [req(0, 0.0, [1, 2], "a"), req(1, 0.0, [5, 6], "b"),
             req(2, 100.0, [1, 2, 3], "a"), req(3, 100.0, [5, 6, 7], "b")]
    result = run(trace, classes=[{"name": "short", "ttl_s": 10.0, "session_regex": "^a$"}])
    assert list(result.requests["cached_tokens"]) == [0, 0, 0, 2]


def test_minimum_cacheable_prompt_bypasses_the_cache():
    """min 3: the 2-token prompt [1,2] is never cached, so its repeat misses; the 3-token
    [7,8,9] is cached and its repeat hits 2 (L-1)."""
    trace = [req(0, 0.0, [1, 2]), req(1, 1.0, [1, 2]), req(2, 2.0, [7, 8, 9]),
             req(3, 3.0, [7, 8, 9])]
    result = run(trace, min_cacheable_tokens=3)
    assert list(result.requests["cached_tokens"]) == [0, 0, 0, 2]
    assert result.summary["cache_inserted_tokens"] == 3


def test_priority_class_pages_survive_under_the_priority_policy():
    """Cache of 4 tokens, 2-token pages. [1] is gold (priority 5), then [2], [3] plain: [2]
    goes, so a repeat of gold hits; under lru the older gold page would be evicted."""
    trace = [req(0, 0.0, [1], "gold", 2), req(1, 1.0, [2], "x", 2), req(2, 2.0, [3], "x", 2),
             req(3, 3.0, [1, 4], "gold", 3)]
    classes = [{"name": "gold", "priority": 5, "session_regex": "gold"}]
    prio = run(trace, policy="priority", capacity_tokens=4, classes=classes)
    lru = run(trace, policy="lru", capacity_tokens=4, classes=classes)
    assert prio.requests["cached_tokens"].iloc[-1] == 1
    assert lru.requests["cached_tokens"].iloc[-1] == 0


def test_rules_first_match_and_seeded_share():
    rules = CacheRules([RequestClass("big", 60.0, 1, None, 100),
                        RequestClass("half", 7.0, 0, None, None, 0.5)], 0, seed=3)
    assert rules.for_request(req(0, 0, [1], tokens=200)).class_name == "big"
    names = [rules.for_request(req(i, 0, [1], f"s{i}")).class_name for i in range(400)]
    assert 150 < names.count("half") < 250
    again = [rules.for_request(req(i, 0, [1], f"s{i}")).class_name for i in range(400)]
    assert names == again
    assert 0 <= unit_hash("k", 1) < 1 and unit_hash("k", 1) != unit_hash("k", 2)


def test_one_hour_class_pays_the_one_hour_write_price():
    """Two 2,148-token prompts sharing 2 pages of 1,024. Request 0 (session x) writes all
    2,148 tokens at the 5-minute price either way; request 1 reads 2,048 and writes 100,
    at 6.00 instead of 3.75 USD/Mtok when its class has a 1 h TTL: +100 * 2.25 / 1e6."""
    trace = [Request(i, float(i), 2148, 0, (1, 2, 10 + i), 1024, "vip" if i else "x")
             for i in range(2)]
    base = run(trace, pricing="anthropic", ttl_s=300.0).summary
    vip = run(trace, pricing="anthropic", ttl_s=300.0,
              classes=[{"name": "long", "ttl_s": 3600.0, "session_regex": "vip"}]).summary
    assert base["cost_cache_write_tokens"] == 2148 + 100
    assert vip["cost_total_usd"] - base["cost_total_usd"] == pytest.approx(225e-6)


def test_bad_class_regex_is_an_input_error():
    with pytest.raises(InputError, match="regular expression"):
        load_config(overrides={"cache.classes": [{"name": "x", "session_regex": "("}]})
