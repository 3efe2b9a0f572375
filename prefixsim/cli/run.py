"""`prefixsim run`: replay a trace through the cache and write the results folder."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from prefixsim.cache import POLICIES
from prefixsim.cli.app import app, default_output_dir, fail_cleanly, print_summary, write_run
from prefixsim.cli.files import check_output_dir
from prefixsim.cli.help_sections import SectionedCommand
from prefixsim.cli.progress import Progress
from prefixsim.cli.serving_options import (
    HARDWARE_OPTIONS,
    SERVING_OPTIONS,
    serving_options,
    serving_overrides,
)
from prefixsim.config import load_config
from prefixsim.errors import InputError
from prefixsim.pipeline import RunResult, load_trace_data, resolve_trace_defaults, simulate
from prefixsim.pipeline.streamed import open_trace_stream, simulate_streamed
from prefixsim.pipeline.streamed_timed import simulate_timed_streamed
from prefixsim.trace import READERS

RUN_SECTIONS = (
    ("Run", ("config_path", "cache_only", "no_stream")),
    ("Trace", ("trace_path", "trace_format", "block_size", "max_requests", "skip_bad_lines",
               "prefix_model", "trace_seed", "session_rate_per_s")),
    ("Cache (both modes; --bounds cache-only)", (
        "policy", "cache_tokens", "ttl_s", "ttl_mode", "cache_mode", "min_cacheable_tokens",
        "host_cache_tokens", "host_bandwidth_gb_s", "disk_cache_tokens",
        "disk_bandwidth_gb_s", "tier_min_load_tokens", "pool_tokens", "pool_policy",
        "pool_ttl_s", "pool_bandwidth_gb_s", "pool_latency_s", "pool_write_through",
        "bounds", "pricing")),
    ("Hardware and model (timed; cache-only runs price prefill GPU-seconds with them)",
     HARDWARE_OPTIONS),
    ("Scheduler and router (timed only)", SERVING_OPTIONS),
    ("Output (both modes)", ("output", "serving_sample_interval", "quiet", "help")),
)


@app.command(cls=SectionedCommand, sections=RUN_SECTIONS)
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="YAML run config; flags given here override its keys.")
@click.option("--trace", "trace_path", help="Trace file to replay (trace.path).")
@click.option("--trace-format", type=click.Choice(READERS.names()),
              help="Trace format (trace.format); auto-detected by default.")
@click.option("--block-size", type=int,
              help="Tokens per trace hash id (trace.block_size); 512 for Mooncake.")
@click.option("--max-requests", type=int, help="Replay only the first N requests.")
@click.option("--skip-bad-lines", is_flag=True, default=None,
              help="Skip malformed trace records and report how many (trace.skip_bad_lines).")
@click.option("--prefix-model",
              help="Lengths-only traces: none (default) or synthetic shared:TOKENS "
                   "(trace.prefix_model).")
@click.option("--cache-only", is_flag=True, default=None,
              help="Replay the cache alone (docs/cache-semantics.md Part A), no timing model.")
@click.option("--policy", help=f"Eviction policy (cache.policy): {', '.join(POLICIES.names())}.")
@click.option("--cache-tokens", type=int,
              help="Cache capacity in tokens (cache.capacity_tokens); unbounded by default.")
@click.option("--ttl", "ttl_s", type=float,
              help="Seconds an unused page stays cached (cache.ttl_s); no TTL by default.")
@click.option("--ttl-mode", type=click.Choice(["sliding", "fixed"]),
              help="sliding: a hit refreshes the TTL (default); fixed: from creation.")
@click.option("--cache-mode", type=click.Choice(["radix", "block"]),
              help="radix: evict leaves only (default); block: any unlocked page (cache.mode).")
@click.option("--min-cacheable-tokens", type=int,
              help="Prompts shorter than this bypass the cache (cache.min_cacheable_tokens).")
@click.option("--host-cache-tokens", type=int,
              help="Host DRAM tier below HBM, in tokens (cache.host_capacity_tokens).")
@click.option("--host-bandwidth", "host_bandwidth_gb_s", type=float,
              help="HBM<->host link in GB/s per direction (cache.host_bandwidth_gb_s; 50).")
@click.option("--disk-cache-tokens", type=int,
              help="Disk tier below host DRAM, in tokens (cache.disk_capacity_tokens).")
@click.option("--disk-bandwidth", "disk_bandwidth_gb_s", type=float,
              help="Disk load bandwidth in GB/s (cache.disk_bandwidth_gb_s; 5).")
@click.option("--tier-min-load-tokens", type=int,
              help="Lower-tier runs shorter than this are recomputed, not loaded.")
@click.option("--pool-tokens",
              help="A KV pool shared by every replica, below HBM: its capacity in tokens or "
                   "`unbounded` (cache.pool.capacity_tokens; docs/cache-semantics.md R18).")
@click.option("--pool-policy", help="The shared pool's eviction policy (cache.pool.policy; lru).")
@click.option("--pool-ttl", "pool_ttl_s", type=float,
              help="Seconds an unused pool page stays (cache.pool.ttl_s); none by default.")
@click.option("--pool-bandwidth", "pool_bandwidth_gb_s", type=float,
              help="Each replica's link to the pool, GB/s per GPU, both directions "
                   "(cache.pool.read_gb_s and write_gb_s; 25).")
@click.option("--pool-latency", "pool_latency_s", type=float,
              help="Seconds of latency per pool transfer (cache.pool.latency_s; 0.0001).")
@click.option("--pool-write-through", is_flag=True, default=None,
              help="Write every prefilled page to the pool, not only HBM's evictions.")
@click.option("--bounds", is_flag=True, default=None,
              help="Cache-only: also report belady's hit rate at the same capacity "
                   "(cache.bounds).")
@click.option("--pricing",
              help="Price the run (cache.pricing): anthropic, anthropic-haiku, openai, FILE.yaml.")
@click.option("--trace-seed", type=click.IntRange(min=0),
              help="Seed of the workload's modelled randomness: conversation starts of "
                   "kv-cache-tester folders, request-class shares (trace.seed; 0).")
@click.option("--session-rate", "session_rate_per_s", type=float,
              help="kv-cache-tester: conversations start as a Poisson process of this rate "
                   "per second (trace.session_rate_per_s; 1/60).")
@click.option("-o", "--output", "output", type=click.Path(file_okay=False),
              help="Results folder (written into directly); default results/<time>-<label>/.")
@click.option("--quiet", is_flag=True, help="No progress bar or summary block.")
@click.option("--no-stream", is_flag=True,
              help="Read the whole trace before replaying. By default a Mooncake JSONL "
                   "or Parquet trace streams in chunks, in both modes (same results, "
                   "bounded memory; docs/architecture.md).")
@serving_options
@fail_cleanly
def run(config_path: str | None, trace_path: str | None, trace_format: str | None,
        block_size: int | None, max_requests: int | None, cache_only: bool | None,
        policy: str | None, cache_tokens: int | None, ttl_s: float | None,
        ttl_mode: str | None, cache_mode: str | None, min_cacheable_tokens: int | None,
        host_cache_tokens: int | None,
        host_bandwidth_gb_s: float | None, disk_cache_tokens: int | None,
        disk_bandwidth_gb_s: float | None, tier_min_load_tokens: int | None,
        pool_tokens: str | None, pool_policy: str | None, pool_ttl_s: float | None,
        pool_bandwidth_gb_s: float | None, pool_latency_s: float | None,
        pool_write_through: bool | None, bounds: bool | None, pricing: str | None,
        output: str | None, quiet: bool, no_stream: bool, skip_bad_lines: bool | None,
        prefix_model: str | None, trace_seed: int | None, session_rate_per_s: float | None,
        **serving: Any) -> None:
    """Replay a trace and write summary.json, requests.parquet and config.yaml.

    Timed by default (replicas of a model on GPUs, continuous batching, a router; also
    writes timeseries.parquet); --cache-only replays the cache alone.

    \b
    Example (timed, 4 x h100-sxm serving llama-3.1-8b, prefix-aware routing):
      prefixsim run --trace traces/demo_chat.jsonl --model llama-3.1-8b --gpu h100-sxm \\
          --replicas 4 --router prefix_aware -o results/timed
    \b
    Example (cache-only, LRU cache of 3M tokens, 5-minute sliding TTL):
      prefixsim run --trace traces/demo_chat.jsonl --cache-only \\
          --policy lru --cache-tokens 3000000 --ttl 300 -o results/demo
    """
    overrides = {
        "trace.path": trace_path, "trace.format": trace_format,
        "trace.block_size": block_size, "trace.max_requests": max_requests,
        "trace.skip_bad_lines": skip_bad_lines, "trace.prefix_model": prefix_model,
        "trace.seed": trace_seed, "trace.session_rate_per_s": session_rate_per_s,
        "cache_only": cache_only, "cache.policy": policy, "cache.capacity_tokens": cache_tokens,
        "cache.ttl_s": ttl_s, "cache.ttl_mode": ttl_mode,
        "cache.mode": cache_mode, "cache.min_cacheable_tokens": min_cacheable_tokens,
        "cache.host_capacity_tokens": host_cache_tokens,
        "cache.host_bandwidth_gb_s": host_bandwidth_gb_s,
        "cache.disk_capacity_tokens": disk_cache_tokens,
        "cache.disk_bandwidth_gb_s": disk_bandwidth_gb_s,
        "cache.tier_min_load_tokens": tier_min_load_tokens,
        "cache.pool.capacity_tokens": _pool_tokens(pool_tokens),
        "cache.pool.policy": pool_policy, "cache.pool.ttl_s": pool_ttl_s,
        "cache.pool.read_gb_s": pool_bandwidth_gb_s, "cache.pool.write_gb_s": pool_bandwidth_gb_s,
        "cache.pool.latency_s": pool_latency_s, "cache.pool.write_through": pool_write_through,
        "cache.bounds": bounds, "cache.pricing": pricing,
        **serving_overrides(serving),
    }
    config = load_config(config_path, overrides)
    out_dir = Path(output) if output else default_output_dir(config)
    check_output_dir(out_dir)
    config = resolve_trace_defaults(config)
    command = shlex.join(["prefixsim", *sys.argv[1:]])

    def produce(requests_path: Path) -> RunResult:
        stream = None if no_stream else open_trace_stream(config)
        if stream is not None:  # read chunk by chunk (cache-only: replayed and written so)
            with Progress("replay", "req", total=stream.total, quiet=quiet) as bar:
                if config.cache_only:
                    streamed = simulate_streamed(config, requests_path, bar.update,
                                                 command=command, stream=stream)
                else:
                    streamed = simulate_timed_streamed(config, bar.update, command=command,
                                                       stream=stream)
            if streamed is not None:
                return streamed
        with Progress("read", "req", quiet=quiet) as bar:
            trace_data = load_trace_data(config.trace, on_progress=bar.update)
        if trace_data.skipped_lines:
            click.echo(f"prefixsim: skipped {trace_data.skipped_lines:,} bad lines", err=True)
        with Progress("replay", "req", total=len(trace_data.requests), quiet=quiet) as bar:
            return simulate(config, on_progress=bar.update, trace=trace_data, command=command)

    out_dir, result = write_run(out_dir, config, produce, fresh=output is None)
    if not quiet:
        print_summary(result.summary, out_dir)




def _pool_tokens(value: str | None) -> int | str | None:
    """`--pool-tokens`: a whole number or `unbounded` (the config checks the number)."""
    if value is None or value == "unbounded":
        return value
    try:
        return int(value)
    except ValueError:
        raise InputError(f"expected a number of tokens or 'unbounded', got {value!r}",
                         field="--pool-tokens") from None
