"""The summary's one schema (prefixsim/metrics/schema.py) against what runs write, what
docs/results.md documents and what the README names.

- Every key of real summaries (cache-only with tiers, pricing and bounds; timed with
  pricing, goodput and a fitted profile; a coarsened timeseries) is in the schema.
- Every schema key is documented in docs/results.md (in backticks).
- Every backticked name in the README that looks like a summary key (a summary prefix) is a
  schema key, a results column, a config key, a price-list field or a profile class.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from prefixsim.config import RunConfig, load_config
from prefixsim.engine.records import CacheOnlyRecord
from prefixsim.engine.request_state import ServedRecord
from prefixsim.metrics.pricing import Pricing
from prefixsim.metrics.schema import SUMMARY_KEYS, TEXT_KEYS, numeric_key, schema_key
from prefixsim.metrics.timeseries import CACHE_ONLY_COLUMNS, TIMESERIES_COLUMNS
from prefixsim.pipeline import simulate
from prefixsim.profiles.calibrate import TARGETS

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "traces" / "demo_chat.jsonl")
SUMMARY_PREFIXES = ("cache_", "cost_", "prefill_", "timeseries_", "trace_", "replica",
                    "mean_", "median_", "p99_", "total_", "request_", "num_")


def _summary(**overrides) -> dict:
    config = load_config(None, {"trace.path": DEMO, "trace.max_requests": 60, **overrides})
    return simulate(config).summary


@pytest.fixture(scope="module")
def summaries() -> list[dict]:
    return [
        _summary(**{"cache_only": True, "cache.capacity_tokens": 20000, "cache.ttl_s": 60,
                    "cache.host_capacity_tokens": 20000, "cache.pricing": "anthropic",
                    "cache.bounds": True, "cache.mode": "block"}),
        _summary(**{"cache.pricing": "openai", "engine.replicas": 2,
                    "router.name": "prefix_aware", "engine.goodput_ttft_ms": 500.0,
                    "engine.sample_interval_s": 1e-4}),
        _summary(**{"cost_model.name": "fitted", "cost_model.profile": "cpu-llama-3.1-8b",
                    "hardware.gpu": "h100-sxm"}),
    ]


def test_every_written_key_is_in_the_schema(summaries):
    unknown = sorted({k for s in summaries for k in s if schema_key(k) is None})
    assert not unknown


def test_the_schema_says_which_keys_hold_text_and_which_numbers(summaries):
    """A report reads a summary's numbers by the schema (a hand-edited `"abc"` in a number's
    place is damage): every text value a run writes is under a text key, every other scalar
    under a number's."""
    assert TEXT_KEYS <= set(SUMMARY_KEYS)
    for summary in summaries:
        for key, value in summary.items():
            if isinstance(value, str):
                assert schema_key(key) in TEXT_KEYS, (key, value)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                assert numeric_key(key), (key, value)
    assert not numeric_key("kept_up") and not numeric_key("stages")
    assert not numeric_key("trace_prefix_model") and numeric_key("trace_time_shift_s")
    assert not numeric_key("no_such_key") and numeric_key("replica3_steps")


def test_the_runs_cover_the_families(summaries):
    keys = {schema_key(k) for s in summaries for k in s}
    assert {"replica{i}_steps", "timeseries_warning", "cost_model_warning",
            "cache_belady_token_hit_rate", "cache_hit_tokens_host"} <= keys


def test_schema_key_can_say_no():
    assert schema_key("replica3_steps") == "replica{i}_steps"
    assert schema_key("trace_prefix_model") == "trace_*"
    assert schema_key("cache_hit_rate") is None and schema_key("replicaX_steps") is None


def test_docs_document_every_schema_key():
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    missing = [key for key in SUMMARY_KEYS if f"`{key}`" not in text]
    assert not missing


def _config_keys() -> set[str]:
    names: set[str] = set()

    def walk(model) -> None:
        for name, info in model.model_fields.items():
            names.add(name)
            annotation = info.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                walk(annotation)

    walk(RunConfig)
    return names


def test_readme_names_only_real_keys():
    known = (set(SUMMARY_KEYS) | set(TIMESERIES_COLUMNS) | set(CACHE_ONLY_COLUMNS)
             | set(ServedRecord._fields)
             | set(CacheOnlyRecord._fields)
             | {f.name for f in dataclasses.fields(Pricing)} | _config_keys()
             | set(TARGETS))  # profile classes (prefill_attention, ...)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z][a-z0-9_{}]*)`", text))
    suspects = sorted(n for n in named if n.startswith(SUMMARY_PREFIXES)
                      and n not in known and schema_key(n) is None)
    assert not suspects
