"""`prefixsim curve`: token hit rate against cache capacity (a miss-ratio curve), for one or
several policies; `--plot` draws the miss-ratio-curve figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import numpy as np

from prefixsim.analysis.bounds import unbounded_hit_rate
from prefixsim.analysis.curve import lru_curve
from prefixsim.analysis.policy_curves import curve_work, parse_policies, policy_curves
from prefixsim.cache import POLICIES, replay_cache
from prefixsim.cli.app import app, fail_cleanly, one_trace
from prefixsim.cli.files import check_output_file, write_bytes, write_text
from prefixsim.cli.progress import Progress
from prefixsim.config.units import quantity
from prefixsim.engine.gc_pause import paused_gc
from prefixsim.errors import InputError
from prefixsim.report import png_bytes
from prefixsim.report.curves import miss_ratio_figure
from prefixsim.trace import READERS, load_trace
from prefixsim.trace.chains import requests_chained
from prefixsim.trace.pages import distinct_prefix_tokens

MAX_CAPACITIES = 1000  # a curve's points: each is a replay for policies other than LRU


def parse_capacities(text: str) -> list[int]:
    """`1e6,2e6,...` or `START:STOP:NUM` (NUM log-spaced capacities, ends included); a
    capacity may carry a unit suffix (`5k`, `2M`: config/units.py)."""
    try:
        if ":" in text:
            start, stop, num = text.split(":")
            count = int(num)
            if count > MAX_CAPACITIES:
                raise InputError(f"at most {MAX_CAPACITIES:,} capacities in one curve, got "
                                 f"{count:,} ({text!r})", field="--capacities")
            with np.errstate(invalid="ignore", over="ignore"):
                values = np.geomspace(_tokens(start), _tokens(stop), count)
        else:
            values = [_tokens(part) for part in text.split(",") if part.strip()]
        if not all(np.isfinite(values)):
            raise ValueError("not finite")
    except ValueError:
        raise InputError(f"expected finite N,N,... or START:STOP:NUM (5k, 2M: tokens), got "
                         f"{text!r}",
                         field="--capacities") from None
    capacities = sorted({int(round(v)) for v in values})
    if len(capacities) > MAX_CAPACITIES:
        raise InputError(f"at most {MAX_CAPACITIES:,} capacities in one curve, got "
                         f"{len(capacities):,}", field="--capacities")
    if not capacities or capacities[0] < 0:
        raise InputError("capacities must be >= 0 and at least one", field="--capacities")
    return capacities


DEFAULT_POINTS = 20  # capacities when --capacities is not given
DEFAULT_LOW_SHARE = 1e-4  # the least of them, as a share of the trace's distinct tokens


def default_capacities(footprint_tokens: int, page_tokens: int) -> list[int]:
    """DEFAULT_POINTS capacities log-spaced from DEFAULT_LOW_SHARE of the trace's distinct
    prefix tokens (at least a page) to all of them, where no policy evicts and every curve
    reaches the unbounded hit rate."""
    if footprint_tokens <= 0:
        return [0]
    low = min(max(page_tokens, footprint_tokens * DEFAULT_LOW_SHARE), footprint_tokens)
    return sorted({int(round(v)) for v in np.geomspace(low, footprint_tokens, DEFAULT_POINTS)})


def _tokens(text: str) -> float:
    return float(quantity(text, "tokens", bare=True))


@app.command()
@click.option("--trace", "trace_path", help="Trace file (or give it as TRACE).")
@click.option("--trace-format", type=click.Choice(READERS.names()),
              help="Trace format; auto-detected by default.")
@click.option("--block-size", type=int, help="Tokens per hash id (512 for Mooncake).")
@click.option("--max-requests", type=int, help="Use only the first N requests.")
@click.option("--policy", "policies", default="lru", show_default=True,
              help=f"Eviction policy, or several comma-separated ({', '.join(POLICIES.names())}"
                   "); belady adds the offline bound.")
@click.option("--capacities",
              help="Capacities in tokens: N,N,... or START:STOP:NUM (log-spaced); 5k, 2M. "
                   f"Default: {DEFAULT_POINTS} log-spaced from 0.01% of the trace's distinct "
                   "prefix tokens (at least one page) to all of them.")
@click.option("--sample-rate", type=float,
              help="LRU only: SHARDS estimate from this fraction of page ids (0 < r <= 1); "
                   "reliable when rate x distinct ids >= ~2,000 (see below).")
@click.option("--replay", "force_replay", is_flag=True,
              help="One replay per capacity even for LRU (the slow reference).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Also write a CSV here.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="Also draw the miss-ratio-curve figure (PNG) here.")
@click.argument("trace_file", metavar="[TRACE]", required=False,
                type=click.Path())  # a file or a folder (RAGPulse, kv-cache-tester)
@fail_cleanly
def curve(trace_file: str | None, trace_path: str | None, trace_format: str | None,
          block_size: int | None, max_requests: int | None, policies: str, capacities: str | None,
          sample_rate: float | None,
          force_replay: bool, **outputs: Any) -> None:
    """Hit rate against capacity for one or several policies. LRU uses one exact
    stack-distance pass (docs/cache-semantics.md Part A, no TTL); other policies replay
    once per capacity.

    --sample-rate R estimates the LRU curve from the page ids whose hash falls under R
    (SHARDS; misses estimated, hits = query - misses, so hot shared prefixes do not skew
    it). Measured against the exact curve (bench/capacity_curve.py): mean error of the hit
    rate <= 0.005 at R=0.1 and 0.001-0.025 at R=0.01 on Mooncake and the chat/agent/rag
    presets.
    Reliable when R x (distinct page ids) is a few thousand and the capacities are well
    above page size / R; below that, errors of 0.05-0.1 at the smallest capacities.

    \b
    Example (50 log-spaced capacities from 100k to 50M tokens, three policies and the
    offline bound, with the figure):
      prefixsim curve trace.jsonl --policy lru,s3fifo,gdsf,belady \\
          --capacities 1e5:5e7:50 --plot curve.png
    """
    as_json, output, plot_path = outputs["as_json"], outputs["output"], outputs["plot_path"]
    trace_path = one_trace(trace_file, trace_path)
    if trace_path is None:
        raise InputError("no trace given; prefixsim curve TRACE (or --trace TRACE)",
                         field="TRACE")
    names = parse_policies(policies)
    if sample_rate is not None and force_replay:
        raise InputError("replays every capacity exactly, which --sample-rate (a SHARDS "
                         "estimate) does not: give one of them", field="--replay")
    if sample_rate is not None and (list(names) != ["lru"] or not 0 < sample_rate <= 1):
        raise InputError("needs --policy lru (alone) and 0 < rate <= 1",
                         field="--sample-rate")  # before the trace is read, as policy_curves
    caps = parse_capacities(capacities) if capacities is not None else None
    if plot_path is not None and not plot_path.lower().endswith(".png"):
        raise InputError(f"expected a .png file, got {plot_path!r}", field="--plot")
    for target in (output, plot_path):
        if target:
            check_output_file(Path(target))
    requests = load_trace(trace_path, trace_format, block_size, max_requests)
    if caps is None:
        footprint = distinct_prefix_tokens(requests)
        caps = default_capacities(footprint, requests[0].page_size_tokens if requests else 1)
        click.echo(f"capacities: {len(caps)} log-spaced from {caps[0]:,} to {caps[-1]:,} "
                   f"tokens (the trace's {footprint:,} distinct prefix tokens, where no "
                   "policy evicts); --capacities sets others", err=True)
    work = curve_work(requests, caps, names, sample_rate, force_replay) + len(requests)
    with paused_gc(), Progress("curve", "req", total=work) as bar:  # gc: engine/gc_pause.py
        def told(policy: str, done: int) -> None:  # per policy, and within its replays
            if bar.postfix != f"policy {policy}":
                bar.set_postfix({"policy": policy})
            bar.update(done)

        curves = policy_curves(requests, caps, names, sample_rate, force_replay, told)
        bar.set_postfix({"policy": "unbounded"})
        unbounded = unbounded_hit_rate(requests, replay_cache(
            None, POLICIES.build("lru"), chained=requests_chained(requests)))
        bar.update(len(requests))
    rows = {c.policy: [{"capacity_tokens": p.capacity_tokens, "hit_tokens": p.hit_tokens,
                        "token_hit_rate": p.token_hit_rate} for p in c.points] for c in curves}
    if output:
        lines = ["capacity_tokens,hit_tokens,token_hit_rate,policy"]
        lines += [f"{r['capacity_tokens']},{r['hit_tokens']},{r['token_hit_rate']:.6f},{name}"
                  for name, points in rows.items() for r in points]
        write_text(Path(output), "\n".join(lines) + "\n")
    if plot_path:
        figure = miss_ratio_figure(curves, unbounded, Path(trace_path).name)
        write_bytes(Path(plot_path), png_bytes(figure))
    if as_json:
        report: dict[str, object] = {
            "curves": [{"policy": c.policy, "method": c.method, "points": rows[c.policy]}
                       for c in curves],
            "unbounded_token_hit_rate": unbounded}
        if len(curves) == 1:  # the one-policy shape, kept
            report.update(policy=curves[0].policy, method=curves[0].method,
                          points=rows[curves[0].policy])
        click.echo(json.dumps(report))
        return
    for c in curves:
        click.echo(f"policy {c.policy}, method {c.method}")
    click.echo(f"unbounded token hit rate {unbounded:.4f}")
    header = "".join(f"  {c.policy:>14}" for c in curves)
    click.echo(f"{'capacity_tokens':>16}{header}")
    for i, capacity in enumerate(caps):
        cells = "".join(f"  {c.points[i].token_hit_rate:>14.4f}" for c in curves)
        click.echo(f"{capacity:>16,}{cells}")
    if plot_path:
        click.echo(f"plot: {plot_path}")


__all__ = ["curve", "lru_curve"]
