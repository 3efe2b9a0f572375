"""The report's standard plots, in page order (`PLOTS`), and the plots over the sweep's axes.

Each plot takes `ReportData` and returns a figure, or raises `PlotSkipped` saying which data
it lacks (cache-only runs have no latencies, a single run has no capacity axis, no run
expired a page, ...), so that the report lists it as skipped instead of drawing an empty
panel. Columns are found by name, so summary keys and request or timeseries columns added
later are picked up without changes here. Plots drawn per run (over time, per request, per
run bars) live in plots_time.py, plots_requests.py and plots_runs.py; latency against load
(per stage of a staged load, per probe of a capacity search) in plots_load.py.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from prefixsim.report.data import ReportData
from prefixsim.report.figures import (
    PlotSkipped,
    axis_label,
    curve_label,
    legend_below,
    legend_rows,
    new_figure,
    percent_axis,
    require,
    tag,
    value_ticks,
    varying,
    xy_figure,
)
from prefixsim.report.format import significant
from prefixsim.report.plots_load import latency_vs_load
from prefixsim.report.plots_requests import (
    latency_ecdfs,
    session_hit_rates,
    session_idle_gaps,
    ttft_vs_cached_fraction,
    workload,
)
from prefixsim.report.plots_runs import cluster, cost_with_without_cache, idle_ages, tier_hits
from prefixsim.report.plots_time import (
    cache_tokens_over_time,
    evictions_over_time,
    expirations_over_time,
)
from prefixsim.report.table import belady_reference
from prefixsim.report.units import KVGeometry, shared_geometry

CAPACITY = "cache_capacity_tokens"
TTL = "cache_ttl_s"
POLICY = "cache_policy"
HIT_RATE = "cache_token_hit_rate"
BELADY = "cache_belady_token_hit_rate"
UNBOUNDED = "cache_unbounded_token_hit_rate"
OFFLINE_MARKERS = ("belady", "offline", "optimal", "opt")


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


def _curve_name(row: pd.Series, columns: list[str]) -> str:
    return curve_label(columns, row)


def policy_zoo(data: ReportData) -> Figure:
    """Policy zoo: token hit rate against cache capacity for every policy in the sweep,
    with the offline Belady bound (dashed) and the unbounded cache (dotted); right, each
    policy's gap to Belady in percentage points (the regret curve: how much a better
    policy could still gain at that capacity). The top axis gives the capacity in GiB of
    KV for the runs' model."""
    table = data.ok
    require(table, [CAPACITY, HIT_RATE])
    bounded = table[table[CAPACITY].notna()].copy()
    if bounded[CAPACITY].nunique() < 2:
        raise PlotSkipped(f"needs runs at 2 or more distinct bounded {CAPACITY} (an "
                          "unbounded run is drawn as a line beside them, not a point)")
    bounded["_belady"] = belady_reference(bounded, data.swept)
    curve_by = varying(bounded, [c for c in data.swept if c != CAPACITY])
    context = [c for c in curve_by if c != POLICY]  # e.g. a swept TTL or router
    policies = bounded[POLICY].astype(str) if POLICY in bounded else pd.Series("", bounded.index)
    curves = bounded[policies != "belady"]
    has_gap = bool(curves["_belady"].notna().any())
    curve_count = len(curves.groupby(curve_by or (lambda _: 0), dropna=False)) + 3
    room = legend_rows(["x" * 40] * curve_count) if curve_count > 4 else 0
    fig, axes = new_figure(ncols=2 if has_gap else 1, width=6.5,
                           height=4.5 + (0.45 + 0.16 * room if room else 0))
    left = axes[0]
    drawn = 0  # curves, not counting the bounds drawn below
    for _, part in curves.groupby(curve_by or (lambda _: 0), dropna=False, sort=False):
        if part[CAPACITY].nunique() < 2:
            continue
        drawn += 1
        part = part.sort_values(CAPACITY)
        name = _curve_name(part.iloc[0], curve_by)
        (line,) = left.plot(part[CAPACITY], part[HIT_RATE], marker="o", label=name)
        if has_gap and part["_belady"].notna().any():
            axes[1].plot(part[CAPACITY], (part["_belady"] - part[HIT_RATE]) * 100, marker="o",
                         color=line.get_color(), label=name)
    bounds = []  # (context label, Belady by capacity, unbounded rate) per context
    for _, part in bounded.groupby(context or (lambda _: 0), dropna=False, sort=False):
        belady = part.dropna(subset=["_belady"]).groupby(CAPACITY)["_belady"].mean()
        top = part[UNBOUNDED].mean() if UNBOUNDED in part else np.nan
        bounds.append((_curve_name(part.iloc[0], context) if context else "", belady, top))
    with_belady = [b for b in bounds if len(b[1])]
    same = all(b[1].round(9).equals(with_belady[0][1].round(9)) for b in with_belady)
    for name, belady, _ in with_belady[:1] if same else with_belady:
        suffix = f" ({name})" if name and not same else ""
        left.plot(belady.index, belady.values, linestyle="--", color="black",
                  label=f"Belady, offline bound at each capacity{suffix}")
    tops = [b for b in bounds if pd.notna(b[2])]
    one_top = all(np.isclose(b[2], tops[0][2]) for b in tops)
    for name, _, top in tops[:1] if one_top else tops:
        suffix = f" ({name})" if name and not one_top else ""
        left.axhline(top, linestyle=":", color="grey", label=f"unbounded cache{suffix}")
    if not drawn:
        raise PlotSkipped(f"no curve with 2 or more runs at distinct {CAPACITY}")
    left.set_title("Token hit rate vs cache capacity", fontsize=10)
    left.set_ylabel("token hit rate (% of prompt tokens)")
    percent_axis(left.yaxis)
    if has_gap:
        axes[1].axhline(0, color="black", linewidth=0.8)
        axes[1].set_title("Gap to Belady (regret) vs cache capacity", fontsize=10)
        axes[1].set_ylabel("Belady minus policy (percentage points)")
    geometry = shared_geometry(data)
    for ax in axes:
        ax.set_xscale("log")
        value_ticks(ax.xaxis, bounded[CAPACITY])
        ax.set_xlabel(axis_label(CAPACITY))
        ax.grid(True, alpha=0.3)
        if len(ax.get_legend_handles_labels()[1]) > 4:  # many curves: under the panel
            legend_below(ax)
        else:
            ax.legend(fontsize=8)
        if geometry is not None:
            gib_axis(ax, geometry, bounded[CAPACITY])
    note = "" if has_gap else ("No Belady bound in these runs, so no regret panel (cache-only "
                               "runs with cache.bounds: true, or belady runs, add it).")
    return tag(fig, None, note)


