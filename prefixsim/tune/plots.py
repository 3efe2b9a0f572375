"""A tune's report plots: optimisation history, parameter importances, Pareto front, and
each objective against each parameter, drawn in the report's style (report/figures.py).

`tune_view(folder, data)` reads a tune folder's trials.parquet, tune.json and spec.yaml and
returns what `prefixsim report` draws: these plots as (name, plot) pairs in the form of
report/plots.py's `PLOTS` (one that cannot be drawn raises `PlotSkipped` saying why), then
the standard per-run plots over the headline runs. Importances are Optuna's PED-ANOVA (no
scikit-learn needed) over the knobs every complete trial set; without Optuna that plot is
skipped. Nothing here writes.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from matplotlib.figure import Figure

from prefixsim.errors import InputError
from prefixsim.report import PLOTS, PlotSkipped, ReportData, axis_label
from prefixsim.report.figures import new_figure, readable_ticks, short_number_axis
from prefixsim.sweep.spec import column_name
from prefixsim.tune.samplers import optuna_module
from prefixsim.tune.space import CATEGORICAL, Knob, parse_knob
from prefixsim.tune.store import read_tune_meta

Plot = Callable[[ReportData], Figure]
MAX_PARAM_PANELS = 8
MAX_HEADLINE_BEST = 3  # Pareto-front trials shown beside the base in the per-run plots
SHORT_TICKS_FROM = 1000  # a linear knob axis reaching this is ticked 5k, 30k (4-inch panels)
SHORT_CHOICE = 6  # characters: categorical choices up to this long are not turned
ALONG_AN_AXIS = ("policy_zoo", "hit_rate_vs_ttl", "p99_ttft_vs_capacity")


def _knobs(folder: Path) -> list[Knob]:
    """The spec's knobs, re-read from DIR/spec.yaml (only the space: is needed)."""
    path = folder / "spec.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    knobs: list[Knob] = []

    def error(message: str, field: str) -> InputError:
        return InputError(message, file=str(path), field=field)

    for key, value in ((data or {}).get("space") or {}).items():
        knobs.append(parse_knob(str(key), value, knobs, error))
    return knobs


def tune_view(folder: Path, data: ReportData) -> tuple[ReportData, list[tuple[str, Plot]]]:
    """What `prefixsim report` draws for `folder`: for a tune, its plots, then the standard
    per-run plots over the headline runs only (the best trial(s), their held-out re-runs and
    the base; every trial is in the history and trials.parquet), without the plots along a
    swept axis (random samples make no curve). Any other folder: `data` and `PLOTS`."""
    meta = read_tune_meta(folder)
    path = folder / "trials.parquet"
    if meta is None or not path.is_file():
        return data, list(PLOTS)
    trials = pd.read_parquet(path)
    knobs = _knobs(folder)
    objectives = [(o["key"], o["direction"]) for o in meta["objectives"]]
    headline = [entry.get(k) for entry in meta.get("best", [])[:MAX_HEADLINE_BEST]
                for k in ("run_id", "test_run_id")]
    headline += ["base", "base-train", "base-test"]
    table = data.table[data.table["run_id"].isin([r for r in headline if r])]
    order = {run_id: i for i, run_id in enumerate(headline)}
    table = table.sort_values("run_id", key=lambda ids: ids.map(order)).reset_index(drop=True)
    focused = dataclasses.replace(data, table=table, swept=[], _frames={})
    plots: list[tuple[str, Plot]] = [
        ("optimisation_history", _bound(history, trials, objectives, meta)),
        ("parameter_importances", _bound(importances, trials, objectives, knobs)),
        ("pareto_front", _bound(pareto, trials, objectives, meta)),
        ("objective_vs_parameters", _bound(vs_parameters, trials, objectives, knobs)),
    ]
    return focused, plots + [(n, p) for n, p in PLOTS if n not in ALONG_AN_AXIS]


