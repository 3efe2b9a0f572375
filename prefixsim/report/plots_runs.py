"""Plots with one row or bar per run, from the summaries: pages' idle ages at hit, eviction
and expiry; hit tokens per tier; cluster-level KV (latencies and link use per
configuration); cost with and without caching.

Every successful run is drawn (the figure grows with the runs, it never keeps a subset);
a plot whose quantity no run has (no lower tiers, no price list, results written before
ages were recorded) is skipped with its reason.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from prefixsim.cache.idle_ages import EDGES_S
from prefixsim.report.data import ReportData
from prefixsim.report.figures import (
    PlotSkipped,
    new_figure,
    percent_axis,
    readable_ticks,
    require,
    short_number_axis,
    short_seconds,
    tag,
    thousands_axis,
    time_ticks,
    wrapped,
)

AGE_FLOOR_S = EDGES_S[0]  # ~1 ms: the idle-age histogram's lowest bin is [0, this)
AGE_EVENTS = (("hit", "at a hit", "tab:blue"), ("evicted", "at eviction (capacity)", "tab:red"),
              ("expired", "at expiry (TTL)", "tab:orange"))


def _run_labels(data: ReportData, runs: list[str]) -> list[str]:
    return [wrapped(data.label(r), 48) for r in runs]


def idle_ages(data: ReportData) -> Figure:
    """How long pages sat unused when they were hit, evicted or expired, per run (bar:
    p10 to p90, dot: median; black tick: the run's TTL). Hits younger than the TTL and
    evictions younger than the TTL mean the capacity limits hits; evictions far older than
    typical hits mean the cache keeps what is no longer reused."""
    table = data.ok
    columns = [f"cache_{e}_age_p50_s" for e, _, _ in AGE_EVENTS]
    if not any(c in table and table[c].notna().any() for c in columns):
        raise PlotSkipped("no cache_*_age_* keys in the summaries (results written before "
                          "prefixsim recorded page ages, or no hits at all)")
    runs = table["run_id"].tolist()
    fig, (ax,) = new_figure(width=10.0, height=max(2.2, 0.42 * len(runs) + 1.2))
    positions = np.arange(len(runs))[::-1]
    offsets = {"hit": 0.22, "evicted": 0.0, "expired": -0.22}
    below = False  # an age under the histogram's lowest edge, drawn at it
    for event, what, colour in AGE_EVENTS:
        keys = [f"cache_{event}_age_p{p}_s" for p in (10, 50, 90)]
        if not all(k in table for k in keys) or table[keys[1]].isna().all():
            continue
        low, mid, high = (table[k].to_numpy(dtype=float) for k in keys)
        y = positions + offsets[event]
        has = ~np.isnan(mid)
        below |= bool((low[has] < AGE_FLOOR_S).any())
        ax.hlines(y[has], np.maximum(low[has], AGE_FLOOR_S), np.maximum(high[has], AGE_FLOOR_S),
                  color=colour, linewidth=4, alpha=0.6)
        ax.plot(np.maximum(mid[has], AGE_FLOOR_S), y[has], "o", color=colour,
                label=f"idle age {what}")
    if "cache_ttl_s" in table and table["cache_ttl_s"].notna().any():
        ttl = table["cache_ttl_s"].to_numpy(dtype=float)
        has = ~np.isnan(ttl)
        ax.vlines(ttl[has], positions[has] - 0.35, positions[has] + 0.35, color="black",
                  linewidth=1.5, label="the run's TTL")
    ax.set_xscale("log")
    ax.autoscale_view()
    if below:  # the floor ticked as what it stands for: the lowest bin, [0, 1 ms)
        ax.set_xlim(AGE_FLOOR_S / 1.5, max(ax.get_xlim()[1], AGE_FLOOR_S * 10))
    time_ticks(ax.xaxis)
    if below:
        ticks = [AGE_FLOOR_S, *(t for t in ax.get_xticks() if t > AGE_FLOOR_S * 3)]
        ax.set_xticks(ticks, ["< 1 ms",
                              *(short_seconds(t) for t in ticks[1:])])
    ax.set_yticks(positions, _run_labels(data, runs), fontsize=8)
    ax.set_ylim(-0.5, len(runs) - 0.5)  # each run's bars around its label (one run: not at
    # the edges of a range autoscaled to the hit bar's offset)
    ax.set_xlabel("idle age: time since the page's last use (log scale)")
    ax.set_ylabel("run")
    ax.set_title("Idle age of pages at hit, eviction and expiry (bar p10-p90, dot median)",
                 fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return tag(fig, runs)


def _bar_runs(data: ReportData, series: dict[str, pd.Series], title: str, xlabel: str,
              stacked: bool) -> Figure:
    """One horizontal bar (stacked) or group of bars per run, runs down the side with one
    label each, as idle_ages draws them (twenty runs' labels under vertical bars ran into
    each other, however they were turned)."""
    runs = data.ok["run_id"].tolist()
    labels = _run_labels(data, runs)
    lines = max(label.count("\n") + 1 for label in labels)
    per_run = max(0.42, 0.22 * lines, 0 if stacked else 0.2 * len(series))
    fig, (ax,) = new_figure(width=10.0, height=max(2.2, per_run * len(runs) + 1.2))
    positions = np.arange(len(runs))[::-1]
    height = 0.8 if stacked else 0.8 / len(series)
    left = np.zeros(len(runs))
    for i, (name, values) in enumerate(series.items()):
        widths = values.fillna(0).to_numpy(dtype=float)
        offset = 0 if stacked else ((len(series) - 1) / 2 - i) * height
        ax.barh(positions + offset, widths, height, left=left if stacked else 0, label=name)
        if stacked:
            left += widths
    ax.set_yticks(positions, labels, fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel("run")
    ax.set_xlabel(xlabel)
    thousands_axis(ax.xaxis)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return tag(fig, runs)


def tier_hits(data: ReportData) -> Figure:
    """Hit tokens per cache tier (`cache_hit_tokens_<tier>` summary keys), per run."""
    pattern = re.compile(r"^cache_(?:hit_tokens_([a-z0-9]+)|([a-z0-9]+)_hit_tokens)$")
    ok = data.ok
    hits = {c: ok[c].fillna(0) for c in ok.columns if pattern.match(c)
            and not re.search(r"unbounded|offline|belady", c)}
    if not hits:
        raise PlotSkipped("no per-tier hit keys (cache_hit_tokens_<tier>) in the summaries")
    used = {c: tokens for c, tokens in hits.items() if tokens.gt(0).any()}  # no run: out
    if not any(not c.endswith("hbm") for c in used):
        raise PlotSkipped("no lower tier (host DRAM, disk or shared pool) served a hit: "
                          "every hit came from HBM (--host-cache-tokens, --disk-cache-tokens "
                          "or cache.pool add one)")
    names = {c: next(g for g in pattern.match(c).groups() if g) for c in used}
    fig = _bar_runs(data, {names[c]: ok[c] for c in used}, "Hit tokens per cache tier",
                    "hit tokens (tokens)", True)
    ax = fig.axes[0]
    totals = sum(used.values())
    positions = np.arange(len(ok))[::-1]
    for row, (position, total) in enumerate(zip(positions, totals, strict=True)):
        shares = [f"{names[c]} {tokens.iloc[row] / total:.1%}" for c, tokens in used.items()
                  if not c.endswith("hbm") and tokens.iloc[row] > 0] if total else []
        if shares:  # each run's own shares (the legend's colours name the tiers)
            ax.annotate(", ".join(shares) + " of its hits", (total, position),
                        xytext=(4, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_xlim(0, float(totals.max()) * TIER_LABEL_ROOM)
    short_number_axis(ax.xaxis)  # 500k 1M 1.5M: seven-digit ticks ran into each other
    return fig


TIER_LABEL_ROOM = 1.45  # the x axis past the longest bar, for its run's shares


def cost_with_without_cache(data: ReportData) -> Figure:
    """Total cost with the cache against the same traffic without it, per run."""
    require(data.ok, ["cost_total_usd"], " (runs without --pricing are not priced)")
    baseline = [c for c in data.ok.columns if c.startswith("cost")
                and re.search(r"no_cache|nocache|without|uncached|baseline", c)
                and c.endswith("_usd")]
    if not baseline:
        raise PlotSkipped("no cost-without-caching key (cost_*_no_cache_usd) in the summaries")
    series = {"with caching": data.ok["cost_total_usd"], "without caching": data.ok[baseline[0]]}
    return _bar_runs(data, series, "Cost with and without prefix caching", "cost (USD)", False)


def _topology(row: pd.Series) -> str:
    """A configuration's short name: 2P2D, 4 colocated; + pool with a shared pool."""
    prefill = row.get("prefill_replicas")
    if prefill is not None and not pd.isna(prefill):
        name = f"{int(prefill)}P{int(row['decode_replicas'])}D"
    else:
        replicas = row.get("replicas")
        name = "colocated" if replicas is None or pd.isna(replicas) else \
            f"{int(replicas)} colocated"
    pool = row.get("cache_pool_link_busy_share")
    return name + (" + pool" if pool is not None and not pd.isna(pool) else "")


def cluster(data: ReportData) -> Figure:
    """Cluster-level KV per run (a shared pool, disaggregated prefill/decode): TTFT and TPOT
    (mean and p99: a dot each, joined, as a latency axis reads them, logarithmic past
    LATENCY_LOG_SPAN, where bars' lengths would mean nothing) and how busy the links were
    (the busiest pool link direction and the prefill -> decode link, in %), configurations
    side by side; legends under the panels, clear of the bars."""
    table = data.ok
    if not any(c in table and table[c].notna().any()
               for c in ("cache_pool_link_busy_share", "kv_transfer_busy_share")):
        raise PlotSkipped("no run has a shared pool or disaggregated serving "
                          "(cache.pool, engine.prefill_replicas)")
    require(table, ["mean_ttft_ms", "mean_tpot_ms"], " (cache-only runs have no timing)")
    runs = table["run_id"].tolist()
    names = [_topology(row) for _, row in table.iterrows()]
    if len(set(names)) < len(names):  # other swept values tell them apart
        names = [f"{n}\n{label}" for n, label in zip(names, _run_labels(data, runs),
                                                     strict=True)]
    lines = max(name.count("\n") + 1 for name in names)
    fig, axes = new_figure(ncols=3, width=4.2,
                           height=max(2.8, max(0.45, 0.22 * lines) * len(runs) + 1.9))
    positions = np.arange(len(runs))[::-1]
    for number, (ax, shown) in enumerate(zip(axes, ("TTFT", "TPOT"), strict=False)):
        key = shown.lower()
        values = []
        for stat, marker in (("mean", "o"), ("p99", "s")):
            column = f"{stat}_{key}_ms"
            if column in table:
                ax.plot(table[column].to_numpy(dtype=float), positions, marker,
                        linestyle="none", label=stat)
                values.append(table[column])
        for position, (_, row) in zip(positions, table.iterrows(), strict=True):
            ax.plot([row.get(f"mean_{key}_ms"), row.get(f"p99_{key}_ms")], [position] * 2,
                    color="grey", linewidth=1, zorder=0)
        readable_ticks(ax.xaxis, f"p99_{key}_ms", pd.concat(values))
        log = ax.get_xscale() == "log"
        if not log:
            short_number_axis(ax.xaxis)  # 100k 200k: six-digit ticks ran together
        ax.set_xlabel(f"{shown} (ms{', log scale' if log else ''})")
        ax.set_title(f"{shown} per configuration", fontsize=10)
        _cluster_panel(ax, positions, names if number == 0 else None)
    ax = axes[2]
    links = {"pool link": "cache_pool_link_busy_share",
             "prefill -> decode link": "kv_transfer_busy_share"}
    present = {name: c for name, c in links.items() if c in table}
    height = 0.8 / max(len(present), 1)
    for i, (name, column) in enumerate(present.items()):
        offset = ((len(present) - 1) / 2 - i) * height
        ax.barh(positions + offset, table[column].fillna(0).to_numpy(dtype=float), height,
                label=name)
    percent_axis(ax.xaxis)
    ax.set_xlabel("link busy share (% of the run)")
    ax.set_title("link busy share per configuration", fontsize=10)
    _cluster_panel(ax, positions, None)
    return tag(fig, runs, "pool hits per run: see the tier-hits plot")


def _cluster_panel(ax, positions: np.ndarray, names: list[str] | None) -> None:
    """A cluster panel's run axis (names on the first panel only), grid and legend, the
    legend under the panel."""
    ax.set_yticks(positions, names if names is not None else [""] * len(positions),
                  fontsize=8)
    ax.set_ylim(-0.6, len(positions) - 0.4)
    ax.set_ylabel("run" if names is not None else "")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
              frameon=False)
