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

import contextlib
import io
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedFormatter,
    FixedLocator,
    FuncFormatter,
    LogFormatter,
    NullFormatter,
    NullLocator,
    PercentFormatter,
)

from prefixsim.report.data import applies, short_name, show_swept, swept_text  # noqa: E402
from prefixsim.report.format import short_number, significant  # noqa: E402

KNOWN_LABELS = {
    "cache_capacity_tokens": "cache capacity (tokens)",
    "cache_ttl_s": "TTL (s)",
    "cache_token_hit_rate": "token hit rate (% of prompt tokens)",
    "cache_request_hit_rate": "request hit rate (% of requests)",
    "cache_policy": "eviction policy",
    "cache_usage": "cache usage (share of capacity)",
    "evictions": "evictions (pages, cumulative)",
    "expirations": "expirations (pages, cumulative)",
}
WORD_SUFFIXES = ("_rate", "_throughput", "_goodput")  # part of the quantity's name too
UNIT_SUFFIXES = (("_tokens", "tokens"), ("_ms", "ms"), ("_s", "s"), ("_usd", "USD"),
                 ("_bytes", "bytes"), ("_pages", "pages"), ("_rate", "share"),
                 ("_throughput", "per s"), ("_goodput", "requests per s"))


MAX_RUNS_PER_PANEL = 10  # matplotlib's default colour cycle has 10 colours


SHORT_LABEL = 30  # characters: labels up to this long go two to a legend row


def legend_columns(labels: Sequence[str]) -> int:
    return 2 if len(labels) > 3 and max(map(len, labels)) <= SHORT_LABEL else 1


LEGEND_WRAP = 46  # characters: a longer legend label is wrapped onto more lines


def wrapped(label: str, width: int = LEGEND_WRAP) -> str:
    """A label broken onto lines of at most `width` characters (after commas and spaces)."""
    return "\n".join(textwrap.wrap(label, width, break_on_hyphens=False)) or label


def legend_rows(labels: Sequence[str]) -> int:
    """Text lines a legend_below of these labels takes."""
    if not labels:
        return 0
    lines = max(wrapped(label).count("\n") + 1 for label in labels)
    return math.ceil(len(labels) / legend_columns(labels)) * lines


def legend_below(ax, fontsize: float = 7) -> None:
    """The legend under the panel (two columns when its labels are short; long labels
    wrapped), so it never hides the data; panel_grid(legend_rows=...) leaves the room."""
    handles, labels = ax.get_legend_handles_labels()
    labels = [wrapped(label) for label in labels]
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
    everywhere = [c for c in candidates  # a column each run has a meaning for, if any
                  if all(applies(c, row) for _, row in rows.iterrows())]
    candidates = everywhere or candidates
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


def tag(fig: Figure, runs: Sequence[str] | None, note: str = "",
        left_out: Sequence[str] = ()) -> Figure:
    """Record on `fig` the runs it drew one by one (None: it draws the runs' table, not
    each run), a note for its caption, such as runs it could not draw and why, and the
    runs it left out on purpose (nothing to show: named in the note); the report writes
    them next to the image."""
    fig.prefixsim_runs = None if runs is None else list(runs)  # type: ignore[attr-defined]
    fig.prefixsim_note = note  # type: ignore[attr-defined]
    fig.prefixsim_left_out = list(left_out)  # type: ignore[attr-defined]
    return fig


ACRONYMS = re.compile(r"\b(ttft|tpot|itl|e2el|kv|hbm|gpu|ttl)\b")


def axis_label(column: str) -> str:
    """A readable axis label with the unit taken from the column's suffix, metric names in
    capitals as vLLM writes them (`p99_ttft_ms` -> `p99 TTFT (ms)`)."""
    if column in KNOWN_LABELS:
        return KNOWN_LABELS[column]
    text = column.replace("_", " ")
    for suffix, unit in UNIT_SUFFIXES:
        if column.endswith(suffix):  # a unit's suffix goes; a quantity's word stays
            name = column if suffix in WORD_SUFFIXES else column[: -len(suffix)]
            text = f"{name.replace('_', ' ')} ({unit})"
            break
    else:
        if column.endswith(("evictions", "expirations")):  # pages removed, not requests
            text = f"{text} (pages)"
        elif column.startswith("num_"):
            text = f"{text} (count)"
    return ACRONYMS.sub(lambda m: m.group(1).upper(), text)


