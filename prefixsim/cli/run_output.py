"""The results folder of one `prefixsim run`: its default path, its atomic write and the
result block printed after it.

Split from cli/app.py so that the command group (and `prefixsim --help`) does not import
the configuration or the pipeline (docs/architecture.md "cli/").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import click

from prefixsim.cli.app import RESULTS_ROOT, format_value, safe_name
from prefixsim.cli.files import write_folder
from prefixsim.config import RunConfig, config_to_yaml
from prefixsim.metrics.schema import PRINTED_KEYS
from prefixsim.pipeline import ParquetRows, RunResult

RUN_FILES = frozenset({"summary.json", "requests.parquet", "timeseries.parquet", "config.yaml"})


def default_output_dir(config: RunConfig) -> Path:
    """`results/<timestamp>-<label>/` with label = trace name and policy."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    trace = safe_name(config.trace.path.stem) if config.trace.path else "run"
    mode = "cache-only" if config.cache_only else "timed"
    return RESULTS_ROOT / f"{stamp}-{trace}-{config.cache.policy}-{mode}"


def write_run(out_dir: Path, produce: Callable[[ParquetRows], RunResult],
              fresh: bool = False) -> tuple[Path, RunResult]:
    """Write a run's summary.json, requests.parquet, timeseries.parquet and config.yaml
    atomically; returns the folder written and the result `produce(rows)` returned.

    `rows` is the sink of the request rows (pipeline/sinks.py): it writes requests.parquet
    in a sibling staging folder as the run makes them; config.yaml is the result's
    (effective) config. A new folder is renamed into place in one step, an existing one gets
    each file replaced atomically and loses a results file of an earlier run that this run
    does not write (e.g. its timeseries). `fresh` (a default folder): never an existing one,
    but the next free `NAME-2`, ... Nothing is left behind if `produce` fails."""
    produced: list[RunResult] = []

    def fill(staging: Path) -> None:
        result = produce(ParquetRows(staging / "requests.parquet"))
        produced.append(result)
        (staging / "summary.json").write_text(
            json.dumps(result.summary, indent=2, default=str) + "\n", encoding="utf-8"
        )
        if not result.timeseries.empty:
            result.timeseries.to_parquet(staging / "timeseries.parquet", index=False)
        if result.config is not None:
            (staging / "config.yaml").write_text(config_to_yaml(result.config),
                                                 encoding="utf-8")

    folder = write_folder(out_dir, fill, RUN_FILES, fresh=fresh)
    return folder, produced[0]


def print_summary(summary: dict[str, object], out_dir: Path) -> None:
    """A vLLM-style result block on stdout."""
    title = " prefixsim result ({}) ".format(summary.get("mode", ""))
    click.echo(f"{title:=^60}")
    for key in PRINTED_KEYS:
        if key in summary:
            click.echo(f"{key + ':':<44}{format_value(summary[key]):>16}")
    click.echo("=" * 60)
    for key in ("max_model_len_warning", "rejected_warning", "kept_up_warning"):
        if key in summary:
            click.echo(f"warning: {summary[key]}")
    if "cost_model_warning" in summary:
        click.echo(f"warning: {summary['cost_model_warning']}")
    if "cost_model_borrowed" in summary:
        click.echo(f"note: profile parts borrowed: {summary['cost_model_borrowed']}")
    if "timeseries_warning" in summary:
        click.echo(f"note: {summary['timeseries_warning']}")
    model = summary.get("trace_prefix_model")
    if isinstance(model, str):  # a lengths-only trace (trace/lengths.py)
        click.echo(f"note: {prefix_model_note(model)}")
    click.echo(f"results: {out_dir}")


def prefix_model_note(label: str) -> str:
    """What a lengths-only trace's hit rates mean, for the printout (trace/lengths.py's
    prefix models: `none`, or a synthetic `shared:TOKENS`)."""
    if label.startswith("none"):
        return ("this trace holds prompt lengths only, no prefix ids: every prompt is "
                "distinct, so nothing hits the cache (--prefix-model shared:TOKENS models a "
                "system prompt every request shares)")
    return (f"the cache hits come from a synthetic prefix model, {label}: the trace "
            "holds prompt lengths only")
