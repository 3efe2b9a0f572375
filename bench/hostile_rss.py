"""Peak memory and wall time of each hostile file of docs/input-rules.md I7, at full size.

Each case writes its file (small on disk, except the long JSON line), runs the `prefixsim`
command on it in a fresh process, and reads the child's peak RSS (getrusage of the
children) and wall time. Targets: exit 2 with one `prefixsim: error:` line, peak RSS under
500 MB and wall time under 10 s (the interpreter and imports alone take ~130 MB and ~2 s on
an idle machine; the baseline line measures them, and `- base` is the time past them).

    python bench/hostile_rss.py            # every case
    python bench/hostile_rss.py parquet    # cases whose name holds 'parquet'
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "traces" / "demo_chat.jsonl"
RSS_LIMIT_MB = 500
WALL_LIMIT_S = 10.0


def parquet_bomb(folder: Path) -> list[str]:
    """255 rows of 2^20 zero hash ids, zstd: ~9 kB declaring 2^28 ids (once 6.7 GB)."""
    path = folder / "bomb.parquet"
    schema = pa.schema([("timestamp", pa.float64()), ("input_length", pa.int64()),
                        ("output_length", pa.int64()), ("hash_ids", pa.list_(pa.int64()))])
    ids = pa.ListArray.from_arrays(pa.array([0, 1 << 20], pa.int32()),
                                   pa.array(np.zeros(1 << 20, dtype=np.int64)))
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for row in range(255):
            writer.write_table(pa.table({"timestamp": [float(row)],
                                         "input_length": [(1 << 20) * 512],
                                         "output_length": [1], "hash_ids": ids}, schema=schema))
    return ["trace", "inspect", str(path)]


def azure_huge_prompts(folder: Path) -> list[str]:
    """120 rows of 2^24 context tokens, a synthetic shared prefix (once a MemoryError)."""
    path = folder / "azure.csv"
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"] + [
        f"2023-11-16 18:15:{i % 60:02d}.{i:07d},{1 << 24},10" for i in range(120)]
    path.write_text("\n".join(rows) + "\n")
    return ["run", "--trace", str(path), "--prefix-model", "shared:1000", "--cache-only",
            "-o", str(folder / "out")]


def long_json_line(folder: Path) -> list[str]:
    """One 256 MB line (the cap is 32 Mi characters; a 1 GB line once took 3 GB)."""
    path = folder / "long.jsonl"
    chunk = b"1, " * (1 << 20)
    with path.open("wb") as handle:
        handle.write(b'{"hash_ids": [')
        for _ in range(85):
            handle.write(chunk)
        handle.write(b"1]}\n")
    return ["run", "--trace", str(path), "--trace-format", "mooncake", "--cache-only",
            "-o", str(folder / "out")]


def dev_zero(folder: Path) -> list[str]:
    """/dev/zero as a Mooncake trace (it once never ended)."""
    return ["trace", "inspect", "/dev/zero", "--trace-format", "mooncake"]


def million_point_grid(folder: Path) -> list[str]:
    """Six keys of ten values, --dry-run (once silent for 120 s)."""
    keys = ["cache.capacity_tokens", "cache.min_cacheable_tokens", "cache.ttl_s",
            "engine.replicas", "scheduler.max_num_seqs", "trace.max_requests"]
    grid = "".join(f"  {k}: [{', '.join(str(v) for v in range(1, 11))}]\n" for k in keys)
    path = folder / "big.yaml"
    path.write_text(f"base:\n  trace: {{path: {DEMO}}}\n  cache_only: true\ngrid:\n{grid}")
    return ["sweep", str(path), "--dry-run"]


def trillion_requests(folder: Path) -> list[str]:
    return ["trace", "generate", "--preset", "chat", "--requests", str(10**12),
            "-o", str(folder / "t.jsonl")]


def backtracking_regex(folder: Path) -> list[str]:
    path = folder / "run.yaml"
    path.write_text("cache:\n  classes: [{name: a, ttl_s: 5, session_regex: '^(a|a)*$'}]\n")
    return ["run", "--config", str(path), "--trace", str(DEMO), "--cache-only",
            "-o", str(folder / "out")]


CASES: dict[str, Callable[[Path], list[str]]] = {
    "parquet-bomb": parquet_bomb, "azure-huge-prompts": azure_huge_prompts,
    "long-json-line": long_json_line, "dev-zero": dev_zero,
    "million-point-grid": million_point_grid, "trillion-requests": trillion_requests,
    "backtracking-regex": backtracking_regex,
}


def measure(args: list[str]) -> tuple[int, str, float, float]:
    """(exit code, last stderr line, peak RSS MB, wall s) of `prefixsim ARGS` in a child
    (run through a fresh python, so its getrusage is its own)."""
    probe = ("import resource, subprocess, sys, time\n"
             "t = time.monotonic()\n"
             "p = subprocess.run([sys.executable, '-m', 'prefixsim', *sys.argv[1:]], "
             "capture_output=True, text=True)\n"
             "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
             "last = (p.stderr.strip().splitlines() or [''])[-1]\n"
             "print(p.returncode, f'{rss:.0f}', f'{time.monotonic() - t:.2f}', last, sep='\\t')\n")
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True,
                         timeout=120, cwd=REPO).stdout.rstrip("\n")
    code, rss, wall, last = out.split("\t", 3)
    return int(code), last, float(rss), float(wall)


def main() -> None:
    wanted = sys.argv[1:]
    failures = 0
    _, _, base_rss, base_wall = measure(["trace", "inspect", "--help"])  # imports only
    print(f"baseline (imports, `trace inspect --help`): {base_rss:.0f} MB, {base_wall:.2f} s")
    print(f"{'case':<22}{'exit':>5}{'peak MB':>9}{'wall s':>8}{'- base':>8}  error line")
    with tempfile.TemporaryDirectory(prefix="prefixsim-hostile-") as tmp:
        for name, make in CASES.items():
            if wanted and not any(w in name for w in wanted):
                continue
            folder = Path(tmp) / name
            folder.mkdir()
            args = make(folder)
            code, last, rss, wall = measure(args)
            ok = code == 2 and last.startswith("prefixsim: error:") and rss < RSS_LIMIT_MB \
                and wall < WALL_LIMIT_S
            failures += not ok
            print(f"{name:<22}{code:>5}{rss:>9.0f}{wall:>8.2f}{wall - base_wall:>8.2f}  "
                  f"{last[:100]}"
                  + ("" if ok else "   <-- over a target"))
            for path in folder.rglob("*"):
                if path.is_file():
                    path.unlink()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"targets: exit 2 in one line, peak RSS < {RSS_LIMIT_MB} MB, wall < {WALL_LIMIT_S:g} s"
          f" (this driver: {own:.0f} MB)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
