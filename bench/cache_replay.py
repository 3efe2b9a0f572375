"""Benchmark of the cache-only replay: speed against a naive baseline, the whole
command's wall time, and resident bytes per cached page.

    .venv/bin/python bench/cache_replay.py [--trace PATH] [--repeat N] [--code CODE]

1. Replay speed on the Mooncake conversation trace, in pages per second, for an LRU cache of
   3,000,000 tokens and for an unbounded cache with a 300 s sliding TTL; prefixsim's cache as
   `prefixsim run --cache-only` builds and samples it (pipeline/build.py: build_cache(...,
   replay_only=True, chained=True) as a streamed run does, the reader having checked the
   ids chained; timeseries rows every simulated second as by default: the
   compressed SegmentCache for these configurations) against a minimal flat page-LRU (an
   OrderedDict of page id -> tokens, capacity counted
   in tokens held, a hit is the run of resident pages from the first page) run in the same
   process on the same requests, each side reading them as it holds them, built once
   before the timings (`Trace`): the flat LRU a list of Request objects, prefixsim's
   compressed cache the trace's columns as the loader returns them (its replay takes each
   block's ids as one int64 array); prefixsim's hit tokens read from its record table's
   column. Medians of N repetitions, each timing as many replays back to back (each on a
   fresh cache) as make the faster side's at least 0.1 CPU s, the same count for both;
   target: prefixsim <= 1.5x the baseline's time on the pure sources, <= 0.125x on the
   compiled hot modules. Each code path
   runs in a child process of its own (bench/code_paths.py; `--code both`, the default,
   builds the compiled copies with `prefixsim accelerate` first). (The flat LRU may evict a
   prefix page before its children, so its hit tokens differ slightly; it is a speed
   yardstick, not a reference of Part A.)
2. The whole command (`python -m prefixsim run --trace T --cache-only --cache-tokens 3000000
   -o DIR --quiet`: start-up, load, replay, write), median of 3; target < 3 s.
3. Resident bytes per page (tracemalloc) of an unbounded replay holding ~1M pages (a
   synthetic chained trace: 10,000 prompts of a shared 4-page prefix + 100 own pages), the
   streamed run's cache (and beside it one over ids not checked chained, which keeps a
   resident-id set);
   target <= 400 bytes per page. The flat OrderedDict's figure is printed beside it.
4. Against libCacheSim (`pip install libcachesim`, an optional bench dependency; skipped
   with the reason without it), in each code path's child: every policy both have (LRU,
   FIFO, LFU, S3-FIFO, GDSF, Belady) replays the same page-id sequence (every page of every
   request, in order; for libCacheSim an oracleGeneral file of it, next accesses included
   for its Belady, each page an object of size 1) with the same capacity in pages
   (3,000,000 tokens / the trace's page size). prefixsim's replay is `prefixsim run
   --cache-only`'s (the cache built for the policy, offline policies' preparation
   included; a hit is the cached run of a request's leading pages, so the hit ratios
   differ: printed beside, for orientation). Medians of N; target: prefixsim at least as
   fast as libCacheSim for every policy.
"""

from __future__ import annotations

import argparse
import gc
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import code_paths

from prefixsim.config import CacheConfig
from prefixsim.engine import replay_cache_only
from prefixsim.engine.gc_pause import paused_gc
from prefixsim.pipeline.build import build_cache
from prefixsim.trace import Request, load_trace
from prefixsim.trace.columns import RequestColumns, as_columns

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = REPO.parent / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"
CAPACITY_TOKENS = 3_000_000
TTL_S = 300.0
SAMPLE_INTERVAL_S = 1.0  # the timeseries period of a default run
TIMING_FLOOR_S = 0.1  # the least CPU time of one timing (rounds_for)


# ------------------------------------------------------------------------- baselines
def flat_lru(requests: Sequence[Request], capacity_tokens: int) -> list[int]:
    """Page-LRU in an OrderedDict: hits = resident run from the first page (cap L-1); the
    rest is inserted in order, evicting least recently used pages while it does not fit."""
    cache: OrderedDict[int, int] = OrderedDict()
    held = 0
    hits = []
    for request in requests:
        ids = request.page_ids
        matched = 0
        for page_id in ids:
            if page_id not in cache:
                break
            cache.move_to_end(page_id)
            matched += 1
        tokens = request.page_tokens()
        hit = request.input_tokens if matched == len(ids) else matched * request.page_size_tokens
        hits.append(min(hit, request.input_tokens - 1) if matched else 0)
        for page_id, size in zip(ids[matched:], tokens[matched:], strict=True):
            while held + size > capacity_tokens and len(cache) > matched:
                held -= cache.popitem(last=False)[1]
            if held + size > capacity_tokens:
                break
            cache[page_id] = size
            held += size
            matched += 1
    return hits


