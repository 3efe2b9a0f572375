"""Plots over simulated time, from each run's timeseries.parquet: resident cache tokens,
cumulative evictions and cumulative expirations.

Every run with a timeseries is drawn: runs are split into small multiples (figures.py:
`run_panels`, one panel per value of the swept column with the fewest values, at most ten
runs a panel) and each panel's legend names all of its runs. A plot whose quantity is zero
in every run (no run evicted: unbounded caches; none expired: no TTL) is skipped with that
reason rather than drawn flat, and so is each run whose quantity stays zero (runs without
a TTL in the expirations plot), named in the caption. Replicas of a timed run are combined
(tokens and counts summed per sampling time), and the capacity line drawn with them is the
capacity per replica times the replicas, so that both are the whole fleet's. Runs without a
timeseries are named in the caption. Time reads in seconds, minutes, hours or days by the
longest run's span (figures.py `time_unit`).
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
from matplotlib.figure import Figure

from prefixsim.report.data import ReportData
from prefixsim.report.figures import (
    PlotSkipped,
    legend_below,
    legend_rows,
    panel_grid,
    run_panels,
    tag,
    thousands_axis,
    time_unit,
)

TIME = "time_s"


def _series(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """(time, value) with replicas summed per sampling time."""
    if "replica" in frame and frame["replica"].nunique() > 1:
        return frame.groupby(TIME, as_index=False)[column].sum()
    return frame[[TIME, column]]


def _over_time(data: ReportData, column: str, title: str,
               ylabel: str | Callable[[list[str]], str], empty_reason: str) -> Figure:
    """The plot of `column` over time, one panel per group of runs; `ylabel` is the axis
    label, or makes it from a panel's runs."""
    runs = data.ok["run_id"].tolist()
    every = data.frames("timeseries")
    if not every:
        raise PlotSkipped("no timeseries.parquet in the runs (engine.sample_interval_s null "
                          "records none)")
    frames = {r: f for r, f in every.items() if column in f and TIME in f}
    if not frames:
        raise PlotSkipped(f"the runs' timeseries have no {column} column (timed runs "
                          "record evictions but not expirations over time)")
    if all(float(f[column].max()) <= 0 for f in frames.values()):
        raise PlotSkipped(empty_reason)
    drawn = [r for r in runs if r in frames]
    flat = [r for r in drawn if float(frames[r][column].max()) <= 0]
    drawn = [r for r in drawn if r not in flat]
    panels = run_panels(data.table, data.swept, drawn)
    labels = {r: data.label(r, () if p.group_by is None else (p.group_by,), p.runs)
              for p in panels for r in p.runs}
    rows = max(legend_rows([labels[r] for r in p.runs]) for p in panels)
    fig, axes = panel_grid(len(panels), legend_rows=rows)
    capacities = fleet_capacities(data)
    size, unit = time_unit(max(float(frames[r][TIME].max()) for r in drawn))
    for ax, panel in zip(axes, panels, strict=True):
        for run_id in panel.runs:
            series = _series(frames[run_id], column)
            (line,) = ax.plot(series[TIME] / size, series[column], label=labels[run_id])
            if column == "cached_tokens" and pd.notna(capacities.get(run_id, float("nan"))):
                ax.axhline(capacities[run_id], color=line.get_color(), linestyle=":",
                           linewidth=0.8)
        thousands_axis(ax.yaxis)
        ax.set_title(f"{title}: {panel.title}" if panel.title != "all runs" else title,
                     fontsize=10)
        ax.set_xlabel(f"time ({unit})")
        thousands_axis(ax.xaxis)
        ax.set_ylabel(ylabel if isinstance(ylabel, str) else ylabel(panel.runs))
        ax.grid(True, alpha=0.3)
        legend_below(ax)
    missing = [r for r in runs if r not in frames]
    note = f"No {column} over time in {len(missing)} run(s): {', '.join(missing)}." \
        if missing else ""
    if flat:
        note += f" Not drawn, {column} zero throughout: {', '.join(flat)}."
    return tag(fig, drawn, note.strip(), left_out=[r for r in runs if r not in drawn])


def fleet_capacities(data: ReportData) -> dict[str, float]:
    """Each run's cache capacity summed over its replicas (capacity per replica times
    `replicas`; NaN where unbounded): what its replicas-summed resident tokens can reach."""
    table = data.table.set_index("run_id")
    if "cache_capacity_tokens" not in table:
        return {}
    replicas = table["replicas"].fillna(1) if "replicas" in table else 1
    return (table["cache_capacity_tokens"].astype(float) * replicas).to_dict()


MAX_COUNTS_NAMED = 3  # replica counts a panel's axis label names (more: "replicas summed")


def replicas_note(data: ReportData, runs: list[str]) -> str:
    """`, 2 replicas summed` when one of `runs` (a panel's) has more than one replica, else
    ``; the counts named when there are at most MAX_COUNTS_NAMED of them (a capacity
    search's seven panels of 1-64 replicas named all seven on every axis, a label longer
    than the panel)."""
    ok = data.ok[data.ok["run_id"].isin(runs)]
    if "replicas" not in ok or not ok["replicas"].fillna(1).gt(1).any():
        return ""
    counts = sorted({int(v) for v in ok["replicas"].fillna(1)})
    if len(counts) > MAX_COUNTS_NAMED:
        return ", replicas summed"
    return f", {'/'.join(map(str, counts))} replicas summed"


def cache_tokens_over_time(data: ReportData) -> Figure:
    """Tokens resident in the cache over simulated time, every run (dotted: the run's
    capacity; a timed run's replicas summed, its capacity line too: per replica times the
    replicas)."""
    return _over_time(data, "cached_tokens", "Resident cache tokens",
                      lambda runs: f"resident tokens (tokens{replicas_note(data, runs)})",
                      "no run held any cache tokens")


def evictions_over_time(data: ReportData) -> Figure:
    """Pages evicted for space, cumulative over simulated time, every run."""
    return _over_time(data, "evictions", "Evictions", "evictions (pages, cumulative)",
                      "no run evicted a page (unbounded caches, or the cache never filled)")


def expirations_over_time(data: ReportData) -> Figure:
    """Pages freed by TTL expiry, cumulative over simulated time, every run."""
    return _over_time(data, "expirations", "Expirations", "expirations (pages, cumulative)",
                      "no run expired a page (no TTL set, or no page outlived it)")
