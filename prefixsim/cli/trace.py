"""`prefixsim trace ...`: look at trace files."""

from __future__ import annotations

import json

import click

from prefixsim.characterize import characterize
from prefixsim.cli.app import app, fail_cleanly, format_value
from prefixsim.errors import InputError
from prefixsim.trace import READERS, load_trace


@app.group()
def trace() -> None:
    """Inspect trace files."""


@trace.command("inspect")
@click.argument("path")
@click.option("--trace-format", type=click.Choice(READERS.names()),
              help="Trace format; auto-detected by default.")
@click.option("--block-size", type=int, help="Tokens per hash id (512 for Mooncake).")
@click.option("--max-requests", type=int, help="Read only the first N requests.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@fail_cleanly
def inspect(path: str, trace_format: str | None, block_size: int | None,
            max_requests: int | None, as_json: bool) -> None:
    """Characterise a trace: sizes, arrival rate, page reuse, hit rates under TTLs.

    Hit rates are those of an unbounded cache replayed in arrival order (cache-spec Part A),
    with no TTL and with sliding TTLs of 10 s, 1 min, 5 min and 1 h.
    """
    if block_size is not None and block_size < 1:
        raise InputError(f"must be >= 1, got {block_size}", field="--block-size")
    stats = characterize(load_trace(path, trace_format, block_size, max_requests))
    stats = {"path": path, **stats}
    if as_json:
        click.echo(json.dumps(stats))
        return
    for key, value in stats.items():
        if isinstance(value, dict):
            inner = "  ".join(f"{k}={format_value(v)}" for k, v in value.items())
            click.echo(f"{key + ':':<28}{inner}")
        else:
            click.echo(f"{key + ':':<28}{format_value(value)}")
