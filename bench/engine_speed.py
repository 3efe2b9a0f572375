"""Bench: timed-engine speed on the Mooncake conversation trace.

Replays the trace on 4 x h100-sxm serving llama-3.1-8b with prefix_aware routing and prints
simulated seconds per wall second (target >= 1000x: the 1-hour trace in <= 3.6 s of wall
time) and events per request. The baseline, measured in the same run, is the same engine
stepping decode one step per timeout (`max_run_steps=1`) on the first N requests, against
the fast path on the same N: the ratio is what "advance per batch change" buys. Then a
fleet series (`--replica-series 4,16,64`): CPU time per request as replicas grow at
constant load per replica (target: 64 replicas <= 1.5x of 4) with no timeseries recorded
(`engine.sample_interval_s: null`), then again recording one every second, as runs do by
default. Without
../shared/traces it uses the bundled demo trace (figures then are not the target's).

    .venv/bin/python bench/engine_speed.py [TRACE] [--baseline-requests N] [--code CODE]

The whole-trace figure and the fleet series run on each code path in a child process
(bench/code_paths.py: the pure sources and the compiled hot modules, built first where the
install did not), with the compiled path's gain in simulated seconds per CPU second (target
>= 2x): the whole trace `--repeats` times per path (default 3), the paths alternating, the
run of median CPU time shown (one run each swung 1.25-2.0x on a shared 2-core host); the
baseline runs in this process, on the path it names.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import code_paths

from prefixsim.config import load_config
from prefixsim.engine.fleet import Fleet, Sampling
from prefixsim.engine.gc_pause import paused_gc
from prefixsim.engine.scheduler import ContinuousBatching
from prefixsim.engine.timed import replay_timed
from prefixsim.pipeline import simulate
from prefixsim.pipeline.build import (
    build_cache,
    build_cost_model,
    replica_pool_tokens,
    resolve_gpu,
    resolve_model,
)
from prefixsim.pipeline.inputs import load_requests
from prefixsim.router import ROUTERS

ROOT = Path(__file__).resolve().parents[1]
MOONCAKE = ROOT.parent / "shared/traces/mooncake/conversation_trace.jsonl"
DEMO = ROOT / "traces/demo_chat.jsonl"


def timed_run(trace: Path, requests, max_run_steps: int | None = None) -> dict:
    config = load_config(None, {
        "trace.path": str(trace), "model.name": "llama-3.1-8b", "hardware.gpu": "h100-sxm",
        "engine.replicas": 4, "router.name": "prefix_aware",
    })
    if max_run_steps is None:
        started, cpu = time.perf_counter(), time.process_time()
        summary = simulate(config, requests).summary
        wall = time.perf_counter() - started
        return {"wall_s": wall, "cpu_s": time.process_time() - cpu,
                "duration_s": summary["duration"],
                "events": summary["num_events"], "completed": summary["completed"],
                "hit_rate": summary["cache_token_hit_rate"]}
    # the step-by-step reference goes through the engine directly
    model, gpu = resolve_model(config.model), resolve_gpu(config.hardware)
    pool = replica_pool_tokens(config, model, gpu)
    section = config.cache.model_copy(update={"capacity_tokens": pool})
    caches = [build_cache(section) for _ in range(4)]
    started = time.perf_counter()
    with paused_gc():  # as pipeline/timed.py runs the engine
        result = replay_timed(requests, Fleet(caches, build_cost_model(config, model, gpu),
                              ContinuousBatching(), ROUTERS.build("prefix_aware")),
                              Sampling(max_run_steps=max_run_steps))
    wall = time.perf_counter() - started
    return {"wall_s": wall, "duration_s": result.duration_s, "events": result.num_events,
            "completed": sum(r.status == "completed" for r in result.records)}


def fleet_series(trace: Path, requests, counts: list[int], repeats: int = 3,
                 timeseries: bool = False) -> None:
    """CPU time per request as the fleet grows at constant load per replica (arrivals
    x counts[0] / R: the same requests, R / counts[0] times faster), medians of
    `repeats` runs interleaved in this process; target: the largest fleet <= 1.5x the
    smallest (routing reads a global prefix index, not every replica's
    cache). `timeseries`: recorded every second, the default of a run."""
    times: dict[int, list[float]] = {r: [] for r in counts}
    for _ in range(repeats):
        for replicas in counts:
            config = load_config(None, {
                "trace.path": str(trace), "model.name": "llama-3.1-8b",
                "hardware.gpu": "h100-sxm", "engine.replicas": replicas,
                "engine.time_scale": counts[0] / replicas, "router.name": "prefix_aware"},
                unset=() if timeseries else ("engine.sample_interval_s",))
            cpu = time.process_time()
            simulate(config, requests)
            times[replicas].append((time.process_time() - cpu) / len(requests))
    base = statistics.median(times[counts[0]])
    sampled = "timeseries every 1 s" if timeseries else "no timeseries"
    print(f"fleet at constant load per replica (prefix_aware, {len(requests):,} requests, "
          f"{sampled}, median of {repeats}, CPU time per request):")
    for replicas in counts:
        per = statistics.median(times[replicas])
        print(f"  {replicas:>4} replicas: {per * 1e6:7.0f} us = {per / base:.2f}x of "
              f"{counts[0]}")
    ratio = statistics.median(times[counts[-1]]) / base
    print(f"  {counts[-1]} vs {counts[0]} replicas: {ratio:.2f}x (target <= 1.5x: "
          f"{'met' if ratio <= 1.5 else 'MISSED'})")


def whole_trace(trace: Path, requests, code: str, repeats: int = 3) -> None:
    """The whole trace's speed on each code path asked for (a child process per run, the
    paths alternating `repeats` times so both see the same load; the run of median CPU
    time is shown), and the compiled path's speed-up in simulated seconds per CPU second
    (issue target >= 2x)."""
    envs = {}
    for path in ("pure", "compiled") if code == "both" else (code,):
        env, why = (code_paths.pure_env(), "") if path == "pure" else code_paths.compiled_env()
        if env is None:
            print(f"compiled hot modules skipped: {why}")
            continue
        envs[path] = env
    runs: dict[str, list[dict]] = {path: [] for path in envs}
    for _ in range(repeats):
        for path, env in envs.items():
            runs[path].append(json.loads(code_paths.run_child(
                Path(__file__), [str(trace), "--whole-only"], env).splitlines()[-1]))
    speeds = {}
    for path, done in runs.items():
        full = sorted(done, key=lambda run: run["cpu_s"])[len(done) // 2]
        speed = full["duration_s"] / full["wall_s"]
        speeds[path] = full["duration_s"] / full["cpu_s"]
        print(f"{path}: whole trace (the median of {len(done)} runs by CPU time): "
              f"{full['completed']:,} completed, "
              f"{full['duration_s']:,.1f} simulated s in {full['wall_s']:.2f} wall s "
              f"= {speed:,.0f}x real time (target >= 1000x: "
              f"{'met' if speed >= 1000 else 'MISSED'})")
        print(f"  CPU time {full['cpu_s']:.2f} s = {speeds[path]:,.0f}x "
              "(wall exceeds CPU when other processes share the cores); all runs: "
              + ", ".join(f"{run['cpu_s']:.2f}" for run in done) + " CPU s")
        print(f"  events: {full['events']:,} = {full['events'] / len(requests):.2f} per "
              f"request; hit rate {full['hit_rate']:.4f}")
    if len(speeds) == 2:
        gain = speeds["compiled"] / speeds["pure"]
        print(f"compiled vs pure, simulated s per CPU s: {gain:.2f}x (target >= 2x: "
              f"{'met' if gain >= 2 else 'MISSED'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", default=None)
    parser.add_argument("--baseline-requests", type=int, default=1500)
    parser.add_argument("--replica-series", default="4,16,64",
                        help="fleet sizes at constant load per replica (first = baseline)")
    parser.add_argument("--code", choices=("both", "pure", "compiled"), default="both",
                        help="whole-trace speed on the pure sources, the compiled hot modules "
                             "(prefixsim accelerate) or both, each in a child process")
    parser.add_argument("--repeats", type=int, default=3,
                        help="whole-trace runs per code path, alternating (median shown)")
    parser.add_argument("--whole-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fleet-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    trace = Path(args.trace) if args.trace else (MOONCAKE if MOONCAKE.exists() else DEMO)
    args.replica_series = [int(x) for x in args.replica_series.split(",")]
    config = load_config(None, {"trace.path": str(trace)})
    requests = load_requests(config.trace)
    if args.whole_only:  # a child: the whole trace on this process's code path
        print(json.dumps(timed_run(trace, requests)))
        return
    if args.fleet_only:  # a child: the fleet series on this process's code path
        print(f"{code_paths.describe()}: ", end="")
        fleet_series(trace, requests, args.replica_series)
        print(f"{code_paths.describe()}: ", end="")
        fleet_series(trace, requests, args.replica_series, timeseries=True)
        return
    print(f"trace: {trace} ({len(requests):,} requests)")
    whole_trace(trace, requests, args.code, args.repeats)
    series = ",".join(map(str, args.replica_series))
    for path in ("pure", "compiled") if args.code == "both" else (args.code,):
        env, why = (code_paths.pure_env(), "") if path == "pure" else code_paths.compiled_env()
        if env is None:
            print(f"compiled fleet series skipped: {why}")
            continue
        print(code_paths.run_child(Path(__file__), [str(trace), "--fleet-only",
                                                    "--replica-series", series], env),
              end="", flush=True)
    print(f"baseline below: {code_paths.describe()}")

    head = requests[: args.baseline_requests]
    fast = timed_run(trace, head, max_run_steps=None)
    slow = timed_run(trace, head, max_run_steps=1)
    print(f"baseline on the first {len(head):,} requests: step-by-step "
          f"{slow['wall_s']:.2f} s ({slow['events']:,} events) vs fast path "
          f"{fast['wall_s']:.2f} s ({fast['events']:,} events): "
          f"{slow['wall_s'] / fast['wall_s']:.1f}x faster, "
          f"{slow['events'] / fast['events']:.1f}x fewer events")


if __name__ == "__main__":
    main()
