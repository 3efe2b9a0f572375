"""Figure building blocks: axis labels with units, curve grouping, panels of runs, the
generic x-y plot.

`xy_figure` is the one line-plot routine behind the sweep plots and `prefixsim plot`: rows
of a table, one curve per combination of `curve_by` columns, one panel per `col_by` value.
Rows whose x is missing (an unbounded capacity, no TTL) can be drawn as dashed horizontal
bounds of the curve with the same other values. `run_panels` splits the runs of a plot
drawn per run (over time, per request) into small multiples so that every run is drawn and
named in a legend, never a silent subset; `tag` records on a figure which runs it drew
(the report puts them on the page, where the browser test reads them). Matplotlib runs on
the Agg backend.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from prefixsim.report.data import short_name, show_swept  # noqa: E402

KNOWN_LABELS = {
    "cache_capacity_tokens": "cache capacity (tokens)",
    "cache_ttl_s": "TTL (s)",
    "cache_token_hit_rate": "token hit rate (share of prompt tokens)",
    "cache_request_hit_rate": "request hit rate (share of requests)",
    "cache_policy": "eviction policy",
    "cache_usage": "cache usage (share of capacity)",
    "evictions": "evictions (pages, cumulative)",
    "expirations": "expirations (pages, cumulative)",
}
UNIT_SUFFIXES = (("_tokens", "tokens"), ("_ms", "ms"), ("_s", "s"), ("_usd", "USD"),
                 ("_bytes", "bytes"), ("_pages", "pages"), ("_rate", "share"),
                 ("_throughput", "per s"))


MAX_RUNS_PER_PANEL = 10  # matplotlib's default colour cycle has 10 colours


SHORT_LABEL = 30  # characters: labels up to this long go two to a legend row


def legend_columns(labels: Sequence[str]) -> int:
    return 2 if len(labels) > 3 and max(map(len, labels)) <= SHORT_LABEL else 1


def legend_rows(labels: Sequence[str]) -> int:
    """Rows a legend_below of these labels takes."""
    return math.ceil(len(labels) / legend_columns(labels)) if labels else 0


def legend_below(ax, fontsize: float = 7) -> None:
    """The legend under the panel (two columns when its labels are short), so it never
    hides the data; panel_grid(legend_rows=...) leaves the room."""
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, fontsize=fontsize, loc="upper center",
              bbox_to_anchor=(0.5, -0.2), ncol=legend_columns(labels), frameon=False)


class PlotSkipped(Exception):
    """A plot cannot be drawn from this data; the message says why."""


@dataclass(frozen=True)
class Panel:
    """One panel of a per-run plot: its title, its runs, and the column it groups by (left
    out of the runs' legend labels, since the title says it)."""

    title: str
    runs: list[str]
    group_by: str | None = None


def run_panels(table: pd.DataFrame, swept: Sequence[str], runs: Sequence[str]) -> list[Panel]:
    """Every one of `runs` (ids in `table`'s run_id column), in panels of at most
    MAX_RUNS_PER_PANEL: grouped by the swept column with the fewest distinct values among
    them (at least 2), else one group; a group too big is cut into parts."""
    rows = table.set_index("run_id").loc[list(runs)] if len(runs) else table.iloc[:0]
    counts = {c: rows[c].astype(str).nunique(dropna=False) for c in swept if c in rows}
    candidates = [c for c in swept if counts.get(c, 0) >= 2]
    column = min(candidates, key=lambda c: counts[c]) if candidates else None
    groups: dict[str, list[str]] = {}
    for run_id in runs:
        key = "all runs" if column is None else \
            f"{short_name(column)}={show_swept(column, rows.loc[run_id, column])}"
        groups.setdefault(key, []).append(run_id)
    panels = []
    for key, members in groups.items():
        parts = [members[i:i + MAX_RUNS_PER_PANEL]
                 for i in range(0, len(members), MAX_RUNS_PER_PANEL)]
        for n, part in enumerate(parts, start=1):
            title = key if len(parts) == 1 else f"{key} (part {n} of {len(parts)})"
            panels.append(Panel(title, part, column))
    return panels


def panel_grid(num_panels: int, ncols: int = 3, width: float = 5.0,
               height: float = 3.6, legend_rows: int = 0) -> tuple[Figure, list]:
    """A grid with room for `num_panels` axes (at most `ncols` across) and, under each, a
    legend of up to `legend_rows` rows (legend_below); spare cells removed."""
    ncols = max(1, min(ncols, num_panels))
    nrows = max(1, math.ceil(num_panels / ncols))
    if legend_rows:
        height += 0.45 + 0.16 * legend_rows
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows),
                             squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[num_panels:]:
        fig.delaxes(ax)
    return fig, flat[:num_panels]


def tag(fig: Figure, runs: Sequence[str] | None, note: str = "") -> Figure:
    """Record on `fig` the runs it drew one by one (None: it draws the runs' table, not
    each run) and a note for its caption, such as runs it could not draw and why; the
    report writes them next to the image."""
    fig.prefixsim_runs = None if runs is None else list(runs)  # type: ignore[attr-defined]
    fig.prefixsim_note = note  # type: ignore[attr-defined]
    return fig


def axis_label(column: str) -> str:
    """A readable axis label with the unit taken from the column's suffix."""
    if column in KNOWN_LABELS:
        return KNOWN_LABELS[column]
    text = column.replace("_", " ")
    for suffix, unit in UNIT_SUFFIXES:
        if column.endswith(suffix):
            return f"{column[: -len(suffix)].replace('_', ' ')} ({unit})"
    if column.startswith("num_") or column.endswith(("evictions", "expirations")):
        return f"{text} (count)"
    return text


