"""ReportData -> figures -> one self-contained report.html (PNG images inlined as base64).

The page, top to bottom: the title, the answer box of a sweep (answers.py: what to pick;
the cells it rests on highlighted in the table), the header (header.py: trace, hardware
and model, runs), the comparison table (table.py; sortable by a click on a header, its
first column frozen, scrolling inside its own box so no column is ever cut off), failed
runs, the plots with
full captions (each figure drawn per run carries `data-runs`, the runs it drew, which the
browser test checks), the plots skipped and why, every summary column, and the spec or
config. `build_report` returns the HTML and the PNG bytes and writes nothing (the
CLI writes report.html and plots/*.png). The one script on the page sorts the table; the
page loads nothing from outside.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from prefixsim.report.answers import Answer, answers
from prefixsim.report.data import ReportData
from prefixsim.report.figures import PlotSkipped, png_bytes
from prefixsim.report.format import missing, plain
from prefixsim.report.header import header_sections
from prefixsim.report.plots import PLOTS
from prefixsim.report.table import comparison, comparison_notes, shown_columns

Plot = Callable[[ReportData], object]

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.2em auto; max-width: 1340px;
       padding: 0 1em; color: #222; }
h1 { margin: 0.2em 0 0.4em; font-size: 1.5em; } h2 { font-size: 1.15em; margin: 1.2em 0 0.4em; }
.facts { display: grid; grid-template-columns: repeat(auto-fit, minmax(21em, 1fr)); gap: 0.8em; }
.facts section { border: 1px solid #ddd; border-radius: 4px; padding: 0.4em 0.7em; }
.facts h2 { margin: 0.1em 0 0.3em; font-size: 0.95em; color: #555; }
.facts dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 0.1em 0.7em;
            margin: 0; font-size: 0.85em; }
.facts dt { color: #666; } .facts dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; border: 1px solid #ddd; }
table { border-collapse: separate; border-spacing: 0; font-size: 0.84em; }
th, td { border-bottom: 1px solid #e3e3e3; border-right: 1px solid #eee;
         padding: 0.25em 0.55em; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; vertical-align: bottom; white-space: normal; min-width: 4.5em; }
table.sortable th { cursor: pointer; } th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
th:first-child, td:first-child { position: sticky; left: 0; z-index: 1; text-align: left;
                                 background: #fff; border-right: 2px solid #ccc; }
th:first-child { background: #f3f3f3; z-index: 2; } td.text { text-align: left; }
p.note { font-size: 0.85em; color: #555; margin: 0.3em 0; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; max-width: 70em; } .failed { color: #a00; }
details { margin: 1em 0; } summary { cursor: pointer; font-weight: 600; }
#answers { border: 2px solid #2a7a2a; border-radius: 4px; background: #f3faf3;
           padding: 0.4em 0.8em; margin: 0 0 0.8em; }
#answers h2 { margin: 0.1em 0 0.3em; font-size: 1.05em; color: #1d5c1d; }
#answers dl { display: grid; grid-template-columns: max-content minmax(0, 1fr);
              gap: 0.2em 0.9em; margin: 0; font-size: 0.9em; }
#answers dt { font-weight: 600; } #answers dd { margin: 0; }
td.win { background: #dff1df; font-weight: 600; }
@media (max-width: 900px) { #answers dl { grid-template-columns: minmax(0, 1fr); } }
"""
SORT_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, index) {
    th.addEventListener("click", function () {
      var up = th.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[index].dataset.sort, y = b.cells[index].dataset.sort;
        if (x === "" || y === "") { return (x === "") - (y === ""); }
        var nx = Number(x), ny = Number(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return up ? c : -c;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


@dataclass
class Report:
    """A drawn report: the page, each plot's PNG, and why the other plots were skipped."""

    html: str
    pngs: dict[str, bytes] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass
class Drawn:
    """One drawn plot: its PNG, caption, the runs it drew (None: not per run), a note,
    the runs it left out on purpose (nothing to draw; the note names them)."""

    png: bytes
    caption: str
    runs: list[str] | None = None
    note: str = ""
    left_out: list[str] = field(default_factory=list)


def _caption(plot) -> str:
    """The docstring's first paragraph, on one line."""
    doc = (plot.__doc__ or plot.__name__).strip().split("\n\n")[0]
    return " ".join(doc.split())


def draw_plots(data: ReportData, plots: Sequence[tuple[str, Plot]] = PLOTS
               ) -> tuple[dict[str, Drawn], dict[str, str]]:
    """Every plot of `plots` (the standard ones by default), and {name: reason} for the
    skipped ones."""
    drawn, skipped = {}, {}
    for name, plot in plots:
        try:
            figure = plot(data)
        except PlotSkipped as exc:
            skipped[name] = str(exc)
            continue
        runs = getattr(figure, "prefixsim_runs", None)
        note = getattr(figure, "prefixsim_note", "")
        left_out = getattr(figure, "prefixsim_left_out", [])
        drawn[name] = Drawn(png_bytes(figure), _caption(plot), runs, note, left_out)
    return drawn, skipped


def _sort_key(value: object) -> str:
    if missing(value):
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(float(value))
    return str(value)


def _table(frame: pd.DataFrame, columns, css: str = "", table_id: str = "",
           highlight: frozenset[tuple[str, str]] = frozenset()) -> str:
    head = "".join(f'<th title="{html.escape(tip)}">{html.escape(title)}</th>'
                   for _, title, tip, _ in columns)
    rows = []
    sortable = "sortable" in css
    records = frame.to_dict("records")
    # a value that does not apply ('-') is aligned as its column's values are
    text_columns = {key for key, _, _, _ in columns if any(
        not missing(record.get(key)) and not isinstance(record.get(key), (int, float))
        for record in records)}
    for record in records:
        cells = []
        run_id = str(record.get("run_id", ""))
        for key, _, _, fmt in columns:
            value = record.get(key)
            text = key in text_columns if missing(value) else not isinstance(value, (int, float))
            classes = ("text" if text else "") + \
                (" win" if (run_id, key) in highlight else "")
            text_class = f' class="{classes.strip()}"' if classes.strip() else ""
            sort = f' data-sort="{html.escape(_sort_key(value))}"' if sortable else ""
            cells.append(f"<td{text_class}{sort}>{html.escape(fmt(value))}</td>")
        run = html.escape(run_id)
        rows.append(f'<tr data-run="{run}">' + "".join(cells) + "</tr>")
    attrs = (f' class="{css}"' if css else "") + (f' id="{table_id}"' if table_id else "")
    return (f'<table{attrs}><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _breakable(text: str) -> str:
    """`text` escaped; a path (no spaces) gets a line-break opportunity after each `/`, so
    it wraps between its folders, never mid-word."""
    escaped = html.escape(text)
    return escaped if " " in text else escaped.replace("/", "/<wbr>")


def _header(data: ReportData, found: list[Answer]) -> str:
    boxes = []
    for title, rows in header_sections(data):
        items = "".join(f"<dt>{html.escape(k)}</dt><dd>{_breakable(v)}</dd>" for k, v in rows)
        boxes.append(f"<section><h2>{html.escape(title)}</h2><dl>{items}</dl></section>")
    return (f'<header id="report-header"><h1>{html.escape(data.title)}</h1>'
            f'{_answer_box(found)}<div class="facts">{"".join(boxes)}</div></header>')


def _answer_box(found: list[Answer]) -> str:
    """The answers as a definition list, first on the page (empty: no box)."""
    if not found:
        return ""
    items = "".join(f"<dt>{html.escape(a.question)}</dt><dd>"
                    + "<br>".join(html.escape(part) for part in a.parts) + "</dd>"
                    for a in found)
    return (f'<section id="answers"><h2>What to pick</h2><dl>{items}</dl>'
            '<p class="note">Read off the comparison table below; the cells behind each '
            "answer are highlighted there.</p></section>")


def _comparison(data: ReportData, found: list[Answer]) -> str:
    frame = comparison(data)
    columns = shown_columns(frame, data)
    notes = "".join(f'<p class="note">{html.escape(n)}</p>'
                    for n in comparison_notes(frame, data))
    cells = frozenset(cell for answer in found for cell in answer.cells)
    return ('<h2>Comparison of the runs</h2><div class="scroll" id="comparison-box">'
            f'{_table(frame, columns, "sortable", "comparison", cells)}</div>{notes}')


def _all_columns(data: ReportData) -> str:
    if data.kind == "run":
        row = data.table.iloc[0]
        frame = pd.DataFrame({"key": list(data.table.columns), "value": list(row)})
        columns = [("key", "key", "summary key", plain), ("value", "value", "", plain)]
        title = f"Every summary key ({len(frame)})"
    else:
        frame = data.table
        columns = [(c, c, c, plain) for c in frame.columns]
        title = f"Every summary column of sweep.parquet ({len(frame.columns)})"
    return (f"<details><summary>{html.escape(title)}</summary><div class=\"scroll\">"
            f"{_table(frame, columns)}</div></details>")


def _figure(name: str, drawn: Drawn) -> str:
    encoded = base64.b64encode(drawn.png).decode("ascii")
    runs = "" if drawn.runs is None else f" data-runs='{html.escape(json.dumps(drawn.runs))}'"
    if drawn.left_out:
        runs += f" data-left-out='{html.escape(json.dumps(drawn.left_out))}'"
    note = f" {drawn.note}" if drawn.note else ""
    return (f'<figure id="{name}"{runs}><img alt="{html.escape(drawn.caption)}" '
            f'src="data:image/png;base64,{encoded}">'
            f"<figcaption>{html.escape(drawn.caption + note)} (plots/{name}.png)</figcaption>"
            "</figure>")


def build_report(data: ReportData, plots: Sequence[tuple[str, Plot]] = PLOTS) -> Report:
    """Draw every plot of `plots` the data allows and lay out the page (a tune adds its own
    plots, tune/plots.py)."""
    drawn, skipped = draw_plots(data, plots)
    found = answers(data)
    parts = [_header(data, found), _comparison(data, found)]
    if "status" in data.table:
        failed = data.table[data.table["status"] != "ok"]
        if len(failed):
            items = "".join(f"<li>{html.escape(str(r.run_id))}: {html.escape(str(r.error))}</li>"
                            for r in failed.itertuples())
            parts.append(f'<h2 class="failed">Failed runs</h2><ul class="failed">{items}</ul>')
    parts.append("<h2>Plots</h2>")
    parts.extend(_figure(name, d) for name, d in drawn.items())
    if skipped:
        items = "".join(f"<li><b>{html.escape(n)}</b>: {html.escape(r)}</li>"
                        for n, r in skipped.items())
        parts.append(f'<h2>Plots skipped</h2><ul id="skipped">{items}</ul>')
    parts.append(_all_columns(data))
    if data.config_text:
        name = "spec.yaml" if data.kind == "sweep" else "config.yaml"
        parts.append(f"<details><summary>{name}</summary>"
                     f"<pre>{html.escape(data.config_text)}</pre></details>")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(data.title)}</title><style>{STYLE}</style></head>"
            f"<body>{''.join(parts)}<script>{SORT_SCRIPT}</script></body></html>\n")
    return Report(html=page, pngs={n: d.png for n, d in drawn.items()}, skipped=skipped)
