"""The report's standard plots. Each takes `ReportData` and returns a figure, or raises
`PlotSkipped` saying which data it lacks (cache-only runs have no latencies, a single run
has no capacity axis, ...). Columns are found by name, so summary keys and request or
timeseries columns added later (TTFT, tiers, cost) are picked up without changes here.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from prefixsim.report.data import ReportData
from prefixsim.report.figures import (
    PlotSkipped,
    axis_label,
    new_figure,
    require,
    varying,
    xy_figure,
)

CAPACITY = "cache_capacity_tokens"
TTL = "cache_ttl_s"
HIT_RATE = "cache_token_hit_rate"
OFFLINE_MARKERS = ("belady", "offline", "optimal", "opt")
LATENCIES = ("ttft_ms", "tpot_ms", "e2el_ms")
PERCENTILES = ((50, "o"), (90, "s"), (99, "^"))
MAX_RUN_CURVES = 6


def _sweep_axis(data: ReportData, x: str, y: str, title: str, bounds: str | None) -> Figure:
    table = data.ok
    require(table, [x, y])
    if table[x].dropna().nunique() < 2:
        raise PlotSkipped(f"needs runs at 2 or more distinct {x}")
    curve_by = varying(table[table[x].notna()], [c for c in data.swept if c != x])
    scale = "log" if (table[x].dropna() > 0).all() else "symlog"
    return xy_figure(table, x, y, curve_by=curve_by, scale_x=scale, title=title,
                     bounds_label=bounds, min_points=2, dashed=OFFLINE_MARKERS,
                     match_by=[c for c in data.swept if c != x and c in table])


def hit_rate_vs_capacity(data: ReportData) -> Figure:
    """Token hit rate per policy against capacity (log x); unbounded runs as dashed lines."""
    bound_columns = [c for c in data.ok.columns
                     if re.search(r"(unbounded|offline|belady).*hit_rate$", c)]
    has_unbounded = any("unbounded" in c for c in bound_columns)
    fig = _sweep_axis(data, CAPACITY, HIT_RATE, "Token hit rate vs cache capacity",
                      bounds=None if has_unbounded else "unbounded")
    ax = fig.axes[0]
    for column, colour in zip(bound_columns, ("black", "grey", "tab:brown"), strict=False):
        rows = data.ok[[CAPACITY, column]].dropna().groupby(CAPACITY)[column].mean()
        label = ("offline bound (Belady) at the same capacity" if "belady" in column
                 or "offline" in column else "unbounded cache") + f" [{column}]"
        ax.plot(rows.index, rows.values, linestyle="--", color=colour, label=label)
    if bound_columns:
        ax.legend(fontsize=8)
    return fig


def hit_rate_vs_ttl(data: ReportData) -> Figure:
    """Token hit rate against TTL; runs without a TTL as dashed lines."""
    return _sweep_axis(data, TTL, HIT_RATE, "Token hit rate vs TTL", bounds="no TTL")


def p99_ttft_vs_capacity(data: ReportData) -> Figure:
    """p99 time to first token against capacity."""
    require(data.ok, ["p99_ttft_ms"], " (cache-only runs have no timing)")
    return _sweep_axis(data, CAPACITY, "p99_ttft_ms", "p99 TTFT vs cache capacity", None)


def _request_frames(data: ReportData, columns: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    frames = data.frames("requests")
    if not frames:
        raise PlotSkipped("no requests.parquet in the runs")
    usable = {rid: f for rid, f in frames.items() if any(c in f for c in columns)}
    if not usable:
        raise PlotSkipped(f"requests have no {'/'.join(columns)} "
                          "(cache-only runs have no timing)")
    return dict(list(usable.items())[:MAX_RUN_CURVES])


def latency_ecdfs(data: ReportData) -> Figure:
    """ECDFs of TTFT, TPOT and E2EL per run, with p50/p90/p99 marked."""
    frames = _request_frames(data, LATENCIES)
    present = [c for c in LATENCIES if any(c in f for f in frames.values())]
    fig, axes = new_figure(ncols=len(present), width=5.0)
    for ax, column in zip(axes, present, strict=True):
        for run_id, frame in frames.items():
            values = np.sort(frame[column].dropna().to_numpy(dtype=float))
            if values.size == 0:
                continue
            ecdf = np.arange(1, values.size + 1) / values.size
            (line,) = ax.step(values, ecdf, where="post", label=data.label(run_id))
            for pct, marker in PERCENTILES:
                ax.plot(np.percentile(values, pct), pct / 100, marker=marker,
                        color=line.get_color(), linestyle="none")
        positive = [f[column].dropna() for f in frames.values() if column in f]
        low = min((v[v > 0].min() for v in positive if (v > 0).any()), default=0.0)
        high = max((v.max() for v in positive), default=0.0)
        if low > 0 and high / low > 100:  # heavy tails (queueing) read better on log x
            ax.set_xscale("log")
        ax.set_title(f"ECDF of {column.removesuffix('_ms').upper()}", fontsize=10)
        ax.set_xlabel(axis_label(column))
        ax.set_ylabel("share of requests")
        ax.grid(True, alpha=0.3)
        handles, _ = ax.get_legend_handles_labels()
        handles += [Line2D([], [], marker=m, color="black", linestyle="none", label=f"p{p}")
                    for p, m in PERCENTILES]
        ax.legend(handles=handles, fontsize=7)
    return fig


def ttft_vs_cached_fraction(data: ReportData) -> Figure:
    """TTFT of each request against the share of its prompt served from the cache."""
    frames = _request_frames(data, ("ttft_ms",))
    fig, (ax,) = new_figure()
    for run_id, frame in list(frames.items())[:4]:
        if not {"ttft_ms", "cached_tokens", "input_tokens"} <= set(frame.columns):
            continue
        share = frame["cached_tokens"] / frame["input_tokens"].clip(lower=1)
        ax.scatter(share, frame["ttft_ms"], s=6, alpha=0.5, label=data.label(run_id))
    ax.set_title("TTFT vs cached share of the prompt", fontsize=10)
    ax.set_xlabel("cached share of the prompt (cached_tokens / input_tokens)")
    ax.set_ylabel(axis_label("ttft_ms"))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


TIMESERIES_PANELS = (("cache usage", ("used", "usage", "resident", "occupancy")),
                     ("evictions", ("evict",)), ("expirations", ("expir",)))


def _per_time(frame: pd.DataFrame, time_col: str, columns: list[str]) -> pd.DataFrame:
    """One row per sampling time: shares averaged, counts summed over replicas."""
    if "replica" not in frame or frame["replica"].nunique() <= 1:
        return frame
    how = {c: "mean" if ("usage" in c or "rate" in c) else "sum" for c in columns}
    return frame.groupby(time_col, as_index=False).agg(how)


def cache_over_time(data: ReportData) -> Figure:
    """Cache usage, evictions and expirations over simulated time, per run (replicas
    combined: usage averaged, counts summed)."""
    frames = data.frames("timeseries", limit=4)
    if not frames:
        raise PlotSkipped("no timeseries.parquet in the runs (engine.sample_interval_s null "
                          "records none)")
    first = next(iter(frames.values()))
    time_col = next((c for c in ("time_s", "now_s", "now", "t_s") if c in first),
                    next((c for c in first.columns if c.endswith("_s")), None))
    panels = [(name, [c for c in first.columns if c != time_col and any(w in c for w in words)])
              for name, words in TIMESERIES_PANELS]
    panels = [(name, cols) for name, cols in panels if cols]
    if time_col is None or not panels:
        raise PlotSkipped("the timeseries has no time column or no usage/eviction/expiry "
                          f"columns (has {', '.join(first.columns)})")
    fig, axes = new_figure(nrows=len(panels), height=3.0)
    for ax, (name, columns) in zip(axes, panels, strict=True):
        for run_id, frame in frames.items():
            present = [c for c in columns if c in frame]
            combined = _per_time(frame, time_col, present)
            for column in present:
                ax.plot(combined[time_col], combined[column],
                        label=f"{column} ({data.label(run_id)})")
        ax.set_title(f"{name.capitalize()} over time", fontsize=10)
        ax.set_xlabel(axis_label(time_col))
        ax.set_ylabel(axis_label(columns[0]))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def _bar_runs(data: ReportData, series: dict[str, pd.Series], title: str, ylabel: str,
              stacked: bool) -> Figure:
    runs = data.ok["run_id"].tolist()[:24]
    fig, (ax,) = new_figure(width=max(7.0, 0.5 * len(runs) + 3))
    positions = np.arange(len(runs))
    width = 0.8 if stacked else 0.8 / len(series)
    bottom = np.zeros(len(runs))
    for i, (name, values) in enumerate(series.items()):
        heights = values.iloc[: len(runs)].fillna(0).to_numpy(dtype=float)
        offset = 0 if stacked else (i - (len(series) - 1) / 2) * width
        ax.bar(positions + offset, heights, width, bottom=bottom if stacked else 0, label=name)
        if stacked:
            bottom += heights
    ax.set_xticks(positions, [data.label(r) for r in runs], rotation=30, ha="right",
                  fontsize=7)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("run")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return fig


def tier_hits(data: ReportData) -> Figure:
    """Hit tokens per cache tier (`cache_hit_tokens_<tier>` summary keys), per run."""
    pattern = re.compile(r"^cache_(?:hit_tokens_([a-z0-9]+)|([a-z0-9]+)_hit_tokens)$")
    columns = [c for c in data.ok.columns if pattern.match(c)
               and not re.search(r"unbounded|offline|belady", c)]
    if not columns:
        raise PlotSkipped("no per-tier hit keys (cache_hit_tokens_<tier>) in the summaries")
    series = {next(g for g in pattern.match(c).groups() if g): data.ok[c] for c in columns}
    return _bar_runs(data, series, "Hit tokens per cache tier", "hit tokens (tokens)", True)


def cost_with_without_cache(data: ReportData) -> Figure:
    """Total cost with the cache against the same traffic without it, per run."""
    require(data.ok, ["cost_total_usd"])
    baseline = [c for c in data.ok.columns if c.startswith("cost")
                and re.search(r"no_cache|nocache|without|uncached|baseline", c)]
    if not baseline:
        raise PlotSkipped("no cost-without-caching key (cost_*_no_cache_usd) in the summaries")
    series = {"with caching": data.ok["cost_total_usd"], "without caching": data.ok[baseline[0]]}
    return _bar_runs(data, series, "Cost with and without prefix caching", "cost (USD)", False)


def workload(data: ReportData) -> Figure:
    """The trace: prompt and output lengths, arrivals over time (from the first run)."""
    frames = data.frames("requests", limit=1)
    if not frames:
        raise PlotSkipped("no requests.parquet in the runs")
    run_id, frame = next(iter(frames.items()))
    require(frame, ["input_tokens", "output_tokens", "arrival_s"])
    fig, axes = new_figure(ncols=3, width=4.5)
    for ax, column in zip(axes[:2], ("input_tokens", "output_tokens"), strict=True):
        ax.hist(frame[column], bins=30, label=f"{len(frame)} requests")
        ax.set_title(f"{column.split('_')[0].capitalize()} length", fontsize=10)
        ax.set_xlabel(axis_label(column))
        ax.set_ylabel("requests (count)")
        ax.legend(fontsize=8)
    arrivals = frame["arrival_s"].to_numpy(dtype=float)
    span = max(float(arrivals.max() - arrivals.min()), 1.0)
    bin_s = max(span / 30, 1.0)
    counts, edges = np.histogram(arrivals, bins=max(int(span / bin_s), 1))
    axes[2].step(edges[:-1], counts / (edges[1] - edges[0]), where="post",
                 label=f"bins of {edges[1] - edges[0]:.0f} s")
    axes[2].set_title("Arrival rate over time", fontsize=10)
    axes[2].set_xlabel("arrival time (s)")
    axes[2].set_ylabel("arrival rate (requests per s)")
    axes[2].legend(fontsize=8)
    fig.suptitle(f"Workload characterisation (requests of {data.label(run_id)})", fontsize=11)
    return fig


PLOTS: tuple[tuple[str, Callable[[ReportData], Figure]], ...] = (
    ("hit_rate_vs_capacity", hit_rate_vs_capacity),
    ("hit_rate_vs_ttl", hit_rate_vs_ttl),
    ("p99_ttft_vs_capacity", p99_ttft_vs_capacity),
    ("latency_ecdfs", latency_ecdfs),
    ("cache_over_time", cache_over_time),
    ("ttft_vs_cached_fraction", ttft_vs_cached_fraction),
    ("tier_hits", tier_hits),
    ("cost", cost_with_without_cache),
    ("workload", workload),
)
