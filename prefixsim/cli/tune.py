"""`prefixsim tune`: an Optuna study over a run config, written as a tune folder."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from prefixsim.cli.app import RESULTS_ROOT, app, fail_cleanly, format_value, safe_name
from prefixsim.cli.files import check_output_dir
from prefixsim.cli.option_groups import executor_options, grouped
from prefixsim.cli.progress import Progress
from prefixsim.sweep import ExecutorOptions
from prefixsim.tune import PartOptions, TrialReport, load_tune_spec, run_tune

MAX_ERRORS_SHOWN = 5


@app.command()
@click.argument("spec_path", metavar="SPEC.yaml", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", type=click.Path(file_okay=False),
              help="Tune folder; default results/tune-<spec name>/.")
@grouped("held_out", PartOptions,
         click.option("--split", metavar="time:F",
                      help="Tune on the first F of the trace's time span, re-run the best on "
                           "the rest."),
         click.option("--train", "train", type=click.Path(dir_okay=False),
                      help="Tune on this trace (instead of the spec's) ..."),
         click.option("--test", "test", type=click.Path(dir_okay=False),
                      help="... and re-run the best on this held-out trace."))
@click.option("--trials", type=click.IntRange(min=1),
              help="Finished trials the study should hold (default: the spec's trials:).")
@executor_options(
    jobs_help="Trials run at once by worker processes (default: the CPUs available).")
@click.option("--storage", "storage_url", metavar="URL",
              help="Join a shared study: an RDB URL (sqlite:///f.db, postgresql://...) or "
                   "journal:PATH; default DIR/study.db.")
@click.option("--resume", is_flag=True, help="Continue the study in -o.")
@click.option("--no-requests", is_flag=True, help="Do not keep requests.parquet per run.")
@click.option("--quiet", is_flag=True, help="No progress bar or closing summary.")
@fail_cleanly
def tune(spec_path: str, output: str | None, held_out: PartOptions, trials: int | None,
         workers: ExecutorOptions, storage_url: str | None, resume: bool, no_requests: bool,
         quiet: bool) -> None:
    """Tune a run config with Optuna (pip install 'prefixsim[tune]'): SPEC.yaml has base: (a
    run config), space: (dotted keys -> a list, or {int: [lo, hi]} / {float: [lo, hi]} with
    log: or step:, and when: for conditional knobs), objectives: (summary key -> maximize or
    minimize), constraints: ('KEY + KEY <= N'), trials: and sampler: (tpe, cmaes, nsga2,
    random, grid; seeded).

    Writes runs/<run_id>/ per trial (as a sweep does), trials.parquet, best.yaml (repeat it
    with prefixsim run --config), tune.json (the best trial's figures on each part of the
    trace), pareto.parquet for several objectives, and the study (DIR/study.db): --resume
    continues it, and prefixsim report DIR draws it.

    \b
    Example (the bundled demo, ~50 cache-only trials, then its report):
      prefixsim tune traces/tune/demo.yaml -o results/demo-tune --split time:0.5
      prefixsim report results/demo-tune
    """
    spec = load_tune_spec(spec_path)
    out_dir = Path(output) if output else RESULTS_ROOT / f"tune-{safe_name(spec.name)}"
    check_output_dir(out_dir)
    bar = Progress("tune", "trial", total=0, quiet=quiet, leave=True)
    counts = {"pruned": 0, "failed": 0}

    def started(total: int) -> None:
        bar.reset(total)

    def finished(report: TrialReport) -> None:
        if report.state in counts:
            counts[report.state] += 1
        postfix: dict[str, Any] = {}
        if report.best is not None:
            postfix["best"] = f"{report.best[0]:.4g}"
        postfix.update({k: v for k, v in counts.items() if v})
        bar.set_postfix(postfix)
        bar.update()

    try:
        result = run_tune(spec, out_dir, held_out=held_out, workers=workers,
                          storage_url=storage_url, resume=resume, trials=trials,
                          keep_requests=not no_requests, on_start=started, on_trial=finished)
    finally:
        bar.close()
    summary = result.summary
    if not quiet:
        _print_summary(summary, out_dir)
        for number, error in list(result.failed.items())[:MAX_ERRORS_SHOWN]:
            click.echo(f"trial {number}: {error}", err=True)
    if not summary.get("best"):
        click.echo("no feasible trial finished", err=True)
        sys.exit(1)


def _print_summary(summary: dict[str, Any], out_dir: Path) -> None:
    trials = summary["trials"]
    states = ", ".join(f"{trials[s]} {s}" for s in ("complete", "pruned", "failed")
                       if trials.get(s))
    click.echo(f"tune {summary['name']}: {trials['total']} trials ({states or 'none'})")
    parts = ["train", "test"] if summary["split"] else ["all"]
    for entry in summary["best"][:3]:
        params = "  ".join(f"{k}={format_value(v)}" for k, v in entry["params"].items())
        click.echo(f"best trial {entry['trial']}: {params or '(the base config)'}")
        rows: list[tuple[str, ...]] = [("objective", "part", "base", "best", "best - base")]
        notes: list[str] = []
        for objective in summary["objectives"]:
            key = objective["key"]
            for part in parts:
                best = (entry.get(part) or {}).get(key)
                base = (summary["base"].get(part) or {}).get(key)
                gain = None if best is None or base is None else best - base
                rows.append((key, part, _figure(base), _figure(best), _figure(gain, "+")))
                notes.append("" if summary["base_feasible"].get(part) is not False else
                             "  (the base breaks a constraint)")
            retained = entry.get("retained") or {}
            if retained.get(key) is not None:
                rows.append(("", f"the test part keeps {retained[key]:.0%} of the train gain"))
                notes.append("")
            elif key in retained:
                rows.append(("", "no gain over the base on the train part"))
                notes.append("")
        for line in _table(rows, ["", *notes]):
            click.echo(f"  {line}")
    if len(summary["best"]) > 3:
        click.echo(f"... {len(summary['best']) - 3} more on the Pareto front (pareto.parquet)")
    if summary["best"]:
        click.echo(f"best config: {out_dir / 'best.yaml'}")
    click.echo(f"results: {out_dir}  (prefixsim report {out_dir})")


def _figure(value: float | None, sign: str = "") -> str:
    """A figure for the summary table: `0.7887`, `154.3`, `1,000,000` (`sign="+"`: `+0.0876`,
    `-4,597,061`); `-` for none."""
    if value is None:
        return "-"
    if abs(value) >= 1000 or (float(value).is_integer() and abs(value) >= 100):
        return f"{value:{sign},.0f}"
    if abs(value) >= 100:
        return f"{value:{sign},.1f}"
    return f"{value:{sign}.4f}"


def _table(rows: list[tuple[str, ...]], notes: list[str]) -> list[str]:
    """Rows as lines: the first two columns left-aligned, the figures right-aligned, two
    spaces between columns at least; a row of two cells (a remark) runs on unaligned."""
    full = [row for row in rows if len(row) > 2]
    widths = [max(len(row[i]) for row in full) for i in range(len(full[0]))]
    lines = []
    for row, note in zip(rows, notes, strict=True):
        if len(row) <= 2:
            lines.append(f"{row[0]:<{widths[0]}}  {row[1]}".rstrip())
            continue
        cells = [f"{c:<{w}}" if i < 2 else f"{c:>{w}}"
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells) + note)
    return lines
