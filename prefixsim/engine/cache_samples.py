"""The cache-only replay's timeseries: the cache's state at t = 0, dt, 2 dt, ... of trace time.

A cache-only replay changes the cache only at request arrivals, so the sample at t is the
state after every request that arrived at or before t (as metrics/timeseries.py samples the
timed engine). The replay loop keeps `upcoming`, the first grid point not yet sampled; before
a request that arrives after it, it appends one row for the state left by the earlier requests
(which holds from `upcoming` up to that arrival), and the next grid point at or after the
arrival becomes `upcoming`. That is one float comparison per request and at most one row per
request, however small dt: no per-page work and nothing that polls. The last row is taken
after the loop. Rows are (grid time, resident tokens, evicted pages, expired pages), the same
for either replay loop. Rolling hit rates come after the run from the per-request
records (hit / query tokens of the requests that arrived since the previous sample),
in metrics/timeseries.py: this module only records rows, with no pandas.
"""

from __future__ import annotations

import math


def next_sample(now: float, interval_s: float) -> float:
    """The first grid point k * interval_s (k >= 0) at or after `now`, computed as the
    sampler computes its grid (float k times the interval): the least such k, found from
    the quotient truncated (compiled, a C conversion: `math.ceil` would be a Python call)
    and moved to the grid point the products say."""
    quotient = now / interval_s
    if quotient < _K_MAX:
        k = int(quotient) if quotient > 0.0 else 0
    else:  # from 2**53 on, or not a number (math.ceil raises, as the C conversion would not)
        k = math.ceil(quotient)
    while k > 0 and (k - 1) * interval_s >= now:  # the quotient rounded past a point
        k -= 1
    while k * interval_s < now:
        k += 1
    return k * interval_s


_K_MAX = 2.0 ** 53  # below it, every whole number is a float and `int` is exact


def end_of_replay(cache, states: list[tuple] | None, upcoming: float, on_progress,
                  unreported: int) -> None:
    """What a replay does after its last request: report the requests not yet reported to
    `on_progress`, and append the last row (when sampling)."""
    if on_progress is not None:
        on_progress(unreported)
    if states is not None:
        states.append(state_row(upcoming, cache))


def state_row(upcoming: float, cache) -> tuple:
    """The row a replay appends at a crossing (either replay loop)."""
    return row_of(upcoming, cache.resident_tokens, cache.counters)


def row_of(upcoming: float, resident_tokens: int, counters) -> tuple:
    """A row from its figures (the chunk replay reads them from its typed cache's C fields,
    engine/cache_only_fast.py: no attribute looked up by name)."""
    return (upcoming, resident_tokens, counters.evicted_pages, counters.expired_pages)
