"""A time window of a trace: the requests that arrive within a share of its time span.

`time_window(requests, start, end)` keeps the requests whose arrival falls in
`[t0 + start * span, t0 + end * span)` (the last request is kept when `end` is 1), where `t0`
is the first arrival and `span` the time from the first arrival to the last. The kept
requests are shifted back by `start * span` (so a window that starts at 0 is the trace's own
prefix, arrival times unchanged, and a later window starts where the trace started) and
renumbered 0.. in arrival order. Splitting at a fraction `f` into `[0, f)` and `[f, 1]`
gives every request to exactly one part: a train/test split by time (`prefixsim tune
--split time:F`). This module knows nothing of files or configs; `trace.time_window` in the
run config names the window (docs/results.md, "A tune folder").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from prefixsim.trace.record import Request


def window_label(start: float, end: float) -> str:
    """`0-0.5`, `0.5-1`: the window as the summary's `trace_time_window` shows it."""
    return f"{start:g}-{end:g}"


def time_window(requests: Sequence[Request], start: float, end: float) -> list[Request]:
    """The requests of `requests` (arrival order) inside the window; see the module
    docstring. `0 <= start < end <= 1` (the config checks it)."""
    if not 0.0 <= start < end <= 1.0:
        raise ValueError(f"expected 0 <= start < end <= 1, got [{start}, {end}]")
    if not requests:
        return []
    first, last = requests[0].arrival_s, requests[-1].arrival_s
    span = last - first
    low, high = first + start * span, first + end * span
    shift = start * span
    kept = [r for r in requests if low <= r.arrival_s and (r.arrival_s < high or end == 1.0)]
    return [dataclasses.replace(r, request_id=i, arrival_s=r.arrival_s - shift)
            for i, r in enumerate(kept)]
