"""Plots from each run's requests.parquet: latency ECDFs, TTFT against the cached share of
the prompt, per-session hit rates, the idle gaps of sessions against the TTL, the workload.

Per-run plots draw every run, in small multiples with a legend naming every run of a panel
(figures.py: `run_panels`); runs without requests.parquet (a sweep with --no-requests) are
named in the caption. The idle-gap plot describes the trace (its sessions' gaps), so it
reads one run's requests and says which.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from prefixsim.engine.request_state import REJECTED
from prefixsim.metrics.pricing import FIVE_MINUTES_S, PRESETS
from prefixsim.report.data import ReportData
from prefixsim.report.figures import (
    PlotSkipped,
    axis_label,
    legend_below,
    legend_rows,
    new_figure,
    panel_grid,
    percent_axis,
    require,
    run_panels,
    short_number_axis,
    short_seconds,
    tag,
    thousands_axis,
    time_ticks,
    time_unit,
)
from prefixsim.report.format import share_text

LATENCIES = ("ttft_ms", "tpot_ms", "e2el_ms")
PERCENTILES = ((50, "o"), (90, "s"), (99, "^"))
ONE_HOUR_S = 3600.0
CUT_PERCENTILE = 99.9  # an ECDF's x axis ends here, so one outlier does not squash it


def _request_frames(data: ReportData, columns: tuple[str, ...], why: str
                    ) -> tuple[dict[str, pd.DataFrame], str]:
    """Frames of the runs whose requests have one of `columns`, and a caption note naming
    the runs that have none."""
    runs = data.ok["run_id"].tolist()
    frames = data.frames("requests")
    if not frames:
        raise PlotSkipped("no requests.parquet in the runs (sweep --no-requests keeps none)")
    usable = {r: f for r, f in frames.items() if any(c in f for c in columns)}
    if not usable:
        raise PlotSkipped(f"requests have no {'/'.join(columns)}{why}")
    missing = [r for r in runs if r not in usable]
    note = f"Not drawn, no {'/'.join(columns)}: {', '.join(missing)}." if missing else ""
    return {r: usable[r] for r in runs if r in usable}, note


def _not_drawn(data: ReportData, frames: dict[str, pd.DataFrame]) -> list[str]:
    """The successful runs a per-run plot left out (named in its caption note)."""
    return [r for r in data.ok["run_id"] if r not in frames]


def _legend_label(data: ReportData, run_id: str, panel) -> str:
    return data.label(run_id, () if panel.group_by is None else (panel.group_by,), panel.runs)


def latency_ecdfs(data: ReportData) -> Figure:
    """ECDFs of TTFT, TPOT and E2EL, every run (one row per latency, one column per group
    of runs), with p50/p90/p99 marked; the panels of a row share one x range, which ends at
    the largest p99.9 of their runs (the title gives the cut and the largest value beyond
    it)."""
    frames, note = _request_frames(data, LATENCIES, " (cache-only runs have no timing)")
    present = [c for c in LATENCIES if any(c in f for f in frames.values())]
    panels = run_panels(data.table, data.swept, list(frames))
    rows = max(legend_rows([_legend_label(data, r, p) for r in p.runs]
                           + [f"p{pct}" for pct, _ in PERCENTILES]) for p in panels)
    fig, axes = panel_grid(len(present) * len(panels), ncols=len(panels), width=4.6,
                           legend_rows=rows)
    for row, column in enumerate(present):
        # one x range per row, over every panel's runs: panels side by side read alike
        # (TPOT 0-450 ms beside 0-510 ms compared two panels on two scales)
        positive = [frames[r][column].dropna() for p in panels for r in p.runs
                    if column in frames[r]]
        low = min((v[v > 0].min() for v in positive if (v > 0).any()), default=0.0)
        cut = max((np.percentile(v, CUT_PERCENTILE) for v in positive if len(v)),
                  default=0.0)
        high = max((v.max() for v in positive if len(v)), default=0.0)
        for col, panel in enumerate(panels):
            ax = axes[row * len(panels) + col]
            for run_id in panel.runs:
                values = np.sort(frames[run_id][column].dropna().to_numpy(dtype=float))
                if values.size == 0:
                    continue
                ecdf = np.arange(1, values.size + 1) / values.size
                (line,) = ax.step(values, ecdf, where="post",
                                  label=_legend_label(data, run_id, panel))
                for pct, marker in PERCENTILES:
                    ax.plot(np.percentile(values, pct), pct / 100, marker=marker,
                            color=line.get_color(), linestyle="none")
            name = column.removesuffix("_ms").upper()
            if low > 0 and cut / low > 100:  # heavy tails (queueing) read better on log x
                ax.set_xscale("log")
            left = low / 1.2 if ax.get_xscale() == "log" else 0
            cut_text = ""
            if cut > 0 and high > cut * 1.05:
                ax.set_xlim(left, cut * 1.05)
                cut_text = f"\n(axis cut at p99.9, {cut:,.0f} ms; max {high:,.0f} ms)"
            elif high > 0:
                ax.set_xlim(left, high * 1.05)
            ax.set_title(f"ECDF of {name}" + ("" if panel.title == "all runs"
                                                else f": {panel.title}") + cut_text,
                         fontsize=10 if not cut_text else 9)
            ax.set_xlabel(f"{name} (ms)")
            ax.set_ylabel("share of requests (%)")
            percent_axis(ax.yaxis)
            if ax.get_xscale() != "log":
                thousands_axis(ax.xaxis)
            ax.grid(True, alpha=0.3)
            for pct, marker in PERCENTILES:
                ax.plot([], [], marker=marker, color="black", linestyle="none", label=f"p{pct}")
            legend_below(ax)
    return tag(fig, list(frames), note, _not_drawn(data, frames))


SHARE_MARGIN = 0.03  # room either side of a 0-100% share axis for the points at its ends


def ttft_vs_cached_fraction(data: ReportData) -> Figure:
    """TTFT of each request against the share of its prompt served from the cache, every
    run (one panel per group of runs)."""
    frames, note = _request_frames(data, ("ttft_ms",), " (cache-only runs have no timing)")
    if not any((frame["cached_tokens"] > 0).any() for frame in frames.values()):
        raise PlotSkipped("no request was served a token from the cache (no shared prefix "
                          "was reused)")
    panels = run_panels(data.table, data.swept, list(frames))
    rows = max(legend_rows([_legend_label(data, r, p) for r in p.runs]) for p in panels)
    fig, axes = panel_grid(len(panels), width=5.0, legend_rows=rows)
    for ax, panel in zip(axes, panels, strict=True):
        ax.set_xlim(-SHARE_MARGIN, 1 + SHARE_MARGIN)  # the whole 0-100%, panel beside panel
        shares, ttfts, colours = [], [], []
        for number, run_id in enumerate(panel.runs):
            frame = frames[run_id]
            colour = f"C{number % 10}"
            shares.append((frame["cached_tokens"] / frame["input_tokens"].clip(lower=1))
                          .to_numpy(dtype=float))
            ttfts.append(frame["ttft_ms"].to_numpy(dtype=float))
            colours += [colour] * len(frame)
            ax.scatter([], [], s=12, color=colour, label=_legend_label(data, run_id, panel))
        # every run's points in one shuffled drawing order (seeded): drawn run after run,
        # the last run's 1,500 points covered the others'
        order = np.random.default_rng(0).permutation(len(colours))
        ax.scatter(np.concatenate(shares)[order], np.concatenate(ttfts)[order], s=6,
                   alpha=0.5, c=np.array(colours)[order], gid="requests")
        ax.set_title("TTFT vs cached share of the prompt"
                     + ("" if panel.title == "all runs" else f": {panel.title}"), fontsize=10)
        ax.set_xlabel("cached share of the prompt (%)")
        ax.set_ylabel("TTFT (ms, log scale)")
        percent_axis(ax.xaxis)
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        legend_below(ax)
    return tag(fig, list(frames), note, _not_drawn(data, frames))


def session_rates(frame: pd.DataFrame) -> pd.Series:
    """Each session's token-weighted hit rate: its cached tokens over its prompt tokens."""
    grouped = frame.dropna(subset=["session_id"]).groupby("session_id")
    sums = grouped[["cached_tokens", "input_tokens"]].sum()
    return sums["cached_tokens"] / sums["input_tokens"].clip(lower=1)


