"""Benchmark of the trace readers: requests read per second for every format,
against a bare-parse baseline measured in the same run, and the 1M-request scale check.

    .venv/bin/python bench/trace_read.py [--requests N] [--scale N]

1. For each format, a file of about N requests (default 20,000) is written into a temporary
   folder (from the `chat` generator preset, re-serialised in the format; the real public
   traces in ../shared/traces are read too where present). Each is read with
   `read_trace` (validation, chain checks, page-id building, sorting); the figure is
   requests per second and its ratio to the bare baseline of the same file's records
   (`json.loads` per line, `csv.reader` rows, one `json.loads` per document, pyarrow's
   `read_table`), which only parses and keeps nothing.
2. With --scale N (e.g. 1000000): generate N requests of the `api-mixed` preset into a file,
   then run `prefixsim run --trace FILE --cache-only --cache-tokens 50000000` in a child
   process and print its peak RSS (target < 2 GB) and wall time.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from prefixsim.trace import read_trace
from prefixsim.trace.generate import generate, load_preset
from prefixsim.trace.pages import coarsen
from prefixsim.trace.readers import ReadOptions
from prefixsim.trace.record import Request
from prefixsim.trace.write import mooncake_lines, parquet_table

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "traces"


def write_formats(requests: list[Request], folder: Path) -> dict[str, tuple[Path, str]]:
    """The same requests in every format: name -> (path, baseline kind)."""
    files: dict[str, tuple[Path, str]] = {}
    moon = folder / "mooncake.jsonl"
    moon.write_text("".join(mooncake_lines(requests)))
    files["mooncake"] = (moon, "jsonl")
    parquet = folder / "trace.parquet"
    pq.write_table(parquet_table(requests), parquet)
    files["parquet"] = (parquet, "parquet")
    fine = [coarsen(r, 512) for r in requests]  # bailian pages: 16 tokens -> re-chunk ids
    bailian = folder / "bailian.jsonl"
    with bailian.open("w") as out:
        for r in fine:
            ids = [i * 32 + k for i in r.page_ids for k in range(32)]
            ids = ids[: -(-r.input_tokens // 16)]
            out.write(json.dumps({"chat_id": r.request_id, "parent_chat_id": -1,
                                  "timestamp": r.arrival_s, "input_length": r.input_tokens,
                                  "output_length": r.output_tokens, "type": "text",
                                  "turn": 1, "hash_ids": ids}) + "\n")
    files["bailian"] = (bailian, "jsonl")
    for name, header, row in (
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens",
         lambda r: f"2023-11-16 18:{int(r.arrival_s) // 60 % 60:02d}:"
                   f"{r.arrival_s % 60:010.7f},{r.input_tokens},{r.output_tokens}"),
        ("burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
         lambda r: f"{r.arrival_s},ChatGPT,{r.input_tokens},{r.output_tokens},"
                   f"{r.input_tokens + r.output_tokens},Conversation log"),
        ("vidur", "arrived_at,num_prefill_tokens,num_decode_tokens",
         lambda r: f"{r.arrival_s},{r.input_tokens},{r.output_tokens}"),
    ):
        path = folder / f"{name}.csv"
        path.write_text(header + "\n" + "".join(row(r) + "\n" for r in requests))
        files[name] = (path, "csv")
    tokens = folder / "tokens.jsonl"
    with tokens.open("w") as out:
        for r in requests[:2000]:  # token ids are big: a smaller file
            ids = [p * 7 + k % 7 for p in r.page_ids for k in range(r.page_size_tokens)]
            out.write(json.dumps({"prompt_token_ids": ids[: r.input_tokens],
                                  "arrival_s": r.arrival_s}) + "\n")
    files["token-ids"] = (tokens, "jsonl")
    if SHARED.is_dir():
        files["ragpulse (real)"] = (SHARED / "ragpulse" / "0_trace.jsonl", "jsonl")
        files["kv-cache-tester (real)"] = (SHARED / "kv-cache-tester", "json-docs")
        files["azure (real conv)"] = (
            SHARED / "azure-llm-2023" / "AzureLLMInferenceTrace_conv.csv", "csv")
        files["mooncake (real)"] = (
            SHARED / "mooncake" / "conversation_trace.jsonl", "jsonl")
    return files


def baseline(path: Path, kind: str) -> int:
    """Parse only; return the record count."""
    if kind == "jsonl":
        with path.open() as handle:
            return sum(1 for line in handle if line.strip() and json.loads(line) is not None)
    if kind == "csv":
        with path.open(newline="") as handle:
            return sum(1 for _ in csv.reader(handle)) - 1
    if kind == "parquet":
        return pq.read_table(path).num_rows
    return sum(len(json.loads(p.read_bytes())["requests"]) for p in sorted(path.glob("*.json")))


def timed(action: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = action()
    return time.perf_counter() - start, value


BUDGET = ReadOptions(max_pages=1 << 30)


def read_rates(num_requests: int) -> None:
    requests = generate(load_preset("chat"), num_requests, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        files = write_formats(requests, Path(tmp))
        print(f"{'format':<24}{'requests':>10}{'read req/s':>14}{'bare parse req/s':>18}"
              f"{'ratio':>8}")
        for name, (path, kind) in files.items():
            base_s, _ = timed(lambda p=path, k=kind: baseline(p, k))
            # a bench's own made-up ids may exceed the default page budget of hostile input
            read_s, data = timed(lambda p=path: read_trace(p, options=BUDGET))
            n = len(data.requests)
            print(f"{name:<24}{n:>10,}{n / read_s:>14,.0f}{n / base_s:>18,.0f}"
                  f"{base_s / read_s:>8.2f}")


PEAK = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def peak_rss_mb(command: list[str]) -> tuple[float, float]:
    """Run `command` in a wrapper process; (wall s, the command's peak RSS in MB)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK, *command], check=True,
                          stdout=subprocess.PIPE, text=True)
    return time.perf_counter() - start, int(done.stdout.split()[-1]) / 1024


def scale(num_requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scale.jsonl"
        gen_s, gen_mb = peak_rss_mb(
            [sys.executable, "-m", "prefixsim", "trace", "generate", "--preset", "api-mixed",
             "--requests", str(num_requests), "--seed", "1", "-o", str(path)])
        size_mb = path.stat().st_size / 1e6
        print(f"generated {num_requests:,} api-mixed requests ({size_mb:,.0f} MB) in "
              f"{gen_s:.1f} s, peak RSS {gen_mb:,.0f} MB")
        run_s, run_mb = peak_rss_mb(
            [sys.executable, "-m", "prefixsim", "run", "--trace", str(path), "--cache-only",
             "--cache-tokens", "50000000", "-o", str(Path(tmp) / "out")])
        summary = json.loads((Path(tmp) / "out" / "summary.json").read_text())
        print(f"read + cache-only replay (LRU, 50M tokens): {run_s:.1f} s, peak RSS "
              f"{run_mb:,.0f} MB (target < 2048 MB), hit rate "
              f"{summary['cache_token_hit_rate']:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--scale", type=int, default=0)
    args = parser.parse_args()
    read_rates(args.requests)
    if args.scale:
        scale(args.scale)


if __name__ == "__main__":
    main()
