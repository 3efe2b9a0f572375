"""`prefixsim trace ...`: inspect, convert and generate trace files."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import pyarrow.parquet as pq

from prefixsim.analysis.characterize import INSPECT_TTLS_S, characterize
from prefixsim.cli.app import PathParam, app, fail_cleanly, format_value
from prefixsim.cli.files import check_output_dir, check_output_file, write_file
from prefixsim.cli.progress import Progress
from prefixsim.engine.gc_pause import paused_gc
from prefixsim.errors import InputError
from prefixsim.report.trace_plots import plot_characterisation, popularity, top_share
from prefixsim.trace import READERS, ReadOptions, TraceData, detect_format, read_trace
from prefixsim.trace.generate import PRESETS, generate, load_preset
from prefixsim.trace.generate.preset import preset_path
from prefixsim.trace.lengths import check_prefix_model
from prefixsim.trace.pages import convert_pages
from prefixsim.trace.readers import FOLDER_SNIFFERS, trace_files
from prefixsim.trace.write import mooncake_lines, parquet_table

IMAGE_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg")  # `--plot` names a folder, not these
ROW_GROUP_ROWS = 65_536  # rows a Parquet row group holds: the reader decodes one at a time


@app.group()
def trace() -> None:
    """Inspect, convert and generate trace files."""


def read_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that say how to read a trace (shared by inspect and convert)."""
    options = [
        click.option("--trace-format", type=click.Choice(READERS.names()),
                     help="Trace format; detected from the content by default."),
        click.option("--block-size", type=int,
                     help="Tokens per page id in the file (the format's default otherwise)."),
        click.option("--page-size", type=int,
                     help="Re-chunk to coarser pages of this many tokens (a multiple of the "
                          "file's; finer sizes are refused)."),
        click.option("--max-requests", type=int, help="Read only the first N requests."),
        click.option("--skip-bad-lines", is_flag=True,
                     help="Skip malformed records (and report how many) instead of failing."),
        click.option("--prefix-model", default="none", show_default=True,
                     help="Lengths-only traces (azure, burstgpt, vidur): none, or the "
                          "synthetic shared:TOKENS (labelled as synthetic)."),
        click.option("--session-rate", type=float, default=1.0 / 60.0, show_default="1/60",
                     help="kv-cache-tester: conversations start as a Poisson process of this "
                          "rate per second (the files carry no absolute time)."),
        click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Seed of the arrival model (kv-cache-tester)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _options(kwargs: dict[str, Any]) -> tuple[str | None, ReadOptions, int | None]:
    for key in ("block_size", "page_size", "max_requests"):
        value = kwargs.get(key)
        if value is not None and value < 1:
            raise InputError(f"must be >= 1, got {value}", field="--" + key.replace("_", "-"))
    check_prefix_model(kwargs["prefix_model"])
    options = ReadOptions(
        block_size=kwargs["block_size"], max_requests=kwargs["max_requests"],
        skip_bad_lines=kwargs["skip_bad_lines"], prefix_model=kwargs["prefix_model"],
        session_rate_per_s=kwargs["session_rate"], seed=kwargs["seed"],
    )
    return kwargs["trace_format"], options, kwargs["page_size"]


def load(path: Path, fmt: str | None, options: ReadOptions, page_size: int | None) -> TraceData:
    """Read a trace (a progress bar on stderr) and convert its pages; report skipped lines."""
    with Progress(f"read {path.name}", "req") as bar:
        data = read_trace(path, fmt, replace(options, on_progress=bar.update))
    if page_size is not None:
        data = replace(data, requests=list(convert_pages(data.requests, page_size)))
    if data.skipped_lines:
        click.echo(f"prefixsim: skipped {data.skipped_lines:,} bad lines in {path}", err=True)
    return data


def expand(path: Path, fmt: str | None) -> list[Path]:
    """The traces under `path`: itself, or (for a folder of traces) each one, recursively."""
    if not path.exists():
        raise InputError("no such file or folder", file=str(path))
    if fmt is not None or path.is_file() or any(test(path) for _, test in FOLDER_SNIFFERS):
        return [path]
    found: list[Path] = []
    for child in trace_files(path) + sorted(p for p in path.iterdir() if p.is_dir()):
        if child.is_dir():
            found += expand(child, None)
            continue
        try:
            detect_format(child)
        except InputError:
            continue  # not a trace (README, a RAGPulse table read with its trace, ...)
        found.append(child)
    if not found:
        raise InputError("no trace files found in the folder", file=str(path))
    return found


def _print_stats(stats: dict[str, object]) -> None:
    for key, value in stats.items():
        if isinstance(value, dict):
            inner = "  ".join(f"{k}={format_value(v)}" for k, v in value.items())
            click.echo(f"{key + ':':<28}{inner}")
        else:
            click.echo(f"{key + ':':<28}{format_value(value)}")


@trace.command("inspect")
@click.argument("path", type=PathParam(path_type=Path))
@read_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--plot", "plot_dir", type=PathParam(file_okay=False, path_type=Path),
              help="Also draw the characterisation plots (PNG) into this folder.")
