"""Bench: vLLM's own latency benchmark (its CI), measured vs simulated.

vLLM's `performance-benchmark` pipeline on Buildkite runs `benchmark_latency.py` on
dedicated GPUs: one batch of 8 prompts of 32 random token ids (dummy weights), 128 output
tokens each (ignore_eos), timed as the mean wall time of one `LLM.generate` over 15
iterations after 5 warm-ups; the latency is the whole batch's (its last request's end).
Three models at the TP sizes vLLM serves them: Llama-3.1-8B on 1 GPU, Llama-3-70B on 4,
Mixtral-8x7B on 2, on A100-SXM4-80GB, H100 (an 8 x H100 node) and H200. Neither 70B at TP4
nor Mixtral at TP2 is a model or TP size any prefixsim default was fitted on, and the step
is decode-bound (127 decode steps at batch 8, contexts of 33-160 tokens): a held-out check
of the decode step (weights, collectives, per-kernel floors, CPU per step).

The figures (`MEASURED`) are transcribed from the three build pages named beside them.
The pages name no vLLM version, but the builds date from late October 2024 (`DATED_BY`;
docs/cost-models.md "Checked, not fitted"), before vLLM released its V1 engine: they ran
V0, so the combined table of bench/sim2real.py simulates them with `RAN_ENGINE`, vllm-v0
(V0's step and CUDA-graph rules). Each test runs with it and with the default serving
engine (vllm-v1), both printed. Simulated as the benchmark
runs: the offline `LLM` class, so no API server (frontend and emission times 0; the
engine's own CPU per step stays), 8 requests at t = 0 with distinct pages (no prefix hit),
the model presets llama-3.1-8b, llama-3.1-70b (Llama-3-70B's geometry) and mixtral-8x7b.

    .venv/bin/python bench/vllm_ci_latency.py
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass

from prefixsim.config import load_config
from prefixsim.pipeline import simulate
from prefixsim.trace.record import Request

BATCH = 8
INPUT_TOKENS = 32
OUTPUT_TOKENS = 128
TARGET = 0.10  # the E2E latency target of the real-run benches
ENGINES = ("vllm-v1", "vllm-v0")
# The engine the builds ran: V0. vLLM PR 9768 ("[perf bench] H200 development", opened
# 2024-10-28) links build 9515 of this pipeline as its working benchmark; the pipeline runs
# after every merge and on every labelled PR's commits (vLLM PR 5073), so builds 9513-9555
# lie within days of it. vLLM's V1 engine was then at most an experimental prototype behind
# VLLM_USE_V1=1: first released as an opt-in alpha on 2025-01-27, the default from v0.8.0;
# in 2025-02 a proposal to run V1 in this pipeline too (vLLM PR 12919) describes its tests
# as running V0.
RAN_ENGINE = "vllm-v0"
DATED_BY = ("https://github.com/vllm-project/vllm/pull/9768",
            "https://github.com/vllm-project/vllm/pull/5073",
            "https://blog.vllm.ai/2025/01/27/v1-alpha-release.html",
            "https://github.com/vllm-project/vllm/pull/12919")

_H100 = "https://buildkite.com/vllm/performance-benchmark/builds/9555"
_H200 = "https://buildkite.com/vllm/performance-benchmark/builds/9513"
_A100 = "https://buildkite.com/vllm/performance-benchmark/builds/9523"


@dataclass(frozen=True)
class Measured:
    """One latency test of one build: the mean batch latency in ms and where it is read."""

    test: str
    model: str  # prefixsim preset
    tp: int
    gpu: str  # prefixsim preset
    latency_ms: float
    source: str


MEASURED = (
    Measured("latency_llama8B_tp1", "llama-3.1-8b", 1, "h100-sxm", 997.542, _H100),
    Measured("latency_llama70B_tp4", "llama-3.1-70b", 4, "h100-sxm", 2444.47, _H100),
    Measured("latency_mixtral8x7B_tp2", "mixtral-8x7b", 2, "h100-sxm", 2326.97, _H100),
    Measured("latency_llama8B_tp1", "llama-3.1-8b", 1, "h200", 834.059, _H200),
    Measured("latency_llama70B_tp4", "llama-3.1-70b", 4, "h200", 2075.08, _H200),
    Measured("latency_mixtral8x7B_tp2", "mixtral-8x7b", 2, "h200", 1921.1, _H200),
    Measured("latency_llama8B_tp1", "llama-3.1-8b", 1, "a100-80g", 1579.27, _A100),
    Measured("latency_llama70B_tp4", "llama-3.1-70b", 4, "a100-80g", 3990.59, _A100),
    Measured("latency_mixtral8x7B_tp2", "mixtral-8x7b", 2, "a100-80g", 3643.84, _A100),
)


def batch_requests() -> list[Request]:
    """The benchmark's batch: 8 prompts at t = 0, each its own page (no shared prefix)."""
    return [Request(i, 0.0, INPUT_TOKENS, OUTPUT_TOKENS, (i + 1,), INPUT_TOKENS)
            for i in range(BATCH)]


def simulated_ms(test: Measured, engine: str) -> float:
    """The simulated batch latency (ms): the last request's end, all arriving at 0."""
    config = load_config(overrides={
        "model.name": test.model, "hardware.gpu": test.gpu, "hardware.tp": test.tp,
        "serving.engine": engine,
        # the offline LLM class: no API server in front of the engine
        "cost_model.params.frontend_s": 0.0,
        "cost_model.params.frontend_s_per_prompt_token": 0.0,
        "cost_model.params.emission_s": 0.0},
        unset=("engine.sample_interval_s",))
    frame = simulate(config, batch_requests()).requests
    done = frame[frame["status"] == "completed"]
    if len(done) != BATCH:
        raise RuntimeError(f"{test.test} on {test.gpu}: {len(done)} of {BATCH} completed")
    return float(done["e2el_ms"].max())


def errors(engine: str) -> list[tuple[Measured, float, float]]:
    """(test, simulated ms, relative error) of every measured test under `engine`."""
    out = []
    for test in MEASURED:
        sim = simulated_ms(test, engine)
        out.append((test, sim, sim / test.latency_ms - 1))
    return out


def main() -> int:
    print(__doc__.split("\n\n")[0])
    print(f"batch {BATCH} x {INPUT_TOKENS} prompt tokens, {OUTPUT_TOKENS} output tokens; "
          "mean batch latency, ms")
    results = {engine: errors(engine) for engine in ENGINES}
    print(f"  {'test':<24} {'gpu':<9} {'measured':>9} "
          + " ".join(f"{engine + (' (ran)' if engine == RAN_ENGINE else ''):>16}"
                     for engine in ENGINES))
    for i, test in enumerate(MEASURED):
        cells = " ".join(f"{results[e][i][1]:8.0f} {results[e][i][2]:+6.1%} " for e in ENGINES)
        print(f"  {test.test:<24} {test.gpu:<9} {test.latency_ms:9.0f} {cells}")
    for engine in ENGINES:
        med = statistics.median(abs(err) for _, _, err in results[engine])
        worst = max(abs(err) for _, _, err in results[engine])
        print(f"  {engine}: median |error| {med:.1%} (target <= {TARGET:.0%}: "
              f"{'met' if med <= TARGET else 'MISSED'}), largest {worst:.1%}")
    print("sources: " + ", ".join(sorted({test.source for test in MEASURED})))
    print(f"the builds ran {RAN_ENGINE} (dated by: {', '.join(DATED_BY)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
