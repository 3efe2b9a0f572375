"""Bench: simulated against measured latencies of real vLLM servers.

Reads the real runs under ../shared/validation/ (inference-perf load sweeps of vLLM v0.11 on
one H100; see that folder's README), rebuilds each open-loop stage's workload with the
package's shared-prefix generator (trace/generate/shared_prefix.py: 10 groups x 10 prompts,
a 128-token system prompt, the question making up the measured prompt length, 64 output
tokens, the stage's rate with inference-perf's rescaled exponential gaps, after a warm-up
probe of every prompt), replays it with the server's limits (max-num-seqs, prefix caching
and chunked prefill on or off, vLLM's default token budget: 8192 with chunked prefill, 2048
without) and prints measured vs simulated per stage and the median |relative error| per
metric. TPOT is derived as the README says: (mean E2E - mean TTFT) / (64 - 1), for both.

Then, for every server whose sweep saturated (a stage that was not open-loop: achieved rate
< 98% of requested, or failures), it compares the measured saturation throughput (the mean
achieved rate of those stages) with the highest rate that the capacity search sustains
(capacity/search.py's bracketing and bisection, no SLO, the kept-up rule of
capacity/verdict.py; docs/load.md "Capacity"): each probe replays one stage at the probed
rate. Target: within 10%. The simulated server's own steady completion rate at the
saturated stages' rates is printed beside it, to tell the cost model's share of an error
from the kept-up rule's margin.

Last, one table over every real source (`--sources`, default all four): per server config
here, per kv-cache-tester working-set run and GPU (replayed by bench/kv_cache_tester.py,
whose docstring gives its settings), per test and GPU of vLLM's CI latency benchmark
(bench/vllm_ci_latency.py: figures transcribed from its build pages, so present without
../shared; simulated with the serving engine those builds ran, V0) and for the V1 serving
benchmark of a vLLM pull request (bench/vllm_pr_serving.py: Llama-3.1-70B at TP 4 on B200,
three Poisson rates; transcribed too), the default cost
model's median |relative error| per
metric with its target, and the count of stages or periods where the real server kept up
(an open-loop stage; a period within the tester's max TTFT) but the simulation saturated
(none released, simulated mean TTFT > 10x measured, or, open loop only, the kept-up rule
of capacity/verdict.py fails); each such stage is listed ("SATURATES IN SIMULATION ONLY").

Defaults only: no per-stage or per-run fitting. `--cost-model` / `--param KEY=VALUE` /
`--profile` compare other cost models; every extra `--compare NAME` adds a column set (a
cost-model name, or `profile:PATH_OR_NAME`, either with `?key=value&...` parameters, e.g.
`profile:h100-sxm-llama-3.1-8b-tp1?step_overhead_s=0.0005` to replace an imported profile's
CPU table by the roofline's formula).

    .venv/bin/python bench/sim2real.py [VALIDATION_DIR] [--compare roofline-step] [--quiet]
        [--tolerance 0.01] [--sources kubecon,kv-cache-tester,vllm-ci-latency,vllm-pr-serving]
        [--kv-cache-tester-dir DIR]
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from prefixsim.capacity import SearchResult, SearchSpace, find_threshold
from prefixsim.capacity.knob import RATE_RANGE
from prefixsim.capacity.verdict import judge
from prefixsim.config import load_config
from prefixsim.metrics.kept_up import kept_up_keys
from prefixsim.pipeline import simulate
from prefixsim.trace.generate.shared_prefix import SharedPrefix, Stage, shared_prefix_requests

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT.parent / "shared" / "validation" / "inference-perf-kubecon-na-2025"
KV_CACHE_TESTER_DIR = ROOT.parent / "shared" / "validation" / "kv-cache-tester-vllm" / "results"
SOURCES = ("kubecon", "kv-cache-tester", "vllm-ci-latency", "vllm-pr-serving")
SIM_ONLY_TTFT_RATIO = 10.0  # simulated / measured mean TTFT above which a stage saturates
MODELS = {"meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
          "meta-llama/Meta-Llama-3-8B-Instruct": "llama-3.1-8b"}
METRICS = ("mean_ttft", "median_ttft", "p99_ttft", "mean_tpot", "mean_e2el", "p99_e2el",
           "throughput")
TARGETS = {"mean_ttft": 0.15, "median_ttft": 0.15, "p99_ttft": 0.25, "mean_tpot": 0.10,
           "mean_e2el": 0.10}
SATURATION_TARGET = 0.10  # |simulated sustainable / measured saturation rate - 1|
SATURATION_TOLERANCE = 0.01  # the capacity search's final bracket (a probe takes ~1 s)
SYSTEM_PROMPT_TOKENS = 129  # the config's 128 tokens plus the BOS token
STAGE_S = 60.0  # seconds per stage
WARM_S = 10.0  # seconds of a saturated stage left out of its simulated steady rate


@dataclass(frozen=True)
class ServerRun:
    """One real server configuration and its load stages."""

    name: str
    model: str
    max_num_seqs: int | None  # None: the serving engine's default on the GPU
    prefix_caching: bool
    chunked_prefill: bool
    memory_utilization: float
    workload: dict
    stages: list[dict]


def _args(manifest: Path) -> dict[str, str]:
    """The vLLM container's --key=value arguments and its MODEL_ID."""
    found: dict[str, str] = {}
    for doc in yaml.safe_load_all(manifest.read_text()):
        for container in _containers(doc):
            for arg in container.get("args", []):
                key, _, value = str(arg).partition("=")
                found[key.lstrip("-").replace("_", "-")] = value
            for env in container.get("env", []):
                if env.get("name") == "MODEL_ID":
                    found["model"] = env.get("value", "")
    return found


