"""`run --help` in sections (trace, cache, hardware and model, scheduler and router,
output) with cache-only and timed options told apart, every option listed once under the
same name as before; `sweep` ends by printing the report command."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.cli.config_options import config_overrides
from prefixsim.metrics.schema import PRINTED_KEYS, SUMMARY_KEYS

RUN_FLAGS = {  # every option `prefixsim run` had before its help was sectioned, and since
    "--config", "--trace", "--trace-format", "--block-size", "--max-requests",
    "--skip-bad-lines", "--prefix-model", "--cache-only", "--no-stream", "--policy",
    "--cache-tokens", "--max-trace-pages",
    "--ttl", "--ttl-mode", "--cache-mode", "--min-cacheable-tokens", "--host-cache-tokens",
    "--host-bandwidth", "--disk-cache-tokens", "--disk-bandwidth", "--tier-min-load-tokens",
    "--tier-load",
    "--bounds", "--pricing", "--trace-seed", "--session-rate", "--output",  # no --seed: I8
    "--quiet", "--model", "--model-config", "--gpu", "--presets", "--tp",
    "--memory-utilization", "--kv-dtype", "--expert-parallel", "--serving-engine",
    "--weight-dtype", "--replicas", "--router", "--router-param", "--cost-model", "--profile",
    "--max-batched-tokens", "--max-num-seqs", "--max-model-len", "--time-scale",
    "--sample-interval",
    "--goodput", "--check-invariants", "--help",
    # the shared pool and disaggregated serving
    "--pool-tokens", "--pool-policy", "--pool-ttl", "--pool-bandwidth", "--pool-latency",
    "--pool-lookup", "--pool-write", "--pool-replicas", "--prefill-replicas",
    "--decode-replicas",
    "--kv-transfer-bandwidth", "--local-prefill-max-tokens", "--decode-router",
    # the load section (docs/load.md)
    "--load", "--rate", "--rate-scale", "--users", "--think-time", "--load-seed"}
HEADINGS = ["Run", "Trace", "Load (how requests arrive; docs/load.md)",
            "Cache (both modes; --bounds cache-only)",
            "Hardware and model (timed; cache-only runs price prefill GPU-seconds with them)",
            "Scheduler and router (timed only)", "Output (both modes)"]


def test_run_help_is_in_sections_and_lists_every_option_once():
    result = CliRunner().invoke(app, ["run", "--help"])
    assert result.exit_code == 0
    text = result.output
    found = re.findall(r"^(\S[^\n]*):$", text[text.index("\nRun:"):], flags=re.M)
    assert found == HEADINGS and "Other options" not in text
    params = app.get_command(None, "run").params
    assert {flag for p in params for flag in p.opts if flag.startswith("--")} | {"--help"} \
        == RUN_FLAGS
    listed = re.findall(r"^  (?:-\w, )?(--[a-z-]+)", text, flags=re.M)
    assert sorted(listed) == sorted(RUN_FLAGS)  # each once


def test_sections_put_timed_options_apart():
    """The router is under the timed-only heading, the TTL under the cache heading."""
    text = CliRunner().invoke(app, ["run", "--help"]).output
    timed = text.index("Scheduler and router (timed only)")
    cache = text.index("Cache (both modes")
    assert text.index("  --router TEXT") > timed > text.index("  --ttl SECONDS") > cache
    assert "Cache-only: also report belady" in text


def test_sweep_ends_with_the_report_command(tmp_path):
    spec = tmp_path / "s.yaml"
    trace = Path("traces/demo_chat.jsonl").resolve()
    spec.write_text(f"base: {{trace: {{path: {trace}, max_requests: 20}}, cache_only: true}}\n"
                    "grid: {cache.capacity_tokens: [5000, 20000]}\n")
    out = tmp_path / "my sweep"
    result = CliRunner().invoke(app, ["sweep", str(spec), "-o", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == f"report:  prefixsim report '{out}'"
    report = CliRunner().invoke(app, ["report", str(out), "--quiet"])
    assert report.exit_code == 0 and (out / "report.html").is_file()


def _overrides(args: list[str]) -> dict:
    """The dotted overrides `prefixsim run ARGS` hands to the config (None: not given)."""
    context = app.get_command(None, "run").make_context("run", args)
    return {k: v for k, v in config_overrides(context.params).items() if v is not None}


def test_flags_made_from_the_config_set_their_keys():
    """One flag may set two keys (--pool-bandwidth, --presets); --pool-tokens takes a word;
    --goodput and --router-param are parsed into their keys; a flag not given sets none."""
    assert _overrides([]) == {}
    assert _overrides(["--pool-bandwidth", "10", "--pool-tokens", "unbounded", "--ttl", "5",
                       "--cache-only", "--trace-seed", "3"]) == {
        "cache.pool.read_gb_s": 10.0, "cache.pool.write_gb_s": 10.0,
        "cache.pool.capacity_tokens": "unbounded", "cache.ttl_s": 5.0, "cache_only": True,
        "trace.seed": 3}
    assert _overrides(["--presets", "p.yaml", "--goodput", "ttft:500 tpot:50",
                       "--router-param", "staleness_s=5", "--pool-tokens", "7"]) == {
        "model.presets_file": "p.yaml", "hardware.presets_file": "p.yaml",
        "engine.goodput_ttft_ms": 500.0, "engine.goodput_tpot_ms": 50.0,
        "router.params": {"staleness_s": 5}, "cache.pool.capacity_tokens": 7}


def test_config_flag_help_ends_with_its_keys_and_default():
    """One text per field (config/flags.py option): the CLI appends the dotted keys and the
    default, leaving out a default of None, False or empty."""
    helps = {opt: param.help for param in app.get_command(None, "run").params for opt in param.opts}
    assert helps["--tp"] == "Tensor-parallel GPUs per replica (hardware.tp; 1)."
    assert helps["--session-rate"].endswith("(trace.session_rate_per_s; 1/60).")
    assert helps["--ttl-mode"].endswith("(cache.ttl_mode; sliding).")
    assert helps["--pool-bandwidth"].endswith(
        "(cache.pool.read_gb_s and cache.pool.write_gb_s; 25).")
    assert helps["--trace"] == "Trace file to replay (trace.path)."
    assert helps["--load-seed"].endswith("(load.seed; 0).")
    assert helps["--router-param"].endswith("(router.params).")


def test_printed_summary_keys_are_schema_keys():
    assert len(set(PRINTED_KEYS)) == len(PRINTED_KEYS) == 48
    assert set(PRINTED_KEYS) <= set(SUMMARY_KEYS)