def show_value(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def plain_text():
    """A context kept for callers that drew under it: math text stays on (so matplotlib's
    own tick labels render), and a `$` in a user string is escaped instead (`escape_math`,
    applied to every text of a figure by `finish_figure`)."""
    return contextlib.nullcontext()


UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")


def escape_math(text: str) -> str:
    """`text` with every unescaped `$` escaped, so it is drawn as written (a swept string
    such as `$\\foo{$` is never parsed as math text, which could fail the report)."""
    return UNESCAPED_DOLLAR.sub(r"\\$", text)


def _escape_texts(fig: Figure) -> None:
    """Escape `$` in every text of `fig`, fixed tick labels (run names) included."""
    for artist in fig.findobj(Text):
        text = artist.get_text()
        if "$" in text:
            artist.set_text(escape_math(text))
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            major, minor = axis.get_major_formatter(), axis.get_minor_formatter()
            if _given_labels(major):
                axis.set_major_formatter(_Escaped(major))
            if _given_labels(minor):
                axis.set_minor_formatter(_Escaped(minor))


def _given_labels(formatter: object) -> bool:
    """A formatter of labels a plot gave (run names: `set_yticks(positions, labels)`)."""
    return isinstance(formatter, (FixedFormatter, FuncFormatter)) and \
        not isinstance(formatter, _Escaped)


class _Escaped(FuncFormatter):
    """Another formatter's labels with `$` escaped."""

    def __init__(self, inner) -> None:
        self.inner = inner
        super().__init__(lambda value, position=None: escape_math(str(inner(value, position))))

    def set_locs(self, locs) -> None:
        self.inner.set_locs(locs)
        super().set_locs(locs)


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 7.0,
               height: float = 4.5) -> tuple[Figure, list]:
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols if ncols > 1 else width,
                                                    height * nrows), squeeze=False)
    return fig, [ax for row in axes for ax in row]


MIN_LOG_MAJORS = 3  # fewer powers of ten inside a log axis: 2x and 5x labelled too
# With 1-2-5 labels, an end of the axis lying more than this factor beyond its nearest
# label is moved out to the next 1-2-5 value, so that one is labelled there.
LOG_END_SLACK = 1.5


def plain_log_ticks(fig: Figure) -> None:
    """Tick labels of the figure's log axes as plain numbers (5k, 20k, 1M) instead of
    matplotlib's `10^4` math text, where a plot has not chosen its own (`value_ticks`,
    `time_ticks`). Minor ticks are labelled (at 2x and 5x a power of ten) only where fewer
    than MIN_LOG_MAJORS major ticks fall inside the axis (a TPOT axis of 10-420 ms is ticked
    10 20 50 100 200, not 10 and 100 with its highest points above every label); such an
    axis then also ends at labelled values (`_labelled_ends`: 7-450 ms is drawn 5-500, its
    highest points below a 500 label rather than far above the 200 one)."""
    for ax in fig.axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale not in ("log", "symlog") or \
                    not isinstance(axis.get_major_formatter(), LogFormatter):
                continue
            axis.set_major_formatter(FuncFormatter(_short_number))
            low, high = sorted(axis.get_view_interval())
            majors = [t for t in axis.get_majorticklocs() if low <= t <= high]
            few = len(majors) < MIN_LOG_MAJORS
            axis.set_minor_formatter(FuncFormatter(_one_two_five) if few else NullFormatter())
            if few and scale == "log":
                _labelled_ends(ax, axis)


def one_two_five_around(low: float, high: float) -> tuple[float, float]:
    """An interval of a log axis (0 < low <= high) widened at either end lying more than
    LOG_END_SLACK beyond the nearest 1-2-5 value inside it (1, 2, 5, 10, 20, ... times a
    power of ten) to the next such value outside: (7, 480) gives (5, 500), (9, 210) stays."""
    def steps(value: float) -> list[float]:
        power = 10.0 ** math.floor(math.log10(value))
        return [m * power * 10.0 ** k for k in (-1, 0, 1) for m in (1.0, 2.0, 5.0)]
    inside = [v for v in steps(low) + steps(high) if low <= v * (1 + 1e-9) and
              v <= high * (1 + 1e-9)]
    if not inside:
        return low, high
    if high > LOG_END_SLACK * max(inside):
        high = min(v for v in steps(high) if v >= high)
    if min(inside) > LOG_END_SLACK * low:
        low = max(v for v in steps(low) if v <= low)
    return low, high


