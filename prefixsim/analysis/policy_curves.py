"""Capacity curves of several eviction policies over one trace, each by its cheapest exact
method (analysis/curve.py): LRU by one stack-distance pass (or a SHARDS estimate when asked),
every other policy by one cache-only replay per capacity. What `prefixsim curve --policy
a,b,c` computes; drawing is report/'s (report/curves.py) and writing cli/'s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
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
from prefixsim.registry import unknown_name
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
        raise InputError(unknown_name("policy", unknown[0], POLICIES.names()), field="--policy")
    return names


def policy_curves(
    requests: Sequence[Request], capacities: Sequence[int], policies: Sequence[str],
    sample_rate: float | None = None, force_replay: bool = False,
    on_progress: Callable[[str, int], None] | None = None,
) -> list[PolicyCurve]:
    """One curve per policy, in the order given. `sample_rate` (LRU only) estimates the LRU
    curve by SHARDS; `force_replay` replays LRU too (the slow reference). `on_progress(policy,
    n)` is told of every n requests a policy's pass or replays went through, as they go
    (`curve_work` is their total)."""
    if sample_rate is not None and (list(policies) != ["lru"] or not 0 < sample_rate <= 1):
        raise InputError("needs --policy lru (alone) and 0 < rate <= 1", field="--sample-rate")
    curves = []
    for policy in policies:
        told = functools.partial(on_progress, policy) if on_progress is not None else None
        if sample_rate is not None:
            curves.append(PolicyCurve(policy, f"shards@{sample_rate:g}",
                                      lru_curve_sampled(requests, capacities, sample_rate)))
            if told is not None:
                told(len(requests))
        elif policy == "lru" and not force_replay:
            distances = stack_distances(requests, told)
            if told is not None:  # the pass tells of whole 10,000s only
                told(len(requests) % 10000)
            method = "stack" if distances.exact else "stack (approximate: page sizes vary per id)"
            curves.append(PolicyCurve(policy, method, curve_from_distances(distances,
                                                                           capacities)))
        else:
            curves.append(PolicyCurve(policy, "replay",
                                      replay_curve(requests, capacities, policy, told)))
    return curves


def curve_work(requests: Sequence[Request], capacities: Sequence[int],
               policies: Sequence[str], sample_rate: float | None = None,
               force_replay: bool = False) -> int:
    """How many requests `policy_curves` goes through in all: one pass for a stack-distance
    or sampled LRU curve, one replay per capacity for every other policy."""
    replays = sum(1 if sample_rate is not None or (p == "lru" and not force_replay)
                  else len(capacities) for p in policies)
    return replays * len(requests)
