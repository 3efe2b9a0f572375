"""Capacity curves of several eviction policies over one trace, each by its cheapest exact
method (analysis/curve.py): LRU by one stack-distance pass (or a SHARDS estimate when asked),
every other policy by one cache-only replay per capacity. What `prefixsim curve --policy
a,b,c` computes; drawing is report/'s (report/curves.py) and writing cli/'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prefixsim.analysis.curve import (
    CurvePoint,
    curve_from_distances,
    lru_curve_sampled,
    replay_curve,
    stack_distances,
)
from prefixsim.cache import POLICIES
from prefixsim.errors import InputError
from prefixsim.trace import Request


@dataclass(frozen=True)
class PolicyCurve:
    """One policy's curve and how it was computed (`stack`, `shards@RATE` or `replay`)."""

    policy: str
    method: str
    points: list[CurvePoint]


def parse_policies(text: str) -> list[str]:
    """`lru,s3fifo,gdsf` -> the names in order, each once; unknown names are an InputError
    listing the valid ones."""
    names = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names:
        raise InputError("expected one or more policy names", field="--policy")
    unknown = [n for n in names if n not in POLICIES.names()]
    if unknown:
        raise InputError(f"unknown policy {', '.join(unknown)} (valid: "
                         f"{', '.join(POLICIES.names())})", field="--policy")
    return names


def policy_curves(
    requests: Sequence[Request], capacities: Sequence[int], policies: Sequence[str],
    sample_rate: float | None = None, force_replay: bool = False,
) -> list[PolicyCurve]:
    """One curve per policy, in the order given. `sample_rate` (LRU only) estimates the LRU
    curve by SHARDS; `force_replay` replays LRU too (the slow reference)."""
    if sample_rate is not None and (list(policies) != ["lru"] or not 0 < sample_rate <= 1):
        raise InputError("needs --policy lru (alone) and 0 < rate <= 1", field="--sample-rate")
    curves = []
    for policy in policies:
        if sample_rate is not None:
            curves.append(PolicyCurve(policy, f"shards@{sample_rate:g}",
                                      lru_curve_sampled(requests, capacities, sample_rate)))
        elif policy == "lru" and not force_replay:
            distances = stack_distances(requests)
            method = "stack" if distances.exact else "stack (approximate: page sizes vary per id)"
            curves.append(PolicyCurve(policy, method, curve_from_distances(distances,
                                                                           capacities)))
        else:
            curves.append(PolicyCurve(policy, "replay",
                                      replay_curve(requests, capacities, policy)))
    return curves