def _containers(doc) -> list[dict]:
    if not isinstance(doc, dict):
        return []
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return [c for c in spec.get("containers", []) if "vllm" in str(c.get("image", ""))]


def load_runs(folder: Path) -> list[ServerRun]:
    config = yaml.safe_load(next(folder.glob("config*.yaml")).read_text())
    workload = config["data"]["shared_prefix"]
    runs = []
    for run_dir in sorted(p for p in folder.iterdir() if (p / "manifests.yaml").is_file()):
        args = _args(run_dir / "manifests.yaml")
        stages = []
        for path in sorted((run_dir / "results").glob("stage_*_lifecycle_metrics.json"),
                           key=lambda p: int(p.name.split("_")[1])):
            stages.append(json.loads(path.read_text()) | {"stage": int(path.name.split("_")[1])})
        runs.append(ServerRun(
            name=run_dir.name, model=MODELS[args["model"]],
            max_num_seqs=int(args["max-num-seqs"]) if "max-num-seqs" in args else None,
            prefix_caching="enable-prefix-caching" in args,
            chunked_prefill="no-enable-chunked-prefill" not in args,
            memory_utilization=float(args.get("gpu-memory-utilization", 0.9)),
            workload=workload, stages=stages))
    return runs


def open_loop(stage: dict) -> bool:
    load = stage["load_summary"]
    failures = (stage.get("failures") or {}).get("count", 0)
    return load["achieved_rate"] >= 0.98 * load["requested_rate"] and not failures


def measured(stage: dict, output_tokens: int) -> dict[str, float]:
    lat = stage["successes"]["latency"]
    ttft, e2e = lat["time_to_first_token"], lat["request_latency"]
    return {
        "mean_ttft": ttft["mean"] * 1e3, "median_ttft": ttft["median"] * 1e3,
        "p99_ttft": ttft["p99"] * 1e3,
        "mean_tpot": (e2e["mean"] - ttft["mean"]) / (output_tokens - 1) * 1e3,
        "mean_e2el": e2e["mean"] * 1e3, "p99_e2el": e2e["p99"] * 1e3,
        "throughput": stage["successes"]["throughput"]["requests_per_sec"],
    }


def replay(run: ServerRun, prompt_tokens: int, rate: float, cost: dict,
           seed: int) -> pd.DataFrame:
    """The simulated rows of one 60 s stage at `rate` req/s (after the warm-up probe), every
    status, replayed with the server's limits."""
    wl = run.workload
    spec = SharedPrefix(wl["num_groups"], wl["num_prompts_per_group"], SYSTEM_PROMPT_TOKENS,
                        prompt_tokens - SYSTEM_PROMPT_TOKENS, wl["output_len"], 16)
    requests = shared_prefix_requests(spec, [Stage(rate, STAGE_S)], seed=seed)
    config = load_config(overrides={
        "model.name": run.model, "hardware.gpu": "h100-sxm",
        "hardware.memory_utilization": run.memory_utilization,
        "scheduler.max_num_seqs": run.max_num_seqs,
        "scheduler.max_batched_tokens": 8192 if run.chunked_prefill else 2048,
        "scheduler.chunked_prefill": run.chunked_prefill,
        "cache.prefix_caching": run.prefix_caching, **cost},
        unset=("engine.sample_interval_s",))
    frame = simulate(config, requests).requests
    return frame[frame["session_id"].str.startswith("stage0/")]


