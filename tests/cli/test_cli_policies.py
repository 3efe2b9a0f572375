"""Acceptance through the CLI: every policy runs from `prefixsim run --cache-only`, with
bounds, a host tier and pricing; belady bounds the online policies on the real trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixsim.cache import POLICIES, SegmentCache, build_policy
from prefixsim.cli import app
from prefixsim.engine import replay_cache_only
from prefixsim.trace import load_trace

# each test runs on the package's cache and on the per-page reference (conftest: each_cache)
pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache


MOONCAKE = Path(__file__).parents[3] / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory) -> Path:
    """40 chat turns over 4 sessions sharing a 2-block system prompt (512-token blocks)."""
    path = tmp_path_factory.mktemp("trace") / "chat.jsonl"
    rows, next_id = [], 100
    paths = {s: [0, 1] for s in range(4)}
    for i in range(40):
        s = i % 4
        paths[s] = paths[s] + [next_id]
        next_id += 1
        rows.append({"timestamp": i * 1000, "input_length": 512 * len(paths[s]) - 100,
                     "output_length": 10, "hash_ids": list(paths[s])})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("policy", POLICIES.names())
def test_run_cache_only_with_each_policy(policy, trace_file, tmp_path):
    out = tmp_path / "r"
    result = CliRunner().invoke(app, [
        "run", "--trace", str(trace_file), "--cache-only", "--policy", policy,
        "--cache-tokens", "4096", "--bounds", "--pricing", "anthropic", "-o", str(out),
        "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cache_policy"] == policy
    rate = summary["cache_token_hit_rate"]
    assert 0 <= rate <= summary["cache_unbounded_token_hit_rate"]
    assert rate <= summary["cache_belady_token_hit_rate"] + 1e-12
    assert summary["cost_total_usd"] > 0


def test_host_tier_flag_raises_the_hit_rate(trace_file, tmp_path):
    rates = []
    for extra in ([], ["--host-cache-tokens", "100000"]):
        out = tmp_path / f"r{len(extra)}"
        result = CliRunner().invoke(app, [
            "run", "--trace", str(trace_file), "--cache-only", "--cache-tokens", "2048",
            "-o", str(out), "--quiet", *extra])
        assert result.exit_code == 0, result.output
        rates.append(json.loads((out / "summary.json").read_text()))
    assert rates[0]["cache_hit_tokens_host"] == 0
    assert rates[1]["cache_hit_tokens_host"] > 0
    assert rates[1]["cache_token_hit_rate"] > rates[0]["cache_token_hit_rate"]


def test_bad_pricing_is_one_line_exit_2(trace_file, tmp_path):
    result = CliRunner().invoke(app, ["run", "--trace", str(trace_file), "--cache-only",
                                      "--pricing", "nope", "-o", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "unknown pricing" in result.output and not (tmp_path / "x").exists()


@pytest.mark.skipif(not MOONCAKE.is_file(), reason=f"real trace absent: {MOONCAKE}")
def test_belady_bounds_online_policies_on_mooncake():
    requests = load_trace(MOONCAKE, max_requests=1500)

    def hits(policy: str) -> int:
        cache = Cache(1_000_000, build_policy(policy, requests))
        return sum(r.cached_tokens for r in replay_cache_only(requests, cache).records)

    best = hits("belady")
    for policy in POLICIES.names():
        assert hits(policy) <= best, policy


@pytest.mark.parametrize("policy", POLICIES.names())
def test_every_policy_runs_in_timed_mode(policy, trace_file, tmp_path):
    """A small KV pool (8,000 tokens) so policies must evict while requests run; R13 is
    checked after every step."""
    out = tmp_path / "t"
    result = CliRunner().invoke(app, [
        "run", "--trace", str(trace_file), "--policy", policy, "--cache-tokens", "8000",
        "--check-invariants", "-o", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "timed" and summary["completed"] == 40
    assert summary["cache_evictions"] > 0
