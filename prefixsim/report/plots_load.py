"""Latency against load: TTFT and TPOT (p50 and p99, ms, and the statistic of each SLO on them,
e.g. p90) against the offered and the achieved request rate (requests/s), per stage of a
staged load or per probe of a capacity search (docs/load.md).

`latency_load_figure` draws it from a table with one row per point: a 2x2 grid (rows TTFT
and TPOT, columns one x axis each), one curve per `curve` value (colours tell curves apart,
line and marker the statistic), failed points hollow, SLOs as dashed horizontal lines and
an answer as a dotted vertical one; it is also what capacity/plot.py draws `capacity.png`
with. `latency_vs_load` is the report's plot: a capacity folder's probes with its SLOs and
answer, else the stages of every staged run. A stage's offered rate is its `rate` (open
loops) or, for a closed loop's users, its requests over its duration; its achieved rate is
its `request_throughput`; a stage that did not keep up (its `kept_up`) is drawn hollow.
Labels are plain text (no math text, no offset such as `1e6` over an axis); a latency axis
whose values span more than LATENCY_LOG_SPAN times, a rate axis more than LOG_SPAN, goes
logarithmic (a capacity search's probes run from seconds of TTFT to a backlog of hours;
replicas double), ticked in plain numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from prefixsim.report.data import ReportData
from prefixsim.report.figures import (
    MAX_RUNS_PER_PANEL,
    PlotSkipped,
    new_figure,
    positive_span,
    readable_ticks,
    tag,
    thousands_axis,
    value_ticks,
)
from prefixsim.report.format import significant

LATENCIES = (("ttft", "TTFT"), ("tpot", "TPOT"))
STATS = (("p50", "o", "--"), ("p99", "s", "-"))  # statistic, marker, line style
# An SLO's own statistic (capacity/verdict.py's SLO_STATS) when it is neither of those: the
# probes were judged on it, so it is drawn beside them (median is p50).
SLO_STAT_STYLES = {"mean": ("D", ":"), "p90": ("^", "-."), "p95": ("v", "-.")}
# One colour per statistic on every panel of a single curve (several curves: one per curve).
STAT_COLOURS = {"p50": "C0", "p99": "C1", "p90": "C2", "p95": "C4", "mean": "C5"}
OFFERED = ("offered_rate", "offered rate (requests/s)")
ACHIEVED = ("achieved_rate", "achieved rate (requests/s)")
CURVE = "curve"  # the column naming each point's curve (absent: one curve)
PLOTTED_KEYS = tuple(f"{stat}_{name}_ms" for name, _ in LATENCIES for stat, _, _ in STATS)
LOG_SPAN = 100.0  # a rate axis whose positive values span more than this goes logarithmic
REPLICAS_LOG_SPAN = 8.0  # ... a replica count's (three doublings), in base 2


def latency_load_figure(points: pd.DataFrame,
                        x_axes: Sequence[tuple[str, str]] = (OFFERED, ACHIEVED), *,
                        slos: Mapping[str, float] | None = None,
                        answer: Mapping[str, Any] | None = None, title: str = "") -> Figure:
    """The grid described in the module docstring. `points` holds the x columns, the
    `{p50,p99}_{ttft,tpot}_ms` it has, and optionally `passed` (False: hollow) and `curve`;
    `answer` is the marked point's row (its x values); `x_axes` are (column, label) pairs."""
    curves = list(points[CURVE].unique()) if CURVE in points else [None]
    fig, axes = new_figure(ncols=len(x_axes), nrows=len(LATENCIES), width=5.5, height=3.8)
    for row, (name, shown) in enumerate(LATENCIES):
        for col, (x, x_label) in enumerate(x_axes):
            ax = axes[row * len(x_axes) + col]
            stats = drawn_stats(points, slos, name)
            for number, curve in enumerate(curves):
                part = points if curve is None else points[points[CURVE] == curve]
                _draw_curve(ax, part.sort_values(x_axes[0][0]), x, name, shown, stats,
                            None if curve is None else (f"C{number % 10}", str(curve)))
            for key, limit in (slos or {}).items():
                if key.endswith(f"_{name}_ms"):
                    ax.axhline(limit, color="black", linestyle="--", linewidth=1,
                               label=f"SLO {key} = {significant(limit, 6)} ms")
            if answer is not None and pd.notna(answer.get(x)):
                ax.axvline(float(answer[x]), color="grey", linestyle=":",
                           label=f"answer (knee): {significant(float(answer[x]), 3)}")
            ax.set_xlabel(x_label)
            _x_scale(ax, points[x], counts="(count)" in x_label)
            ys = [points[k] for k in (f"{stat}_{name}_ms" for stat, _, _ in stats) if k in points]
            _y_scale(ax, pd.concat(ys) if ys else pd.Series(dtype=float), slos, name)
            ax.set_ylabel(f"{shown} (ms)")
            ax.set_title(f"{shown} vs {x_label.split(' (')[0]}", fontsize=10)
            ax.grid(True, alpha=0.3)
            if len(curves) == 1 or (row, col) == (0, len(x_axes) - 1):
                _legend(ax, len(curves) > 1, stats)  # several curves: one legend, top right
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def drawn_stats(points: pd.DataFrame, slos: Mapping[str, float] | None,
                name: str) -> list[tuple[str, str, str]]:
    """(statistic, marker, line style) drawn for one latency: p50 and p99, and before p99 the
    statistic of every SLO on it that the points hold (a probe judged on its p90 TTFT shows
    its p90 TTFT; `median` is p50)."""
    extra = {key.removesuffix(f"_{name}_ms") for key in (slos or {})
             if key.endswith(f"_{name}_ms") and key in points}
    chosen = [(stat, *SLO_STAT_STYLES[stat]) for stat in SLO_STAT_STYLES if stat in extra]
    return [STATS[0], *chosen, STATS[1]]