def flat_ttl(requests: Sequence[Request], ttl_s: float) -> list[int]:
    """Unbounded page cache with a sliding TTL: an OrderedDict in last-access order whose
    front entries are dropped once their last access + ttl is before now."""
    cache: OrderedDict[int, float] = OrderedDict()
    hits = []
    for request in requests:
        now = request.arrival_s
        while cache:
            page_id, last = next(iter(cache.items()))
            if last + ttl_s >= now:
                break
            del cache[page_id]
        ids = request.page_ids
        matched = 0
        for page_id in ids:
            if page_id not in cache:
                break
            cache.move_to_end(page_id)
            cache[page_id] = now
            matched += 1
        hit = request.input_tokens if matched == len(ids) else matched * request.page_size_tokens
        hits.append(min(hit, request.input_tokens - 1) if matched else 0)
        for page_id in ids[matched:]:
            cache[page_id] = now
    return hits


def replay_cache(capacity: int | None, ttl_s: float | None):
    """The cache `prefixsim run --cache-only` replays through for an LRU `cache` section
    (a streamed run's: the reader checked the ids chained, so no resident-id set)."""
    return build_cache(CacheConfig(policy="lru", capacity_tokens=capacity, ttl_s=ttl_s),
                       replay_only=True, chained=True)


def prefixsim_replay(trace: Trace, capacity: int | None, ttl_s: float | None) -> list[int]:
    cache = replay_cache(capacity, ttl_s)
    # sampled every second and the collector paused, as `prefixsim run --cache-only` does
    with paused_gc():
        result = replay_cache_only(trace.columns, cache,
                                   sample_interval_s=SAMPLE_INTERVAL_S)
    return hit_column(result)


@dataclass(frozen=True)
class Trace:
    """The trace held two ways, both built before the timings: as the loader returns it
    (`columns`: ids in one int64 array) and as a list of Request objects (`requests`)."""

    columns: RequestColumns
    requests: list[Request]


def hit_column(result) -> list[int]:
    """The replay's hit tokens per request, read from its record table's column as
    `prefixsim run` writes them (no record object built per request)."""
    return result.records.column("cached_tokens").tolist()


# ------------------------------------------------------------------------- libCacheSim
LIBCACHESIM_POLICIES = {"lru": "LRU", "fifo": "FIFO", "lfu": "LFU", "s3fifo": "S3FIFO",
                        "gdsf": "GDSF", "belady": "Belady"}
ORACLE_GENERAL = [("clock_time", "<u4"), ("obj_id", "<u8"), ("obj_size", "<u4"),
                  ("next_access_vtime", "<i8")]  # libCacheSim's oracleGeneral record


def write_oracle_general(requests: Sequence[Request], path: Path) -> int:
    """Every page of every request in order as libCacheSim's oracleGeneral binary trace
    (objects of size 1, each access's next access index, -1 for none); returns its length."""
    import numpy as np

    ids = [page_id for request in requests for page_id in request.page_ids]
    clock = [int(request.arrival_s) for request in requests for _ in request.page_ids]
    following = [-1] * len(ids)
    seen: dict[int, int] = {}
    for position in range(len(ids) - 1, -1, -1):
        following[position] = seen.get(ids[position], -1)
        seen[ids[position]] = position
    records = np.zeros(len(ids), dtype=np.dtype(ORACLE_GENERAL))
    records["clock_time"], records["obj_size"] = clock, 1
    records["obj_id"] = np.asarray(ids, dtype=np.uint64)
    records["next_access_vtime"] = following
    records.tofile(path)
    return len(ids)


