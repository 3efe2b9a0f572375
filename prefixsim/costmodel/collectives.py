"""Tensor-parallel communication time shared by every cost model.

Each layer all-reduces its attention and MLP outputs (2 per layer) across the `tp` GPUs of a
replica, a ring all-reduce moving 2 (tp - 1) / tp of the activations over the interconnect.
Activations are bf16 (2 bytes) whatever the weights' dtype. Compute and memory time are not here.
"""

from __future__ import annotations

from prefixsim.presets import GPUSpec, ModelSpec

ACTIVATION_BYTES = 2  # bf16 activations, also with fp8 weights


def allreduce_s_per_token(model: ModelSpec, gpu: GPUSpec | None, tp: int) -> float:
    """Seconds of all-reduce per token of a step on `tp` GPUs (0 without tensor parallelism)."""
    if tp <= 1 or gpu is None:
        return 0.0
    per_token_bytes = model.num_layers * 2 * model.hidden_size * ACTIVATION_BYTES
    return 2 * (tp - 1) / tp * per_token_bytes / gpu.interconnect_bytes_s
