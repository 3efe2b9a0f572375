"""How long pages sat unused: histograms of a page's idle age at a hit, at an eviction and
at an expiry (docs/cache-semantics.md R5, R10, R12).

A page's idle age is the simulated time since its last use (its last hit or its insert):
at a hit, `now - last_access_s` before the hit refreshes it; at an eviction, the same at the
moment the cache made room (the time of the request that needed it); at an expiry, the
time it had been unused when its deadline passed (`deadline_s - last_access_s`: the TTL for
a sliding TTL, unless a descendant kept it alive longer). Comparing the three says what
limits hits: pages evicted while younger than the TTL mean the capacity does; pages that
expire while hits keep arriving at ages just over the TTL mean the TTL does.

Bins are log-spaced, four per doubling, from 2**-10 s (~1 ms) to 2**20 s (~12 days), with
one bin below and one above; a quantile is interpolated geometrically inside its bin, so it
is within a factor 2**0.25 (19%) of the exact value, and kept within the exact least and
greatest age where every page's age was reported to `bound` (expiries are: under a TTL of
300 s every page expires at an age of 300 s or more, which the bin [256, 304) s alone would
spread down to 256 s). Counts are pages. The caches add to
the bins with `age_bin(age)` inline (one call per hit segment or evicted run); this module
owns the bins, adding histograms and reading quantiles.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable

BINS_PER_DOUBLING = 4
LOWEST_EXPONENT = -10
HIGHEST_EXPONENT = 20
EDGES_S: tuple[float, ...] = tuple(
    2.0 ** (k / BINS_PER_DOUBLING)
    for k in range(LOWEST_EXPONENT * BINS_PER_DOUBLING, HIGHEST_EXPONENT * BINS_PER_DOUBLING + 1)
)
"""Bin i holds ages in [EDGES_S[i-1], EDGES_S[i]); bin 0 ages below EDGES_S[0] (0 included),
the last bin ages of EDGES_S[-1] and more."""
_NUM_EDGES = len(EDGES_S)
_FIRST_EDGE_S = EDGES_S[0]
_LAST_EDGE_S = EDGES_S[-1]
# `age_bin`: the first edge scaled to 1; the octave (bit length less one) of 1..1023
_SCALE = 2.0 ** -LOWEST_EXPONENT
_OCTAVE_OF: tuple[int, ...] = tuple(max(n.bit_length() - 1, 0) for n in range(1024))
# the two tables as `age_bin` reads them: arrays, which compiled are C arrays (typed views)
_OCTAVES = array("q", _OCTAVE_OF)
_EDGES = array("d", EDGES_S)
assert BINS_PER_DOUBLING == 4 and HIGHEST_EXPONENT - LOWEST_EXPONENT <= 30, "age_bin's reach"


def age_bin(age_s: float) -> int:
    """The bin of idle age `age_s`: `bisect_right(EDGES_S, age_s)`, the same answer for every
    float (NaN included), found from the binary exponent rather than by bisection. An age in
    [2**e, 2**(e+1)) within the edges' range, scaled by 2**-LOWEST_EXPONENT (exact: a power of
    two), is a t in [1, 2**30) whose integer part has the octave e - LOWEST_EXPONENT: read
    from a table of 1024 entries, a factor 1024 at a time (divisions by powers of two are
    exact). The age then lies between the edges 2**e (exact) and 2**(e+1), with the three
    quarter-doubling edges of that octave between them, and two comparisons place it.
    Compiled (idle_ages.pxd) it makes no Python call, where a bisection compares seven
    Python floats."""
    if age_s < _FIRST_EDGE_S:
        return 0
    if not age_s < _LAST_EDGE_S:  # the last edge or more, or NaN (bisect_right's answers)
        return _NUM_EDGES
    scaled = age_s * _SCALE  # in [1, 2**30)
    if scaled < 1024.0:
        whole = int(scaled)
        octave = _OCTAVES[whole]
    elif scaled < 1048576.0:
        whole = int(scaled / 1024.0)
        octave = _OCTAVES[whole] + 10
    else:
        whole = int(scaled / 1048576.0)
        octave = _OCTAVES[whole] + 20
    low = 4 * octave  # the index of the edge 2**e (BINS_PER_DOUBLING of them per octave)
    middle = _EDGES[low + 2]
    if age_s < middle:
        quarter = _EDGES[low + 1]
        return low + 1 if age_s < quarter else low + 2
    quarter = _EDGES[low + 3]
    return low + 3 if age_s < quarter else low + 4


class AgeHistogram:
    """Page counts per idle-age bin (see EDGES_S); added with `+` (replicas' counters).
    The counts are an `array("q")`: the compiled caches add to them in C, through a typed
    view (segment_tree.pxd). `least_s` and `most_s` are the exact extremes of the
    `bounded_pages` pages whose ages were reported (`add`, `bound`); quantiles keep within
    them only when every counted page was (`bounded_pages == total`)."""

    __slots__ = ("counts", "least_s", "most_s", "bounded_pages")

    def __init__(self, counts: Iterable[int] | None = None, least_s: float | None = None,
                 most_s: float | None = None, bounded_pages: int = 0) -> None:
        self.counts = array("q", bytes(8 * (len(EDGES_S) + 1)) if counts is None else counts)
        self.least_s = least_s
        self.most_s = most_s
        self.bounded_pages = bounded_pages

    def add(self, age_s: float, pages: int = 1) -> None:
        """Count `pages` pages of idle age `age_s` (seconds)."""
        self.counts[age_bin(age_s)] += pages
        self.bound(age_s, age_s, pages)

    def bound(self, least_s: float, most_s: float, pages: int) -> None:
        """Report that `pages` pages just counted (in `counts` directly, as the caches do)
        had ages from `least_s` to `most_s`."""
        if pages <= 0:
            return
        self.least_s = least_s if self.least_s is None else min(self.least_s, least_s)
        self.most_s = most_s if self.most_s is None else max(self.most_s, most_s)
        self.bounded_pages += pages

    @property
    def total(self) -> int:
        return sum(self.counts)

    def quantile(self, q: float) -> float | None:
        """The age below which a share `q` of the pages fall (None when empty), within the
        exact extremes where every page's age was reported (class docstring)."""
        total = self.total
        if total == 0:
            return None
        value = self._binned_quantile(q, total)
        if self.bounded_pages == total and self.least_s is not None and self.most_s is not None:
            return min(max(value, self.least_s), self.most_s)
        return value

    def _binned_quantile(self, q: float, total: int) -> float:
        target = q * total
        seen = 0
        for index, count in enumerate(self.counts):
            if count and seen + count >= target:
                share = (target - seen) / count
                if index == 0:
                    return EDGES_S[0] * share
                if index == len(EDGES_S):
                    return EDGES_S[-1]
                low, high = EDGES_S[index - 1], EDGES_S[index]
                return low * (high / low) ** share
            seen += count
        return EDGES_S[-1]  # pragma: no cover - q > 1

    def share_below(self, age_s: float) -> float | None:
        """Share of the pages younger than the bin edge at or below `age_s` (None if empty)."""
        total = self.total
        if total == 0:
            return None
        return sum(self.counts[: bisect_right(EDGES_S, age_s)]) / total

    def __add__(self, other: AgeHistogram) -> AgeHistogram:
        total = AgeHistogram([a + b for a, b in zip(self.counts, other.counts, strict=True)])
        for part in (self, other):
            if part.least_s is not None and part.most_s is not None:
                total.bound(part.least_s, part.most_s, part.bounded_pages)
        return total

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AgeHistogram) and self.counts == other.counts and \
            (self.least_s, self.most_s, self.bounded_pages) == \
            (other.least_s, other.most_s, other.bounded_pages)

    __hash__ = None  # type: ignore[assignment]  (mutable)

    def __repr__(self) -> str:
        nonzero = {i: c for i, c in enumerate(self.counts) if c}
        bounds = "" if not self.bounded_pages else \
            f", {self.least_s}..{self.most_s} s over {self.bounded_pages} pages"
        return f"AgeHistogram({nonzero}{bounds})"
