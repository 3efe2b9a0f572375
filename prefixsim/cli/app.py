"""The `prefixsim` command group and what every subcommand shares.

The cli package is the only code that chooses paths and writes files. Each subcommand lives
in its own module of this package and registers itself on `app`; `InputError` becomes one
line on stderr and exit code 2; results are written into a temporary folder and moved into
place only when complete.
"""


from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from prefixsim._version import __version__
from prefixsim.cli.files import write_folder
from prefixsim.config import RunConfig, config_to_yaml
from prefixsim.errors import InputError
from prefixsim.metrics.schema import PRINTED_KEYS
from prefixsim.pipeline import ParquetRows, RunResult

RESULTS_ROOT = Path("results")
RUN_FILES = frozenset({"summary.json", "requests.parquet", "timeseries.parquet", "config.yaml"})


def fail_cleanly(command: Callable[..., Any]) -> Callable[..., Any]:
    """Report `InputError` as one line `prefixsim: error: ...` and exit 2, without a
    traceback (an OSError such as a full disk: one line, exit 1)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except InputError as exc:
            click.echo(f"prefixsim: error: {one_line(str(exc))}", err=True)
            sys.exit(2)
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            click.echo(f"prefixsim: error: {one_line(where + (exc.strerror or str(exc)))}",
                       err=True)
            sys.exit(1)

    return wrapper


def one_line(text: str) -> str:
    """`text` on one line with terminal control characters shown as escapes (a name from a
    file must not move the cursor or retitle the terminal)."""
    text = " ".join(text.split())
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def safe_name(name: str) -> str:
    """A name from a file (a sweep spec's `name:`) made safe as one path component."""
    cleaned = re.sub(r"[^A-Za-z0-9._+-]+|\.{2,}", "-", name)
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip(".-")
    return cleaned[:80] or "sweep"


# ------------------------------------------------------------------- results folder
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


# ----------------------------------------------------------------------- printing
def format_value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "-" if value is None else str(value)


def print_summary(summary: dict[str, object], out_dir: Path) -> None:
    """A vLLM-style result block on stdout."""
    title = " prefixsim result ({}) ".format(summary.get("mode", ""))
    click.echo(f"{title:=^60}")
    for key in PRINTED_KEYS:
        if key in summary:
            click.echo(f"{key + ':':<44}{format_value(summary[key]):>16}")
    click.echo("=" * 60)
    if "cost_model_warning" in summary:
        click.echo(f"warning: {summary['cost_model_warning']}")
    if "cost_model_borrowed" in summary:
        click.echo(f"note: profile parts borrowed: {summary['cost_model_borrowed']}")
    if "timeseries_warning" in summary:
        click.echo(f"note: {summary['timeseries_warning']}")
    click.echo(f"results: {out_dir}")


# ---------------------------------------------------------------------------- CLI
@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="prefixsim")
def app() -> None:
    """prefixsim: simulate what prefix (KV) caching does for LLM serving traffic.

    Replay a request trace through a radix-tree prefix cache and read hit rates, evictions
    and expirations (and, in timed mode, TTFT/TPOT/throughput). Start with
    `prefixsim run --help` or `prefixsim trace inspect --help`.
    """


