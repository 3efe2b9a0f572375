"""Benchmark of prefixsim at scale: read rates, then wall time and peak RSS of the
main commands at 1M and 10M requests, in one run.

    .venv/bin/python bench/scale.py [--data DIR] [--commands-10m cache-only,...] [--skip ...]

1. The base trace: 1M requests of the `chat` generator preset, seed 7 (Mooncake JSONL, ~320 MB,
   generated into --data once, ~2 min, then reused) and its Parquet form (`trace convert`).
2. Read rates at 1M, side by side: a bare `json.loads` loop over the JSONL lines (parses,
   keeps nothing), `read_trace` of the JSONL (Mooncake fast path) and of the Parquet file.
3. Each command in a child process, its wall time and peak RSS from the kernel (wait4):
   `trace inspect`, `run --cache-only` (LRU, 3M tokens; `cache-only-800m`: LRU 800M tokens,
   the issue's capacity; `belady`: LRU's capacity with belady,
   streamed through its next-use pass), `curve` (LRU, 20 capacities) and a timed `run`
   (4 x h100-sxm, prefix_aware, streamed) at 1M, and `run --cache-only` at 10M (the others
   at 10M on request: inspect and curve read the whole trace, the timed run takes ~10x 1M).
   The runs of cache-only, cache-only-800m and timed go on both code paths side by side
   (`--code`): the plain sources (PREFIXSIM_PURE=1) and the hot modules compiled at install
   or by `prefixsim accelerate` (bench/code_paths.py; skipped with the reason where they
   cannot be built), whose requests.parquet must equal the plain run's: checked, printed.
   The others run the plain sources. Cache-only runs also print their wall time over the
   bare `json.loads` pass of step 2 (issue target for LRU 800M: <= 2x, <= 1 GiB).
4. The 10M trace is the base Parquet tiled ten times, written row group by row group (never
   in memory): copy k's page ids are shifted past every earlier copy's (no prefix shared
   across copies), its clock starts after the previous copy ends and its session ids get a
   `#k` suffix (k >= 1). So its first 1M requests are the base trace, and the 10M run's first 1M
   request rows must equal an in-memory (`--no-stream`) run of the base: checked, printed.

Targets: JSONL >= 200k req/s, Parquet >= 1M req/s; cache-only 1M <= 25 s and
<= 1 GB, cache-only-800m <= 2x the json.loads pass and <= 1 GB, timed 1M <= 120 s and
<= 1.5 GB, cache-only 10M <= 4 GB (RSS is printed in MiB,
as the kernel counts it; the targets are read as GiB). The machine is shared:
wall times move by 20-30% from run to run; RSS does not.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import code_paths
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from prefixsim.trace import read_trace

PREFIXSIM = [sys.executable, "-m", "prefixsim"]
ROW_GROUP = 65_536
COMMANDS = ("inspect", "cache-only", "cache-only-800m", "belady", "curve", "timed")
BOTH_PATHS = ("cache-only", "cache-only-800m", "timed")  # run pure and compiled
# (wall s, peak RSS MiB, wall / json.loads pass) a run must stay within; None: no target
TARGETS = {("cache-only", "1M"): (25, 1024, None), ("cache-only-800m", "1M"): (None, 1024, 2.0),
           ("timed", "1M"): (120, 1536, None), ("cache-only", "10M"): (None, 4096, None)}
PURE = code_paths.pure_env()


def base_traces(data: Path) -> tuple[Path, Path]:
    """The 1M-request chat trace as JSONL and Parquet (made once, then reused)."""
    data.mkdir(parents=True, exist_ok=True)
    jsonl, parquet = data / "chat1m-seed7.jsonl", data / "chat1m-seed7.parquet"
    if not jsonl.exists():
        print(f"generating {jsonl} (1M requests, chat preset, seed 7, ~2 min) ...", flush=True)
        subprocess.run([*PREFIXSIM, "trace", "generate", "--preset", "chat", "--seed", "7",
                        "--requests", "1000000", "-o", str(jsonl)], check=True)
    if not parquet.exists():
        subprocess.run([*PREFIXSIM, "trace", "convert", str(jsonl), str(parquet)], check=True)
    return jsonl, parquet


def tiled(base: Path, copies: int, out: Path) -> Path:
    """`base` repeated `copies` times (see the module docstring), row group by row group."""
    if out.exists():
        return out
    handle = pq.ParquetFile(base)
    top = stamp_end = 0
    for group in range(handle.metadata.num_row_groups):
        table = handle.read_row_group(group, columns=["hash_ids", "timestamp"])
        ids = pc.list_flatten(table.column("hash_ids"))
        top = max(top, pc.max(ids).as_py() or 0)
        stamp_end = max(stamp_end, pc.max(table.column("timestamp")).as_py())
    partial = out.with_suffix(".partial")
    writer = None
    for k in range(copies):
        for group in range(handle.metadata.num_row_groups):
            table = handle.read_row_group(group)
            ids = table.column("hash_ids").combine_chunks()
            offsets = pc.subtract(ids.offsets, ids.offsets[0])
            shifted = pa.ListArray.from_arrays(offsets, pc.add(ids.flatten(), k * (top + 1)))
            table = table.set_column(table.schema.get_field_index("hash_ids"), "hash_ids",
                                     shifted.cast(table.schema.field("hash_ids").type))
            stamps = pc.add(table.column("timestamp"), k * (stamp_end + 1000.0))
            table = table.set_column(table.schema.get_field_index("timestamp"), "timestamp",
                                     stamps.cast(table.schema.field("timestamp").type))
            if k and "session_id" in table.schema.names:  # copy 0 is the base as it is
                sessions = pc.binary_join_element_wise(table.column("session_id"), f"#{k}", "")
                table = table.set_column(table.schema.get_field_index("session_id"),
                                         "session_id", sessions)
            if writer is None:
                writer = pq.ParquetWriter(partial, table.schema)
            writer.write_table(table, row_group_size=ROW_GROUP)
    writer.close()
    partial.rename(out)
    return out


def read_rates(jsonl: Path, parquet: Path) -> list[tuple[str, float]]:
    """Requests per second: bare json.loads, the Mooncake reader, the Parquet reader."""
    rows = []
    started = time.perf_counter()
    count = 0
    with jsonl.open("rb") as handle:
        for line in handle:
            if line.strip():
                json.loads(line)
                count += 1
    rows.append(("bare json.loads loop (JSONL)", count / (time.perf_counter() - started)))
    for name, path in (("read_trace mooncake JSONL", jsonl), ("read_trace parquet", parquet)):
        started = time.perf_counter()
        data = read_trace(path)
        rows.append((name, len(data.requests) / (time.perf_counter() - started)))
        del data
    return rows


def measured(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(wall s, peak RSS MiB, exit status) of a child process running `args`. Linux keeps a
    process's peak RSS across fork and exec, so the parent must stay small: everything
    heavy (generating, tiling, the read rates) runs in a child of its own."""
    started = time.perf_counter()
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, env=env or PURE)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss / 1024, child.returncode