def show_value(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def plain_text():
    """A context in which text is drawn as given: a `$` in a label from a results file (a
    swept string such as `$\\foo{$`) is not parsed as mathtext, which could fail the report."""
    return matplotlib.rc_context({"text.parse_math": False})


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 7.0,
               height: float = 4.5) -> tuple[Figure, list]:
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols if ncols > 1 else width,
                                                    height * nrows), squeeze=False)
    return fig, [ax for row in axes for ax in row]


def plain_log_ticks(fig: Figure) -> None:
    """Tick labels of the figure's log axes as plain text (5k, 20k, 1M): matplotlib's own
    are math text, which `plain_text` (rightly) leaves unparsed, so they would be drawn as
    raw `$\\mathdefault{10^{4}}$`. Minor ticks are labelled (at 2x and 5x a power of ten) only where
    fewer than two major ticks fall inside the axis."""
    for ax in fig.axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale != "log":
                continue
            axis.set_major_formatter(FuncFormatter(_short_number))
            low, high = sorted(axis.get_view_interval())
            majors = [t for t in axis.get_majorticklocs() if low <= t <= high]
            axis.set_minor_formatter(NullFormatter() if len(majors) >= 2
                                     else FuncFormatter(_one_two_five))


def _one_two_five(value: float, _position: object = None) -> str:
    """A minor tick's label at 2 and 5 times a power of ten only (no crowding)."""
    if value <= 0:
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value))
    return _short_number(value) if round(mantissa, 6) in (2.0, 5.0) else ""


def _short_number(value: float, _position: object = None) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG (log axes labelled in plain text); closes it."""
    buffer = io.BytesIO()
    plain_log_ticks(fig)
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def require(table: pd.DataFrame, columns: Sequence[str], why: str = "") -> None:
    missing = [c for c in columns if c not in table.columns or table[c].isna().all()]
    if missing:
        raise PlotSkipped(f"no {', '.join(missing)} in the results{why}")


def varying(table: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """Those of `columns` with more than one distinct value (missing counts as a value)."""
    return [c for c in columns if c in table and table[c].astype(str).nunique(dropna=False) > 1]


def _key(row: pd.Series, columns: Sequence[str]) -> tuple[str, ...]:
    return tuple(show_value(row[c]) for c in columns)


def curve_label(columns: Sequence[str], key: tuple[str, ...]) -> str:
    return ", ".join(f"{c}={v}" for c, v in zip(columns, key, strict=True)) or "all runs"


@dataclass(frozen=True)
class XYLayout:
    """How `xy_figure` groups rows into curves and panels and draws them."""

    curve_by: Sequence[str] = ()
    col_by: str | None = None
    scale_x: str = "linear"
    title: str | None = None
    bounds_label: str | None = None
    min_points: int = 1
    dashed: Sequence[str] = ()
    match_by: Sequence[str] | None = None


def xy_figure(table: pd.DataFrame, x: str, y: str, **layout: Any) -> Figure:
    """One curve per `curve_by` combination (sorted by x), one panel per `col_by` value;
    `layout` holds the fields of `XYLayout`.

    Rows with a missing x become dashed horizontal lines labelled `bounds_label` when it is
    given (else they are dropped), drawn for the curve that has the same `match_by` values
    (default: `curve_by`). Curves with fewer than `min_points` points are dropped;
    curves whose label contains one of `dashed` are drawn dashed.
    """
    with plain_text():
        return _xy_figure(table, x, y, XYLayout(**layout))


def _xy_figure(table: pd.DataFrame, x: str, y: str, layout: XYLayout) -> Figure:
    curve_by, col_by, min_points = layout.curve_by, layout.col_by, layout.min_points
    bounds_label, dashed, match_by = layout.bounds_label, layout.dashed, layout.match_by
    require(table, [x, y])
    match_by = list(curve_by if match_by is None else match_by)
    panels = [(None, table)] if col_by is None else [
        (show_value(v), part) for v, part in table.groupby(col_by, dropna=False, sort=True)]
    fig, axes = new_figure(ncols=len(panels))
    drawn = 0
    for ax, (panel, part) in zip(axes, panels, strict=True):
        points = part[part[x].notna()]
        missing_x = part[part[x].isna()]
        colours = {}
        for key, curve in _groups(points, curve_by):
            if len(curve) < min_points:
                continue
            curve = curve.sort_values(x)
            label = curve_label(curve_by, key)
            style = "--" if any(d in label for d in dashed) else "-"
            (line,) = ax.plot(curve[x], curve[y], marker="o", linestyle=style, label=label)
            colours[_key(curve.iloc[0], match_by)] = (line.get_color(), label)
            drawn += 1
        if bounds_label is not None:
            for _, row in missing_x.iterrows():
                key = _key(row, match_by)
                if key in colours and pd.notna(row[y]):
                    colour, label = colours[key]
                    ax.axhline(row[y], linestyle="--", color=colour, linewidth=1.2,
                               label=f"{bounds_label} ({label})")
        ax.set_xscale(layout.scale_x)
        ax.set_xlabel(axis_label(x))
        ax.set_ylabel(axis_label(y))
        heading = layout.title or f"{axis_label(y)} vs {axis_label(x)}"
        ax.set_title(heading if panel is None else f"{heading}\n{col_by}={panel}", fontsize=10)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    if drawn == 0:
        plt.close(fig)
        raise PlotSkipped(f"no curve with {min_points} or more runs at distinct {x}")
    return fig


def _groups(table: pd.DataFrame, columns: Sequence[str]):
    if not columns:
        yield (), table
        return
    keys = table.apply(lambda row: _key(row, columns), axis=1) if len(table) else []
    for key in dict.fromkeys(keys):
        yield key, table[[k == key for k in keys]]
