"""Tensor-parallel communication time shared by every cost model.

Each layer all-reduces its attention and MLP outputs (2 per layer) across the `tp` GPUs of a
replica. Activations are bf16 (2 bytes) whatever the weights' dtype. Two models:

- `allreduce_s_per_token`: the bandwidth-only ring formula, 2 (tp - 1) / tp of the
  activations over the per-direction interconnect (the step roofline's; no latency).
- `AllReduceCost`: latency + bytes / bandwidth per call (alpha-beta), the faster of two
  algorithms as vLLM picks them: a one-shot "custom" all-reduce for small messages (latency
  `small_latency_s`, or `graph_latency_s` inside a CUDA graph, where it reads the graph's
  registered buffers in place; `small_bytes_s` of payload per second) and the NCCL ring for
  large ones (`ring_latency_s`, bus bandwidth `ring_bus_bytes_s` carrying 2 (tp - 1) / tp of
  the payload; both by the number of GPUs over NVLink, `nvlink_ring`). Which steps run as
  CUDA graphs is the serving engine's (engines.py).
Defaults and their sources: docs/cost-models.md "Defaults and their sources".

Compute and memory time are not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import log2

from prefixsim.presets import GPUSpec, ModelSpec

ACTIVATION_BYTES = 2  # bf16 activations, also with fp8 weights


def allreduce_s_per_token(model: ModelSpec, gpu: GPUSpec | None, tp: int) -> float:
    """Seconds of all-reduce per token of a step on `tp` GPUs (0 without tensor parallelism)."""
    if tp <= 1 or gpu is None:
        return 0.0
    per_token_bytes = model.num_layers * 2 * model.hidden_size * ACTIVATION_BYTES
    return 2 * (tp - 1) / tp * per_token_bytes / gpu.interconnect_bytes_s


# vLLM's custom all-reduce on H100 NVLink: 8.7-10.1 us for 512 B - 32 KB at TP 2/4/8 and
# about 17.8-27.9 us more per MB (sglang-project/sglang PR #2904, "vllm" table, no CUDA graph).
SMALL_LATENCY_S = 9e-6
SMALL_BYTES_S = 45e9
# The same one-shot kernel inside a CUDA graph: the graph's buffers are registered with the
# all-reduce, so it reads them in place, without the copy into its own buffer and that
# launch; the copy-free one-shot kernel measured 3.7-5.9 us for 512 B - 32 KB at TP 2/4/8
# on H100 (same PR, "custom allreduce" table).
GRAPH_LATENCY_S = 4.5e-6
# NCCL's ring all-reduce over NVLink, per number of GPUs: (latency, bus bandwidth as a
# fraction of the per-direction NVLink bandwidth), fitted to Vidur's all_reduce.csv (h100_dgx)
# over 4-64 MB messages by relative least squares (docs/cost-models.md "Defaults and their
# sources"; tests/costmodel/test_collectives_measured.py refits them). The bus bandwidth
# grows from 2 to 4 GPUs (NCCL's algorithms over the NVSwitch), the latency with the ring.
NVLINK_RING = {2: (19.5e-6, 0.66), 4: (25e-6, 0.79), 8: (35e-6, 0.80)}
# Over the host link (no NVLink) nothing is measured: an assumption kept from the former
# single fit to the NVLink data, 35 us and 0.65 of the link's per-direction bandwidth.
RING_LATENCY_S = 35e-6
RING_BUS_EFFICIENCY = 0.65


def nvlink_ring(tp: int) -> tuple[float, float]:
    """(latency s, bus efficiency) of NCCL's NVLink ring on `tp` GPUs: NVLINK_RING's
    figures, linear in log2(tp) between the measured sizes and held at either end."""
    sizes = sorted(NVLINK_RING)
    if tp <= sizes[0] or tp >= sizes[-1]:
        return NVLINK_RING[sizes[0] if tp <= sizes[0] else sizes[-1]]
    upper = next(size for size in sizes if size >= tp)
    lower = sizes[sizes.index(upper) - 1]
    if upper == tp:
        return NVLINK_RING[tp]
    w = (log2(tp) - log2(lower)) / (log2(upper) - log2(lower))
    (lat0, eff0), (lat1, eff1) = NVLINK_RING[lower], NVLINK_RING[upper]
    return lat0 + w * (lat1 - lat0), eff0 + w * (eff1 - eff0)


@dataclass(frozen=True, slots=True)
class AllReduceCost:
    """Time of one all-reduce of `num_bytes` on `tp` GPUs: the faster of the one-shot
    (`small_*`, NVLink only) and the ring algorithm (see the module docstring)."""

    tp: int
    ring_bus_bytes_s: float
    ring_latency_s: float = RING_LATENCY_S
    small_latency_s: float | None = SMALL_LATENCY_S  # None: no one-shot algorithm (no NVLink)
    small_bytes_s: float = SMALL_BYTES_S
    graph_latency_s: float = GRAPH_LATENCY_S  # the one-shot latency inside a CUDA graph

    @classmethod
    def for_gpu(cls, gpu: GPUSpec, tp: int, **overrides: float | None) -> AllReduceCost:
        """Defaults for `gpu`: with NVLink the ring at `nvlink_ring(tp)` (latency, share of
        the per-direction bandwidth) and the one-shot algorithm; over the host link the ring
        only, at 35 us and 0.65 of its bandwidth."""
        if gpu.nvlink_bytes_s is not None:
            latency, efficiency = nvlink_ring(tp)
            values: dict = {"tp": tp, "ring_latency_s": latency,
                            "ring_bus_bytes_s": efficiency * gpu.nvlink_bytes_s}
        else:
            values = {"tp": tp, "ring_latency_s": RING_LATENCY_S,
                      "ring_bus_bytes_s": RING_BUS_EFFICIENCY * gpu.interconnect_bytes_s,
                      "small_latency_s": None}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def time_s(self, num_bytes: float, graphed: bool = False) -> float:
        """One all-reduce of `num_bytes`; `graphed`: inside a CUDA graph (the one-shot
        kernel's `graph_latency_s` instead of `small_latency_s`)."""
        if self.tp <= 1 or num_bytes <= 0:
            return 0.0
        ring = self.ring_latency_s + 2 * (self.tp - 1) / self.tp * num_bytes / (
            self.ring_bus_bytes_s)
        if self.small_latency_s is None:
            return ring
        latency = self.graph_latency_s if graphed else self.small_latency_s
        return min(ring, latency + num_bytes / self.small_bytes_s)
