"""Plots over simulated time, from each run's timeseries.parquet: resident cache tokens,
cumulative evictions and cumulative expirations.

Every run with a timeseries is drawn: runs are split into small multiples (figures.py:
`run_panels`, one panel per value of the swept column with the fewest values, at most ten
runs a panel) and each panel's legend names all of its runs. A plot whose quantity is zero
in every run (no run evicted: unbounded caches; none expired: no TTL) is skipped with that
reason rather than drawn flat. Replicas of a timed run are combined (tokens and counts
summed per sampling time). Runs without a timeseries are named in the caption.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from prefixsim.report.data import ReportData
from prefixsim.report.figures import (
    PlotSkipped,
    axis_label,
    legend_below,
    legend_rows,
    panel_grid,
    run_panels,
    tag,
)

TIME = "time_s"


def _series(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """(time, value) with replicas summed per sampling time."""
    if "replica" in frame and frame["replica"].nunique() > 1:
        return frame.groupby(TIME, as_index=False)[column].sum()
    return frame[[TIME, column]]


def _over_time(data: ReportData, column: str, title: str, ylabel: str,
               empty_reason: str) -> Figure:
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
    panels = run_panels(data.table, data.swept, drawn)
    labels = {r: data.label(r, () if p.group_by is None else (p.group_by,))
              for p in panels for r in p.runs}
    rows = max(legend_rows([labels[r] for r in p.runs]) for p in panels)
    fig, axes = panel_grid(len(panels), legend_rows=rows)
    capacities = data.table.set_index("run_id").get("cache_capacity_tokens")
    for ax, panel in zip(axes, panels, strict=True):
        for run_id in panel.runs:
            series = _series(frames[run_id], column)
            (line,) = ax.plot(series[TIME], series[column], label=labels[run_id])
            if column == "cached_tokens" and capacities is not None:
                capacity = capacities.get(run_id)
                if capacity is not None and pd.notna(capacity):
                    ax.axhline(capacity, color=line.get_color(), linestyle=":", linewidth=0.8)
        ax.set_title(f"{title}: {panel.title}" if panel.title != "all runs" else title,
                     fontsize=10)
        ax.set_xlabel(axis_label(TIME))
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        legend_below(ax)
    missing = [r for r in runs if r not in frames]
    note = f"No timeseries in {len(missing)} run(s): {', '.join(missing)}." if missing else ""
    return tag(fig, drawn, note)


def cache_tokens_over_time(data: ReportData) -> Figure:
    """Tokens resident in the cache over simulated time, every run (dotted: the run's
    capacity; replicas summed)."""
    return _over_time(data, "cached_tokens", "Resident cache tokens",
                      "resident tokens (tokens)", "no run held any cache tokens")


def evictions_over_time(data: ReportData) -> Figure:
    """Pages evicted for space, cumulative over simulated time, every run."""
    return _over_time(data, "evictions", "Evictions", "evictions (pages, cumulative)",
                      "no run evicted a page (unbounded caches, or the cache never filled)")


def expirations_over_time(data: ReportData) -> Figure:
    """Pages freed by TTL expiry, cumulative over simulated time, every run."""
    return _over_time(data, "expirations", "Expirations", "expirations (pages, cumulative)",
                      "no run expired a page (no TTL set, or no page outlived it)")
