"""The cost-model interface: how long one engine step of a batch takes (simulated seconds).

The engine calls a cost model for every batch change: `step_time_s` for a step that has
prefill chunks (mixed with decodes or not), `decode_steps_time_s` for a run of identical
decode-only steps (the fast path of "advance per batch change"), and `transfer_time_s` for
moving KV between tiers. Implementations register in `COST_MODELS` (the roofline model in
roofline.py; the calibrated model in fitted.py). A cost model is pure: same batch, same time;
it keeps no state between calls and never sees the cache or the scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from prefixsim.registry import Registry


@dataclass(frozen=True, slots=True)
class PrefillChunk:
    """One sequence's prefill work in a step: `new_tokens` computed now, after
    `cached_tokens` whose KV is already present (a cached prefix or earlier chunks).
    `emits_token`: the chunk finishes its prompt, so the step samples a token for it (only
    then are its logits computed)."""

    new_tokens: int
    cached_tokens: int
    emits_token: bool = True


@dataclass(frozen=True, slots=True)
class StepBatch:
    """The work of one engine step: prefill chunks, and the context length (tokens whose KV
    is attended to, including the new token's own) of each decoding sequence."""

    prefills: tuple[PrefillChunk, ...] = ()
    decode_contexts: tuple[int, ...] = ()

    @property
    def num_tokens(self) -> int:
        """Tokens computed in the step (prefill tokens plus one per decode)."""
        return sum(c.new_tokens for c in self.prefills) + len(self.decode_contexts)


@dataclass(frozen=True, slots=True)
class ServingOverheads:
    """Time outside the engine's steps, in seconds (docs/cost-models.md "Serving
    overheads"): `frontend_s` from the client's send to the request reaching the scheduler
    (HTTP, tokenisation, hand-off to the engine), `emission_s` from a token's step end to the
    client (detokenisation, streaming), `idle_wakeup_s` added to the first step a replica
    runs after standing idle. A request is scheduled `frontend_s` after its arrival; its
    first and last tokens reach the client `emission_s` after their steps, so TTFT and E2E
    include both and TPOT neither."""

    frontend_s: float = 0.0
    emission_s: float = 0.0
    idle_wakeup_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("frontend_s", "emission_s", "idle_wakeup_s"):
            value = getattr(self, name)
            if not 0 <= value < float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")


NO_OVERHEADS = ServingOverheads()


class CostModel(Protocol):
    """Step times of one replica (a model on `tp` GPUs); all times in simulated seconds."""

    name: str
    serving_overheads: ServingOverheads
    """Time spent outside the steps (the engine adds it; NO_OVERHEADS: none)."""

    def step_time_s(self, batch: StepBatch) -> float:
        """Time of one engine step over `batch` (> 0 for a non-empty batch).

        Called once per step that contains prefill chunks; decode-only stretches go through
        `decode_steps_time_s`. An empty batch takes 0.
        """
        ...

    def decode_steps_time_s(self, decode_contexts: Sequence[int], num_steps: int) -> float:
        """Total time of `num_steps` consecutive decode-only steps of an unchanging batch.

        Step k (k = 0 .. num_steps-1) has contexts `c + k` for each c in `decode_contexts`.
        Must equal the sum of `step_time_s(StepBatch((), contexts + k))` over k (to float
        rounding); implementations may compute it in closed form or vectorised.
        """
        ...

    def transfer_time_s(self, num_bytes: int, bandwidth_bytes_s: float) -> float:
        """Time to move `num_bytes` of KV over a link of `bandwidth_bytes_s` per direction."""
        ...


COST_MODELS: Registry[CostModel] = Registry("cost model")
"""Factories are called as `COST_MODELS.build(name, model=ModelSpec, gpu=GPUSpec, tp=int,
**params)`, params being the `cost_model.params` mapping of the run config."""
