"""Bench: a real vLLM V1 serving benchmark from a vLLM pull request, measured vs simulated.

vLLM PR #20759 ("[PERF] PyTorch Symmetric Memory All-Reduce", 2025-07-10) gives, as its
baseline, `vllm bench serve` against `VLLM_USE_V1=1 vllm serve
meta-llama/Llama-3.1-70B-Instruct --disable-log-requests --no-enable-prefix-caching -tp 4`
on B200 GPUs: the sonnet dataset, Poisson arrivals at 1, 5 and 10 requests/s for 60 s
(60 x QPS prompts), mean and median TTFT and TPOT per rate (`MEASURED`, transcribed from
the PR's description). Neither the GPU (B200) nor the model at TP 4 under load is one any
prefixsim default was fitted on: a held-out check of the V1 engine's mixed
prefill/decode steps at tensor parallelism, where TTFT and TPOT both depend on the
all-reduces and the chunked-prefill steps.

Simulated as the benchmark ran: `vllm bench serve`'s sonnet defaults (550 input tokens,
150 output tokens, each request its own pages: prefix caching was off), Poisson arrivals
seeded 0, the `llama-3.1-70b` preset on 4 x `b200`, the default serving engine (vllm-v1)
and its limits on that GPU, defaults otherwise. Left as it is: the sonnet prompts' exact
lengths (about 550 tokens with the chat template) and whether answers stopped before 150
tokens (the benchmark does not force `ignore_eos` for sonnet) are not in the PR.

    .venv/bin/python bench/vllm_pr_serving.py
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefixsim.config import load_config
from prefixsim.pipeline import simulate
from prefixsim.trace.record import Request

SOURCE = "https://github.com/vllm-project/vllm/pull/20759"
MODEL, GPU, TP = "llama-3.1-70b", "b200", 4
INPUT_TOKENS, OUTPUT_TOKENS = 550, 150  # vllm bench serve's sonnet defaults
DURATION_S = 60
PAGE = 16
METRICS = ("mean_ttft", "median_ttft", "mean_tpot", "median_tpot")
TARGETS = {"mean_ttft": 0.15, "median_ttft": 0.15, "mean_tpot": 0.10, "median_tpot": 0.10}


@dataclass(frozen=True)
class Stage:
    """One rate of the PR's baseline table: ms per metric."""

    qps: float
    mean_ttft: float
    median_ttft: float
    mean_tpot: float
    median_tpot: float


MEASURED = (
    Stage(1, 45.021, 44.248, 12.880, 12.866),
    Stage(5, 48.574, 46.048, 14.120, 14.084),
    Stage(10, 55.482, 51.188, 17.674, 17.710),
)


def requests(qps: float, seed: int = 0) -> list[Request]:
    """60 x `qps` Poisson arrivals, each prompt its own pages (no prefix hit)."""
    count = int(DURATION_S * qps)
    times = np.cumsum(np.random.default_rng(seed).exponential(1.0 / qps, count))
    pages = -(-INPUT_TOKENS // PAGE)
    return [Request(i, float(t), INPUT_TOKENS, OUTPUT_TOKENS,
                    tuple(range(i * pages + 1, (i + 1) * pages + 1)), PAGE)
            for i, t in enumerate(times)]


def simulated_frame(stage: Stage) -> pd.DataFrame:
    """The simulated rows of one rate (every status)."""
    config = load_config(overrides={"model.name": MODEL, "hardware.gpu": GPU,
                                    "hardware.tp": TP},
                         unset=("engine.sample_interval_s",))
    return simulate(config, requests(stage.qps)).requests


def figures(frame: pd.DataFrame) -> dict[str, float]:
    """The figures (ms) of a rate's rows, as `vllm bench serve` computes them over the
    completed requests (the rows' `tpot_ms`: (E2E - TTFT) / (output tokens - 1) each)."""
    done = frame[frame["status"] == "completed"]
    return {"mean_ttft": float(done["ttft_ms"].mean()),
            "median_ttft": float(done["ttft_ms"].median()),
            "mean_tpot": float(done["tpot_ms"].mean()),
            "median_tpot": float(done["tpot_ms"].median())}


def result(stage: Stage) -> tuple[pd.DataFrame, dict[str, float], dict[str, float]]:
    """(simulated rows, figures, relative error per metric) of one rate."""
    frame = simulated_frame(stage)
    sim = figures(frame)
    return frame, sim, {m: sim[m] / getattr(stage, m) - 1 for m in METRICS}


def errors() -> list[tuple[Stage, dict[str, float], dict[str, float]]]:
    """(stage, simulated figures, relative error per metric) of every measured rate; every
    request must complete (the real server kept up)."""
    out = []
    for stage in MEASURED:
        frame, sim, err = result(stage)
        done = int((frame["status"] == "completed").sum())
        if done != int(DURATION_S * stage.qps):
            raise RuntimeError(f"{stage.qps} req/s: {done} completed")
        out.append((stage, sim, err))
    return out


def main() -> int:
    print(__doc__.split("\n\n")[0])
    print(f"{MODEL} on {TP} x {GPU}, {INPUT_TOKENS} in / {OUTPUT_TOKENS} out, Poisson, "
          f"{DURATION_S} s a rate; measured / simulated ms (error)")
    results = errors()
    for stage, sim, err in results:
        cells = " | ".join(f"{m} {getattr(stage, m):6.1f} {sim[m]:6.1f} {err[m]:+5.0%}"
                           for m in METRICS)
        print(f"  {stage.qps:4g} req/s: {cells}")
    for m in METRICS:
        med = statistics.median(abs(err[m]) for _, _, err in results)
        print(f"  {m}: median |error| {med:.1%} (target <= {TARGETS[m]:.0%}: "
              f"{'met' if med <= TARGETS[m] else 'MISSED'})")
    print(f"source: {SOURCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