def stage_rows(run: ServerRun, stage: dict, cost: dict, seed: int = 0) -> pd.DataFrame:
    """The simulated rows of one measured stage (its prompt length and requested rate)."""
    prompt = round(stage["successes"]["prompt_len"]["mean"])
    rate = stage["load_summary"]["requested_rate"]
    return replay(run, prompt, rate, cost, seed + stage["stage"])


def simulated(run: ServerRun, rows: pd.DataFrame) -> dict[str, float]:
    """The compared figures of one stage's simulated rows (as `measured`'s)."""
    wl = run.workload
    done = rows[rows["status"] == "completed"]
    ttft, e2e = done["ttft_ms"].to_numpy(), done["e2el_ms"].to_numpy()
    span = done["finish_s"].max() - done["arrival_s"].min()
    return {
        "mean_ttft": float(ttft.mean()), "median_ttft": float(np.median(ttft)),
        "p99_ttft": float(np.percentile(ttft, 99)),
        "mean_tpot": float((e2e.mean() - ttft.mean()) / (wl["output_len"] - 1)),
        "mean_e2el": float(e2e.mean()), "p99_e2el": float(np.percentile(e2e, 99)),
        "throughput": len(done) / span if span > 0 else float("nan"),
    }


def saturation_rate(run: ServerRun) -> float | None:
    """Measured saturation throughput: the mean achieved rate of the saturated stages (those
    that were not open-loop; None when the sweep never saturated)."""
    rates = [s["load_summary"]["achieved_rate"] for s in run.stages if not open_loop(s)]
    return statistics.mean(rates) if rates else None


def sustainable_rate(run: ServerRun, cost: dict, tolerance: float) -> SearchResult:
    """The capacity search's answer for the server (`prefixsim capacity --search rate`'s
    bracketing and bisection, no SLO, its kept-up rule: docs/load.md "Capacity"): each probe
    replays one stage at the probed rate, judged on that stage's rows."""
    saturated = [s for s in run.stages if not open_loop(s)]
    prompt = round(statistics.mean(s["successes"]["prompt_len"]["mean"] for s in saturated))
    start = run.stages[0]["load_summary"]["requested_rate"]

    def probe(rates: Sequence[float]) -> list[bool]:
        return [kept_up(replay(run, prompt, rate, cost, seed=0)) for rate in rates]

    space = SearchSpace(start=start, passes_below=True, lowest=start / RATE_RANGE,
                        highest=start * RATE_RANGE, tolerance=tolerance)
    return find_threshold(probe, space)


def simulated_saturation(run: ServerRun, cost: dict) -> float:
    """The simulated server's own saturation throughput, for comparison: at each saturated
    stage's requested rate, completions per second from WARM_S after the stage's first
    arrival to its last (steady state, as the client's achieved rate; no drain), averaged."""
    rates = []
    for stage in (s for s in run.stages if not open_loop(s)):
        prompt = round(stage["successes"]["prompt_len"]["mean"])
        rows = replay(run, prompt, stage["load_summary"]["requested_rate"], cost,
                      seed=stage["stage"])
        start, end = rows["arrival_s"].min() + WARM_S, rows["arrival_s"].max()
        done = rows[(rows["status"] == "completed") & rows["finish_s"].between(start, end)]
        rates.append(len(done) / (end - start))
    return statistics.mean(rates)


def kept_up(rows: pd.DataFrame) -> bool:
    """The capacity verdict, without SLOs, on one open-loop stage's rows: its own counts,
    rate and kept-up keys, as a run's summary holds them (metrics/kept_up.py)."""
    done = rows[rows["status"] == "completed"]
    span = done["finish_s"].max() - rows["arrival_s"].min() if len(done) else 0.0
    summary = {"num_requests": len(rows), "completed": len(done),
               "request_throughput": len(done) / span if span > 0 else 0.0,
               **kept_up_keys(rows, open_loop=True, pool_tokens=None)}
    return judge(summary, rows, slos={}).passed