def _labelled_ends(ax, axis) -> None:
    """Move the ends of `axis` (a log axis ticked 1-2-5) out to labelled values, unless
    the plot chose its limits itself (an ECDF cut at p99.9 stays cut there)."""
    if not (ax.get_autoscaley_on() if axis is ax.yaxis else ax.get_autoscalex_on()):
        return
    inverted = axis.get_inverted()
    low, high = sorted(axis.get_view_interval())
    if not (0 < low <= high < math.inf):
        return
    low, high = one_two_five_around(low, high)
    ends = (high, low) if inverted else (low, high)
    (ax.set_ylim if axis is ax.yaxis else ax.set_xlim)(*ends)


def _one_two_five(value: float, _position: object = None) -> str:
    """A minor tick's label at 2 and 5 times a power of ten only (no crowding)."""
    if value <= 0:
        return ""
    mantissa = value / 10 ** math.floor(math.log10(value))
    return _short_number(value) if round(mantissa, 6) in (2.0, 5.0) else ""


def _short_number(value: float, _position: object = None) -> str:
    return short_number(value)  # FuncFormatter's signature


def finish_figure(fig: Figure) -> Figure:
    """Make `fig` ready to save as the report saves it: `$` in its texts escaped, log axes
    labelled in plain text, the layout tightened."""
    _escape_texts(fig)
    plain_log_ticks(fig)
    fig.tight_layout()
    return fig


TIME_UNITS = ((86400.0, "d"), (3600.0, "h"), (60.0, "min"))
TIME_UNIT_SPAN = 5  # a unit is used once the axis spans this many of it


def time_unit(span_s: float) -> tuple[float, str]:
    """(seconds per unit, unit) a time axis spanning `span_s` seconds reads best in: days
    from 5 days, hours from 5 h, minutes from 5 min, else seconds (a week of a trace ticked
    0-7 d, not 100000 200000 ... s running into each other)."""
    for size, unit in TIME_UNITS:
        if span_s >= TIME_UNIT_SPAN * size:
            return size, unit
    return 1.0, "s"


def short_seconds(value: float) -> str:
    """A time tick: 10 -> 10 s, 120 -> 2 min, 3600 -> 1 h, 0.5 -> 0.5 s."""
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if value >= size:
            return f"{significant(value / size, 3)} {unit}"
    return f"{significant(value, 3)} s" if value > 0 else "0 s"


def value_ticks(axis, values, fmt=short_number, max_ticks: int = 8) -> None:
    """Major ticks at `values` (the swept capacities, TTLs, ...) labelled with `fmt`, when
    there are at most `max_ticks` of them; minor ticks unlabelled."""
    values = sorted({float(v) for v in values if v == v})
    if not values or len(values) > max_ticks:
        axis.set_major_formatter(FuncFormatter(lambda v, _=None: fmt(v)))
        return
    axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(FuncFormatter(lambda v, _=None: fmt(v)))
    axis.set_minor_locator(NullLocator())


def time_ticks(axis) -> None:
    """A log time axis ticked at round times (1 s, 10 s, 1 min, 10 min, 1 h, 1 d) that fall
    inside it, labelled as such."""
    low, high = sorted(axis.get_view_interval())
    rounds = [t for t in (0.01, 0.1, 1, 10, 60, 600, 3600, 6 * 3600, 86400, 7 * 86400)
              if low <= t <= high]
    axis.set_major_locator(FixedLocator(rounds))
    axis.set_major_formatter(FuncFormatter(lambda v, _=None: short_seconds(v)))
    axis.set_minor_formatter(NullFormatter())


def percent_axis(axis) -> None:
    """A share (0-1) shown in % on `axis`, with the decimals its tick step needs."""
    axis.set_major_formatter(StepPercentFormatter())


class StepPercentFormatter(PercentFormatter):
    """Shares (0-1) in %, with as many decimals as the ticks' step needs (none for steps of
    whole per cents: 0% 20% 40%; a link busy 0-1.2% of a run is ticked 0.0% 0.2% 0.4%, not
    0% 0% 0% 1%; 2.5% steps read 2.5% 5.0% 7.5%); at most 3."""

    def __init__(self) -> None:
        super().__init__(1.0, decimals=0)

    def set_locs(self, locs) -> None:
        super().set_locs(locs)
        ordered = sorted(float(v) for v in locs)
        steps = [b - a for a, b in zip(ordered, ordered[1:], strict=False) if b > a]
        step = 100 * min(steps) if steps else 1.0
        self.decimals = next((d for d in range(3) if abs(round(step, d) - step) < 1e-6 * step),
                             3)