def _x_scale(ax, values: pd.Series, counts: bool) -> None:
    """A rate axis logarithmic past LOG_SPAN; a replica count in base 2 past
    REPLICAS_LOG_SPAN, ticked at the counts probed where there are at most 8 of them, else at
    whole numbers (a single probe's axis was ticked 0.95-1.05 replicas: too few whole numbers
    in view for an integer locator)."""
    if counts:
        if positive_span(values) >= REPLICAS_LOG_SPAN:
            ax.set_xscale("log", base=2)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        value_ticks(ax.xaxis, values.dropna())
    elif positive_span(values) > LOG_SPAN:
        ax.set_xscale("log")
    else:
        thousands_axis(ax.xaxis)


def _y_scale(ax, values: pd.Series, slos: Mapping[str, float] | None, name: str) -> None:
    """A latency axis as figures.readable_ticks ticks one, over its figures and SLOs:
    logarithmic past LATENCY_LOG_SPAN (an SLO of 2 s beside a backlog of 30 min would sit on
    the zero line), else linear with plain thousands (no `1e6` offset)."""
    limits = [v for k, v in (slos or {}).items() if k.endswith(f"_{name}_ms")]
    readable_ticks(ax.yaxis, f"{name}_ms", pd.concat([values, pd.Series(limits, dtype=float)]))


def _draw_curve(ax, part: pd.DataFrame, x: str, name: str, shown: str,
                stats: Sequence[tuple[str, str, str]], curve: tuple[str, str] | None) -> None:
    """One curve's statistics on one panel; `curve` is (colour, label) among several."""
    for stat, marker, style in stats:
        key = f"{stat}_{name}_ms"
        if key not in part or part[key].isna().all():
            continue
        colour = STAT_COLOURS[stat] if curve is None else curve[0]
        named = curve is not None and stat == "p99"  # a curve's colour, named once
        line = ax.plot(part[x], part[key], linestyle=style,
                       alpha=0.5 if curve is None else 0.85,  # several: colours told apart
                       color=colour, label=curve[1] if named else None)[0]
        if curve is None:  # the statistic's entry, whether its points passed or failed
            ax.plot([], [], color=line.get_color(), linestyle=style, marker=marker,
                    label=f"{shown} {stat}")
        passed = part["passed"].astype(bool) if "passed" in part else pd.Series(True, part.index)
        for ok, face in ((True, line.get_color()), (False, "none")):
            chosen = part[passed == ok]
            if len(chosen):
                ax.scatter(chosen[x], chosen[key], marker=marker, facecolors=face,
                           edgecolors=line.get_color(),
                           gid=f"{shown} {stat}{'' if ok else ' failed'}")