def saturation_table(runs: list[ServerRun], labels: list[str], tolerance: float) -> None:
    """Print measured saturation throughput against the capacity search, per server."""
    print(f"\nsaturation throughput (req/s): measured = mean achieved rate of the saturated "
          f"stages (achieved < 98% of requested, or failures); simulated = highest rate the "
          f"capacity search (no SLO, kept up: docs/load.md) sustains, tolerance "
          f"{tolerance:.0%}; target |error| <= {SATURATION_TARGET:.0%}; sim saturated = the "
          f"simulated server's steady completion rate at the saturated stages' rates")
    print(f"  {'server config':<34} {'cost model':>14} {'measured':>9} {'simulated':>9} "
          f"{'error':>7}  {'target':<13} {'sim saturated':>13}")
    for run in runs:
        real = saturation_rate(run)
        if real is None:
            print(f"  {run.name:<34} {'':>14} {'-':>9}  (the sweep never saturated)")
            continue
        for label in labels:
            found = sustainable_rate(run, cost_overrides(label), tolerance)
            if found.good is None:
                print(f"  {run.name:<34} {label:>14} {real:9.1f} {'-':>9}  (no rate passed)")
                continue
            err = found.good / real - 1
            verdict = "met" if abs(err) <= SATURATION_TARGET else "MISSED"
            own = simulated_saturation(run, cost_overrides(label))
            print(f"  {run.name:<34} {label:>14} {real:9.1f} {found.good:9.1f} {err:+7.1%}  "
                  f"{f'<= {SATURATION_TARGET:.0%} {verdict}':<13} {own:13.1f}")


def cost_overrides(label: str) -> dict:
    """Config overrides of a label: `default`, `NAME[?k=v&...]` or `profile:P[?k=v&...]`."""
    if label == "default":
        return {}
    name, _, params = label.partition("?")
    out: dict = ({"cost_model.profile": name.removeprefix("profile:")}
                 if name.startswith("profile:") else {"cost_model.name": name})
    if params:
        out["cost_model.params"] = {k: float(v) for k, v in
                                    (kv.split("=") for kv in params.split("&"))}
    return out


@dataclass
class SourceErrors:
    """One configuration of a real source, default cost model: its relative errors per
    metric, and the stages where the real server kept up but the simulation saturated."""

    source: str
    config: str
    gpu: str
    targets: dict[str, float]
    errors: dict[str, list[float]] = field(default_factory=dict)
    sim_only: list[str] = field(default_factory=list)

    def add(self, metric: str, error: float) -> None:
        self.errors.setdefault(metric, []).append(error)

    def check(self, stage: str, rows: pd.DataFrame, real_ttft_s: float, sim_ttft_s: float,
              open_loop: bool = True) -> None:
        """Flag a stage the real server kept up with when the simulation saturates it:
        nothing released, simulated mean TTFT > SIM_ONLY_TTFT_RATIO x the measured, or (open
        loop only) its rows fail the kept-up rule (capacity/verdict.py: docs/load.md
        "Capacity"). A closed loop holds at most its users in flight, so no queue can grow
        there, and the rule's TTFT growth would read the hit/miss mix of a period."""
        if len(rows) == 0:
            why = "no request released"
        elif not sim_ttft_s <= SIM_ONLY_TTFT_RATIO * real_ttft_s:
            why = f"TTFT > {SIM_ONLY_TTFT_RATIO:g}x measured"
        elif open_loop and not kept_up(rows):
            why = "not kept up (queue grew)"
        else:
            return
        self.sim_only.append(f"{self.source}, {self.config} on {self.gpu}, {stage}: measured "
                             f"{real_ttft_s:.3f} s vs simulated {sim_ttft_s:.3f} s mean TTFT "
                             f"({why})")


