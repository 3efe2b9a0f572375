"""The cost-model interface: how long one engine step of a batch takes (simulated seconds).

The engine calls a cost model for every batch change: `step_time_s` for a step that has
prefill chunks (mixed with decodes or not), `decode_steps_time_s` for a run of identical
decode-only steps (the fast path of "advance per batch change"), and `transfer_time_s` for
moving KV between tiers; `decode_run_timer` for the steps a decode run has done by a time,
and `describe` for the summary keys a model adds about itself. `CostModelBase` gives every
method but `step_time_s` a default. Implementations register in `COST_MODELS` (the roofline
models in roofline.py and step_roofline.py, sharing roofline_base.py; the calibrated model in
fitted.py). A cost model is pure: same batch, same time; it keeps no state between calls and
never sees the cache or the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from prefixsim.registry import Registry

_set_field = object.__setattr__  # how a frozen dataclass's own __init__ sets its fields


@dataclass(frozen=True, slots=True, init=False)
class PrefillChunk:
    """One sequence's prefill work in a step: `new_tokens` computed now, after
    `cached_tokens` whose KV is already present (a cached prefix or earlier chunks).
    `emits_token`: the chunk finishes its prompt, so the step samples a token for it (only
    then are its logits computed)."""

    new_tokens: int
    cached_tokens: int
    emits_token: bool = True

    def __init__(self, new_tokens: int, cached_tokens: int, emits_token: bool = True) -> None:
        # the dataclass's own __init__, written out: compiled it runs as C, where the
        # generated one stays interpreted (docs/architecture.md "Compiled hot modules")
        _set_field(self, "new_tokens", new_tokens)
        _set_field(self, "cached_tokens", cached_tokens)
        _set_field(self, "emits_token", emits_token)


@dataclass(frozen=True, slots=True, init=False)
class StepBatch:
    """The work of one engine step: prefill chunks, and the context length (tokens whose KV
    is attended to, including the new token's own) of each decoding sequence."""

    prefills: tuple[PrefillChunk, ...] = ()
    decode_contexts: tuple[int, ...] = ()

    def __init__(self, prefills: tuple[PrefillChunk, ...] = (),
                 decode_contexts: tuple[int, ...] = ()) -> None:
        # written out, as PrefillChunk's
        _set_field(self, "prefills", prefills)
        _set_field(self, "decode_contexts", decode_contexts)

    @property
    def num_tokens(self) -> int:
        """Tokens computed in the step (prefill tokens plus one per decode)."""
        return sum(c.new_tokens for c in self.prefills) + len(self.decode_contexts)


@dataclass(frozen=True, slots=True)
class ServingOverheads:
    """Time outside the engine's steps, in seconds (docs/cost-models.md "Serving
    overheads"): `frontend_s` + `frontend_s_per_prompt_token` x prompt tokens from the
    client's send to the request reaching the scheduler (HTTP, tokenisation, block hashing,
    hand-off to the engine), `emission_s` from a token's step end to the
    client (detokenisation, streaming), `idle_wakeup_s` added to the first step a replica
    runs after standing idle. A request is scheduled `frontend_s` after its arrival; its
    first and last tokens reach the client `emission_s` after their steps, so TTFT and E2E
    include both and TPOT neither."""

    frontend_s: float = 0.0
    emission_s: float = 0.0
    idle_wakeup_s: float = 0.0
    frontend_s_per_prompt_token: float = 0.0

    def __post_init__(self) -> None:
        check_finite_nonnegative(self, ("frontend_s", "emission_s", "idle_wakeup_s",
                                        "frontend_s_per_prompt_token"))

    def frontend_delay_s(self, input_tokens: int) -> float:
        """From a request's send to its reaching the scheduler: `frontend_s` plus
        `frontend_s_per_prompt_token` per prompt token (tokenising the text, hashing its
        blocks)."""
        return self.frontend_s + self.frontend_s_per_prompt_token * input_tokens


def check_finite_nonnegative(owner: object, names: Iterable[str]) -> None:
    """ValueError naming the first of the attributes `names` of `owner` that is not a finite
    number >= 0."""
    for name in names:
        value = getattr(owner, name)
        if not 0 <= value < float("inf"):
            raise ValueError(f"{name} must be a finite number >= 0, got {value}")


NO_OVERHEADS = ServingOverheads()

DecodeRunTime = Callable[[tuple[int, ...], int], float]
"""(decode contexts, steps) -> seconds of that many steps of one decode run."""


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

    def decode_run_timer(self, decode_contexts: tuple[int, ...]) -> DecodeRunTime:
        """`decode_steps_time_s` for repeated calls on one run over `decode_contexts` (the
        engine asks how many steps fit in a time); it may precompute what the contexts fix."""
        ...

    def transfer_time_s(self, num_bytes: int, bandwidth_bytes_s: float) -> float:
        """Time to move `num_bytes` of KV over a link of `bandwidth_bytes_s` per direction."""
        ...

    def describe(self) -> dict[str, object]:
        """Keys the model adds to the summary about itself (the fitted model names its
        profile; docs/cost-models.md); none by default."""
        ...


class CostModelBase:
    """The defaults of `CostModel`: no serving overheads, decode runs summed step by step
    and timed by `decode_steps_time_s` itself, transfers at the link's bandwidth, nothing to
    describe. A model subclasses it and writes `step_time_s` and what it computes better."""

    # (no annotations here: the compiled class is an extension type, whose annotated class
    # attributes Cython would take for C fields)
    # name: each model sets its own (a class attribute, the name it registers under)
    serving_overheads = NO_OVERHEADS  # a ServingOverheads; a model may set its own
    # True when a decode step never takes less time than the one before it in a run (the
    # contexts only grow): the engine may then bound a run's progress without timing it
    # (engine/decode_steps.py `RunClock.steps_done_at_most`)
    decode_steps_never_shorten = False

    def step_time_s(self, batch: StepBatch) -> float:
        raise NotImplementedError

    def decode_steps_time_s(self, decode_contexts: Sequence[int], num_steps: int) -> float:
        return sum(self.step_time_s(StepBatch((), tuple(c + k for c in decode_contexts)))
                   for k in range(num_steps))

    def decode_run_timer(self, decode_contexts: tuple[int, ...]) -> DecodeRunTime:
        return self.decode_steps_time_s

    def chunk_time_s(self, new_tokens: int, cached_tokens: int) -> float:
        """A step of one prefill chunk alone (which finishes its prompt): `step_time_s` of
        that batch. A model may compute it without the batch, to the same float."""
        return self.step_time_s(StepBatch((PrefillChunk(new_tokens, cached_tokens),)))

    def transfer_time_s(self, num_bytes: int, bandwidth_bytes_s: float) -> float:
        if bandwidth_bytes_s <= 0:
            raise ValueError(f"bandwidth must be > 0, got {bandwidth_bytes_s}")
        return num_bytes / bandwidth_bytes_s

    def describe(self) -> dict[str, object]:
        return {}


def chunk_time_function(cost_model: CostModel) -> Callable[[int, int], float]:
    """(new_tokens, cached_tokens) -> seconds of that one prefill chunk alone (the cost of a
    miss gdsf weighs, docs/cache-semantics.md R11; the summary's prefill pricing):
    `CostModelBase.chunk_time_s`, or the step of that one-chunk batch for a model without it."""
    if isinstance(cost_model, CostModelBase):
        return cost_model.chunk_time_s
    return lambda new, cached: cost_model.step_time_s(StepBatch((PrefillChunk(new, cached),)))


COST_MODELS: Registry[CostModel] = Registry("cost model")
"""Factories are called as `COST_MODELS.build(name, model=ModelSpec, gpu=GPUSpec, tp=int,
**params)`, params being the `cost_model.params` mapping of the run config."""
