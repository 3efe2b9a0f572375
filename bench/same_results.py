"""Do two commits give the same results? The check a behaviour-preserving change cites.

    .venv/bin/python bench/same_results.py [--base REV] [--head REV|worktree] [--data DIR]

Each side is checked out with `git worktree` (the head may be the working tree as it is)
and run by this interpreter with that checkout first on `sys.path`, so both sides use one
set of installed packages. Each side runs, as a user would, from the CLI:

1. the demo sweep (`traces/sweeps/demo.yaml`, cache-only, 14 runs),
2. the timed demo sweep (`traces/sweeps/timed_demo.yaml`, 6 runs),
3. the cluster demo sweep (`traces/sweeps/cluster_demo.yaml`, pool and disaggregation),
4. a streamed 100k-request run, cache-only (LRU, 3M tokens, bounds) and timed
   (2 x h100-sxm, prefix_aware), on a `chat` preset trace generated once into --data.

Then every run's `summary.json` values (less the wall-clock figures and the command line)
and `requests.parquet` rows are compared between the sides; one line a run, and a last
line `N same, M differ`. Exit 0 when all are the same, 1 otherwise. Wall time of each
side's commands is printed as a ratio (head / base), a noisy figure on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
VARYING = {"wall_time_s", "simulated_s_per_wall_s", "command", "prefixsim_version"}
TRACE_REQUESTS = 100_000


def checkout(rev: str, where: Path) -> Path:
    """`rev` checked out at `where` (a detached worktree); `worktree`: the working tree."""
    if rev == "worktree":
        return ROOT
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(where),
                    rev], check=True, capture_output=True)
    return where


def run_side(src: Path, out: Path, trace: Path) -> float:
    """Run the four jobs with the package at `src`; results under `out`. Wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(src), "PREFIXSIM_PURE": "1"}
    cli = [sys.executable, "-m", "prefixsim"]
    jobs = [
        ["sweep", str(src / "traces/sweeps/demo.yaml"), "-o", str(out / "demo")],
        ["sweep", str(src / "traces/sweeps/timed_demo.yaml"), "-o", str(out / "timed")],
        ["sweep", str(src / "traces/sweeps/cluster_demo.yaml"), "-o", str(out / "cluster")],
        ["run", "--trace", str(trace), "--cache-only", "--policy", "lru",
         "--cache-tokens", "3000000", "--bounds", "--quiet", "-o", str(out / "stream-cache")],
        ["run", "--trace", str(trace), "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
         "--replicas", "2", "--router", "prefix_aware", "--quiet",
         "-o", str(out / "stream-timed")],
    ]
    where = subprocess.run([*cli[:1], "-c", "import prefixsim; print(prefixsim.__file__)"],
                           env=env, capture_output=True, text=True, check=True,
                           cwd=src).stdout.strip()
    if not where.startswith(str(src)):
        raise SystemExit(f"the package imported from {where}, not from {src}")
    started = time.perf_counter()
    for job in jobs:
        done = subprocess.run([*cli, *job], env=env, capture_output=True, text=True, cwd=src)
        if done.returncode:
            raise SystemExit(f"{' '.join(job)} failed ({done.returncode}) at {src}:\n"
                             f"{done.stderr[-3000:]}")
    return time.perf_counter() - started


def run_folders(out: Path) -> dict[str, Path]:
    """Every run folder under `out`, by its path relative to `out`."""
    return {str(p.parent.relative_to(out)): p.parent for p in sorted(out.rglob("summary.json"))}


def compare(base: Path, head: Path) -> list[str]:
    """One line per run: same, or what differs."""
    lines = []
    a, b = run_folders(base), run_folders(head)
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            lines.append(f"DIFFER {name}: only in {'head' if name in b else 'base'}")
            continue
        sa = json.loads((a[name] / "summary.json").read_text())
        sb = json.loads((b[name] / "summary.json").read_text())
        keys = sorted((set(sa) | set(sb)) - VARYING)
        diff = [k for k in keys if sa.get(k, "<absent>") != sb.get(k, "<absent>")]
        ra = pd.read_parquet(a[name] / "requests.parquet")
        rb = pd.read_parquet(b[name] / "requests.parquet")
        rows_same = ra.shape == rb.shape and list(ra.columns) == list(rb.columns) and ra.equals(rb)
        if diff or not rows_same:
            shown = ", ".join(f"{k}: {sa.get(k, '<absent>')!r} -> {sb.get(k, '<absent>')!r}"
                              for k in diff[:5])
            lines.append(f"DIFFER {name}: summary keys {len(diff)} ({shown}); "
                         f"requests rows {'same' if rows_same else 'differ'}")
        else:
            lines.append(f"same   {name}: {len(keys)} summary values, {len(ra):,} request rows")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD", help="the commit before the change")
    parser.add_argument("--head", default="worktree", help="the commit after (or worktree)")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) /
                        "prefixsim-same-results", help="where the 100k trace is kept")
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    trace = args.data / "chat-100k.jsonl"
    if not trace.exists():
        subprocess.run([sys.executable, "-m", "prefixsim", "trace", "generate", "--preset",
                        "chat", "--requests", str(TRACE_REQUESTS), "--seed", "7", "-o",
                        str(trace)], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    with tempfile.TemporaryDirectory(prefix="same-results-") as tmp:
        tmp_path = Path(tmp)
        sides = {}
        try:
            for side, rev in (("base", args.base), ("head", args.head)):
                src = checkout(rev, tmp_path / f"src-{side}")
                seconds = run_side(src, tmp_path / f"out-{side}", trace)
                sides[side] = seconds
                print(f"{side} ({rev}): {seconds:.1f} s", flush=True)
            lines = compare(tmp_path / "out-base", tmp_path / "out-head")
        finally:
            for side in ("base", "head"):
                if (tmp_path / f"src-{side}").exists():
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                    str(tmp_path / f"src-{side}")], capture_output=True)
    for line in lines:
        print(line)
    differ = sum(line.startswith("DIFFER") for line in lines)
    print(f"wall time head / base: {sides['head'] / sides['base']:.2f}")
    print(f"{len(lines) - differ} same, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
