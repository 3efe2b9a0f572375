"""Characterisation plots of a trace (`prefixsim trace inspect --plot DIR`).

Arrival rate over time, input/output length histograms, reuse-time CDF, page popularity
skew, turns per session, and the hit rate of a cache-only replay against TTL (unbounded
cache, sliding TTL) and against capacity (LRU, no TTL). Uses matplotlib's Agg backend; each
figure has a title, axis labels with units and a legend, and is finished as the report's
are (figures.py `finish_figure`: log axes ticked in plain numbers, times as 1 min, 1 h, 1 d;
the arrival axis in s, min, h or d by the trace's span).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from prefixsim.cache import POLICIES, TTLRule, replay_cache  # noqa: E402
from prefixsim.engine import replay_cache_only  # noqa: E402
from prefixsim.engine.gc_pause import paused_gc  # noqa: E402
from prefixsim.report.figures import (  # noqa: E402
    finish_figure,
    short_seconds,
    time_ticks,
    time_unit,
)
from prefixsim.trace import Request  # noqa: E402
from prefixsim.trace.columns import RequestColumns  # noqa: E402

TTL_GRID_S = (1.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0)
CAPACITY_FRACTIONS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)


def reuse_times_s(requests: Sequence[Request]) -> np.ndarray:
    """Seconds between consecutive uses of the same page id (arrival order)."""
    last: dict[int, float] = {}
    gaps: list[float] = []
    for request in requests:
        now = request.arrival_s
        for page in request.page_ids:
            before = last.get(page)
            if before is not None:
                gaps.append(now - before)
            last[page] = now
    return np.array(gaps)


def popularity(requests: Sequence[Request]) -> np.ndarray:
    """Reuses per page id (uses - 1), most reused first (from the columns of a trace kept
    by column, trace/columns.py)."""
    if isinstance(requests, RequestColumns):
        start, end = int(requests.page_start[0]), int(requests.page_start[-1])
        counts = np.unique(requests.page_ids[start:end], return_counts=True)[1]
        return np.sort(counts.astype(np.int64) - 1)[::-1]
    uses = Counter(page for request in requests for page in request.page_ids)
    return np.array(sorted((count - 1 for count in uses.values()), reverse=True))


def top_share(reuses: np.ndarray, fraction: float = 0.1) -> float:
    """Share of all reuses that fall on the most reused `fraction` of pages."""
    total = reuses.sum()
    if total == 0:
        return 0.0
    return float(reuses[: max(1, int(len(reuses) * fraction))].sum() / total)


def hit_rate(requests: Sequence[Request], capacity_tokens: int | None,
             ttl_s: float | None) -> float:
    ttl = None if ttl_s is None else TTLRule(ttl_s)
    with paused_gc():  # the replay makes no cycles (engine/gc_pause.py)
        result = replay_cache_only(requests, replay_cache(capacity_tokens,
                                                          POLICIES.build("lru"), ttl))
    query = sum(r.input_tokens for r in result.records)
    return sum(r.cached_tokens for r in result.records) / query if query else 0.0


def _save(fig, path: Path) -> Path:
    finish_figure(fig)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


class _Figures:
    """The plots of one trace, saved into `out_dir` as they are drawn (`paths`)."""

    def __init__(self, out_dir: Path, title: str) -> None:
        self.out_dir, self.title = out_dir, title
        self.paths: list[Path] = []

    @contextmanager
    def figure(self, name: str, subject: str, xlabel: str, ylabel: str) -> Iterator[Any]:
        """Axes to draw on; on leaving, titled `TITLE: subject`, labelled, with a legend,
        saved as `name`.png."""
        fig, ax = plt.subplots(figsize=(7, 3.5))
        yield ax
        ax.set(title=f"{self.title}: {subject}", xlabel=xlabel, ylabel=ylabel)
        ax.legend()
        self.paths.append(_save(fig, self.out_dir / f"{name}.png"))


def plot_characterisation(requests: Sequence[Request], out_dir: Path,
                          title: str = "trace") -> list[Path]:
    """Draw every characterisation plot of `requests` into `out_dir`; return the files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = _Figures(out_dir, title)
    arrivals = np.array([r.arrival_s for r in requests])
    span = max(arrivals.max() - arrivals.min(), 1e-9)
    bins = max(1, min(200, len(requests) // 20))
    size, unit = time_unit(span)
    with figures.figure("arrival_rate", "arrival rate over time", f"time since start ({unit})",
                        "arrival rate (requests/s)") as ax:
        counts, edges = np.histogram(arrivals, bins=bins)
        width = span / bins
        ax.plot((edges[:-1] - edges[0]) / size, counts / width,
                label=f"requests/s ({short_seconds(width)} bins)")
        ax.axhline(len(requests) / span, color="grey", ls="--", label="mean rate")

    with figures.figure("lengths", "request lengths", "length (tokens, log scale)",
                        "requests") as ax:
        inputs = np.array([r.input_tokens for r in requests])
        outputs = np.array([r.output_tokens for r in requests])
        top = max(inputs.max(), max(outputs.max(), 1))
        log_bins = np.logspace(0, np.log10(top + 1), 60)
        ax.hist(inputs, bins=log_bins, alpha=0.6, label=f"input (mean {inputs.mean():,.0f})")
        ax.hist(np.maximum(outputs, 1), bins=log_bins, alpha=0.6,
                label=f"output (mean {outputs.mean():,.0f})")
        ax.set_xscale("log")

    gaps = np.sort(reuse_times_s(requests))
    with figures.figure("reuse_time_cdf", "reuse-time CDF",
                        "time since the page's last use (log scale)", "fraction of reuses") as ax:
        if len(gaps):
            median = short_seconds(float(np.median(gaps)))
            ax.plot(np.maximum(gaps, 1e-3), np.arange(1, len(gaps) + 1) / len(gaps),
                    label=f"{len(gaps):,} page reuses (median {median})")
            ax.set_xscale("log")
            ax.autoscale_view()
            time_ticks(ax.xaxis)

    reuses = popularity(requests)
    with figures.figure("popularity_skew", "page popularity skew",
                        "most reused pages (% of pages, log scale)",
                        "share of all reuses (%)") as ax:
        if reuses.sum() > 0:  # log x: a few hot pages (a system prompt) are visible
            share = np.cumsum(reuses) / reuses.sum()
            ax.plot(np.arange(1, len(share) + 1) / len(share) * 100, share * 100,
                    label=f"top 10% of pages hold {top_share(reuses) * 100:.1f}% of reuses")
            ax.set_xscale("log")

    with figures.figure("turns_per_session", "turns per session", "requests per session",
                        "sessions") as ax:
        sessions = Counter(r.session_id for r in requests if r.session_id is not None)
        turns = np.array(list(sessions.values()))
        if len(turns):
            ax.hist(turns, bins=np.arange(1, min(turns.max(), 100) + 2) - 0.5,
                    label=f"{len(turns):,} sessions (mean {turns.mean():.2f} turns)")
        else:
            ax.text(0.5, 0.5, "no session ids in this trace", ha="center",
                    transform=ax.transAxes)

    with figures.figure("hit_rate_vs_ttl", "hit rate against TTL", "TTL (log scale)",
                        "token hit rate (%)") as ax:
        ttl_rates = [hit_rate(requests, None, ttl) * 100 for ttl in TTL_GRID_S]
        ax.plot(TTL_GRID_S, ttl_rates, marker="o", label="unbounded cache, sliding TTL")
        ax.axhline(hit_rate(requests, None, None) * 100, color="grey", ls="--", label="no TTL")
        ax.set_xscale("log")
        ax.autoscale_view()
        time_ticks(ax.xaxis)

    footprint = sum(r.input_tokens for r in requests)
    capacities = [max(1, int(footprint * f)) for f in CAPACITY_FRACTIONS]
    with figures.figure("hit_rate_vs_capacity", "hit rate against capacity",
                        "cache capacity (M tokens, log scale)", "token hit rate (%)") as ax:
        rates = [hit_rate(requests, c, None) * 100 for c in capacities]
        ax.plot(np.array(capacities) / 1e6, rates, marker="o", label="LRU, no TTL")
        ax.set_xscale("log")
    return figures.paths