def command_args(command: str, trace: Path, out: Path) -> list[str]:
    if command == "inspect":
        return [*PREFIXSIM, "trace", "inspect", str(trace), "--json"]
    if command in ("cache-only", "cache-only-800m"):
        tokens = "800000000" if command == "cache-only-800m" else "3000000"
        return [*PREFIXSIM, "run", "--trace", str(trace), "--cache-only", "--policy", "lru",
                "--cache-tokens", tokens, "-o", str(out), "--quiet"]
    if command == "belady":  # streamed: a next-use pass first (analysis/next_uses.py)
        return [*PREFIXSIM, "run", "--trace", str(trace), "--cache-only", "--policy",
                "belady", "--cache-tokens", "3000000", "-o", str(out), "--quiet"]
    if command == "curve":
        return [*PREFIXSIM, "curve", "--trace", str(trace), "--capacities", "1e5:5e7:20",
                "--json"]
    return [*PREFIXSIM, "run", "--trace", str(trace), "--replicas", "4", "--router",
            "prefix_aware", "-o", str(out), "--quiet"]


def verdict(target: tuple | None, wall: float, rss: float, bare_s: float | None) -> str:
    """`target` (wall s, RSS MiB, x json.loads) against a run: "met" or what missed."""
    if target is None:
        return ""
    limit_s, limit_mib, limit_x = target
    missed = []
    if limit_s and wall > limit_s:
        missed.append(f"{wall:.0f} s > {limit_s} s")
    if rss > limit_mib:
        missed.append(f"{rss:,.0f} > {limit_mib:,} MiB")
    if limit_x and bare_s and wall / bare_s > limit_x:
        missed.append(f"{wall / bare_s:.1f}x > {limit_x}x the json.loads pass")
    return "met" if not missed else "MISSED: " + ", ".join(missed)


