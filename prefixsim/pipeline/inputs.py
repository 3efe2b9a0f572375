"""The trace a run reads: its section resolved (format detected, block size filled in) and
the file read into a TraceData (requests in arrival order, skipped lines, labels).
Writes nothing."""

from __future__ import annotations

import dataclasses
import functools
import os

from prefixsim.config import RunConfig, TraceConfig
from prefixsim.engine import ProgressCallback
from prefixsim.errors import InputError
from prefixsim.trace import DEFAULT_BLOCK_SIZES, ReadOptions, Request, TraceData, detect_format
from prefixsim.trace import read_trace as read_trace_file
from prefixsim.trace.readers import rows_block_size
from prefixsim.trace.window import time_window, window_label


def load_trace_data(config: TraceConfig,
                    on_progress: ProgressCallback | None = None) -> TraceData:
    """The trace named by the `trace` section, with skipped-line count and labels;
    `on_progress(n)` is told of every n requests read. A `time_window` keeps that share of
    the trace's time span (trace/window.py; after `max_requests`) and labels the data with
    it (`trace_time_window` in the summary)."""
    if config.path is None:
        raise InputError("no trace given (pass --trace PATH or set trace.path)",
                         field="trace.path")
    options = ReadOptions(
        block_size=config.block_size, max_requests=config.max_requests,
        skip_bad_lines=config.skip_bad_lines, prefix_model=config.prefix_model,
        session_rate_per_s=config.session_rate_per_s, seed=config.seed,
        max_pages=config.max_pages, on_progress=on_progress,
    )
    data = read_trace_file(config.path, config.format, options)
    if config.time_window is None:
        return data
    start, end = config.time_window
    kept = time_window(data.requests, start, end)
    if not kept:
        raise InputError(f"no requests arrive in the window [{start:g}, {end:g}] of the trace",
                         file=str(config.path), field="trace.time_window")
    return dataclasses.replace(data, requests=kept,
                               labels={**data.labels, "time_window": window_label(start, end)})


@functools.lru_cache(maxsize=4)
def _cached_trace(trace: TraceConfig, stamp: tuple[int, int]) -> TraceData:
    """The loaded trace; `stamp` (mtime, size) makes an edited file load afresh."""
    return load_trace_data(trace)


def shared_trace_data(config: TraceConfig) -> TraceData:
    """`load_trace_data` of a resolved trace section, loaded at most once per process and
    file version (a sweep worker's runs share it). Callers must not mutate it."""
    if config.path is None:
        raise InputError("no trace given", field="trace.path")
    try:
        info = os.stat(config.path)
    except OSError:
        return load_trace_data(config)  # raises the reader's "no such file" InputError
    return _cached_trace(config, (info.st_mtime_ns, info.st_size))


def load_requests(config: TraceConfig) -> list[Request]:
    """The trace named by the `trace` section, in arrival order."""
    return load_trace_data(config).requests


def check_trace_exists(config: RunConfig) -> RunConfig:
    """The trace of `config` resolved (resolve_trace_defaults), refusing one that is not
    given, does not exist or is of no known format (an empty file): what every run of a
    capacity search, a sweep or a tune would otherwise fail on alike."""
    resolved = resolve_trace_defaults(config)  # no trace; no such file; format not detected
    path = config.trace.path
    if path is not None and not os.path.exists(path):  # a format given, so not detected
        raise InputError("no such file or folder (no run was started)", file=str(path),
                         field="trace.path")
    return resolved


def resolve_trace_defaults(config: RunConfig) -> RunConfig:
    """The config with the trace format detected and the block size filled in (the one a
    Mooncake or Parquet file's first row states, else the format's), so the effective
    config written beside the results says what was actually used."""
    trace = config.trace
    if trace.path is None:
        raise InputError("no trace given (pass --trace PATH or set trace.path)",
                         field="trace.path")
    fmt = trace.format or detect_format(trace.path)
    block_size = trace.block_size or rows_block_size(trace.path, fmt) or \
        DEFAULT_BLOCK_SIZES.get(fmt)  # a converted file's rows state theirs (16 for Azure)
    return config.model_copy(
        update={"trace": trace.model_copy(update={"format": fmt, "block_size": block_size})}
    )