def kubecon(args: argparse.Namespace, labels: list[str]) -> list[SourceErrors]:
    """The inference-perf runs: per-stage tables, median errors, saturation throughput
    (module docstring); returns the default cost model's errors per server config."""
    if not args.folder.is_dir():
        print(f"skipped: no validation data at {args.folder}")
        return []
    runs = load_runs(args.folder)
    errors: dict[str, dict[str, list[float]]] = {lab: {m: [] for m in METRICS} for lab in labels}
    table = []
    for run in runs:
        output = run.workload["output_len"]
        stages = [s for s in run.stages if open_loop(s)]
        entry = SourceErrors("kubecon", run.name, "h100-sxm", TARGETS)
        table.append(entry)
        if not args.quiet:
            seqs = run.max_num_seqs or "the engine's"
            print(f"\n{run.name}: {run.model}, max-num-seqs {seqs}, prefix "
                  f"caching {'on' if run.prefix_caching else 'off'}, chunked prefill "
                  f"{'on' if run.chunked_prefill else 'off'}; {len(stages)} of "
                  f"{len(run.stages)} stages open-loop")
        for stage in stages:
            real = measured(stage, output)
            rate = stage["load_summary"]["requested_rate"]
            for label in labels:
                rows = stage_rows(run, stage, cost_overrides(label))
                sim = simulated(run, rows)
                cells = []
                for m in METRICS:
                    err = sim[m] / real[m] - 1
                    errors[label][m].append(err)
                    cells.append(f"{m} {real[m]:8.1f} {sim[m]:8.1f} {err:+6.0%}")
                    if label == "default" and m in TARGETS:
                        entry.add(m, err)
                if label == "default":
                    entry.check(f"stage {stage['stage']} ({rate:g} req/s)", rows,
                                real["mean_ttft"] / 1e3, sim["mean_ttft"] / 1e3)
                if not args.quiet:
                    print(f"  stage {stage['stage']} {rate:6.1f} req/s [{label}] "
                          + " | ".join(cells))
    print("\nmedian |relative error| over "
          f"{len(next(iter(errors.values()))['mean_ttft'])} open-loop stages "
          "(measured vs simulated; target in brackets):")
    for label in labels:
        parts = []
        for m in METRICS:
            med = statistics.median(abs(e) for e in errors[label][m])
            target = TARGETS.get(m)
            mark = "" if target is None else (f" [<= {target:.0%} "
                                              f"{'met' if med <= target else 'MISSED'}]")
            parts.append(f"{m} {med:.1%}{mark}")
        print(f"  {label:>14}: " + ", ".join(parts))
    saturation_table(runs, labels, args.tolerance)
    return table


def kv_cache_tester(folder: Path) -> list[SourceErrors]:
    """The kv-cache-tester working-set runs, replayed by bench/kv_cache_tester.py (its
    docstring: settings, GPUs, the host tier, "fits"), seed 0: per run and GPU, the errors of
    the periods whose working set fits the cache simulated (HBM, plus the host tier of the
    "gds_dram" runs); a period counts as kept up by the real server
    when its mean TTFT is within the run's max TTFT (the tester's limit)."""
    if not folder.is_dir():
        print(f"skipped: no validation data at {folder}")
        return []
    kvt = importlib.import_module("kv_cache_tester")  # bench/ is sys.path[0] (a script)
    metric = "mean_ttft/period"
    table = []
    for run in kvt.load_runs(folder):
        for gpu in kvt.GPUS:
            entry = SourceErrors("kv-cache-tester", run.name, gpu, {metric: kvt.TARGET},
                                 {metric: []})
            table.append(entry)
            frame = kvt.simulated_frame(run, gpu, seed=0)
            means = kvt.period_means(frame, len(run.periods))
            pool = kvt.cache_tokens(run, gpu)
            for k, (row, sim) in enumerate(zip(run.periods.itertuples(), means, strict=True)):
                err = sim / row.avg_ttft - 1
                if row.working_set_size <= pool and not math.isnan(err):
                    entry.add(metric, err)
                if row.avg_ttft <= run.max_ttft:
                    fits = "fits" if row.working_set_size <= pool else "does not fit"
                    entry.check(f"period {row.period_number} ({row.concurrency_level} users, "
                                f"working set {fits})", frame[frame["stage"] == k],
                                row.avg_ttft, sim, open_loop=False)
    return table


def vllm_ci_latency() -> list[SourceErrors]:
    """vLLM's CI latency benchmark (bench/vllm_ci_latency.py), under the serving engine its
    builds ran (`RAN_ENGINE`, V0: they predate vLLM's V1 engine): one batch's latency per
    test and GPU (a batch of 8 at once cannot saturate)."""
    ci = importlib.import_module("vllm_ci_latency")  # bench/ is sys.path[0] (a script)
    metric = "batch e2el"
    table = []
    for test, _, err in ci.errors(ci.RAN_ENGINE):
        entry = SourceErrors("vllm-ci-latency", f"{test.test} ({test.model})", test.gpu,
                             {metric: ci.TARGET}, {metric: []})
        entry.add(metric, err)
        table.append(entry)
    return table


