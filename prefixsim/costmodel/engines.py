"""Serving engines as named choices (`serving.engine`; docs/cost-models.md "Serving
engines"): the CPU time per step and per sequence, the frontend and emission times and
whether the engine overlaps its CPU work with the GPU's, one set of figures per engine
version, each with its source; and the scheduler limits each engine starts with on a given
GPU when the user sets none (`BatchLimits`: running requests and token budget per step).

Owns the figures and the overlap rule's closed form for decode runs; leaves the GPU time to
the cost models (roofline.py, fitted.py), which take an engine's figures as the defaults
of their serving parameters (an explicit `cost_model.params` value wins).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

from prefixsim.presets.specs import GIB, GPUSpec


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """The scheduler limits an engine starts with on one GPU: running requests per replica
    (vLLM's --max-num-seqs) and the token budget per step (--max-num-batched-tokens)."""

    max_num_seqs: int
    max_batched_tokens: int


def _large_not_a100(gpu: GPUSpec) -> bool:
    """vLLM's test for its larger defaults: 70 GiB of memory or more, and not an A100."""
    return gpu.memory_bytes >= 70 * GIB and "a100" not in gpu.name.lower()


def _vllm_budget(default: int, max_num_seqs: int, chunked: bool,
                 max_model_len: int | None) -> int:
    """vLLM's token budget when none is set: `default` with chunked prefill; without it at
    least max_model_len (a whole prompt must fit one step); at most max_num_seqs x
    max_model_len."""
    if max_model_len is None:
        return default
    budget = default if chunked else max(max_model_len, default)
    return min(max_num_seqs * max_model_len, budget)


def vllm_v1_limits(gpu: GPUSpec, max_num_seqs: int | None = None, chunked: bool = True,
                   max_model_len: int | None = None) -> BatchLimits:
    """vLLM V1's API-server defaults: 1024 requests and 8192 tokens on a GPU of 70 GiB or
    more that is not an A100 (H100, H200, B200, MI300X), else 256 and 2048 (`max_num_seqs`
    where set; the budget as `_vllm_budget`)."""
    large = _large_not_a100(gpu)
    seqs = max_num_seqs or (1024 if large else 256)
    return BatchLimits(seqs, _vllm_budget(8192 if large else 2048, seqs, chunked,
                                          max_model_len))


def vllm_v0_limits(gpu: GPUSpec, max_num_seqs: int | None = None, chunked: bool = True,
                   max_model_len: int | None = None) -> BatchLimits:
    """vLLM V0's: 256 requests on every GPU, a 2048-token budget with chunked prefill."""
    seqs = max_num_seqs or 256
    return BatchLimits(seqs, _vllm_budget(2048, seqs, chunked, max_model_len))


def sglang_limits(gpu: GPUSpec, max_num_seqs: int | None = None, chunked: bool = True,
                  max_model_len: int | None = None) -> BatchLimits:
    """SGLang's: at least 2048 running requests (its request pool, clamped to 2048-4096,
    so its KV pool is what limits them) and a chunked-prefill size by GPU memory: 2048
    tokens under 35 GiB, 8192 under 160 GiB, else 16384; without chunking, its
    max_prefill_tokens, 16384."""
    memory = gpu.memory_bytes
    budget = 2048 if memory < 35 * GIB else 8192 if memory < 160 * GIB else 16384
    return BatchLimits(max_num_seqs or 2048, budget if chunked else 16384)


_V1_LIMITS_SOURCE = (
    "vLLM's EngineArgs batch defaults for the OpenAI API server: 8192 tokens on H100/H200 "
    "(vLLM PR 12369, 2025-01), 1024 requests kept there only (PR 16158, 2025-04, reverted "
    "other GPUs to 256), later any GPU of 70 GiB or more but the A100; else 256 and 2048; "
    "without chunked prefill the budget is at least max_model_len")


@dataclass(frozen=True, slots=True)
class ServingEngine:
    """One engine version's figures (seconds) and where they come from."""

    name: str
    step_overhead_s: float
    step_overhead_s_per_seq: float
    frontend_s: float
    frontend_s_per_prompt_token: float
    emission_s: float
    idle_wakeup_s: float
    overlaps_cpu: bool
    source: str
    # Steps of at most this many tokens run as CUDA graphs (their all-reduces at the graph
    # latency, collectives.py): every such step (`graphs_mixed_steps`) or decode-only ones.
    cuda_graph_max_tokens: int = 512
    graphs_mixed_steps: bool = True
    graph_source: str = ""
    # The scheduler limits it starts with on a GPU when none are set (BatchLimits).
    batch_limits: Callable[..., BatchLimits] = vllm_v1_limits
    limits_source: str = _V1_LIMITS_SOURCE

    def params(self) -> dict[str, float]:
        """The figures as serving parameters (names of roofline.ServingParams)."""
        return {"step_overhead_s": self.step_overhead_s,
                "step_overhead_s_per_seq": self.step_overhead_s_per_seq,
                "frontend_s": self.frontend_s,
                "frontend_s_per_prompt_token": self.frontend_s_per_prompt_token,
                "emission_s": self.emission_s, "idle_wakeup_s": self.idle_wakeup_s}

    def graphed(self, num_tokens: int, decode_only: bool) -> bool:
        """Whether a step of `num_tokens` tokens (only decodes or not) runs as CUDA graphs."""
        return num_tokens <= self.cuda_graph_max_tokens and (decode_only
                                                              or self.graphs_mixed_steps)


_V1 = dict(step_overhead_s=0.0005, step_overhead_s_per_seq=0.000005, frontend_s=0.0064,
           frontend_s_per_prompt_token=3.2e-6, emission_s=0.007, idle_wakeup_s=0.006)
_V1_SOURCE = ("vLLM v0.11 (V1 engine) serving Llama-3.1-8B on one H100, the bundled "
              "inference-perf runs; tokenising and hashing per prompt token from Hugging Face "
              "tokenizers' and vLLM's own measurements")

_V1_GRAPHS = dict(cuda_graph_max_tokens=512, graphs_mixed_steps=True, graph_source=(
    "vLLM V1's piecewise CUDA graphs: every step of up to 512 tokens (the largest default "
    "capture size) runs its layers, all-reduces included, as graphs; attention runs between "
    "the pieces"))
_DECODE_GRAPHS = dict(graphs_mixed_steps=False)

ENGINES = MappingProxyType({e.name: e for e in (
    ServingEngine("vllm-v1", **_V1, overlaps_cpu=False, source=_V1_SOURCE, **_V1_GRAPHS),
    ServingEngine("vllm-v1-async", **_V1, **_V1_GRAPHS, overlaps_cpu=True, source=(
        _V1_SOURCE + "; --async-scheduling schedules the next step while the GPU runs this "
        "one (vLLM docs), so a step takes the longer of its CPU and GPU times")),
    ServingEngine("vllm-v0", **{**_V1, "step_overhead_s": 0.0008,
                                "step_overhead_s_per_seq": 0.000043},
                  overlaps_cpu=False, source=(
                      "Vidur's measurements of vLLM of 2024-05 (about v0.4): schedule, input "
                      "preparation, sampling and output processing, 0.8 ms + 43 us per "
                      "sequence; frontend and emission as vllm-v1 (no separate measurement)"),
                  cuda_graph_max_tokens=256, **_DECODE_GRAPHS, graph_source=(
                      "vLLM v0 captured CUDA graphs of decode-only batches of up to 256 "
                      "sequences; prefill and mixed steps ran eagerly"),
                  batch_limits=vllm_v0_limits, limits_source=(
                      "vLLM V0's max_num_seqs default 256; its chunked-prefill budget 2048 "
                      "for the API server (vLLM PR 10544, 2024-11; 512 before)")),
    ServingEngine("sglang", **_V1, overlaps_cpu=True, source=(
        "SGLang's overlap scheduler (default since v0.4, LMSYS blog 2024-12-04: the CPU "
        "schedules the next batch while the GPU runs this one); CPU, frontend and emission "
        "figures as vllm-v1 (no public SGLang measurement of them)"),
        cuda_graph_max_tokens=160, **_DECODE_GRAPHS, graph_source=(
            "SGLang captures CUDA graphs of decode batches of up to cuda_graph_max_bs "
            "sequences (160 by default on large GPUs in v0.4); prefill and extend steps run "
            "eagerly"),
        batch_limits=sglang_limits, limits_source=(
            "SGLang's ServerArgs and ModelRunner: chunked_prefill_size by GPU memory (2048 "
            "under 35 GiB, 8192 under 160 GiB, 16384 above; max_prefill_tokens 16384 "
            "without chunking); max_running_requests from its request pool, 2048-4096 "
            "(token capacity / context length x 512, clamped)")),
)})
DEFAULT_ENGINE = "vllm-v1"


def get_engine(name: str) -> ServingEngine:
    """The engine named `name` (a ValueError listing the valid names otherwise)."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown serving engine {name!r} (valid: "
                         f"{', '.join(ENGINES)})") from None


def overlapped_run_s(first_gpu_s: float, growth_s: float, cpu_s: float,
                     num_steps: int) -> float:
    """Sum over steps j = 0 .. num_steps - 1 of max(first_gpu_s + j * growth_s, cpu_s): a
    decode run whose GPU time grows by `growth_s` a step under a constant CPU time, each
    step as long as the longer of the two (growth_s >= 0)."""
    if num_steps <= 0:
        return 0.0
    if first_gpu_s >= cpu_s:
        below = 0
    elif growth_s * num_steps <= cpu_s - first_gpu_s:
        below = num_steps  # the GPU line stays under the CPU time (or does not grow)
    else:  # steps before the GPU line crosses the CPU time take the CPU time
        below = min(num_steps, math.ceil((cpu_s - first_gpu_s) / growth_s))
    above = num_steps - below
    return (below * cpu_s + above * (first_gpu_s + below * growth_s)
            + growth_s * above * (above - 1) / 2)
