"""ReportData -> figures -> one self-contained report.html (PNG images inlined as base64).

`build_report` draws every standard plot it can and records why the others were skipped;
it returns the HTML and the PNG bytes and writes nothing (the CLI writes report.html and
plots/*.png). The page has no scripts and loads nothing from outside.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from prefixsim._version import __version__
from prefixsim.report.data import ReportData
from prefixsim.report.figures import PlotSkipped, png_bytes, show_value
from prefixsim.report.plots import PLOTS

Plot = Callable[[ReportData], object]

TABLE_METRICS = ("cache_token_hit_rate", "cache_request_hit_rate", "cache_hit_tokens",
                 "cache_evictions", "cache_expirations", "cache_peak_tokens", "p50_ttft_ms",
                 "p99_ttft_ms", "p99_tpot_ms", "request_throughput", "cost_total_usd",
                 "wall_time_s")
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; } td.text { text-align: left; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #555; } .failed { color: #a00; }
"""


@dataclass
class Report:
    """A drawn report: the page, each plot's PNG, and why the other plots were skipped."""

    html: str
    pngs: dict[str, bytes] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def draw_plots(data: ReportData, plots: Sequence[tuple[str, Plot]] = PLOTS
               ) -> tuple[dict[str, tuple[bytes, str]], dict[str, str]]:
    """Every plot of `plots` (the standard ones by default) as (PNG, caption), and
    {name: reason} for the skipped ones."""
    drawn, skipped = {}, {}
    for name, plot in plots:
        try:
            figure = plot(data)
        except PlotSkipped as exc:
            skipped[name] = str(exc)
            continue
        drawn[name] = (png_bytes(figure), (plot.__doc__ or name).strip().splitlines()[0])
    return drawn, skipped


def _cell(value: object) -> str:
    if isinstance(value, float) and not math.isnan(value):
        text = f"{value:.4f}" if abs(value) < 10 else f"{value:,.1f}"
    else:
        text = show_value(value)
    css = "" if isinstance(value, (int, float)) else ' class="text"'
    return f"<td{css}>{html.escape(text)}</td>"


def _table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def runs_table(data: ReportData) -> pd.DataFrame:
    """The table shown in the report: a sweep's rows, or a run's summary as key/value."""
    if data.kind == "run":
        row = data.table.iloc[0]
        return pd.DataFrame({"key": data.table.columns, "value": [row[c] for c in data.table]})
    columns = ["run_id", "status", *data.swept,
               *[c for c in TABLE_METRICS if c in data.table and c not in data.swept]]
    return data.table[[c for c in dict.fromkeys(columns) if c in data.table]]


def build_report(data: ReportData, plots: Sequence[tuple[str, Plot]] = PLOTS) -> Report:
    """The page and PNGs of `plots` over `data` (a tune adds its own plots, tune/plots.py)."""
    drawn, skipped = draw_plots(data, plots)
    parts = [f"<h1>{html.escape(data.title)}</h1>",
             f"<p>{len(data.table)} run(s); prefixsim {html.escape(__version__)}.</p>"]
    if "status" in data.table:
        failed = data.table[data.table["status"] != "ok"]
        if len(failed):
            items = "".join(f"<li>{html.escape(str(r.run_id))}: {html.escape(str(r.error))}</li>"
                            for r in failed.itertuples())
            parts.append(f'<h2 class="failed">Failed runs</h2><ul class="failed">{items}</ul>')
    parts.append("<h2>Plots</h2>")
    for name, (png, caption) in drawn.items():
        encoded = base64.b64encode(png).decode("ascii")
        parts.append(f'<figure id="{name}"><img alt="{html.escape(caption)}" '
                     f'src="data:image/png;base64,{encoded}">'
                     f"<figcaption>{html.escape(caption)} (plots/{name}.png)</figcaption>"
                     "</figure>")
    if skipped:
        items = "".join(f"<li><b>{html.escape(n)}</b>: {html.escape(r)}</li>"
                        for n, r in skipped.items())
        parts.append(f"<h2>Plots skipped</h2><ul>{items}</ul>")
    parts.append("<h2>Runs</h2>" + _table(runs_table(data)))
    if data.config_text:
        name = "spec.yaml" if data.kind == "sweep" else "config.yaml"
        parts.append(f"<h2>{name}</h2><pre>{html.escape(data.config_text)}</pre>")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(data.title)}</title><style>{STYLE}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")
    return Report(html=page, pngs={n: png for n, (png, _) in drawn.items()}, skipped=skipped)