def session_hit_rates(data: ReportData) -> Figure:
    """Distribution over sessions of each session's token hit rate (ECDF), every run: the
    spread behind the mean (a few long sessions can carry the token-weighted rate)."""
    frames, note = _request_frames(data, ("session_id",), "")
    frames = {r: f for r, f in frames.items() if f["session_id"].notna().any()}
    if not frames:
        raise PlotSkipped("the trace has no session ids")
    panels = run_panels(data.table, data.swept, list(frames))
    rates = {r: np.sort(session_rates(frames[r]).to_numpy()) for r in frames}
    labels = {r: f"{_legend_label(data, r, p)} (median {np.median(rates[r]):.0%}, "
                 f"mean {rates[r].mean():.0%})" for p in panels for r in p.runs}
    rows = max(legend_rows([labels[r] for r in p.runs]) for p in panels)
    fig, axes = panel_grid(len(panels), width=5.0, legend_rows=rows)
    for ax, panel in zip(axes, panels, strict=True):
        for run_id in panel.runs:
            label = labels[run_id]
            run_rates = rates[run_id]
            ax.step(run_rates, np.arange(1, run_rates.size + 1) / run_rates.size, where="post",
                    label=label)
        ax.set_title("Per-session token hit rate" + ("" if panel.title == "all runs"
                                                      else f": {panel.title}"), fontsize=10)
        ax.set_xlabel("session's token hit rate (% of its prompt tokens)")
        ax.set_ylabel("share of sessions (%)")
        percent_axis(ax.xaxis)
        percent_axis(ax.yaxis)
        ax.grid(True, alpha=0.3)
        legend_below(ax)
    return tag(fig, list(frames), note, _not_drawn(data, frames))