@fail_cleanly
def inspect(path: Path, as_json: bool, plot_dir: Path | None, **kwargs: Any) -> None:
    """Characterise a trace file or folder: sizes, arrival rate, page reuse, hit rates.

    Hit rates are those of an unbounded cache replayed in arrival order (docs/cache-semantics.md
    Part A), with no TTL and with sliding TTLs of 10 s, 1 min, 5 min and 1 h. A folder that is one
    trace (RAGPulse, kv-cache-tester) is read whole; any other folder, trace by trace.
    """
    fmt, options, page_size = _options(kwargs)
    if plot_dir is not None:
        if plot_dir.suffix.lower() in IMAGE_SUFFIXES and not plot_dir.is_dir():
            raise InputError(f"a folder for the figures (one PNG each), got the file name "
                             f"{str(plot_dir)!r} (e.g. --plot {plot_dir.with_suffix('')})",
                             field="--plot")
        check_output_dir(plot_dir)
    results = []
    targets = expand(path, fmt)
    for target in targets:
        data = load(target, fmt, options, page_size)
        # its replays make no cycles (engine/gc_pause.py); a bar for them, as for the read
        with paused_gc(), Progress(f"inspect {target.name}", "replays",
                                   total=1 + len(INSPECT_TTLS_S)) as bar:
            stats = _inspected(target, data, plot_dir, len(targets) > 1,
                               on_replay=lambda: bar.update(1))
        results.append(stats)
    if as_json:
        payload = results[0] if len(targets) == 1 and targets[0] == path else \
            {"path": str(path), "traces": results}
        click.echo(json.dumps(payload))
        return
    for number, stats in enumerate(results):
        if number:
            click.echo("")
        _print_stats(stats)


def _inspected(target: Path, data: TraceData, plot_dir: Path | None, many: bool,
               on_replay: Callable[[], None] | None = None) -> dict[str, object]:
    """`trace inspect`'s figures of one trace (and its plots, with `plot_dir`)."""
    stats: dict[str, object] = {
        "path": str(target), "format": data.format, **characterize(data.requests, on_replay),
        "reuse_share_top10pct_pages": top_share(popularity(data.requests)),
        **data.labels, "time_shift_s": data.time_shift_s,
        "reordered_rows": data.reordered_rows}
    if data.skipped_lines:
        stats["skipped_lines"] = data.skipped_lines
    if plot_dir is not None:
        folder = plot_dir / target.stem if many else plot_dir
        stats["plots"] = [str(p) for p in plot_characterisation(data.requests, folder,
                                                                title=target.name)]
    return stats


OTHER_FORMAT_SUFFIXES = (".csv", ".tsv", ".xls", ".xlsx")  # a name promising another format
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip")  # nothing is written compressed


