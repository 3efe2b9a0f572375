"""What a timed run hands its summary (pipeline/timed.py): its pricing and each request's
TTL, the model's context length, how its timeseries was sampled, in an open and a closed
loop; worked against the functions that price and sample, on the demo trace."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from pathlib import Path

import pytest

from prefixsim.analysis.bounds import unbounded_hit_rate
from prefixsim.config import load_config
from prefixsim.metrics.pricing import PRESETS, pricing_summary
from prefixsim.pipeline import simulate
from prefixsim.pipeline.build import build_rules, build_unbounded_cache
from prefixsim.pipeline.inputs import load_requests

DEMO = Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl"
COST_KEYS = ("cost_total_usd", "cost_no_cache_usd")


def run(unset=(), **overrides):
    config = load_config(overrides={"trace.path": str(DEMO), "trace.max_requests": 60,
                                "model.name": "llama-3.1-8b", "hardware.gpu": "h100-sxm",
                                "cache.pricing": "anthropic", "cache.ttl_s": 3600.0, **overrides},
                         unset=unset)
    return simulate(config)


@pytest.mark.parametrize("load", [{}, {"load.type": "concurrency", "load.users": 4}],
                         ids=["open-loop", "closed-loop"])
def test_a_timed_run_is_priced_with_its_requests_ttls(load):
    """Every request's write is priced at the 1-hour TTL's price (Anthropic: 2x the input
    price, not 1.25x), over the requests the run served (a closed loop: those it sent,
    again after the run)."""
    result = run(**load)
    summary, frame = result.summary, result.requests
    one_hour = pricing_summary(frame, PRESETS["anthropic"], [3600.0] * len(frame))
    five_minutes = pricing_summary(frame, PRESETS["anthropic"], None)
    for key in COST_KEYS:
        assert summary[key] == pytest.approx(one_hour[key])
    assert one_hour["cost_total_usd"] > five_minutes["cost_total_usd"]
    assert summary["max_model_len"] == 131_072  # llama-3.1-8b's context


def test_a_timed_run_samples_its_timeseries():
    result = run(**{"engine.sample_interval_s": 2.0})
    assert result.summary["timeseries_interval_s"] == 2.0
    assert result.summary["timeseries_rows"] == len(result.timeseries) > 0
    assert result.timeseries["time_s"].diff().dropna().min() >= 2.0 - 1e-9
    unsampled = run(unset=("engine.sample_interval_s",))  # null: no timeseries
    assert "timeseries_rows" not in unsampled.summary and unsampled.timeseries.empty


def test_a_timed_run_reports_its_progress():
    """The replay's bar counts every request it finished, once."""
    counts: dict[str, int] = {}

    @contextlib.contextmanager
    def progress(desc, total):
        class Bar:
            def update(self, n=1):
                counts[desc] = counts.get(desc, 0) + n
        yield Bar()

    config = load_config(overrides={"trace.path": str(DEMO), "trace.max_requests": 60,
                                    "model.name": "llama-3.1-8b", "hardware.gpu": "h100-sxm"})
    simulate(config, progress=progress)
    assert sum(counts.values()) >= 60 and max(counts.values()) == 60, counts


def classes(ttl_s: float) -> list[dict]:
    return [{"name": "long", "ttl_s": ttl_s, "session_regex": "^s1"}]


def class_ttls(frame, rest: float | None, ttl_s: float) -> list[float | None]:
    """Sessions s1, s10, s11, ... in the class, the rest at the cache's TTL."""
    return [ttl_s if re.match("^s1", str(sid)) else rest for sid in frame["session_id"]]


CLOSED = {"load.type": "concurrency", "load.users": 4}


@pytest.mark.parametrize(("load", "cache_ttl", "class_ttl"), [
    ({}, 300.0, 3600.0), (CLOSED, 300.0, 3600.0), (CLOSED, None, 3600.0), (CLOSED, None, 5.0),
    ({"load.type": "concurrency", "load.stages": [{"users": 2, "duration_s": 20.0}]}, 300.0,
     3600.0)],
    ids=["open-loop", "closed-loop", "closed-loop-no-cache-ttl",
         "closed-loop-short-class-only", "closed-loop-stage"])
def test_a_priced_run_prices_each_class_at_its_ttl(load, cache_ttl, class_ttl):
    """Each request's writes at its class's TTL (1 hour for sessions s1*, else the cache's
    5 min or none), over the requests the run served; a staged closed loop sends only part
    of the trace, so the TTLs are those of the requests it sent. The unbounded bound is read
    with the classes' TTLs at the times the requests were sent (with no cache TTL, only the
    classes' TTLs make the order matter)."""
    ttl = {} if cache_ttl is None else {"cache.ttl_s": cache_ttl}
    result = run(unset=("cache.ttl_s",) if cache_ttl is None else (),
                 **{**ttl, "cache.classes": classes(class_ttl), **load})
    summary, frame = result.summary, result.requests
    assert result.config.cache.ttl_s == cache_ttl
    if "load.stages" in load:
        assert len(frame) < 60  # the stage ended before the trace did
    ttls = class_ttls(frame, cache_ttl, class_ttl)
    expected = pricing_summary(frame, PRESETS["anthropic"], ttls)
    assert len(set(ttls)) == 2
    for key in COST_KEYS:
        assert summary[key] == pytest.approx(expected[key])
    config = result.config
    rules = build_rules(config.cache, config.trace.seed)
    requests = {r.request_id: r for r in load_requests(config.trace)}
    sent = sorted((dataclasses.replace(requests[rid], arrival_s=t)
                   for rid, t in zip(frame["request_id"], frame["arrival_s"], strict=True)),
                  key=lambda r: r.arrival_s)
    assert summary["cache_unbounded_token_hit_rate"] == pytest.approx(
        unbounded_hit_rate(sent, build_unbounded_cache(config.cache), rules))