def idle_gaps_s(frame: pd.DataFrame) -> np.ndarray:
    """Seconds between a session's consecutive requests: the next arrival after the previous
    request finished (timed runs) or arrived (cache-only runs). Negative where the next
    request arrived before the previous one finished (a timed replay of recorded times that
    fell behind them): its prefix was still in use, so any TTL keeps it."""
    rows = frame.dropna(subset=["session_id"]).sort_values(["session_id", "arrival_s"])
    end = rows["finish_s"] if "finish_s" in rows else rows["arrival_s"]
    same = rows["session_id"].to_numpy()[1:] == rows["session_id"].to_numpy()[:-1]
    gaps = rows["arrival_s"].to_numpy()[1:] - end.to_numpy()[:-1]
    return gaps[same & ~np.isnan(gaps)]


def long_ttl_break_even(pricing_name: str) -> tuple[float, str]:
    """The share of writes whose next use must fall between 5 minutes and 1 hour for the
    1-hour write class to pay for itself, under preset `pricing_name` (anthropic if it has
    no dearer 1-hour class): extra (w_1h - w_5m) per written token, against a 5-minute
    rewrite avoided, (w_5m - read), when the next request comes in that window."""
    pricing = PRESETS.get(pricing_name, PRESETS["anthropic"])
    if pricing.cache_write_1h_usd_per_mtok <= pricing.cache_write_usd_per_mtok:
        pricing = PRESETS["anthropic"]
    extra = pricing.cache_write_1h_usd_per_mtok - pricing.cache_write_usd_per_mtok
    saved = pricing.cache_write_usd_per_mtok - pricing.cache_read_usd_per_mtok
    return extra / saved, pricing.name