def vllm_pr_serving() -> list[SourceErrors]:
    """The vLLM V1 serving benchmark of vLLM PR #20759 (bench/vllm_pr_serving.py: Llama-3.1-70B
    at TP 4 on B200, three Poisson rates, figures transcribed from the PR): each metric per
    rate, and each rate checked as an open-loop stage the real server kept up with."""
    pr = importlib.import_module("vllm_pr_serving")  # bench/ is sys.path[0] (a script)
    entry = SourceErrors("vllm-pr-serving", f"{pr.MODEL} tp{pr.TP}", pr.GPU,
                         {m: pr.TARGETS[m] for m in pr.METRICS}, {m: [] for m in pr.METRICS})
    for stage in pr.MEASURED:
        frame, sim, err = pr.result(stage)
        for metric in pr.METRICS:
            entry.add(metric, err[metric])
        entry.check(f"{stage.qps:g} req/s", frame[frame["status"] == "completed"],
                    stage.mean_ttft / 1e3, sim["mean_ttft"] / 1e3)
    return [entry]


def combined_table(table: list[SourceErrors]) -> None:
    """Print the median |relative error| per source configuration and metric, with the
    targets, then every stage that saturates in simulation only."""
    pooled: dict[tuple[str, str], SourceErrors] = {}
    for entry in table:
        key = (entry.source, entry.gpu)
        total = pooled.setdefault(key, SourceErrors(entry.source, "all", entry.gpu,
                                                    entry.targets))
        for metric, errs in entry.errors.items():
            total.errors.setdefault(metric, []).extend(errs)
        total.sim_only.extend(entry.sim_only)
    print(f"\nall real sources, default cost model: median |relative error| (n = stages or "
          f"periods compared); sim-only = stages where the real server kept up but the "
          f"simulation saturated (none released, mean TTFT > {SIM_ONLY_TTFT_RATIO:g}x "
          f"measured, or, open loop, the kept-up rule fails)")
    print(f"  {'source':<16} {'config':<42} {'gpu':<9} {'metric':<17} {'n':>3} "
          f"{'median':>7}  {'target':<13} {'sim-only':>8}")
    for entry in [*table, *pooled.values()]:
        for i, (metric, errs) in enumerate(entry.errors.items()):
            med = statistics.median(abs(e) for e in errs) if errs else math.nan
            target = entry.targets[metric]
            verdict = "-" if not errs else ("met" if med <= target else "MISSED")
            count = str(len(entry.sim_only)) if i == 0 else ""
            print(f"  {entry.source:<16} {entry.config:<42} {entry.gpu:<9} {metric:<17} "
                  f"{len(errs):3d} {med:7.1%}  {f'<= {target:.0%} {verdict}':<13} {count:>8}")
    for line in (line for entry in table for line in entry.sim_only):
        print(f"SATURATES IN SIMULATION ONLY: {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--compare", action="append", default=[],
                        help="another cost model: NAME[?k=v&k=v] or profile:PATH[?k=v&k=v]")
    parser.add_argument("--quiet", action="store_true", help="only the error summaries")
    parser.add_argument("--tolerance", type=float, default=SATURATION_TOLERANCE,
                        help="relative tolerance of the capacity search (default 1%%)")
    parser.add_argument("--sources", default=",".join(SOURCES),
                        help=f"comma-separated real sources (default {','.join(SOURCES)})")
    parser.add_argument("--kv-cache-tester-dir", type=Path, default=KV_CACHE_TESTER_DIR,
                        help="kv-cache-tester's results folder")
    args = parser.parse_args()
    sources = [name for name in args.sources.split(",") if name]
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown:
        parser.error(f"unknown source {', '.join(unknown)} (valid: {', '.join(SOURCES)})")
    table = []
    if "kubecon" in sources:
        table += kubecon(args, ["default", *args.compare])
    if "kv-cache-tester" in sources:
        table += kv_cache_tester(args.kv_cache_tester_dir)
    if "vllm-ci-latency" in sources:
        table += vllm_ci_latency()
    if "vllm-pr-serving" in sources:
        table += vllm_pr_serving()
    if table:
        combined_table(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
