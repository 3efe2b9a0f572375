"""Bench: kv-cache-tester's working-set runs replayed closed-loop, measured vs simulated TTFT.

Reads the working-set runs under ../shared/validation/kv-cache-tester-vllm/results/ (real
vLLM servers of Qwen3-Coder-30B-A3B-Instruct-FP8 at TP 4; that folder's README), rebuilds
each run's logged requests and replays them with the tester's pacing, then prints per 30 s
period the measured and the simulated mean TTFT and the median |relative error| over the
periods whose working set fits the assumed cache (docs/load.md for the closed loop).

Settings (defaults only: nothing is fitted):
- Model: the `qwen3-coder-30b-a3b` preset (the MoE geometry of the model's config.json;
  its `notes` say what is approximated), `model.weight_dtype` fp8,
  `model.kv_dtype` bf16 (vLLM's `auto` for this checkpoint), `hardware.tp` 4, the roofline
  cost model, vLLM's default scheduler limits (8192 batched tokens, 256 sequences,
  chunked prefill), `hardware.memory_utilization` 0.9 with the 2 GiB activation reserve.
- GPU: unknown (the repository does not record it); every run is shown on `h100-sxm` and
  `h200` (`--gpu` to choose). KV capacity: the HBM pool (presets.kv_pool_tokens) and, for
  the "gds_dram" server (CPU memory plus GPUDirect Storage), a host tier that holds the
  run's largest working set at the default host bandwidth (`cache.host_capacity_tokens`):
  its sizes are not recorded, but it "held every working set" (the data's README), so its
  periods beyond HBM read their prefixes from that tier rather than prefill them again.
  The "dram_only" server's tier held "far less than the largest working sets", by an
  unknown amount: no lower tier is simulated there, and its periods beyond HBM are shown
  but not compared.
- Workload: each logged request (detailed_results_*.csv) in launch order, with its logged
  context, cached and unique tokens and 1 output token. Its cached part is the first
  `cached_tokens` of one working-set prompt, drawn uniformly (seeded, `--seed`) among the
  prompts in use in the period the tester launched it in: ceil(working set / rounded
  context) prompts (the tester's `WorkingSet`, context rounded up to its 256-token chunk),
  so requests of one prompt share page ids; the unique part has fresh ids. Pages are 256
  tokens (the tester's chunk: every cached part ends on a page boundary), not vLLM's
  16-token blocks. The tester's unlogged warm-up (every prompt once at 16 users before
  period 1) is left out: the simulated cache starts cold. The tester picked prompts
  unseeded, so the exact sequence is unknown; this is one draw of the same process.
  Requests drawn from the last period's working set are appended (three times as many), so
  a faster simulated server does not run out of requests before the last stage ends.
- Pacing: a `concurrency` load with one `{users, duration_s}` stage per logged period
  (sustained_periods_*.csv: its `concurrency_level` and its logged duration, about 30-34 s),
  no think time. A simulated period is the stage its requests were released in; its mean
  TTFT is over its completed requests (the tester's `avg_ttft` over the period's completed
  requests). Because the workload is fixed before the run, a simulated server faster or
  slower than the real one reaches a period with requests drawn for a neighbouring period.
- "Fits": the period's working set (tokens) is at most the cache assumed: the HBM KV pool
  of the GPU, plus the host tier where one is simulated (`cache_tokens`).
- First, isolated requests: a miss (the whole context) and a hit (96 % cached) on an idle
  server, against the logged concurrency-1 TTFTs (`isolated_measured`), which shows how
  much of the error is the step time of one request.

    .venv/bin/python bench/kv_cache_tester.py [RESULTS_DIR] [--run NAME] [--gpu h200]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from prefixsim.config import load_config
from prefixsim.pipeline import simulate
from prefixsim.presets import GIB, get_gpu, get_model, kv_pool_tokens
from prefixsim.trace import Request

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT.parent / "shared" / "validation" / "kv-cache-tester-vllm" / "results"
MODEL = "qwen3-coder-30b-a3b"
GPUS = ("h100-sxm", "h200")
TP = 4
PAGE = 256  # the tester's chunk size
PAD_SHARE = 3.0
PROMPT_ID_SPACE = 1 << 32  # page ids of prompt p: (p + 1) * PROMPT_ID_SPACE + page
TARGET = 0.30


@dataclass(frozen=True)
class WorkingSetRun:
    """One working-set run: its per-request log and its per-period summary."""

    name: str
    context: int
    max_ttft: float
    requests: pd.DataFrame
    periods: pd.DataFrame


def load_run(folder: Path) -> WorkingSetRun | None:
    details = sorted(folder.glob("detailed_results_*.csv"))
    periods = sorted(folder.glob("sustained_periods_*.csv"))
    if not details or not periods:
        return None
    params = json.loads((folder / "progress.json").read_text())["parameters"]
    requests = pd.read_csv(details[-1]).sort_values("launch_time", kind="stable")
    return WorkingSetRun(folder.name, int(params["context_sizes"][0]),
                         float(params.get("max_ttft") or math.nan),
                         requests.reset_index(drop=True), pd.read_csv(periods[-1]))


class PageIds:
    """Chained page ids: a prompt's cached part shares ids; unique parts get fresh ones."""

    def __init__(self) -> None:
        self._fresh = 1

    def request(self, request_id: int, prompt: int, cached: int, unique: int) -> Request:
        cached_pages = cached // PAGE
        ids = [(prompt + 1) * PROMPT_ID_SPACE + page for page in range(cached_pages)]
        total = cached + unique
        for _ in range(cached_pages, -(-total // PAGE)):
            ids.append(self._fresh)
            self._fresh += 1
        return Request(request_id, float(request_id), total, 1, tuple(ids), PAGE)


def _prompts_in_use(working_set: int, context: int) -> int:
    rounded = -(-context // PAGE) * PAGE
    return max(1, math.ceil(working_set / rounded))


def build_requests(run: WorkingSetRun, seed: int) -> list[Request]:
    """The logged requests in launch order, plus padding (module docstring, Workload)."""
    rng = np.random.default_rng(seed)
    periods = run.periods
    starts = periods["start_time"].to_numpy()
    in_use = [_prompts_in_use(int(ws), run.context) for ws in periods["working_set_size"]]
    which = np.clip(np.searchsorted(starts, run.requests["launch_time"].to_numpy(),
                                    side="right") - 1, 0, len(periods) - 1)
    pages = PageIds()
    out = []
    rows = run.requests[["cached_tokens", "unique_tokens"]].to_numpy()
    for i, ((cached, unique), period) in enumerate(zip(rows, which, strict=True)):
        out.append(pages.request(i, int(rng.integers(in_use[period])), int(cached),
                                 int(unique)))
    cached, unique = (int(v) for v in rows[-1])
    for i in range(len(out), len(out) + int(len(out) * PAD_SHARE)):
        out.append(pages.request(i, int(rng.integers(in_use[-1])), cached, unique))
    return out


def _config(gpu: str, stages: list[dict], host_tokens: int | None = None):
    overrides = {"model.name": MODEL, "model.weight_dtype": "fp8", "model.kv_dtype": "bf16",
                 "hardware.gpu": gpu, "hardware.tp": TP,
                 "load.type": "concurrency", "load.stages": stages}
    if host_tokens is not None:
        overrides["cache.host_capacity_tokens"] = host_tokens
    return load_config(overrides=overrides, unset=("engine.sample_interval_s",))


def host_tier_tokens(run: WorkingSetRun) -> int | None:
    """The host tier simulated below HBM: the run's largest working set for the
    "gds_dram" server (it held every one), none for "dram_only" (module docstring)."""
    if not run.name.startswith("gds_dram"):
        return None
    return int(run.periods["working_set_size"].max())


def cache_tokens(run: WorkingSetRun, gpu: str) -> int:
    """The KV tokens the simulated server of `run` holds on `gpu`: HBM plus host tier."""
    return pool_tokens(gpu) + (host_tier_tokens(run) or 0)


def simulated_frame(run: WorkingSetRun, gpu: str, seed: int) -> pd.DataFrame:
    """The simulated rows of one run on one GPU, every status; `stage` is the period index
    (from 0) each request was released in."""
    stages = [{"users": int(users), "duration_s": float(duration)} for users, duration
              in zip(run.periods["concurrency_level"], run.periods["duration"], strict=True)]
    config = _config(gpu, stages, host_tier_tokens(run))
    return simulate(config, build_requests(run, seed)).requests


def period_means(frame: pd.DataFrame, periods: int) -> list[float]:
    """Mean TTFT (s) of the completed rows of each period, NaN where none completed."""
    done = frame[frame["status"] == "completed"]
    means = done.groupby("stage")["ttft_ms"].mean() / 1e3
    return [float(means.get(k, math.nan)) for k in range(periods)]


def simulated_periods(run: WorkingSetRun, gpu: str, seed: int) -> list[float]:
    """Mean simulated TTFT (s) of each period, NaN where none completed."""
    return period_means(simulated_frame(run, gpu, seed), len(run.periods))


def load_runs(folder: Path, names: list[str] | None = None) -> list[WorkingSetRun]:
    """The working-set runs in `folder` (those named, or every one with both logs)."""
    folders = [folder / name for name in names or []] or sorted(folder.iterdir())
    return [run for run in map(load_run, folders) if run is not None]


def isolated_simulated(context: int, gpu: str) -> tuple[float, float]:
    """TTFT (s) of a miss and then a hit (96 % cached) of one prompt on an idle server."""
    cached = int(context * 0.96)
    pages = PageIds()
    requests = [pages.request(0, 0, cached, context - cached),
                pages.request(1, 0, cached, context - cached)]
    frame = simulate(_config(gpu, [{"users": 1, "duration_s": 1e6}]), requests).requests
    ttft = frame.sort_values("request_id")["ttft_ms"].to_numpy() / 1e3
    return float(ttft[0]), float(ttft[1])


def isolated_measured(run: WorkingSetRun) -> tuple[float, float]:
    """Median TTFT (s) of a miss and of an HBM hit at concurrency 1: hits are the TTFTs
    within 1.5x the run's fastest; misses are those above 3x it in the first period (its
    working set fits every cache, so nothing there comes from an offload tier)."""
    rows = run.requests[run.requests["concurrency_level"] == 1]
    if rows.empty:
        return math.nan, math.nan
    ttft, fastest = rows["ttft"].to_numpy(), rows["ttft"].min()
    first = rows.loc[rows["launch_time"] < run.periods["end_time"].iloc[0], "ttft"].to_numpy()
    slow, fast = first[first > 3 * fastest], ttft[ttft <= 1.5 * fastest]
    return (float(np.median(slow)) if len(slow) else math.nan,
            float(np.median(fast)) if len(fast) else math.nan)


def _median(values: list[float]) -> str:
    """The median of the values measured, to 0.01 s, or `-` when none was (a run whose first
    period held no miss at concurrency 1)."""
    known = [v for v in values if not math.isnan(v)]
    return f"{float(np.median(known)):.2f}" if known else "-"


def pool_tokens(gpu: str) -> int:
    return kv_pool_tokens(get_model(MODEL), get_gpu(gpu), TP, 0.9, 2 * GIB,
                          weight_dtype_bytes=1, kv_dtype_bytes=2)


def report(run: WorkingSetRun, gpu: str, seed: int, quiet: bool) -> list[float]:
    """Print one run on one GPU; return the relative errors of the periods that fit."""
    pool = cache_tokens(run, gpu)
    sim = simulated_periods(run, gpu, seed)
    errors = []
    if not quiet:
        host = host_tier_tokens(run)
        tier = "" if host is None else f" + host tier {host / 1e6:.2f}M"
        print(f"\n{run.name} on {gpu} (HBM KV pool {pool_tokens(gpu) / 1e6:.2f}M tokens"
              f"{tier}), context {run.context}, max TTFT {run.max_ttft:g} s")
        print("  period  users  working set  fits  measured s  simulated s   error")
    for row, simulated in zip(run.periods.itertuples(), sim, strict=True):
        fits = row.working_set_size <= pool
        err = simulated / row.avg_ttft - 1
        if fits and not math.isnan(err):
            errors.append(err)
        if not quiet:
            print(f"  {row.period_number:6d} {row.concurrency_level:6d} "
                  f"{row.working_set_size / 1e6:11.2f}M  {'yes' if fits else ' no'} "
                  f"{row.avg_ttft:11.3f} {simulated:12.3f} {err:+7.0%}")
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--run", action="append", default=[],
                        help="a run folder's name (repeatable); default: every working-set run")
    parser.add_argument("--gpu", action="append", default=[],
                        help=f"GPU preset (repeatable); default: {' and '.join(GPUS)}")
    parser.add_argument("--seed", type=int, default=0, help="seed of the prompt draws")
    parser.add_argument("--quiet", action="store_true", help="only the summaries")
    args = parser.parse_args()
    if not args.folder.is_dir():
        print(f"skipped: no validation data at {args.folder}")
        return 0
    gpus = args.gpu or list(GPUS)
    runs = load_runs(args.folder, args.run)
    print("isolated requests (idle server): TTFT s of a miss / a hit (96 % cached)")
    for context in sorted({run.context for run in runs}):
        real = [isolated_measured(run) for run in runs if run.context == context]
        cells = [f"measured {_median([m for m, _ in real])} / {_median([h for _, h in real])}"]
        for gpu in gpus:
            miss, hit = isolated_simulated(context, gpu)
            cells.append(f"{gpu} {miss:.2f} / {hit:.2f}")
        print(f"  context {context}: " + " | ".join(cells))
    summary = []
    for gpu in gpus:
        errors: list[float] = []
        for run in runs:
            run_errors = report(run, gpu, args.seed, args.quiet)
            errors += run_errors
            summary.append((run.name, gpu, run_errors))
        if errors:
            print(f"\n{gpu}: median |relative error| of mean TTFT over {len(errors)} periods "
                  f"that fit: {statistics.median(abs(e) for e in errors):.0%} "
                  f"(target {TARGET:.0%})")
    print("\nper run: periods that fit, median |relative error|")
    for name, gpu, errs in summary:
        med = f"{statistics.median(abs(e) for e in errs):.0%}" if errs else "-"
        print(f"  {name:34s} {gpu:9s} {len(errs):3d} {med:>6s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
