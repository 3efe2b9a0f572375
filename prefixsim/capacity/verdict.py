"""Whether one probe run passes: its SLOs, its goodput share, and whether the fleet kept up.

SLOs are `KEY:LIMIT` pairs over the latency figures every timed summary holds
(`{mean,median,p50,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms`, docs/results.md), each "lower is
better": a probe holds an SLO when the figure is at most its limit. The goodput share (as
vLLM's `--goodput`) is the share of the offered requests that completed within the run's
`engine.goodput_*` SLOs. The kept-up rule (docs/load.md, capacity) is metrics/kept_up.py's,
read from the probe's own summary, which judged it: at least KEPT_UP_SHARE of the offered
requests completed, and, under an open loop, no queue grew (`ttft_growth`: the last
quarter's mean TTFT, requests in arrival order, at most GROWTH_LIMIT times the first
quarter's); a staged load is judged stage by stage (each stage's `kept_up`), a closed loop
by its completions only. So a probe passes the rule exactly when its run says it kept up.

The rates reported: offered = (n - 1) / (last arrival - first arrival) over the run's n
requests; achieved = the summary's `request_throughput` (completed / duration, as vLLM's
benchmark reports it). Their ratio is not the rule: on a short trace the drain of the last
requests (a few seconds of decode) cuts completed / duration by several per cent at any
fleet size.

This module reads a summary and a requests frame; it runs and writes nothing.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from prefixsim.errors import InputError
from prefixsim.metrics.kept_up import GROWTH_LIMIT, KEPT_UP_SHARE, named_stages, stages_behind
from prefixsim.metrics.schema import LATENCIES
from prefixsim.report.format import significant

SLO_STATS = ("mean", "median", "p50", "p90", "p95", "p99")
SLO_KEYS = tuple(f"{stat}_{name}_ms" for name in LATENCIES for stat in SLO_STATS)


def parse_slos(values: Sequence[str], flag: str = "--slo") -> dict[str, float]:
    """`p99_ttft_ms:2000`, ... (also comma- or space-separated) -> {key: limit}; a key no
    timed summary has, or a limit that is not a positive number, is an InputError."""
    slos: dict[str, float] = {}
    for item in (part for value in values for part in re.split(r"[\s,]+", value) if part):
        key, sep, number = item.partition(":")
        if key not in SLO_KEYS:
            guess = _slo_key_guess(key)
            hint = f"did you mean {guess!r}? " if guess else ""
            raise InputError(f"{key!r} is not a latency of a timed summary ({hint}valid: "
                             f"{', '.join(SLO_KEYS)})", field=flag)
        try:
            limit = float(number) if sep else math.nan
        except ValueError:
            limit = math.nan
        if not math.isfinite(limit) or limit <= 0:
            raise InputError(f"expected KEY:LIMIT with a positive number of ms, got {item!r}",
                             field=flag)
        slos[key] = limit
    return slos


def _slo_key_guess(key: str) -> str | None:
    """The SLO key a misspelt one means: its statistic and latency in any order, case or
    unit (`ttft_p99`, `P99-TTFT`, `p99_ttft_s` -> `p99_ttft_ms`), else the closest key."""
    words = set(re.split(r"[\W_]+", key.lower()))
    stats = [stat for stat in SLO_STATS if stat in words]
    names = [name for name in LATENCIES if name in words]
    if len(stats) == 1 and len(names) == 1:
        return f"{stats[0]}_{names[0]}_ms"
    close = difflib.get_close_matches(key.lower(), SLO_KEYS, n=1, cutoff=0.6)
    return close[0] if close else None


@dataclass(frozen=True)
class Verdict:
    """One probe judged: its rates, the figures the SLOs read, and why it failed (if so)."""

    offered_rate: float
    achieved_rate: float
    figures: dict[str, float | None] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.reasons


def judge(summary: Mapping[str, Any], requests: pd.DataFrame, slos: Mapping[str, float],
          goodput_share: float | None = None) -> Verdict:
    """Judge one finished probe (module docstring)."""
    offered = _rate(requests["arrival_s"]) if "arrival_s" in requests else math.nan
    achieved = float(summary.get("request_throughput") or 0.0)
    reasons: list[str] = []
    figures: dict[str, float | None] = {}
    for key, limit in slos.items():
        value = summary.get(key)
        figures[key] = value if isinstance(value, (int, float)) else None
        if figures[key] is None or not value <= limit:
            reasons.append(f"{key} {_show(value)} > {significant(limit, 6)}")
    if goodput_share is not None:
        share = _goodput_share(summary)
        figures["goodput_share"] = share
        if not share >= goodput_share:
            reasons.append(f"goodput share {share:.3f} < {goodput_share:g}")
    completed, total = summary.get("completed") or 0, summary.get("num_requests") or 0
    if not completed >= KEPT_UP_SHARE * total:
        reasons.append(f"{completed} of {total} requests completed (< {KEPT_UP_SHARE:g})")
    growth = summary.get("ttft_growth")  # an open loop's, as its run judged it
    if growth is not None and growth > GROWTH_LIMIT:
        reasons.append(f"queue grew: last quarter's mean TTFT {growth:.2f} x the first's")
    behind = stages_behind(summary.get("stages") or ())
    if behind:
        reasons.append(f"behind in {named_stages(behind)}")
    return Verdict(offered_rate=offered, achieved_rate=achieved, figures=figures,
                   reasons=tuple(reasons))


def _rate(times: pd.Series) -> float:
    """(n - 1) / (last - first) of a column of times (nan with fewer than two, or no span)."""
    values = times.to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    if len(values) < 2 or values.max() <= values.min():
        return math.nan
    return (len(values) - 1) / float(values.max() - values.min())


def _goodput_share(summary: Mapping[str, Any]) -> float:
    """Requests completed within the goodput SLOs / requests offered (0 when unknown)."""
    goodput, duration = summary.get("request_goodput"), summary.get("duration")
    offered = summary.get("num_requests") or 0
    if goodput is None or duration is None or not offered:
        return 0.0
    return float(goodput) * float(duration) / float(offered)


def _show(value: object) -> str:
    """A figure in a reason: 4 significant digits, never in exponent notation (a p99 TTFT
    of 12,345 ms, not 1.234e+04)."""
    return significant(value, 4) if isinstance(value, (int, float)) else "missing"
