"""`prefixsim run`: replay a trace through the cache and write the results folder."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from prefixsim.cli.app import app, fail_cleanly, one_trace
from prefixsim.cli.config_options import config_dests, config_options, load_flagged_config
from prefixsim.cli.files import check_output_dir
from prefixsim.cli.help_sections import SectionedCommand
from prefixsim.cli.progress import Progress
from prefixsim.cli.run_output import default_output_dir, print_summary, write_run
from prefixsim.errors import InputError
from prefixsim.pipeline import simulate
from prefixsim.sweep.store import SWEEP_MARKS

RUN_SECTIONS = (
    ("Run", ("config_path", *config_dests("run"), "no_stream")),
    ("Trace", config_dests("trace")),
    ("Load (how requests arrive; docs/load.md)", config_dests("load")),
    ("Cache (both modes; --bounds cache-only)", config_dests("cache")),
    ("Hardware and model (timed; cache-only runs price prefill GPU-seconds with them)",
     config_dests("model", "hardware", "cost_model", "serving")),
    ("Scheduler and router (timed only)", config_dests("engine", "router", "scheduler")),
    ("Output (both modes)", ("output", *config_dests("output"), "quiet", "help")),
)


# The flags of the timed engine (its section of --help) that a cache-only replay never
# reads; --check-invariants checks the cache in both modes.
TIMED_ONLY = tuple(name for name in config_dests("engine", "router", "scheduler")
                   if name != "engine_check_invariants")


def _refuse_timed_flags() -> None:
    """A timed-only flag given on the command line of a cache-only run is refused, naming it
    (docs/input-rules.md I8: nothing is accepted that nothing reads); a config file's keys
    are not (a sweep's base serves cache-only and timed points alike)."""
    context = click.get_current_context()
    for param in context.command.params:
        if param.name in TIMED_ONLY and \
                context.get_parameter_source(param.name) == ParameterSource.COMMANDLINE:
            raise InputError("only timed runs read it, and this run is cache-only "
                             "(--cache-only or cache_only: true)", field=param.opts[0])


@app.command(cls=SectionedCommand, sections=RUN_SECTIONS)
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="YAML run config; flags given here override its keys.")
@click.option("-o", "--output", "output", type=click.Path(file_okay=False),
              help="Results folder (written into directly); default results/<time>-<label>/.")
@click.option("--quiet", is_flag=True, help="No progress bar or summary block.")
@click.option("--no-stream", is_flag=True,
              help="Read the whole trace before replaying. By default a Mooncake JSONL "
                   "or Parquet trace streams in chunks, in both modes (same results, "
                   "bounded memory; docs/architecture.md).")
@config_options
@click.argument("trace_file", metavar="[TRACE]", required=False,
                type=click.Path())  # a file or a folder (RAGPulse, kv-cache-tester)
@fail_cleanly
def run(config_path: str | None, output: str | None, quiet: bool, no_stream: bool,
        trace_file: str | None, **flags: Any) -> None:
    """Replay a trace and write summary.json, requests.parquet and config.yaml.

    TRACE is the trace file to replay (the same as --trace).

    Timed by default (replicas of a model on GPUs, continuous batching, a router); with
    --cache-only it replays the cache alone. Both write timeseries.parquet too (the cache
    and, timed, the fleet over time).

    \b
    Example (timed, 4 x h100-sxm serving llama-3.1-8b, prefix-aware routing):
      prefixsim run --trace traces/demo_chat.jsonl --model llama-3.1-8b --gpu h100-sxm \\
          --replicas 4 --router prefix_aware -o results/timed
    \b
    Example (cache-only, LRU cache of 3M tokens, 5-minute sliding TTL):
      prefixsim run --trace traces/demo_chat.jsonl --cache-only \\
          --policy lru --cache-tokens 3000000 --ttl 300 -o results/demo
    """
    flags["trace_path"] = one_trace(trace_file, flags.get("trace_path"))
    config = load_flagged_config(config_path, flags)  # the config keys' flags: config/flags.py
    if config.cache_only:
        _refuse_timed_flags()
    out_dir = Path(output) if output else default_output_dir(config)
    check_output_dir(out_dir)
    held = [name for name in SWEEP_MARKS if (out_dir / name).exists()]
    if held:  # a run's summary.json beside a sweep's table: report would read one of them
        raise InputError(f"holds a sweep ({held[0]}); a run's results would mix with it: "
                         "choose another -o folder", file=str(out_dir))
    command = shlex.join(["prefixsim", *sys.argv[1:]])
    out_dir, result = write_run(out_dir, lambda rows: simulate(
        config, sink=rows, progress=lambda desc, total: Progress(desc, "req", total, quiet),
        command=command, stream=not no_stream), fresh=output is None)
    if result.not_streamed:  # the memory a streamed run bounds was not bounded: say why
        click.echo(f"note: the trace was read whole, not streamed ({result.not_streamed})",
                   err=True)
    if result.summary.get("trace_skipped_lines"):
        click.echo(f"prefixsim: skipped {result.summary['trace_skipped_lines']:,} bad lines",
                   err=True)
    if not quiet:
        print_summary(result.summary, out_dir)
