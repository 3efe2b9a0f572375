"""Bench: every eviction policy side by side (cache-only token hit rate), with the bounds.

Prints one row per policy and a column per capacity, plus the unbounded rate and Belady's
offline bound; each online policy should sit between LRU-ish figures and belady. Uses the
Mooncake conversation trace when ../shared/traces is present, else the synthetic trace of
bench/capacity_curve.py.

    .venv/bin/python bench/policy_zoo.py [TRACE] [CAPACITY ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from prefixsim.cache import POLICIES, build_policy
from prefixsim.cache.factory import replay_cache
from prefixsim.engine import replay_cache_only
from prefixsim.engine.gc_pause import paused_gc
from prefixsim.trace import load_trace

MOONCAKE = Path(__file__).resolve().parents[2] / "shared/traces/mooncake/conversation_trace.jsonl"


def hit_rate(requests, policy: str, capacity: int | None) -> float:
    cache = replay_cache(capacity, build_policy(policy, requests))  # the tree a run uses
    with paused_gc():  # as a run does (engine/gc_pause.py)
        records = replay_cache_only(requests, cache).records
    return sum(r.cached_tokens for r in records) / sum(r.input_tokens for r in records)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else MOONCAKE
    capacities = [int(float(c)) for c in sys.argv[2:]] or [1_000_000, 4_000_000, 16_000_000]
    if path.is_file():
        requests, label = load_trace(path), path.name
    else:
        sys.path.insert(0, str(Path(__file__).parent))
        from capacity_curve import synthetic

        requests, label = synthetic(), "synthetic (shared traces absent)"
    print(f"trace: {label}: {len(requests):,} requests")
    print(f"unbounded token hit rate: {hit_rate(requests, 'lru', None):.4f}")
    print(f"{'policy':<16}" + "".join(f"{c:>14,}" for c in capacities) + f"{'wall s':>9}")
    for policy in POLICIES.names():
        started = time.perf_counter()
        rates = [hit_rate(requests, policy, c) for c in capacities]
        wall = time.perf_counter() - started
        print(f"{policy:<16}" + "".join(f"{r:>14.4f}" for r in rates) + f"{wall:>9.2f}")


if __name__ == "__main__":
    main()