def libcachesim_speed(trace: Trace, repeat: int) -> None:
    """prefixsim against libCacheSim, policy by policy, same pages and capacity."""
    requests = trace.requests
    try:
        import libcachesim
    except ImportError:
        print("libCacheSim comparison skipped: libcachesim is not installed "
              "(pip install libcachesim)")
        return
    page_size = requests[0].page_size_tokens
    pages_held = CAPACITY_TOKENS // page_size
    with tempfile.TemporaryDirectory(prefix="prefixsim-lcs-") as folder:
        oracle = Path(folder) / "pages.oracleGeneral.bin"
        accesses = write_oracle_general(requests, oracle)

        def ours(name: str) -> list[int]:
            cache = build_cache(CacheConfig(policy=name, capacity_tokens=pages_held * page_size),
                                requests, replay_only=True, chained=True)
            with paused_gc():
                result = replay_cache_only(trace.columns, cache,
                                           sample_interval_s=SAMPLE_INTERVAL_S)
            return hit_column(result)

        def theirs(name: str) -> list[float]:
            reader = libcachesim.TraceReader(str(oracle),
                                             libcachesim.TraceType.ORACLE_GENERAL_TRACE)
            cache = getattr(libcachesim, LIBCACHESIM_POLICIES[name])(cache_size=pages_held)
            return list(cache.process_trace(reader))

        print(f"against libCacheSim {getattr(libcachesim, '__version__', '')}: {accesses:,} "
              f"page accesses, {pages_held:,} pages held, median of {repeat} (CPU s)")
        slower = []
        for name in LIBCACHESIM_POLICIES:
            ours(name), theirs(name)  # warm-up
            runs = [(timed(lambda n=name: ours(n)), timed(lambda n=name: theirs(n)))
                    for _ in range(repeat)]
            cpu_ours = statistics.median(r[0][1] for r in runs)
            cpu_theirs = statistics.median(r[1][1] for r in runs)
            hit_ours = sum(runs[-1][0][2]) / sum(r.input_tokens for r in requests)
            hit_theirs = 1 - runs[-1][1][2][0]
            if cpu_ours > cpu_theirs:
                slower.append(name)
            print(f"  {name:<7} prefixsim {accesses / cpu_ours:>11,.0f} pages/s, libCacheSim "
                  f"{accesses / cpu_theirs:>11,.0f} req/s: {cpu_ours / cpu_theirs:5.2f}x its "
                  f"CPU time (hit ratio {hit_ours:.3f} of tokens vs {hit_theirs:.3f} of pages)")
        print(f"  target: every policy at most 1.00x: "
              f"{'met' if not slower else 'MISSED (' + ', '.join(slower) + ')'}")


