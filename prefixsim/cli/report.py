"""`prefixsim report` and `prefixsim plot`: figures and report.html from a results folder."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import click
import pandas as pd

from prefixsim.cli.app import app, fail_cleanly, safe_name
from prefixsim.cli.files import check_output_dir, check_output_file, write_bytes
from prefixsim.errors import InputError
from prefixsim.report import PlotSkipped, build_report, load_report_data, png_bytes, xy_figure
from prefixsim.report.data import show_swept
from prefixsim.tune.plots import tune_view


@app.command()
@click.argument("results_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--quiet", is_flag=True, help="Print nothing but errors.")
@fail_cleanly
def report(results_dir: str, quiet: bool) -> None:
    """Write DIR/report.html (self-contained) and DIR/plots/*.png for a run, sweep or tune
    folder (a tune adds its optimisation history, importances, Pareto front and
    objective-vs-parameter plots).

    Plots that need data the runs lack (latencies of cache-only runs, tiers, cost) are
    skipped; the report lists them with the reason.
    """
    folder = Path(results_dir)
    whole = load_report_data(folder)
    data, plots = tune_view(folder, whole)  # a tune draws its headline runs only
    refuse_symlink(folder / "plots")
    check_output_dir(folder / "plots")
    check_output_file(folder / "report.html")
    built = build_report(data, plots)
    for name, png in built.pngs.items():
        write_bytes(folder / "plots" / f"{name}.png", png)
    write_bytes(folder / "report.html", built.html.encode("utf-8"))
    gaps = whole.gaps()  # over every planned run (a tune's trials too), not those drawn
    if gaps:  # said even with --quiet: the report is not the whole sweep
        click.echo(f"prefixsim: warning: {gaps}", err=True)
    if quiet:
        return
    click.echo(f"{len(built.pngs)} plots: {', '.join(built.pngs) or '-'}")
    for name, reason in built.skipped.items():
        click.echo(f"skipped {name}: {reason}")
    click.echo(f"report: {folder / 'report.html'}")


def refuse_symlink(path: Path) -> None:
    """The report writes into `path`: it must not be a symlink (its target is elsewhere)."""
    if path.is_symlink():
        raise InputError("is a symlink; the report writes only into real folders",
                         file=str(path))


MAX_GUESSES = 3


def column_guesses(column: str, columns: list[str]) -> list[str]:
    """The columns a misspelt one may mean, at most MAX_GUESSES, shortest first: those
    holding it, case and separators aside (`p99_ttft` -> `p99_ttft_ms`, `hitrate` ->
    `cache_token_hit_rate` ...); else those holding its words in any order (`ttft_p99`);
    else the closest spellings."""
    def squeezed(text: str) -> str:
        return re.sub(r"[\W_]+", "", text.lower())

    def words(text: str) -> set[str]:
        return set(re.split(r"[\W_]+", text.lower())) - {""}

    wanted = squeezed(column)
    for tier in ([c for c in columns if wanted and wanted in squeezed(c)],
                 [c for c in columns if words(column) and words(column) <= words(c)]):
        if tier:
            return sorted(tier, key=len)[:MAX_GUESSES]
    return difflib.get_close_matches(column.lower(), columns, n=MAX_GUESSES, cutoff=0.6)


def _filters(values: tuple[str, ...]) -> list[tuple[str, str]]:
    pairs = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"expected COLUMN=VALUE, got {item!r}", field="--filter-by")
        pairs.append((key, value))
    return pairs


@app.command()
@click.argument("results_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--var-x", required=True, help="Column on the x axis (e.g. cache_capacity_tokens).")
@click.option("--var-y", required=True, help="Column on the y axis (e.g. cache_token_hit_rate).")
@click.option("--curve-by", multiple=True, help="Column(s) whose values make separate curves.")
@click.option("--col-by", help="Column whose values make side-by-side panels.")
@click.option("--filter-by", multiple=True, metavar="COLUMN=VALUE",
              help="Keep only rows where COLUMN equals VALUE (repeatable; 'none' = missing).")
@click.option("--scale-x", type=click.Choice(["linear", "log", "symlog"]), default="linear",
              show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="PNG to write; default DIR/plots/<var-y>-vs-<var-x>.png.")
@fail_cleanly
def plot(results_dir: str, var_x: str, var_y: str, curve_by: tuple[str, ...],
         col_by: str | None, filter_by: tuple[str, ...], scale_x: str,
         output: str | None) -> None:
    """A custom line plot over the runs of a sweep folder (columns of sweep.parquet).

    Axes are ticked by what they hold: shares (hit rates) in %, tokens with thousands,
    times as 10 s / 1 min; a latency (a *_ms column) spanning more than 10x is drawn
    logarithmic.

    \b
    Example:
      prefixsim plot results/demo-sweep --var-x cache_capacity_tokens \\
          --var-y cache_token_hit_rate --curve-by cache_ttl_s --scale-x log
    """
    if output is not None and not output.lower().endswith(".png"):  # written as PNG bytes
        raise InputError(f"expected a .png file, got {output!r}", field="--output")
    folder = Path(results_dir)
    table = load_report_data(folder).ok
    for option, column in [("--var-x", var_x), ("--var-y", var_y), ("--col-by", col_by),
                           *[("--curve-by", c) for c in curve_by],
                           *[("--filter-by", k) for k, _ in _filters(filter_by)]]:
        if column is not None and column not in table.columns:
            guesses = column_guesses(column, [str(c) for c in table.columns])
            meant = f"; did you mean {' or '.join(map(repr, guesses))}?" if guesses else ""
            raise InputError(f"no column {column!r}{meant} (columns: "
                             f"{', '.join(table.columns)})", field=option)
    for key, value in _filters(filter_by):
        shown = table[key].map(lambda v: "none" if v is None or v != v else str(v))
        numeric = table[key].map(lambda v: _number(v))
        table = table[(shown == value) | (numeric == _number(value))]
    if table.empty:
        raise InputError("no runs left after the filters", field="--filter-by")
    try:
        figure = xy_figure(table, var_x, var_y, curve_by=list(curve_by), col_by=col_by,
                           scale_x=scale_x)
    except PlotSkipped as exc:
        raise InputError(f"nothing to plot: {exc}") from None
    left_out = _left_out(table, var_x, var_y, scale_x)
    if left_out:
        click.echo(f"note: {left_out}", err=True)
    target = Path(output) if output else folder / "plots" / f"{safe_name(var_y)}-vs-" \
        f"{safe_name(var_x)}.png"
    if output is None:
        refuse_symlink(folder / "plots")
    check_output_file(target)
    write_bytes(target, png_bytes(figure))
    click.echo(f"plot: {target}")


def _left_out(table: pd.DataFrame, var_x: str, var_y: str, scale_x: str) -> str:
    """Which runs the plot could not place, and why (a run without an x value: an
    unbounded capacity, no TTL; a value a log axis cannot show), or ``."""
    x, y = table[var_x], table[var_y]
    numeric_x = pd.to_numeric(x, errors="coerce")
    reasons = {
        f"{var_x} {show_swept(var_x, None)}": x.isna(),
        f"no {var_y}": y.isna() & x.notna(),
        f"{var_x} <= 0 on a log axis": (numeric_x <= 0) & y.notna() if scale_x == "log"
        else pd.Series(False, index=table.index),
    }
    parts = [f"{int(mask.sum())} with {why}" for why, mask in reasons.items() if mask.any()]
    if not parts:
        return ""
    count = int(sum(mask for mask in reasons.values()).clip(upper=1).sum())
    return f"{count} of {len(table)} runs not drawn: {'; '.join(parts)}"


def _number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if number != number else number