def trace_output_format(out: Path, fmt: str | None, option: str) -> str:
    """The format OUT is written in: `fmt` when given, else Parquet for a `.parquet` name
    and Mooncake JSONL for any other; a name promising another format (`trace.csv`: it
    would hold JSON lines) is refused without `fmt`, before anything is read."""
    suffix = out.suffix.lower()
    if suffix in COMPRESSED_SUFFIXES:  # `g.jsonl.gz` held plain text, which no reader takes
        raise InputError(f"{out.name} names a compressed file, but traces are written "
                         f"uncompressed, as the readers take them: name it "
                         f"{out.with_suffix('').name}", field=option)
    if fmt is None and suffix in OTHER_FORMAT_SUFFIXES:
        raise InputError(f"{out.name} names a {suffix[1:]} file, but traces are written as "
                         f"Mooncake JSONL or Parquet: name it {out.with_suffix('.jsonl').name}"
                         f" or {out.with_suffix('.parquet').name}", field=option)
    return fmt or ("parquet" if suffix == ".parquet" else "jsonl")


def write_trace(requests: Sequence, out: Path, fmt: str) -> str:
    """Write `requests` to `out` atomically in `fmt` (jsonl or parquet); returns it."""

    def write(temp: Path) -> None:
        if fmt == "parquet":
            pq.write_table(parquet_table(requests), temp, row_group_size=ROW_GROUP_ROWS)
            return
        with temp.open("w", encoding="utf-8") as handle, \
                Progress(f"write {out.name}", "req", total=len(requests)) as bar:
            for number, line in enumerate(mooncake_lines(requests), start=1):
                handle.write(line)
                if number % 10000 == 0:
                    bar.update(10000)

    write_file(out, write)
    return fmt


@trace.command("convert")
@click.argument("source", type=PathParam(path_type=Path))
@click.argument("out", type=PathParam(dir_okay=False, path_type=Path))
@read_options
@click.option("--to", "out_format", type=click.Choice(["jsonl", "parquet"]),
              help="Output format; by OUT's suffix (.parquet) by default, else Mooncake JSONL.")
@fail_cleanly
def convert(source: Path, out: Path, out_format: str | None, **kwargs: Any) -> None:
    """Convert any readable trace to Mooncake JSONL or Parquet (session ids kept).

    \b
    Example (kv-cache-tester folder at 512-token pages):
      prefixsim trace convert ../shared/traces/kv-cache-tester agents.jsonl --page-size 512
    """
    fmt, options, page_size = _options(kwargs)
    check_output_file(out)
    written = trace_output_format(out, out_format, "OUT")
    data = load(source, fmt, options, page_size)
    write_trace(data.requests, out, written)
    labels = "".join(f"; {key}: {value}" for key, value in data.labels.items())
    click.echo(f"wrote {len(data.requests):,} requests ({data.format} -> {written}, "
               f"{data.requests[0].page_size_tokens}-token pages) to {out}{labels}", err=True)


@trace.command("generate")
@click.option("--preset", required=True,
              help=f"Built-in preset ({', '.join(PRESETS)}) or a preset YAML file.")
@click.option("--requests", "num_requests", type=int, required=True,
              help="Number of requests.")
@click.option("--rate", type=float,
              help="Target requests per second (the preset's by default). Sessions start at "
                   "rate / mean turns, so a short trace, still ramping up, comes out slower.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Random seed.")
@click.option("-o", "--output", "out", type=PathParam(dir_okay=False, path_type=Path),
              required=True, help="Output file: Mooncake JSONL (or .parquet).")
@fail_cleanly
def generate_command(preset: str, num_requests: int, rate: float | None, seed: int,
                     out: Path) -> None:
    """Generate a production-like workload as Mooncake JSONL with session ids.

    Every knob is in the preset YAML (traces/<preset>.yaml); the same preset, --requests,
    --rate and --seed give a byte-identical file.
    """
    if num_requests < 1:
        raise InputError(f"must be >= 1, got {num_requests}", field="--requests")
    if rate is not None and not 0 < rate < float("inf"):
        raise InputError(f"must be a finite number > 0, got {rate}", field="--rate")
    check_output_file(out)
    written = trace_output_format(out, None, "--output")
    with Progress("generate", "req", total=num_requests) as bar:
        requests = generate(load_preset(preset), num_requests, seed, rate,
                            on_progress=bar.update, source=str(preset_path(preset)))
        bar.update(len(requests) - bar.count)  # the generator's last partial block
    write_trace(requests, out, written)
    click.echo(f"wrote {len(requests):,} requests ({preset}, seed {seed}) to {out}", err=True)