def _objective_values(trials: pd.DataFrame, meta: dict[str, Any], key: str) -> pd.Series:
    """Every value of objective `key` the history draws: the trials', the base's and the
    best trial's on the test part (so a share's axis is in % only when all are shares)."""
    extra = [(meta.get("base", {}).get(part) or {}).get(key) for part in ("train", "all", "test")]
    extra.append(((meta.get("best") or [{}])[0].get("test") or {}).get(key))
    return pd.concat([trials[key], pd.Series([v for v in extra if v is not None], dtype=float)])


def _bound(draw: Callable[..., Figure], *args: Any) -> Plot:
    """A report plot (ReportData -> Figure) that draws `draw(*args)`; its docstring is the
    report's caption."""

    def plot(data: ReportData) -> Figure:
        return draw(*args)

    plot.__doc__ = draw.__doc__
    return plot


def _feasible(trials: pd.DataFrame) -> pd.DataFrame:
    return trials[(trials["state"] == "complete") & (trials["feasible"] == True)]  # noqa: E712


def history(trials: pd.DataFrame, objectives: list[tuple[str, str]],
            meta: dict[str, Any]) -> Figure:
    """Each objective per trial, the best feasible value so far, and the held-out figures."""
    done = trials[trials["state"] == "complete"]
    if done.empty:
        raise PlotSkipped("no complete trial")
    fig, axes = new_figure(ncols=len(objectives), width=6.5)
    best = (meta.get("best") or [{}])[0]
    for ax, (key, direction) in zip(axes, objectives, strict=True):
        ok = _feasible(trials)
        bad = done[~done.index.isin(ok.index)]
        ax.scatter(ok["trial"], ok[key], s=14, label="feasible trial")
        if not bad.empty:
            ax.scatter(bad["trial"], bad[key], s=14, marker="x", color="grey",
                       label="infeasible trial")
        if not ok.empty and len(objectives) == 1:
            running = ok[key].cummax() if direction == "maximize" else ok[key].cummin()
            ax.step(ok["trial"], running, where="post", color="tab:red", label="best so far")
        for part, style in (("train", "--"), ("all", "--"), ("test", ":")):
            base = (meta.get("base", {}).get(part) or {}).get(key)
            if base is not None:
                ax.axhline(base, linestyle=style, color="black", linewidth=1,
                           label=f"base config ({part} part)")
        test = (best.get("test") or {}).get(key)
        if test is not None:
            ax.scatter([best["trial"]], [test], marker="*", s=120, color="tab:green",
                       zorder=3, label=f"best trial on the test part ({meta.get('split')})")
        ax.set_xlabel("trial")
        ax.set_ylabel(axis_label(key))
        readable_ticks(ax.yaxis, key, _objective_values(trials, meta, key))
        ax.set_title(f"{key} ({direction})", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Optimisation history ({meta.get('sampler', {}).get('name')}, "
                 f"{len(trials)} trials)", fontsize=11)
    return fig


def importances(trials: pd.DataFrame, objectives: list[tuple[str, str]],
                knobs: list[Knob]) -> Figure:
    """How much each knob matters to the first objective (Optuna's PED-ANOVA)."""
    try:
        optuna = optuna_module()
    except InputError as exc:
        raise PlotSkipped(str(exc)) from None
    ok = _feasible(trials)
    if len(ok) < 4 or not knobs:
        raise PlotSkipped("needs 4 or more feasible complete trials")
    distributions = {k.key: _distribution(optuna, k) for k in knobs}
    study = optuna.create_study(directions=[d for _, d in objectives])
    for _, row in ok.iterrows():
        params = {k.key: _param(row[column_name(k.key)], k) for k in knobs}
        params = {key: value for key, value in params.items() if value is not None
                  or None in getattr(distributions[key], "choices", ())}
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions={k: distributions[k] for k in params},
            values=[float(row[key]) for key, _ in objectives]))
    key, direction = objectives[0]
    sign = -1.0 if direction == "maximize" else 1.0  # PED-ANOVA looks for low values
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(
                study, evaluator=optuna.importance.PedAnovaImportanceEvaluator(),
                target=lambda t: sign * t.values[0])
    except Exception as exc:  # noqa: BLE001 - too few or too uniform trials
        raise PlotSkipped(f"importances could not be computed: {exc}") from None
    if not found:
        raise PlotSkipped("no knob was set by every complete trial")
    names = list(found)[::-1]
    fig, (ax,) = new_figure(height=max(2.5, 0.5 * len(names) + 1.5))
    ax.barh(names, [found[n] for n in names])
    ax.set_xlabel(f"importance for {key} (PED-ANOVA, share)")
    ax.set_title("Parameter importances", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def _distribution(optuna: Any, knob: Knob) -> Any:
    dist = optuna.distributions
    if knob.kind == CATEGORICAL:
        return dist.CategoricalDistribution(list(knob.choices))
    if knob.kind == "int":
        return dist.IntDistribution(int(knob.low), int(knob.high), log=knob.log,
                                    step=int(knob.step or 1))
    return dist.FloatDistribution(knob.low, knob.high, log=knob.log, step=knob.step)


def _param(value: Any, knob: Knob) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if knob.kind == CATEGORICAL:
        return next((c for c in knob.choices if str(c) == str(value)), value)
    return int(value) if knob.kind == "int" else float(value)


def pareto(trials: pd.DataFrame, objectives: list[tuple[str, str]],
           meta: dict[str, Any]) -> Figure:
    """The first two objectives of every feasible trial, the Pareto front joined."""
    if len(objectives) < 2:
        raise PlotSkipped("needs two or more objectives")
    (x, _), (y, _) = objectives[:2]
    ok = _feasible(trials)
    if ok.empty:
        raise PlotSkipped("no feasible complete trial")
    front = ok[ok["trial"].isin([b["trial"] for b in meta.get("best", [])])].sort_values(x)
    fig, (ax,) = new_figure()
    ax.scatter(ok[x], ok[y], s=14, color="grey", label="feasible trial")
    ax.plot(front[x], front[y], marker="o", color="tab:red", label="Pareto front")
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    readable_ticks(ax.xaxis, x, ok[x])
    readable_ticks(ax.yaxis, y, ok[y])
    ax.set_title("Pareto front", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def vs_parameters(trials: pd.DataFrame, objectives: list[tuple[str, str]],
                  knobs: list[Knob]) -> Figure:
    """The first objective against each knob (one panel each; colour: trial number)."""
    key, _ = objectives[0]
    done = trials[trials["state"] == "complete"]
    shown = [k for k in knobs if column_name(k.key) in done and done[column_name(k.key)]
             .notna().any()][:MAX_PARAM_PANELS]
    if done.empty or not shown:
        raise PlotSkipped("no complete trial")
    fig, axes = new_figure(ncols=min(len(shown), 4), nrows=math.ceil(len(shown) / 4),
                           width=4.0, height=3.5)
    for ax, knob in zip(axes, shown, strict=False):
        column = column_name(knob.key)
        rows = done[done[column].notna()]
        if knob.kind == CATEGORICAL:
            labels = [str(c) for c in knob.choices]
            x = np.array([labels.index(str(v)) if str(v) in labels else -1
                          for v in rows[column]], dtype=float)
            turned = max(map(len, labels)) > SHORT_CHOICE
            ax.set_xticks(range(len(labels)), labels, rotation=30 if turned else 0,
                          ha="right" if turned else "center", fontsize=8)
        else:
            x = rows[column].to_numpy(dtype=float)
            if knob.log:
                ax.set_xscale("log")  # ticked 5k / 20k as the report saves it
            elif np.nanmax(np.abs(x)) >= SHORT_TICKS_FROM:
                short_number_axis(ax.xaxis)  # 10k 20k 30k, not 10000 ... 35000 run together
        ax.scatter(x, rows[key], c=rows["trial"], s=14, cmap="viridis",
                   vmin=0, vmax=max(int(trials["trial"].max()), 1))
        ax.set_xlabel(axis_label(column))
        ax.set_ylabel(axis_label(key))
        readable_ticks(ax.yaxis, key, rows[key])  # a knob's own axis as matplotlib ticks it
        ax.grid(True, alpha=0.3)
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    fig.suptitle(f"{key} against each parameter (colour: trial number, dark = early)",
                 fontsize=11)
    return fig