def first_rows_match(run_10m: Path, base: Path, out: Path) -> bool:
    """Whether the 10M run's first 1M request rows equal an in-memory run of the base."""
    args = command_args("cache-only", base, out) + ["--no-stream"]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    whole = pq.read_table(out / "requests.parquet")
    streamed = pq.ParquetFile(run_10m / "requests.parquet").iter_batches(
        batch_size=whole.num_rows)
    head = pa.Table.from_batches([next(streamed)])
    return head.equals(whole)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("bench/.scale-data"),
                        help="folder for the generated traces (reused between runs)")
    parser.add_argument("--skip", default="", help="comma-separated 1M commands to skip")
    parser.add_argument("--commands-10m", default="cache-only",
                        help="comma-separated commands to run at 10M (default cache-only)")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the 10M-vs-in-memory check of the first 1M rows")
    parser.add_argument("--code", choices=("both", "pure", "compiled"), default="both",
                        help="code paths of cache-only, cache-only-800m and timed")
    parser.add_argument("--part", choices=["prepare"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    jsonl, parquet = args.data / "chat1m-seed7.jsonl", args.data / "chat1m-seed7.parquet"
    big = args.data / "chat10m-seed7.parquet"
    if args.part == "prepare":  # in a child: the parent stays small (see `measured`)
        base_traces(args.data)
        tiled(parquet, 10, big)
        print("read rate at 1M requests (same run):")
        rates = read_rates(jsonl, parquet)
        for name, rate in rates:
            print(f"  {name:<32} {rate:>12,.0f} req/s   {rate / rates[0][1]:5.2f}x bare")
        count = pq.ParquetFile(parquet).metadata.num_rows
        print(json.dumps({"bare_json_loads_s": count / rates[0][1]}))  # for the parent
        return
    prepared = subprocess.run([sys.executable, __file__, "--data", str(args.data), "--part",
                               "prepare"], check=True, stdout=subprocess.PIPE, text=True)
    lines = prepared.stdout.splitlines()
    print("\n".join(lines[:-1]))
    bare_s = json.loads(lines[-1])["bare_json_loads_s"]  # the bare pass over the 1M JSONL
    print(f"bare json.loads pass over the 1M JSONL: {bare_s:.1f} s")
    skip = {s for s in args.skip.split(",") if s}
    plan = [(c, "1M", parquet) for c in COMMANDS if c not in skip]
    plan += [(c, "10M", big) for c in args.commands_10m.split(",") if c]
    compiled, why = (code_paths.compiled_env() if args.code != "pure" else (None, ""))
    if args.code != "pure" and compiled is None:
        print(f"compiled runs skipped: {why}")
    paths = {"pure": PURE, "compiled": compiled}
    wanted = [p for p in ("pure", "compiled") if args.code in (p, "both") and paths[p]]
    print(f"\n{'command':<16} {'requests':>8} {'path':>9} {'wall s':>8} {'peak RSS MiB':>12} "
          f"{'x json':>7}  target")
    outputs = {}
    for command, size, trace in plan:
        for path in wanted if command in BOTH_PATHS else ["pure"]:
            out = args.data / f"out-{command}-{size}-{path}"
            line = command_args(command, trace, out)
            if size == "10M":  # 237M hash ids: past the default page budget (input-rules I7)
                line += ["--max-trace-pages", str(2**28)]
            wall, rss, status = measured(line, paths[path])
            outputs[(command, size, path)] = out
            ratio = (f"{wall / bare_s:7.2f}" if command.startswith("cache-only")
                     and size == "1M" else f"{'':>7}")
            note = verdict(TARGETS.get((command, size)), wall, rss,
                           bare_s if size == "1M" else None) if status == 0 else "FAILED"
            flag = "" if status == 0 else f"  (exit {status})"
            print(f"{command:<16} {size:>8} {path:>9} {wall:>8.1f} {rss:>12,.0f} {ratio}  "
                  f"{note}{flag}", flush=True)
    for command in BOTH_PATHS:
        pair = [outputs.get((command, "1M", path)) for path in ("pure", "compiled")]
        if all(pair):
            same = pq.read_table(pair[0] / "requests.parquet").equals(
                pq.read_table(pair[1] / "requests.parquet"))
            print(f"{command} 1M, compiled requests.parquet == pure: {same}")
    if ("cache-only", "10M", "pure") in outputs and not args.no_check:
        same = first_rows_match(outputs[("cache-only", "10M", "pure")], parquet,
                                args.data / "out-cache-only-1M-whole")
        print(f"\n10M streamed run, first 1M rows == in-memory 1M run: {same}")
    print(f"\nnumpy {np.__version__}, pyarrow {pa.__version__}, {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
