"""The cache-only replay's timeseries: the cache's state at t = 0, dt, 2 dt, ... of trace time.

A cache-only replay changes the cache at request arrivals and, under a TTL, as deadlines
pass, so the sample at t is the state after every request that arrived at or before t less
the pages whose deadline passed before t (docs/cache-semantics.md R12: alive through the
deadline, gone after it; the cache frees them when it is next called, which for the
replay is the next arrival). The replay loop keeps `upcoming`, the first grid point not yet
sampled; before a request that arrives after it, `gap_rows` frees the pages dead by
`upcoming` and appends one row, then one more at the first grid point after each later
deadline that passes before the arrival (none without a TTL), and the next grid point at or
after the arrival becomes `upcoming`. That is one float comparison per request and at most
one row per request or batch of expiries, however small dt: no per-page work and nothing
that polls. Freeing the dead pages early changes no record: the arrival would free the same
pages, in the same deadline order, before it looks anything up. The last row is taken
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


def gap_rows(cache, states: list, upcoming: float, now: float, interval_s: float) -> float:
    """Append the rows of the grid points from `upcoming` up to, not at, `now` (a request's
    arrival after `upcoming`), as the module docstring says, and return the next grid point
    to sample: the first at or after `now`."""
    cache.expire(upcoming)
    states.append(state_row(upcoming, cache))
    soonest = cache.next_expiry_s()
    while soonest < now:
        # the first grid point after the deadline (a page is alive at its deadline)
        point = next_sample(math.nextafter(soonest, math.inf), interval_s)
        if not point < now:
            break
        if cache.expire(point):
            states.append(state_row(point, cache))
        soonest = cache.next_expiry_s()
    return next_sample(now, interval_s)


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
