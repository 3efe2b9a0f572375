"""Bench: the 50-capacity LRU curve in one stack-distance pass vs 3 single replays.

Target (issue 6): 50 capacities of the LRU curve in less time than 3 single cache-only
replays, both timed here in the same process. Uses the Mooncake conversation trace when
../shared/traces is present, else a synthetic multi-turn trace. The 3 replays' capacities
are points of the curve, so the bench also checks their hit tokens agree exactly.

    .venv/bin/python bench/capacity_curve.py [TRACE]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from prefixsim.curve import lru_curve, replay_curve
from prefixsim.trace import Request, load_trace

MOONCAKE = Path(__file__).resolve().parents[2] / "shared/traces/mooncake/conversation_trace.jsonl"


def synthetic(num_sessions: int = 3000, seed: int = 0, page: int = 512) -> list[Request]:
    """Multi-turn sessions over a few shared system prompts; each turn extends its prompt."""
    rng = np.random.default_rng(seed)
    next_id = 0
    systems = []
    for _ in range(8):
        systems.append(list(range(next_id, next_id + 4)))
        next_id += 4
    events = []
    for s in range(num_sessions):
        path = list(systems[rng.integers(len(systems))])
        t = float(rng.uniform(0, 3600))
        for _ in range(int(rng.integers(1, 8))):
            grow = int(rng.integers(1, 6))
            path = path + list(range(next_id, next_id + grow))
            next_id += grow
            events.append((t, s, tuple(path)))
            t += float(rng.exponential(30))
    events.sort()
    return [Request(i, t, len(ids) * page, 100, ids, page) for i, (t, _, ids) in
            enumerate(events)]


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else MOONCAKE
    if path.is_file():
        requests, label = load_trace(path), path.name
    else:
        requests, label = synthetic(), "synthetic (shared traces absent)"
    total = sum(r.input_tokens for r in requests)
    capacities = [int(c) for c in np.geomspace(total / 1000, total, 50)]
    probe = [capacities[10], capacities[25], capacities[40]]

    started = time.perf_counter()
    replays = replay_curve(requests, probe)
    replay_s = time.perf_counter() - started

    started = time.perf_counter()
    curve = lru_curve(requests, capacities)
    curve_s = time.perf_counter() - started

    by_capacity = {p.capacity_tokens: p.hit_tokens for p in curve}
    agree = all(by_capacity[p.capacity_tokens] == p.hit_tokens for p in replays)
    print(f"trace: {label}: {len(requests):,} requests, "
          f"{sum(r.num_pages for r in requests):,} pages")
    print(f"3 single LRU replays:        {replay_s:8.3f} s")
    print(f"50-capacity stack curve:     {curve_s:8.3f} s")
    print(f"ratio curve / 3 replays:     {curve_s / replay_s:8.3f}  (target < 1)")
    print(f"replays agree with curve:    {agree}")
    print("target met" if curve_s < replay_s and agree else "TARGET MISSED")


if __name__ == "__main__":
    main()