def short_number_axis(axis) -> None:
    """A linear count axis ticked as 5k, 200k, 1.5M (no offset text, no digits run
    together)."""
    axis.set_major_formatter(FuncFormatter(_short_number))


def thousands_axis(axis) -> None:
    """A linear count axis with thousands separators (250,000), no offset text."""
    axis.set_major_formatter(FuncFormatter(lambda v, _=None: f"{v:,.0f}" if abs(v) >= 1000
                                           else significant(v, 6)))


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG (finish_figure first); closes it."""
    buffer = io.BytesIO()
    finish_figure(fig)
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


def curve_label(columns: Sequence[str], row: pd.Series) -> str:
    """`policy=lru, capacity=5k`: a curve's values as every report label shows them (the
    router and replicas left out of a cache-only run's)."""
    return swept_text(row, list(columns)) or "all runs"


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
        for _, curve in _groups(points, curve_by):
            if len(curve) < min_points:
                continue
            curve = curve.sort_values(x)
            label = curve_label(curve_by, curve.iloc[0])
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
        readable_ticks(ax.xaxis, x, points[x])
        readable_ticks(ax.yaxis, y, points[y])
        x_name = axis_label(x)
        if x.endswith("_s") and ax.get_xscale() in ("log", "symlog"):
            # ticked 30 s / 5 min / 1 h: the ticks carry the unit, which `(s)` contradicted
            x_name = x_name.removesuffix(" (s)")
            ax.set_xlabel(f"{x_name} (log scale)")
        heading = layout.title or f"{axis_label(y)} vs {x_name}"
        shown = None if panel is None else show_swept(col_by, part[col_by].iloc[0])
        ax.set_title(heading if panel is None else f"{heading}\n{short_name(col_by)}={shown}",
                     fontsize=10)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    if drawn == 0:
        plt.close(fig)
        raise PlotSkipped(f"no curve with {min_points} or more runs at distinct {x}")
    _share_y(axes)
    return fig


def _share_y(axes: Sequence) -> None:
    """Panels of one figure on one y range, where their scales agree (side by side, panels
    of 0.54-0.56 and 0.68-0.96 read as the same)."""
    if len(axes) < 2 or len({ax.get_yscale() for ax in axes}) > 1:
        return
    lows, highs = zip(*(ax.get_ylim() for ax in axes), strict=True)
    for ax in axes:
        ax.set_ylim(min(lows), max(highs))


LATENCY_LOG_SPAN = 10.0  # a latency axis (ms) whose values span more than this goes log


def positive_span(values: pd.Series) -> float:
    """max / min of the positive finite values (1 with none)."""
    values = pd.to_numeric(values, errors="coerce")
    values = values[(values > 0) & (values.abs() != math.inf)]
    return float(values.max() / values.min()) if len(values) else 1.0


def readable_ticks(axis, column: str, values: pd.Series) -> None:
    """Shares in %, capacities at the swept values (5k, 20k), times as 10 s / 1 min / 1 h,
    other token and count axes with thousands separators; a latency (ms) spanning more than
    LATENCY_LOG_SPAN goes logarithmic (a p99 TTFT of 3 s at a small cache beside 120 ms and
    200 ms at larger ones), else thousands."""
    if column.endswith("_rate") and values.dropna().between(0, 1).all():
        percent_axis(axis)
    elif column.endswith("_ms") and axis.get_scale() == "linear":
        if positive_span(values) > LATENCY_LOG_SPAN:
            ax = axis.axes
            (ax.set_yscale if axis is ax.yaxis else ax.set_xscale)("log")
        else:
            thousands_axis(axis)
    elif column.endswith("_s") and axis.get_scale() in ("log", "symlog"):
        value_ticks(axis, values, short_seconds)
    elif axis.get_scale() in ("log", "symlog"):
        value_ticks(axis, values)
    elif column.endswith(("_tokens", "evictions", "expirations")) or column.startswith("num_"):
        thousands_axis(axis)


def _groups(table: pd.DataFrame, columns: Sequence[str]):
    if not columns:
        yield (), table
        return
    keys = table.apply(lambda row: _key(row, columns), axis=1) if len(table) else []
    for key in dict.fromkeys(keys):
        yield key, table[[k == key for k in keys]]