def gib_axis(ax, geometry: KVGeometry, capacities: pd.Series) -> None:
    """A second x axis on top: the capacities in GiB of KV for the runs' model."""
    top = ax.secondary_xaxis("top", functions=(geometry.gib, geometry.tokens))
    value_ticks(top.xaxis, [geometry.gib(c) for c in capacities.dropna()],
                lambda v: significant(v, 2))
    top.set_xlabel(f"KV (GiB; {geometry.describe()})", fontsize=9)
    top.tick_params(labelsize=8)


def hit_rate_vs_ttl(data: ReportData) -> Figure:
    """Token hit rate against TTL; runs without a TTL as dashed lines."""
    if TTL not in data.ok or data.ok[TTL].isna().all():
        raise PlotSkipped("no run set a TTL (cache_ttl_s)")
    return _sweep_axis(data, TTL, HIT_RATE, "Token hit rate vs TTL", bounds="no TTL")


def p99_ttft_vs_capacity(data: ReportData) -> Figure:
    """p99 time to first token against capacity."""
    require(data.ok, ["p99_ttft_ms"], " (cache-only runs have no timing)")
    return _sweep_axis(data, CAPACITY, "p99_ttft_ms", "p99 TTFT vs cache capacity", None)


PLOTS: tuple[tuple[str, Callable[[ReportData], Figure]], ...] = (
    ("policy_zoo", policy_zoo),
    ("hit_rate_vs_ttl", hit_rate_vs_ttl),
    ("p99_ttft_vs_capacity", p99_ttft_vs_capacity),
    ("latency_vs_load", latency_vs_load),
    ("idle_ages", idle_ages),
    ("session_hit_rates", session_hit_rates),
    ("session_idle_gaps", session_idle_gaps),
    ("cache_tokens_over_time", cache_tokens_over_time),
    ("evictions_over_time", evictions_over_time),
    ("expirations_over_time", expirations_over_time),
    ("latency_ecdfs", latency_ecdfs),
    ("ttft_vs_cached_fraction", ttft_vs_cached_fraction),
    ("tier_hits", tier_hits),
    ("cluster", cluster),
    ("cost", cost_with_without_cache),
    ("workload", workload),
)
"""Every standard plot, in the order the report shows them."""
