"""The timed mode end to end: CLI, results files, effective config, and the Mooncake
acceptance run (skipped where ../shared/traces is absent)."""

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.config import load_config
from prefixsim.costmodel import Roofline
from prefixsim.pipeline import simulate
from prefixsim.presets import get_gpu, get_model

MOONCAKE = Path(__file__).parents[3] / "shared" / "traces" / "mooncake" / \
    "conversation_trace.jsonl"

REQUEST_COLUMNS = ["status", "arrival_s", "first_token_s", "finish_s", "input_tokens",
                   "cached_tokens", "output_tokens", "queue_ms", "ttft_ms", "tpot_ms",
                   "e2el_ms", "replica", "preemptions"]
SUMMARY_KEYS = ["completed", "failed", "duration", "total_input_tokens", "total_output_tokens",
                "request_throughput", "output_throughput", "total_token_throughput",
                "request_goodput", "cache_token_hit_rate", "cache_hit_tokens"] + [
    f"{stat}_{name}_ms" for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99")
    for name in ("ttft", "tpot", "itl", "e2el")]


def invoke(*args):
    return CliRunner().invoke(app, ["run", *args, "--quiet"])


def test_timed_demo_run_writes_everything(tmp_path):
    out = tmp_path / "timed"
    result = invoke("--trace", "traces/demo_chat.jsonl", "--model", "llama-3.1-8b",
                    "--gpu", "h100-sxm", "--replicas", "2", "--router", "prefix_aware",
                    "--goodput", "ttft:50", "--goodput", "tpot:7.6", "-o", str(out))
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    for key in SUMMARY_KEYS:
        assert key in summary, key
    assert summary["mode"] == "timed" and summary["completed"] == 264
    assert 0 < summary["request_goodput"] < summary["request_throughput"]
    requests = pd.read_parquet(out / "requests.parquet")
    assert set(REQUEST_COLUMNS) <= set(requests.columns)
    assert (requests["status"] == "completed").all()
    # light load: prefix_aware may keep every request where its prefix is cached
    assert requests["replica"].isin([0, 1]).all()
    timeseries = pd.read_parquet(out / "timeseries.parquet")
    assert {"time_s", "replica", "running", "waiting", "cache_usage", "rolling_hit_rate",
            "evictions"} <= set(timeseries.columns)
    assert timeseries["cache_usage"].between(0, 1).all()
    # the effective config reproduces the run exactly
    again = tmp_path / "again"
    result = invoke("--config", str(out / "config.yaml"), "-o", str(again))
    assert result.exit_code == 0, result.output
    pd.testing.assert_frame_equal(requests, pd.read_parquet(again / "requests.parquet"))


@pytest.mark.parametrize("args,field", [
    (["--model", "gpt-9"], "model"),
    (["--gpu", "tpu"], "hardware"),
    (["--router", "random"], "router.name"),
    (["--goodput", "ttft"], "--goodput"),
    (["--router-param", "nonsense"], "--router-param"),
    (["--max-num-seqs", "10000"], "scheduler"),
    (["--model", "llama-3.1-405b"], "hardware.tp"),
])
def test_bad_timed_options_fail_in_one_line(tmp_path, args, field):
    out = tmp_path / "bad"
    result = invoke("--trace", "traces/demo_chat.jsonl", *args, "-o", str(out))
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and field in lines[0], result.output
    assert not out.exists()


def test_tensor_parallel_makes_70b_fit():
    config = load_config(None, {"trace.path": "traces/demo_chat.jsonl", "trace.max_requests": 20,
                                "model.name": "llama-3.1-70b", "hardware.tp": 4})
    summary = simulate(config).summary
    assert summary["completed"] == 20 and summary["kv_pool_tokens_per_replica"] > 400_000


@pytest.mark.skipif(not MOONCAKE.exists(), reason="../shared/traces is absent")
def test_mooncake_acceptance():
    """Acceptance: 4 x h100-sxm, llama-3.1-8b, prefix_aware: all 12,031 requests
    complete, the hit rate stays below the unbounded cache-only 0.3736, and no TTFT beats the
    compute floor of its uncached prefill."""
    config = load_config(None, {"trace.path": str(MOONCAKE), "model.name": "llama-3.1-8b",
                                "hardware.gpu": "h100-sxm", "engine.replicas": 4,
                                "router.name": "prefix_aware"})
    result = simulate(config)
    assert result.summary["completed"] == 12_031
    assert result.summary["cache_token_hit_rate"] <= 0.3736
    cost = Roofline(get_model("llama-3.1-8b"), get_gpu("h100-sxm"))
    peak = get_gpu("h100-sxm").peak_flops(2)
    ops = cost.operator_params
    df = result.requests
    for row in df.itertuples():
        gemm, attn = cost.prefill_flops(row.input_tokens - row.cached_tokens, row.cached_tokens)
        floor_ms = (gemm / (peak * ops.gemm_efficiency)
                    + attn / (peak * ops.prefill_attention_efficiency)) * 1e3
        assert row.ttft_ms >= floor_ms * (1 - 1e-12)


def test_a_disaggregated_runs_block_prints_its_fleet_and_a_plain_run_does_not(tmp_path):
    """Prefill and decode replicas, a KV pool: the result block gives their counts, how
    busy each side and the links were, and the pool's hits (they were in summary.json
    only); a run of one fleet prints none of them but the pool's hits (0, as the host's and
    the disk's are)."""
    def shown(*args):
        return CliRunner().invoke(app, ["run", "--trace", "traces/demo_chat.jsonl",
                                        "--max-requests", "40",
                                        *map(str, args)])

    split = shown("--prefill-replicas", 1, "--decode-replicas", 2, "--pool-tokens", "1M",
                  "-o", tmp_path / "split")
    assert split.exit_code == 0, split.output
    keys = ("cache_hit_tokens_pool", "cache_pool_link_busy_share", "prefill_replicas",
            "decode_replicas", "prefill_busy_fraction", "decode_busy_fraction",
            "kv_transfer_busy_share")
    printed = [line.split(":")[0] for line in split.stdout.splitlines() if ":" in line]
    assert [k for k in printed if k in keys] == list(keys)
    summary = json.loads((tmp_path / "split" / "summary.json").read_text())
    assert f"{'decode_replicas:':<44}{2:>16,}" in split.stdout and summary["decode_replicas"] == 2
    plain = shown("-o", tmp_path / "plain")
    assert plain.exit_code == 0
    assert [k for k in keys if f"\n{k}:" in plain.stdout] == ["cache_hit_tokens_pool"]
