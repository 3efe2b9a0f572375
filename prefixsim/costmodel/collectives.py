"""Tensor-parallel communication time shared by every cost model.

Each layer all-reduces its attention and MLP outputs (2 per layer) across the `tp` GPUs of a
replica. Activations are bf16 (2 bytes) whatever the weights' dtype. Two models:

- `allreduce_s_per_token`: the bandwidth-only ring formula, 2 (tp - 1) / tp of the
  activations over the per-direction interconnect (the step roofline's; no latency).
- `AllReduceCost`: latency + bytes / bandwidth per call (alpha-beta), the faster of vLLM's
  custom all-reduce (NVLink only, messages under 8 MiB, 2/4/6/8 GPUs) and the NCCL ring.
  The custom kernel runs one-shot (each GPU reads the tp - 1 peers' whole buffers: latency
  `small_latency_s`, or `graph_latency_s` inside a CUDA graph, where it reads the graph's
  registered buffers in place, and `small_bytes_s` read from each peer per second) on 2
  GPUs and below 512 KiB (4 GPUs) or 256 KiB (6-8), else two-shot (a reduce-scatter and an
  all-gather through the peers: `two_shot_latency_s`, 2 (tp - 1) / tp of the payload at
  `two_shot_bytes_s`), as vLLM's kernel picks them. The ring: `ring_latency_s`, bus
  bandwidth `ring_bus_bytes_s` carrying 2 (tp - 1) / tp of the payload, both by the number
  of GPUs and the NVLink generation (`nvlink_ring`). Newer vLLM releases choose among more
  algorithms by measured size limits; the faster of the two stands for that choice. Which
  steps run as CUDA graphs is the serving engine's (engines.py).
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


# vLLM's custom all-reduce on H100 NVLink. Small messages outside a CUDA graph: 8.7-10.1
# us for 512 B - 32 KB at TP 2/4/8 (sglang-project/sglang PR #2904, "vllm" table); inside
# one the kernel reads the graph's registered buffers in place, without the copy into its
# own buffer and that launch (the same PR's copy-free kernel: 3.7-5.9 us). Bytes: vLLM PR
# #24111's H100 device-communicator table at 4 GPUs (hidden 8192, bf16, 0.5-4 MiB): the
# one-shot kernel ("ca_1stage", 10-38 us) is 6 us plus each peer read at 0.85 of the
# per-direction NVLink bandwidth (-5..+2%; 7.4 us against its 7 us on 2 GPUs at 0.5 MiB),
# its 6 us taken as the graphed latency; the two-shot one ("ca_2stage", 17-43 us) is 12 us
# plus 2 (tp - 1) / tp of the payload at 0.45 of it (-12..+10%).
SMALL_LATENCY_S = 9e-6
GRAPH_LATENCY_S = 6e-6
ONE_SHOT_PEER_SHARE = 0.85
TWO_SHOT_LATENCY_S = 12e-6
TWO_SHOT_SHARE = 0.45
# vLLM's kernel choice (csrc/custom_all_reduce.cuh, CustomAllreduce in
# custom_all_reduce.py): world sizes 2, 4, 6, 8; messages under max_size = 8 MiB; one-shot on
# 2 GPUs, or under 512 KiB on up to 4 GPUs, or under 256 KiB on up to 8; two-shot otherwise.
CUSTOM_WORLD_SIZES = (2, 4, 6, 8)
CUSTOM_MAX_BYTES = 8 * 1024 * 1024
_H100_NVLINK_BYTES_S = 450e9  # the defaults of a cost built without a GPU (tests)
SMALL_BYTES_S = ONE_SHOT_PEER_SHARE * _H100_NVLINK_BYTES_S
TWO_SHOT_BYTES_S = TWO_SHOT_SHARE * _H100_NVLINK_BYTES_S


def one_shot_below(tp: int) -> float:
    """The message size (bytes) under which vLLM's custom all-reduce runs one-shot on `tp`
    GPUs (infinity on 2: always)."""
    if tp <= 2:
        return float("inf")
    return 512 * 1024 if tp <= 4 else 256 * 1024


# NCCL's ring all-reduce over NVLink, per number of GPUs: (latency, bus bandwidth as a
# fraction of the per-direction NVLink bandwidth), fitted to Vidur's all_reduce.csv over 4-64
# MB messages by relative least squares (docs/cost-models.md "Defaults and their sources";
# tests/costmodel/test_collectives_measured.py refits them), one table per measured system:
# an H100 DGX (NVLink 4, 450 GB/s per direction; h100_dgx) and an A100 DGX (NVLink 3, 300
# GB/s; a100_dgx, the rows of one node). On the H100 the bus bandwidth grows from 2 to 4
# GPUs (NCCL's algorithms over the NVSwitch), the latency with the ring; the A100's ring
# takes 2-3x the latency at a smaller share of its slower links.
NVLINK_RING = {2: (19.5e-6, 0.66), 4: (25e-6, 0.79), 8: (35e-6, 0.80)}
NVLINK3_RING = {2: (42.5e-6, 0.56), 4: (61e-6, 0.62), 8: (68e-6, 0.58)}
# (per-direction NVLink bandwidth of the measured system, its table): a GPU takes the table
# measured on the link nearest its own (H200, B200, MI300X: the H100's; an assumption
# beyond the two measured generations)
NVLINK_RINGS = ((300e9, NVLINK3_RING), (450e9, NVLINK_RING))
# Over the host link (no NVLink) nothing is measured: an assumption kept from the former
# single fit to the NVLink data, 35 us and 0.65 of the link's per-direction bandwidth.
RING_LATENCY_S = 35e-6
RING_BUS_EFFICIENCY = 0.65


def ring_table(link_bytes_s: float) -> dict[int, tuple[float, float]]:
    """The NVLINK_RINGS table measured on the link bandwidth nearest `link_bytes_s`."""
    return min(NVLINK_RINGS, key=lambda entry: abs(entry[0] - link_bytes_s))[1]


def nvlink_ring(tp: int, link_bytes_s: float = _H100_NVLINK_BYTES_S) -> tuple[float, float]:
    """(latency s, bus efficiency) of NCCL's NVLink ring on `tp` GPUs whose per-direction
    NVLink bandwidth is `link_bytes_s`: `ring_table`'s figures, linear in log2(tp) between
    the measured sizes and held at either end."""
    table = ring_table(link_bytes_s)
    sizes = sorted(table)
    tp = min(max(tp, sizes[0]), sizes[-1])  # held at either end
    if tp in table:
        return table[tp]
    upper = next(size for size in sizes if size > tp)
    lower = sizes[sizes.index(upper) - 1]
    w = (log2(tp) - log2(lower)) / (log2(upper) - log2(lower))
    (lat0, eff0), (lat1, eff1) = table[lower], table[upper]
    return lat0 + w * (lat1 - lat0), eff0 + w * (eff1 - eff0)


@dataclass(frozen=True, slots=True)
class AllReduceCost:
    """Time of one all-reduce of `num_bytes` on `tp` GPUs: the faster of vLLM's custom
    all-reduce (`small_*`, `graph_latency_s`, `two_shot_*`; NVLink only) and the ring (see
    the module docstring)."""

    tp: int
    ring_bus_bytes_s: float
    ring_latency_s: float = RING_LATENCY_S
    small_latency_s: float | None = SMALL_LATENCY_S  # None: no custom all-reduce (no NVLink)
    small_bytes_s: float = SMALL_BYTES_S  # one-shot: bytes read from each peer per second
    graph_latency_s: float = GRAPH_LATENCY_S  # the one-shot latency inside a CUDA graph
    two_shot_latency_s: float = TWO_SHOT_LATENCY_S  # inside a CUDA graph
    two_shot_bytes_s: float = TWO_SHOT_BYTES_S

    @classmethod
    def for_gpu(cls, gpu: GPUSpec, tp: int, **overrides: float | None) -> AllReduceCost:
        """Defaults for `gpu`: with NVLink the ring at `nvlink_ring(tp, its link)` (latency,
        share of the per-direction bandwidth) and the custom all-reduce at its shares of the
        same bandwidth (measured on H100s only: an assumption on other GPUs); over the host
        link the ring only, at 35 us and 0.65 of its bandwidth."""
        if gpu.nvlink_bytes_s is not None:
            link = gpu.nvlink_bytes_s
            latency, efficiency = nvlink_ring(tp, link)
            values: dict = {"tp": tp, "ring_latency_s": latency,
                            "ring_bus_bytes_s": efficiency * link,
                            "small_bytes_s": ONE_SHOT_PEER_SHARE * link,
                            "two_shot_bytes_s": TWO_SHOT_SHARE * link}
        else:
            values = {"tp": tp, "ring_latency_s": RING_LATENCY_S,
                      "ring_bus_bytes_s": RING_BUS_EFFICIENCY * gpu.interconnect_bytes_s,
                      "small_latency_s": None}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def custom_s(self, num_bytes: float, graphed: bool = False) -> float:
        """vLLM's custom all-reduce of `num_bytes` (> 0): one-shot or two-shot by its size
        rule. Outside a CUDA graph the one-shot kernel's latency is `small_latency_s`, and
        the two-shot one pays the same difference (`small_latency_s - graph_latency_s`: the
        copy into its buffer and that launch). Infinity where vLLM would not run it (no
        NVLink, another GPU count, 8 MiB or more)."""
        tp = self.tp
        if (self.small_latency_s is None or tp not in CUSTOM_WORLD_SIZES
                or not num_bytes < CUSTOM_MAX_BYTES):
            return float("inf")
        if num_bytes < one_shot_below(tp):
            latency = self.graph_latency_s if graphed else self.small_latency_s
            return latency + (tp - 1) * num_bytes / self.small_bytes_s
        copy = 0.0 if graphed else max(0.0, self.small_latency_s - self.graph_latency_s)
        return (self.two_shot_latency_s + copy
                + 2 * (tp - 1) / tp * num_bytes / self.two_shot_bytes_s)

    def time_s(self, num_bytes: float, graphed: bool = False) -> float:
        """One all-reduce of `num_bytes`; `graphed`: inside a CUDA graph (the custom
        kernel's graphed latencies)."""
        if self.tp <= 1 or num_bytes <= 0:
            return 0.0
        ring = self.ring_latency_s + 2 * (self.tp - 1) / self.tp * num_bytes / (
            self.ring_bus_bytes_s)
        if self.small_latency_s is None:
            return ring
        return min(ring, self.custom_s(num_bytes, graphed))