# ------------------------------------------------------------------------- measuring
def timed(fn: Callable[[], list[int]], rounds: int = 1) -> tuple[float, float, list[int]]:
    """(wall s, CPU s, result of the last call) of `rounds` calls back to back."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def rounds_for(*fns: Callable[[], object]) -> int:
    """Calls per timing so that the faster of `fns` runs at least TIMING_FLOOR_S in one
    (each `fn` called once here, the warm-up): a compiled replay of the Mooncake trace takes
    ~8 ms, where a timer's and the allocator's noise (page faults after the other side
    freed its memory) are a tenth of it; both sides get the same number of calls."""
    fastest = math.inf
    for fn in fns:
        start = time.process_time()
        fn()
        fastest = min(fastest, time.process_time() - start)
    return max(1, math.ceil(TIMING_FLOOR_S / max(fastest, 1e-6)))


def speed(trace: Trace, repeat: int) -> list[float]:
    """Ratios of prefixsim's to the baseline's median CPU time, per case.

    Repetitions alternate between the two so both see the same load on a shared machine;
    the ratio is taken on CPU time (wall time is printed too)."""
    requests = trace.requests
    pages = sum(r.num_pages for r in requests)
    ratios = []
    cases = [
        (f"LRU {CAPACITY_TOKENS:,} tokens",
         lambda: prefixsim_replay(trace, CAPACITY_TOKENS, None),
         lambda: flat_lru(requests, CAPACITY_TOKENS)),
        (f"unbounded, TTL {TTL_S:g} s",
         lambda: prefixsim_replay(trace, None, TTL_S),
         lambda: flat_ttl(requests, TTL_S)),
    ]
    for (name, ours, base), (capacity, ttl_s) in zip(
            cases, [(CAPACITY_TOKENS, None), (None, TTL_S)], strict=True):
        kind = type(replay_cache(capacity, ttl_s)).__name__
        rounds = rounds_for(ours, base)  # and the warm-up
        runs = [(timed(ours, rounds), timed(base, rounds)) for _ in range(repeat)]
        wall_ours = statistics.median(r[0][0] for r in runs)
        cpu_ours = statistics.median(r[0][1] for r in runs)
        wall_base = statistics.median(r[1][0] for r in runs)
        cpu_base = statistics.median(r[1][1] for r in runs)
        hits_ours, hits_base = sum(runs[-1][0][2]), sum(runs[-1][1][2])
        ratio = cpu_ours / cpu_base
        wall_ours, cpu_ours, wall_base, cpu_base = (
            x / rounds for x in (wall_ours, cpu_ours, wall_base, cpu_base))
        ratios.append(ratio)
        print(f"replay {name}: {len(requests):,} requests, {pages:,} pages, median of {repeat}"
              + (f", {rounds} replays a timing (CPU s of one)" if rounds > 1 else ""))
        for label, cpu, wall, hits in (
                (f"prefixsim {kind:<14}", cpu_ours, wall_ours, hits_ours),
                ("flat OrderedDict        ", cpu_base, wall_base, hits_base)):
            print(f"  {label}: {cpu:6.3f} CPU s {pages / cpu:>11,.0f} pages/s "
                  f"(wall {wall:6.3f} s)  hit tokens {hits:,}")
        print(f"  ratio prefixsim/baseline CPU time: {ratio:.2f}x (pure sources: target <= "
              f"1.5x, {'OK' if ratio <= 1.5 else 'MISSED'}; compiled: target <= 0.125x, "
              f"{'OK' if ratio <= 0.125 else 'MISSED'})")
    return ratios


def command_wall(trace: Path, runs: int = 3) -> float:
    """Median wall time of the whole command in a fresh process (and its CPU time, which
    a busy shared machine inflates less)."""
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            argv = [sys.executable, "-m", "prefixsim", "run", "--trace", str(trace),
                    "--cache-only", "--cache-tokens", str(CAPACITY_TOKENS),
                    "-o", str(Path(tmp) / f"run{i}"), "--quiet"]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, text=True)
            walls.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            if proc.returncode != 0:
                sys.exit(f"the command failed ({proc.returncode}): {proc.stderr.strip()}")
    wall = statistics.median(walls)
    print(f"whole command (python -m prefixsim run --trace T --cache-only --cache-tokens "
          f"{CAPACITY_TOKENS} -o DIR), median of {runs}: wall {wall:.2f} s "
          f"(runs {', '.join(f'{t:.2f}' for t in walls)}), CPU {statistics.median(cpus):.2f} s "
          f"(target wall < 3 s) {'OK' if wall < 3 else 'MISSED'}")
    return wall


def synthetic_chains(num_prompts: int = 10_000, own_pages: int = 100,
                     shared_pages: int = 4, page: int = 16) -> list[Request]:
    """Prompts of a shared `shared_pages` prefix and `own_pages` distinct pages each."""
    shared = tuple(range(1, shared_pages + 1))
    requests = []
    next_id = shared_pages + 1
    for i in range(num_prompts):
        ids = shared + tuple(range(next_id, next_id + own_pages))
        next_id += own_pages
        requests.append(Request(i, float(i), len(ids) * page, 1, ids, page))
    return requests


def bytes_per_page() -> float:
    """The cache of a run whose ids are checked chained (a stream, or a trace in memory
    that build() checked: no resident-id set), then, printed beside it, the cache of ids not
    checked chained (which keeps the set)."""
    requests = synthetic_chains()
    gc.collect()
    tracemalloc.start()
    try:
        held = {}
        for chained in (True, False):
            before = tracemalloc.get_traced_memory()[0]
            cache = build_cache(CacheConfig(policy="lru"), replay_only=True, chained=chained)
            result = replay_cache_only(requests, cache)
            del result  # per-request records are not resident cache state
            gc.collect()
            held[chained] = (tracemalloc.get_traced_memory()[0] - before) / cache.num_pages
            num_pages = cache.num_pages
            del cache
            gc.collect()
        ours = held[True]
        before = tracemalloc.get_traced_memory()[0]
        flat: OrderedDict[int, int] = OrderedDict()
        for request in requests:
            for page_id, size in zip(request.page_ids, request.page_tokens(), strict=True):
                flat[page_id] = size
        base = (tracemalloc.get_traced_memory()[0] - before) / len(flat)
    finally:
        tracemalloc.stop()
    print(f"resident memory, unbounded replay holding {num_pages:,} pages (tracemalloc): "
          f"{ours:.0f} bytes/page (target <= 400) {'OK' if ours <= 400 else 'MISSED'}; "
          f"{held[False]:.0f} with a resident-id set (ids not checked chained); "
          f"flat OrderedDict {base:.0f} bytes/page")
    return ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE,
                        help="Mooncake JSONL trace (default: the conversation trace in ../shared)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per timing")
    parser.add_argument("--code", choices=("both", "pure", "compiled"), default="both",
                        help="replay speed on the pure sources, the compiled hot modules "
                             "(prefixsim accelerate) or both, each in a child process")
    parser.add_argument("--speed-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.trace.is_file():
        sys.exit(f"trace not found: {args.trace} (pass --trace PATH to a Mooncake JSONL file)")
    if args.speed_only:  # a child: this process's code path
        print(f"code path: {code_paths.describe()}")
        # Both forms built once, outside the timings (Trace): iterating the trace's columns
        # builds a Request per request on every pass (~20% of either replay), which is
        # neither cache's work
        columns = as_columns(load_trace(args.trace))  # as read, or records made columns
        trace = Trace(columns, list(columns))
        speed(trace, args.repeat)
        libcachesim_speed(trace, args.repeat)
        return
    child_args = ["--trace", str(args.trace), "--repeat", str(args.repeat), "--speed-only"]
    for code in ("pure", "compiled") if args.code == "both" else (args.code,):
        env, why = (code_paths.pure_env(), "") if code == "pure" else code_paths.compiled_env()
        print(f"--- {code} ---")
        if env is None:
            print(f"compiled hot modules skipped: {why}")
            continue
        print(code_paths.run_child(Path(__file__), child_args, env), end="", flush=True)
    command_wall(args.trace)
    bytes_per_page()


if __name__ == "__main__":
    main()