def session_idle_gaps(data: ReportData) -> Figure:
    """Idle gaps between a session's requests against the TTLs (ECDF, from one run's
    requests): which gaps a 5-minute TTL covers, which only a 1-hour TTL class covers, and,
    for runs priced with a hosted API's prices, whether a 1-hour write class pays back (the
    share of its writes that never do)."""
    frames, _ = _request_frames(data, ("session_id",), "")
    frames = {r: f for r, f in frames.items() if f["session_id"].notna().any()}
    if not frames:
        raise PlotSkipped("the trace has no session ids")
    run_id, frame = next(iter(frames.items()))
    gaps = np.sort(idle_gaps_s(frame))
    if gaps.size == 0:
        raise PlotSkipped("no session has two requests")
    overlapping = float((gaps < 0).mean())
    gaps = np.maximum(gaps, 0.0)
    writes = int(frame["session_id"].notna().sum())  # every request writes its new tail
    in_window = int(((gaps > FIVE_MINUTES_S) & (gaps <= ONE_HOUR_S)).sum())
    priced = "cost_pricing" in data.ok and data.ok["cost_pricing"].notna().any()
    fig, (ax,) = new_figure(width=8.0, height=4.5)
    ax.step(np.maximum(gaps, 1e-3), np.arange(1, gaps.size + 1) / gaps.size, where="post",
            label=f"{gaps.size:,} gaps in {frame['session_id'].nunique():,} sessions")
    ttls = sorted({float(t) for t in data.ok.get("cache_ttl_s", pd.Series()).dropna()})
    for ttl in ttls:
        ax.axvline(ttl, color="tab:green", linestyle=":", linewidth=1)
    if ttls:
        ax.plot([], [], color="tab:green", linestyle=":", label="TTLs of the runs")
    ax.axvline(FIVE_MINUTES_S, color="tab:orange", linestyle="--", label="5 min (short class)")
    ax.axvline(ONE_HOUR_S, color="tab:red", linestyle="--", label="1 h (long class)")
    ax.set_xscale("log")
    ax.autoscale_view()
    time_ticks(ax.xaxis)
    ax.set_title("Idle gaps between a session's requests", fontsize=10)
    ax.set_xlabel("gap: next arrival after the previous request (log scale)")
    ax.set_ylabel("share of gaps (%)")
    percent_axis(ax.yaxis)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="center right")
    short = float((gaps <= FIVE_MINUTES_S).mean())
    text = (f"gaps <= 5 min: {share_text(short)} (a 5-min TTL keeps the prefix)\n"
            f"5 min - 1 h: {share_text(in_window / gaps.size)} (only a 1-h class keeps it)\n"
            f"> 1 h: {share_text(float((gaps > ONE_HOUR_S).mean()))} (neither)")
    if overlapping:
        text += (f"\nnext arrived before the previous finished: {overlapping:.0%}"
                 f"\n(the run fell behind the trace's times): gap 0, at the left edge")
    if priced:
        break_even, priced_by = long_ttl_break_even(str(data.ok["cost_pricing"].dropna().iloc[0]))
        text += (f"\n1-h writes that never pay back: {1 - in_window / writes:.0%} of "
                 f"{writes:,} requests"
                 f"\nbreak-even ({priced_by} prices): {break_even:.0%} must pay back")
    # the ECDF climbs from the lower left to the upper right: the box goes in the corner it
    # leaves empty, above the curve where most gaps are long, else below it on the right
    low, high = np.log10(ax.get_xlim())
    middle = (np.log10(max(float(np.median(gaps)), 1e-3)) - low) / (high - low)
    corner = (0.02, 0.96, "top", "left") if middle > 0.5 else (0.98, 0.04, "bottom", "right")
    ax.text(corner[0], corner[1], text, transform=ax.transAxes, va=corner[2], ha=corner[3],
            fontsize=8, multialignment="left",
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#ccc"})
    return tag(fig, [run_id], f"Gaps of {run_id}'s requests (the trace's sessions).")


LENGTH_LOG_SPAN = 30.0  # lengths whose largest / smallest (> 0) exceeds this: log bins
HISTOGRAM_HEADROOM = 1.18  # the length histograms' y axis reaches this times the top


def _length_histogram(ax, lengths: np.ndarray, note: str = "") -> None:
    """30 bins of token counts: log-spaced on a log axis where the lengths span more than
    LENGTH_LOG_SPAN (a long tail of outputs would put nearly all in one linear bin; zero
    lengths, which a log axis cannot show, are counted in the legend), else linear; ticks
    as 5k, 200k. `note` ends the legend's label."""
    positive = lengths[lengths > 0]
    label = f"{lengths.size:,} requests{note}"
    if positive.size and positive.max() / positive.min() > LENGTH_LOG_SPAN:
        ax.hist(positive, bins=np.geomspace(positive.min(), positive.max(), 31), label=label
                + (f" ({lengths.size - positive.size:,} of length 0 not shown)"
                   if positive.size < lengths.size else ""))
        ax.set_xscale("log")
    else:
        ax.hist(lengths, bins=30, label=label)
        short_number_axis(ax.xaxis)


def workload(data: ReportData) -> Figure:
    """The trace: prompt and output lengths, arrivals over time (from the first run)."""
    frames = data.frames("requests", limit=1)
    if not frames:
        raise PlotSkipped("no requests.parquet in the runs")
    run_id, frame = next(iter(frames.items()))
    require(frame, ["input_tokens", "output_tokens", "arrival_s"])
    fig, axes = new_figure(ncols=3, width=4.5)
    rejected = (frame["status"] == REJECTED).to_numpy() if "status" in frame \
        else np.zeros(len(frame), dtype=bool)
    for ax, column in zip(axes[:2], ("input_tokens", "output_tokens"), strict=True):
        lengths = frame[column].to_numpy(dtype=float)
        if column == "output_tokens" and rejected.any():  # a rejected request outputs none
            _length_histogram(ax, lengths[~rejected], f" ({int(rejected.sum()):,} rejected "
                                                      "not shown: no output)")
        else:
            _length_histogram(ax, lengths)
        ax.set_title(f"{column.split('_')[0].capitalize()} length", fontsize=10)
        label = axis_label(column)  # `input (tokens)`: a log scale joins its parentheses
        ax.set_xlabel(label[:-1] + ", log scale)" if ax.get_xscale() == "log" else label)
        ax.set_ylabel("requests (count)")
        ax.set_ylim(top=ax.get_ylim()[1] * HISTOGRAM_HEADROOM)  # the legend above the bars
        ax.legend(fontsize=8, loc="upper right")
    arrivals = frame["arrival_s"].to_numpy(dtype=float)
    span = max(float(arrivals.max() - arrivals.min()), 1.0)
    bin_s = max(span / 30, 1.0)
    counts, edges = np.histogram(arrivals, bins=max(int(span / bin_s), 1))
    size, unit = time_unit(float(arrivals.max()))
    # stairs: every bin a step, the last one too (a step plot left it a riser), from 0
    axes[2].stairs(counts / (edges[1] - edges[0]), edges / size,
                   label=f"bins of {short_seconds(edges[1] - edges[0])}")
    axes[2].set_ylim(bottom=0)
    stages = data.summary(run_id).get("stages")
    starts = [float(stage["start_s"]) for stage in stages or []
              if isinstance(stage, dict) and isinstance(stage.get("start_s"), (int, float))]
    for number, start in enumerate(starts[1:]):  # where each later load stage began
        axes[2].axvline(start / size, color="grey", linestyle=":", linewidth=1,
                        label="load stage starts" if number == 0 else None)
    axes[2].set_title("Arrival rate over time", fontsize=10)
    axes[2].set_xlabel(f"arrival time ({unit})")
    thousands_axis(axes[2].xaxis)
    axes[2].set_ylabel("arrival rate (requests per s)")
    axes[2].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Workload characterisation (requests of {run_id})", fontsize=11)
    return fig
