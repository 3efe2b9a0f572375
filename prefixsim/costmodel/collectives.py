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
  the payload). Which steps run as CUDA graphs is the serving engine's (engines.py).
Defaults and their sources: docs/cost-models.md "Defaults and their sources".

Compute and memory time are not here.
"""

from __future__ import annotations

from dataclasses import dataclass

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
# NCCL ring on H100 DGX (Vidur's all_reduce.csv, h100_dgx): ~35 us for small messages and a
# bus bandwidth of about 0.65 x the per-direction NVLink bandwidth for large ones.
RING_LATENCY_S = 35e-6
RING_BUS_EFFICIENCY = 0.65


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
        """Defaults for `gpu`: the ring over NVLink (else the host link) at 0.65 of its
        per-direction bandwidth; the one-shot algorithm only with NVLink."""
        values: dict = {
            "tp": tp,
            "ring_bus_bytes_s": RING_BUS_EFFICIENCY * gpu.interconnect_bytes_s,
            "small_latency_s": SMALL_LATENCY_S if gpu.nvlink_bytes_s is not None else None,
        }
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
