"""A timed run's unbounded bound leaves out the requests a replica rejects on arrival
(longer than the model's context or its KV pool, engine/replica.py `submit`): they meet no
cache in the run, so a bound that counted them could read below the run's own hit rate (a
kv-cache-tester trace with one 142k-token prompt over a 131k context: bound 0.9613, run
0.9630). Known answers worked by hand, on every road the bound takes: in memory, streamed
(the seen-pages pass, and a replay with a TTL) and a closed loop's requests as sent."""

from __future__ import annotations

import json

import pytest

from prefixsim.analysis.bounds import accepted
from prefixsim.config import load_config
from prefixsim.pipeline import simulate
from prefixsim.trace import Request
from prefixsim.trace.columns import as_columns

PAGE = 512
# 4 pages, then 6 pages (3,072 + 10 > a 3,000-token context: rejected), then 5 pages
PROMPTS = [(0.0, 4, 10), (1.0, 6, 10), (2.0, 5, 10)]


def _requests() -> list[Request]:
    return [Request(i, at, pages * PAGE, out, tuple(range(1, pages + 1)), PAGE)
            for i, (at, pages, out) in enumerate(PROMPTS)]


def _trace(tmp_path):
    path = tmp_path / "three.jsonl"
    path.write_text("".join(json.dumps({
        "timestamp": int(at * 1000), "input_length": pages * PAGE, "output_length": out,
        "hash_ids": list(range(1, pages + 1))}) + "\n" for at, pages, out in PROMPTS))
    return path


def _config(path, **more):
    return load_config(None, {"trace.path": str(path), "scheduler.max_model_len": 3000,
                              **more})


# Served: request 0 (nothing cached) and request 2 (its first 4 pages cached by request 0).
# Counting the rejected one too would give (0 + 2,048 + 2,559) / 7,680 (request 1 hits
# request 0's 4 pages; request 2 then hits all 5 of its pages, capped at L - 1).
SERVED = 2048 / (2048 + 2560)
WITH_REJECTED = (2048 + 2559) / (2048 + 3072 + 2560)


@pytest.mark.parametrize("more", [{}, {"cache.ttl_s": 100.0}])
@pytest.mark.parametrize("stream", [False, True])
def test_the_bound_counts_the_requests_served(tmp_path, stream, more):
    result = simulate(_config(_trace(tmp_path), **more), stream=stream)
    assert result.requests["status"].tolist() == ["completed", "rejected", "completed"]
    assert result.summary["cache_token_hit_rate"] == SERVED
    assert result.summary["cache_unbounded_token_hit_rate"] == SERVED != WITH_REJECTED


def test_a_closed_loop_bound_counts_the_requests_served(tmp_path):
    """With a TTL a closed loop's bound replays its requests as sent: the rejected one is
    sent (it has a row) but still meets no cache."""
    config = _config(_trace(tmp_path), **{"load.type": "concurrency", "load.users": 1,
                                          "cache.ttl_s": 100.0})
    result = simulate(config)
    assert result.requests["status"].tolist() == ["completed", "rejected", "completed"]
    assert result.summary["cache_unbounded_token_hit_rate"] == SERVED


def test_accepted_keeps_what_fits_by_list_and_by_column():
    requests = _requests()
    columns = as_columns(requests)
    assert accepted(requests, None) is requests and accepted(columns, None) is columns
    assert accepted(requests, 4000) is requests and accepted(columns, 4000) is columns
    assert [r.request_id for r in accepted(requests, 3000)] == [0, 2]
    kept = accepted(columns, 3000)
    assert kept.request_ids.tolist() == [0, 2]
    assert kept.page_ids.tolist() == [1, 2, 3, 4, 1, 2, 3, 4, 5]
    # prompt plus output, at least one output token: a 2,048-token prompt with no output
    # fits a limit of 2,049 and not one of 2,048
    lone = [Request(0, 0.0, 2048, 0, (1, 2, 3, 4), PAGE)]
    assert len(accepted(lone, 2049)) == 1 and len(accepted(lone, 2048)) == 0
    assert len(accepted(as_columns(lone), 2049)) == 1
    assert len(accepted(as_columns(lone), 2048)) == 0


@pytest.mark.parametrize("closed", [False, True])
def test_the_bound_keeps_the_request_rules(tmp_path, closed):
    """A minimum cacheable prompt of 3,000 tokens: neither served prompt (2,048 and 2,560
    tokens) is cached, in the run or in its bound, open or closed loop; without the rule
    the bound would be 2,048 / 4,608."""
    more = {"cache.ttl_s": 100.0, "cache.min_cacheable_tokens": 3000}
    if closed:
        more |= {"load.type": "concurrency", "load.users": 1}
    result = simulate(_config(_trace(tmp_path), **more))
    assert result.requests["status"].tolist() == ["completed", "rejected", "completed"]
    assert result.summary["cache_token_hit_rate"] == 0.0
    assert result.summary["cache_unbounded_token_hit_rate"] == 0.0