def _legend(ax, several: bool, stats: Sequence[tuple[str, str, str]]) -> None:
    """Several curves: their colours plus one entry per statistic's style, right of the
    panel; one curve: inside it."""
    handles, labels = ax.get_legend_handles_labels()
    if several:
        for stat, marker, style in stats:
            handles.append(Line2D([], [], color="black", marker=marker, linestyle=style))
            labels.append(stat)
        ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False)
    else:
        ax.legend(handles, labels, fontsize=7)


def stage_points(data: ReportData) -> tuple[pd.DataFrame, list[str]]:
    """One row per stage of every successful staged run (module docstring), and those runs."""
    rows, runs = [], []
    for run_id in data.ok["run_id"]:
        stages = data.summary(run_id).get("stages")
        if not isinstance(stages, list) or not stages:
            continue
        runs.append(run_id)
        for stage in stages:
            if not isinstance(stage, dict):
                continue
            rate = stage.get("rate")
            if rate is None and stage.get("duration_s"):
                rate = (stage.get("num_requests") or 0) / stage["duration_s"]
            rows.append({CURVE: data.label(run_id), "offered_rate": rate,
                         "achieved_rate": stage.get("request_throughput"),
                         "passed": stage.get("kept_up") is not False,
                         **{k: stage.get(k) for k in PLOTTED_KEYS}})
    return pd.DataFrame(rows), runs


def latency_vs_load(data: ReportData) -> Figure:
    """Latency against load: TTFT and TPOT (p50 dashed with circles, p99 solid with squares)
    against the offered and the achieved request rate, per probe of a capacity search (its
    SLOs dashed, its answer dotted, failed probes hollow) or per stage of each staged run
    (a closed loop's offered rate is its stage's requests over the stage's duration; a stage
    whose fleet did not keep up hollow)."""
    if data.capacity is not None:
        probes, answer = data.capacity.probes, data.capacity.answer
        if probes.empty:
            raise PlotSkipped("the capacity search ran no probe")
        return tag(capacity_figure(probes, answer), None)
    points, runs = stage_points(data)
    if points.empty:
        raise PlotSkipped("no run has load stages (load.stages) and this is not a "
                          "capacity folder")
    if points[list(PLOTTED_KEYS)].isna().all().all():
        raise PlotSkipped("the staged runs have no latencies (cache-only runs have no timing)")
    shown = runs[:MAX_RUNS_PER_PANEL]
    kept = points[points[CURVE].isin({data.label(r) for r in shown})]
    if len(runs) == 1:
        kept = kept.drop(columns=CURVE)
    left = runs[MAX_RUNS_PER_PANEL:]
    note = f"Not drawn (one colour per run, at most {MAX_RUNS_PER_PANEL}): " \
        f"{', '.join(left)}." if left else ""
    title = "Latency against load, per stage"
    if not kept["passed"].all():
        title += " (hollow: the fleet did not keep up)"
    return tag(latency_load_figure(kept, title=title), shown, note)


def capacity_figure(probes: pd.DataFrame, answer: Mapping[str, Any]) -> Figure:
    """A capacity search's probes (capacity.parquet) and answer (capacity.json): a replicas
    search plots against the replicas instead of the offered rate, which it does not change."""
    replicas = answer.get("search") == "replicas"
    x_axes = (("config_value", "replicas (count)") if replicas else OFFERED, ACHIEVED)
    knee = probes[probes["run_id"] == answer.get("answer_run_id")]
    passed = probes["passed"].astype(bool).any() if "passed" in probes else True
    return latency_load_figure(
        probes, x_axes, slos=answer.get("slos") or {},
        answer=None if knee.empty else knee.iloc[0].to_dict(),
        title=f"Capacity search: {answer.get('search')} (hollow: failed probes"
              + ("" if passed else "; none passed: no answer") + ")")
