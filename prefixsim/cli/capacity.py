"""`prefixsim capacity`: the highest sustainable rate, or the fewest replicas, under SLOs."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from prefixsim.capacity import (
    SEARCHES,
    CapacityAnswer,
    CapacityQuestion,
    capacity_png,
    check_question,
    parse_slos,
    run_capacity,
)
from prefixsim.cli.app import (
    RESULTS_ROOT,
    app,
    fail_cleanly,
    format_value,
    one_line,
    one_trace,
    safe_name,
)
from prefixsim.cli.config_options import config_options, load_flagged_config
from prefixsim.cli.files import check_output_dir, write_folder
from prefixsim.cli.option_groups import executor_options
from prefixsim.config import RunConfig
from prefixsim.errors import InputError
from prefixsim.sweep import ExecutorOptions

CAPACITY_FILES = frozenset({"capacity.json", "capacity.parquet", "capacity.png",
                            "sweep.json", "sweep.parquet", "spec.yaml"})
PRINTED = ("answer", "answer_config_value", "offered_rate", "achieved_rate",
           "first_failing", "first_failing_reasons", "probes", "rounds", "tolerance")


@app.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="YAML run config; the run flags below override its keys.")
@click.option("--search", metavar="|".join(SEARCHES),
              help="Required. rate: the highest offered rate the fleet sustains (load.rate, "
                   "else the trace's rate multiplier); replicas: the fewest engine.replicas "
                   "for the trace's own load.")
@click.option("--slo", "slo_values", multiple=True, metavar="KEY:MS",
              help="A latency SLO, e.g. p99_ttft_ms:2000 (repeat; any "
                   "{mean,median,p50,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms).")
@click.option("--goodput-share", type=float,
              help="Also require this share of the requests within the --goodput SLOs.")
@click.option("--tolerance", type=float, default=0.05, show_default=True,
              help="Relative width of the final rate bracket (replicas are exact).")
@executor_options(jobs_help="Probes run at once (default: the CPUs available, at most 8).")
@click.option("-o", "--output", "output", type=click.Path(file_okay=False),
              help="Capacity folder (new or empty); default results/capacity-<search>-<trace>/.")
@click.option("--quiet", is_flag=True,
              help="No progress lines or answer block; a search with no answer still says "
                   "why on stderr.")
@config_options
@click.argument("trace_file", metavar="[TRACE]", required=False,
                type=click.Path())  # a file or a folder (RAGPulse, kv-cache-tester)
@fail_cleanly
def capacity(config_path: str | None, search: str | None, slo_values: tuple[str, ...],
             goodput_share: float | None, tolerance: float, workers: ExecutorOptions,
             output: str | None, quiet: bool, trace_file: str | None, **flags: Any) -> None:
    """Find the capacity of a fleet: each probe is a normal timed run (on the sweep
    executors); bracketing by doubling, then bisection. A probe passes when every --slo
    holds and the fleet kept up, as the probe's run judges it (>= 98% of the requests
    completed; open loop, no growing TTFT queue, a staged load stage by stage;
    docs/load.md).

    Writes capacity.json (the answer), capacity.parquet (one row per probe), capacity.png
    (TTFT and TPOT against offered and achieved rate) and the probes' run folders as a sweep
    folder does (prefixsim report DIR draws them). TRACE is the trace (as --trace).

    \b
    Example (fewest h100-sxm replicas of llama-3.1-8b for the demo trace at p99 TTFT 2 s):
      prefixsim capacity --search replicas --trace traces/demo_chat.jsonl \\
          --model llama-3.1-8b --gpu h100-sxm --slo p99_ttft_ms:2000 -o results/cap
    """
    if search is None:
        raise InputError(f"is required: what to search for, {' or '.join(SEARCHES)}",
                         field="--search")
    if search not in SEARCHES:
        raise InputError(f"expected one of {', '.join(SEARCHES)}, got {search!r}",
                         field="--search")
    slos = parse_slos(slo_values)
    flags["trace_path"] = one_trace(trace_file, flags.get("trace_path"))
    config = load_flagged_config(config_path, flags)
    question = CapacityQuestion(config=config, search=search, slos=slos,
                                goodput_share=goodput_share, tolerance=tolerance)
    check_question(question)
    out_dir = Path(output) if output else _default_dir(config, search)
    check_output_dir(out_dir)
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise InputError("is not empty; a capacity search writes a new folder",
                         file=str(out_dir))
    command = shlex.join(["prefixsim", *sys.argv[1:]])

    def progress(row: dict[str, Any]) -> None:
        if not quiet:
            verdict = "pass" if row["passed"] else f"fail ({row['reasons']})"
            click.echo(f"probe {row['probe']}: {row['knob']}={format_value(row['config_value'])}"
                       f"  offered {format_value(row['offered_rate'])}/s: {verdict}", err=True)

    answers: list[CapacityAnswer] = []

    def fill(staging: Path) -> None:
        answer = run_capacity(question, staging, workers, on_probe=progress, command=command)
        (staging / "capacity.png").write_bytes(capacity_png(answer.probes, answer.summary))
        answers.append(answer)

    folder = write_folder(out_dir, fill, CAPACITY_FILES, fresh=output is None)
    summary = answers[0].summary
    if not quiet:
        _print_answer(summary, folder)
    if summary.get("answer") is None:
        if quiet:  # quiet silences the progress and the block, not the outcome
            click.echo(f"prefixsim: no answer: {one_line(_no_answer_reason(summary))} "
                       f"(results: {folder})", err=True)
        sys.exit(1)


def _default_dir(config: RunConfig, search: str) -> Path:
    trace = safe_name(config.trace.path.stem) if config.trace.path else "run"
    return RESULTS_ROOT / f"capacity-{search}-{trace}"


def _no_answer_reason(summary: dict[str, Any]) -> str:
    """Why a search found no answer: its note, else the first failing probe's reasons."""
    if summary.get("note"):
        return str(summary["note"])
    if summary.get("first_failing_reasons"):
        return (f"no probe passed; {summary['knob']} {format_value(summary['first_failing'])}"
                f" fails: {summary['first_failing_reasons']}")
    return "no probe passed"


def _print_answer(summary: dict[str, Any], out_dir: Path) -> None:
    title = f" prefixsim capacity ({summary['search']}) "
    click.echo(f"{title:=^60}")
    click.echo(f"{'knob:':<28}{summary['knob']:>32}")
    for key, limit in (summary.get("slos") or {}).items():
        click.echo(f"{'SLO ' + key + ':':<44}{format_value(limit):>16}")
    for key in PRINTED:
        if summary.get(key) is not None:
            click.echo(f"{key + ':':<28}{format_value(summary[key]):>32}")
    click.echo("=" * 60)
    if summary.get("note"):
        click.echo(f"note: {summary['note']}")
    if summary.get("max_model_len_warning"):
        click.echo(f"warning: {summary['max_model_len_warning']}")
    click.echo(f"results: {out_dir}  (prefixsim report {shlex.quote(str(out_dir))})")
