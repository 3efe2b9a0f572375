"""Sweep scaling: a 60-run cache-only sweep with 2 local workers against 1 worker.

Target: 2 workers >= 1.7x faster than 1 (on a machine with 2 free cores). The baseline is
the same sweep with -j 1 (run in this process, no pool), measured in the same invocation.
The trace is synthetic (Mooncake JSONL written to a temporary folder, seeded) so the
benchmark needs no shared data. Run: .venv/bin/python bench/sweep_scaling.py [--requests N]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from joblib.externals.loky import get_reusable_executor

from prefixsim.sweep import ExecutorOptions, parse_spec, run_sweep

BLOCK = 512
TARGET_SPEEDUP = 1.7


def write_trace(path: Path, num_requests: int, seed: int = 1) -> None:
    """Multi-turn sessions over a few shared system prompts (chained hash ids)."""
    rng = np.random.default_rng(seed)
    next_id = 0
    systems = []
    for _ in range(16):
        systems.append(list(range(next_id, next_id + int(rng.integers(2, 12)))))
        next_id = systems[-1][-1] + 1
    sessions: dict[int, list[int]] = {}
    now_ms = 0
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(num_requests):
            now_ms += int(rng.exponential(300))
            session = int(rng.integers(0, num_requests // 6 + 1))
            if session not in sessions:
                sessions[session] = list(systems[int(rng.zipf(1.3)) % len(systems)])
            ids = sessions[session]
            new = int(rng.integers(1, 4))
            ids += list(range(next_id, next_id + new))
            next_id += new
            length = BLOCK * len(ids) - int(rng.integers(0, BLOCK))
            handle.write(json.dumps({"timestamp": now_ms, "input_length": length,
                                     "output_length": int(rng.integers(20, 400)),
                                     "hash_ids": ids}) + "\n")


def spec_for(trace: Path) -> dict:
    """60 runs: 12 capacities x 5 TTLs."""
    return {"name": "scaling",
            "base": {"trace": {"path": str(trace)}, "cache_only": True},
            "grid": {"cache.ttl_s": [None, 30, 120, 600, 3600],
                     "cache.capacity_tokens": [int(c) for c in np.geomspace(2e5, 2e7, 12)]}}


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the pool's workers, once shut)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def timed_sweep(spec: dict, out: Path, n_jobs: int) -> tuple[float, float]:
    """Wall and CPU seconds of one sweep (CPU includes the workers' imports)."""
    cpu, started = cpu_seconds(), time.perf_counter()
    result = run_sweep(parse_spec(spec), out, ExecutorOptions(n_jobs=n_jobs), keep_requests=False)
    elapsed = time.perf_counter() - started
    get_reusable_executor().shutdown(wait=True)  # reap the workers so their CPU is counted
    assert len(result.executed) == 60 and not result.failed, result.failed
    return elapsed, cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=12000, help="requests in the trace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        trace = root / "trace.jsonl"
        write_trace(trace, args.requests)
        spec = spec_for(trace)
        load_before = os.getloadavg()[0]
        one, one_cpu = timed_sweep(spec, root / "j1", 1)
        two, two_cpu = timed_sweep(spec, root / "j2", 2)
        load_after = os.getloadavg()[0]
    ratio = one / two
    print(f"60-run cache-only sweep, {args.requests} requests per run, "
          f"{len(os.sched_getaffinity(0))} CPUs, load average {load_before:.1f} -> "
          f"{load_after:.1f}")
    print(f"1 worker:  {one:7.2f} s wall, {one_cpu:7.2f} s CPU")
    print(f"2 workers: {two:7.2f} s wall, {two_cpu:7.2f} s CPU (incl. worker start-up)")
    print(f"speed-up:  {ratio:7.2f}x (target >= {TARGET_SPEEDUP}x) "
          f"{'OK' if ratio >= TARGET_SPEEDUP else 'BELOW TARGET'}")
    # What 2 idle cores would give: the serial CPU work over half the parallel CPU work.
    print(f"CPU-bound estimate on 2 idle cores: {one_cpu / (two_cpu / 2):.2f}x "
          "(the wall ratio falls below it when other processes hold the cores)")


if __name__ == "__main__":
    main()
