"""Bench: the 50-capacity LRU curve in one stack-distance pass vs 3 single replays.

Target: 50 capacities of the LRU curve in less time than 3 single cache-only
replays, both timed here in the same process. Uses the Mooncake conversation trace when
../shared/traces is present, else a synthetic multi-turn trace. The 3 replays' capacities
are points of the curve, so the bench also checks their hit tokens agree exactly.

Then the sampled (SHARDS) curve's error against the exact one at rates 0.1 and 0.01, on the
trace and on the generated chat/agent/rag presets (5,000 requests each): mean and max
absolute error of the hit rate over 12 log-spaced capacities from total/1000 to total.

    .venv/bin/python bench/capacity_curve.py [TRACE]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from prefixsim.analysis.curve import lru_curve, lru_curve_sampled, replay_curve
from prefixsim.trace import Request, load_trace
from prefixsim.trace.generate import generate, load_preset

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
    print()
    print("sampled curve vs exact (hit rate; 12 log-spaced capacities, total/1000..total)")
    print(f"{'trace':<28}{'rate':>6}{'mean err':>10}{'max err':>9}{'at cap':>14}"
          f"{'exact s':>9}{'sampled s':>11}")
    sampled_errors(requests, label)
    for preset in ("chat", "agent", "rag"):
        sampled_errors(generate(load_preset(preset), 5000, seed=0), f"preset {preset}")


def sampled_errors(requests: list[Request], label: str) -> None:
    """Print the sampled curve's error against the exact curve at rates 0.1 and 0.01."""
    total = sum(r.input_tokens for r in requests)
    capacities = [int(c) for c in np.geomspace(total / 1000, total, 12)]
    started = time.perf_counter()
    exact = np.array([p.token_hit_rate for p in lru_curve(requests, capacities)])
    exact_s = time.perf_counter() - started
    for rate in (0.1, 0.01):
        started = time.perf_counter()
        est = np.array([p.token_hit_rate
                        for p in lru_curve_sampled(requests, capacities, rate)])
        sampled_s = time.perf_counter() - started
        err = np.abs(est - exact)
        print(f"{label[:27]:<28}{rate:>6g}{err.mean():>10.4f}{err.max():>9.4f}"
              f"{capacities[int(err.argmax())]:>14,}{exact_s:>9.2f}{sampled_s:>11.2f}")


if __name__ == "__main__":
    main()
