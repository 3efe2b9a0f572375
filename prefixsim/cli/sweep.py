"""`prefixsim sweep`: run every point of a sweep spec and write the sweep folder."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from prefixsim.cli.app import RESULTS_ROOT, app, fail_cleanly, one_line, safe_name
from prefixsim.cli.files import check_output_dir
from prefixsim.cli.option_groups import executor_options
from prefixsim.cli.progress import Progress
from prefixsim.errors import InputError
from prefixsim.sweep import OK, ExecutorOptions, RunOutcome, load_spec, plan, run_sweep


@app.command()
@click.argument("spec_path", metavar="SPEC.yaml", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", type=click.Path(file_okay=False),
              help="Sweep folder; default results/sweep-<spec name>/.")
@executor_options(jobs_help="Worker processes (default: the CPUs available).")
@click.option("--resume", is_flag=True,
              help="Continue a sweep in -o: run only the points not finished there.")
@click.option("--force", is_flag=True,
              help="With --resume: continue even though -o holds a sweep of another spec.")
@click.option("--no-requests", is_flag=True,
              help="Do not keep requests.parquet per run (smaller folders; no ECDF plots).")
@click.option("--dry-run", is_flag=True, help="List the runs (id and parameters) and exit.")
@click.option("--quiet", is_flag=True, help="No progress bar or closing summary.")
@fail_cleanly
def sweep(spec_path: str, output: str | None, workers: ExecutorOptions, resume: bool,
          force: bool, no_requests: bool, dry_run: bool, quiet: bool) -> None:
    """Run a sweep: SPEC.yaml has base: (a run config), grid: (dotted key -> list of values,
    all combinations) and optional runs: (explicit points).

    Writes runs/<run_id>/ per run as it finishes and sweep.parquet with one row per run
    (swept keys with dots as underscores, status, error and every summary scalar), and
    ends by printing the `prefixsim report DIR` command that draws the report. A failing
    run is recorded and the sweep goes on; an interrupted sweep continues with --resume.

    \b
    Example (the bundled demo, then its report):
      prefixsim sweep traces/sweeps/demo.yaml -o results/demo-sweep
      prefixsim report results/demo-sweep
    """
    if force and not resume:  # it says what --resume may continue; alone it would do nothing
        raise InputError("only with --resume (continue a sweep of another spec in -o)",
                         field="--force")
    spec = load_spec(spec_path)
    if dry_run:
        points = plan(spec, spec_path)
        for point in points:
            params = "  ".join(f"{k}={v}" for k, v in point.params.items())
            click.echo(f"{point.run_id:<40} {params}")
        click.echo(f"{len(points)} runs")
        return
    out_dir = Path(output) if output else RESULTS_ROOT / f"sweep-{safe_name(spec.name)}"
    check_output_dir(out_dir)
    bar = Progress("sweep", "run", total=0, quiet=quiet, leave=True)
    counts = {"done": 0, "failed": 0}

    def started(total: int) -> None:
        bar.reset(total=total)

    def finished(outcome: RunOutcome) -> None:
        counts["done" if outcome.status == OK else "failed"] += 1
        bar.set_postfix(counts)
        bar.update()

    try:
        result = run_sweep(spec, out_dir, workers, resume=resume, force=force,
                           keep_requests=not no_requests,
                           source=spec_path, on_start=started, on_outcome=finished,
                           command=shlex.join(["prefixsim", *sys.argv[1:]]))
    finally:
        bar.close()
    for run_id, error in result.failed.items():  # errors are printed even with --quiet
        click.echo(f"failed {run_id}: {one_line(error)}", err=True)
    if not quiet:
        click.echo(f"{len(result.points)} runs: {len(result.executed) - len(result.failed)} "
                   f"ran, {len(result.failed)} failed, {len(result.skipped)} already finished")
        click.echo(f"results: {result.table_path}")
        behind = _not_kept_up(result.table_path)
        if behind:
            shown = ", ".join(behind[:4]) + (f" and {len(behind) - 4} more"
                                             if len(behind) > 4 else "")
            click.echo(f"warning: {len(behind)} timed run{'s' if len(behind) > 1 else ''} did "
                       "not keep up with the load (kept_up false: a growing TTFT queue or too "
                       f"many rejected requests; docs/load.md): {shown}")
        if result.foreign:
            shown = ", ".join(result.foreign[:4]) + (
                f" and {len(result.foreign) - 4} more" if len(result.foreign) > 4 else "")
            many = len(result.foreign) > 1
            click.echo(f"note: {len(result.foreign)} run folder{'s' if many else ''} under "
                       f"runs/ {'are' if many else 'is'} no run of this sweep (another config, "
                       "or defaults that changed since; left as "
                       f"{'they are' if many else 'it is'}, not in the table or report): "
                       f"{shown}", err=True)
        click.echo(f"report:  prefixsim report {shlex.quote(str(out_dir))}")
    if result.failed:  # the sweep went on; its exit status still says not all runs finished
        sys.exit(1)


def _not_kept_up(table_path: Path | None) -> list[str]:
    """The run ids of the sweep table's timed runs whose fleet did not keep up."""
    if table_path is None or not table_path.exists():
        return []
    import pandas as pd  # the command group imports no pandas (docs/architecture.md "cli/")

    table = pd.read_parquet(table_path)
    if "kept_up" not in table or "run_id" not in table:
        return []
    return table.loc[table["kept_up"].astype(object).eq(False), "run_id"].astype(str).tolist()
