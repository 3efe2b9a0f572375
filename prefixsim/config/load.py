"""The `load:` config section: how requests are offered to the simulator (docs/load.md).

`trace` replays the trace's own arrival times (divided by `rate_scale`); `poisson` and
`constant` re-time the trace's requests, in order, at `rate` requests/s (open loop);
`concurrency` and `sessions` are closed loops of `users` users (the engine releases a request
when an earlier one finishes). `stages` run loads back to back. Every key that the chosen
type does not read is refused, naming the dotted key (docs/input-rules.md I8). Whether a
closed loop has a timed run to react to is checked across sections (config/run_config.py).
This module validates only; re-timing is pipeline/load.py's, the closed loops engine/'s.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from prefixsim.config.flags import option
from prefixsim.config.section import Section

LoadType = Literal["trace", "poisson", "constant", "concurrency", "sessions"]
RATE_TYPES = ("poisson", "constant")  # open loops at a rate (pipeline/load.py)
USER_TYPES = ("concurrency", "sessions")  # closed loops of users (engine/)
MAX_RATE = 1e9  # requests/s; keeps 1/rate and the arrival times finite and distinct
# key -> (the types that read it, those that need it unless stages are given, whether
# stages give it instead)
_READERS = {"rate": (RATE_TYPES, RATE_TYPES, True), "users": (USER_TYPES, ("concurrency",), True),
            "think_time_s": (USER_TYPES, (), False)}


class StageConfig(Section):
    """One stage of a staged load: a rate (open loop) or a number of users (closed loop),
    run for `duration_s` seconds after the stage before it (docs/load.md, stages)."""

    rate: float | None = Field(
        None, gt=0, le=MAX_RATE, allow_inf_nan=False,
        description="requests/s in this stage (poisson, constant)")
    users: int | None = Field(
        None, ge=1, description="users in flight in this stage (concurrency, sessions)")
    duration_s: float = Field(gt=0, allow_inf_nan=False, description="seconds the stage runs")

    @model_validator(mode="after")
    def _rate_or_users(self) -> StageConfig:
        if (self.rate is None) == (self.users is None):
            raise ValueError("a stage gives either rate or users (one of them)")
        return self


class LoadConfig(Section):
    """How requests arrive: the trace's times, an open loop at a rate, or a closed loop."""

    type: LoadType = option(
        "trace", "--load", "How requests arrive: trace (the trace's own times), poisson or "
        "constant (at --rate), concurrency or sessions (closed loop of --users; timed runs); "
        "docs/load.md")
    stages: list[StageConfig] | None = Field(
        None, validate_default=True, description="stages run back to back, each a rate or a "
        "number of users for duration_s seconds; null = one stage for the whole trace")
    rate_scale: float = option(
        1.0, "--rate-scale", "Trace load: divide every arrival time by this; 2 = twice the rate",
        gt=0, le=MAX_RATE, allow_inf_nan=False, validate_default=True)
    rate: float | None = option(
        None, "--rate", "Poisson/constant load: requests per second", gt=0, le=MAX_RATE,
        allow_inf_nan=False, validate_default=True)
    users: int | None = option(
        None, "--users", "Concurrency/sessions load: users (or sessions) in flight; for "
        "sessions, all by default", ge=1, validate_default=True)
    think_time_s: float | None = option(
        None, "--think-time", "Concurrency/sessions load: seconds a user waits after a reply; "
        "by default 0 for concurrency, the trace's gaps between turns for sessions", ge=0,
        allow_inf_nan=False, validate_default=True)
    seed: int = option(0, "--load-seed", "Poisson load: seed of the gaps", ge=0)

    @field_validator("stages")
    @classmethod
    def _stages_fit_type(cls, value: list[StageConfig] | None, info: ValidationInfo
                         ) -> list[StageConfig] | None:
        kind = info.data.get("type")
        if value is None or kind is None:
            return value
        if not value:
            raise ValueError("expected at least one stage (or leave stages out)")
        if kind == "trace":
            raise ValueError("the trace load keeps the trace's own times; stages need "
                             "load.type poisson, constant, concurrency or sessions")
        wanted = "rate" if kind in RATE_TYPES else "users"
        for index, stage in enumerate(value):
            if getattr(stage, wanted) is None:
                raise ValueError(f"stage {index}: a {kind} load's stages each give {wanted}")
        return value

    @field_validator("rate_scale")
    @classmethod
    def _scale_for_trace(cls, value: float, info: ValidationInfo) -> float:
        kind = info.data.get("type")
        if value != 1.0 and kind not in (None, "trace"):
            raise ValueError(f"only the trace load is scaled; a {kind} load sets its own pace")
        return value

    @field_validator("rate", "users", "think_time_s")
    @classmethod
    def _read_by_type(cls, value: float | None, info: ValidationInfo) -> float | None:
        kind = info.data.get("type")
        if kind is None or "stages" not in info.data:  # else that key failed and is named
            return value
        readers, needers, staged = _READERS[info.field_name]
        key = f"load.{info.field_name}"
        if value is None:
            if kind in needers and info.data["stages"] is None:
                raise ValueError(f"a {kind} load needs {key} or stages")
        elif kind not in readers:
            hint = "; a trace's own arrivals go faster with load.rate_scale (--rate-scale 2)" \
                if kind == "trace" and info.field_name == "rate" else ""
            raise ValueError(f"read only by {' and '.join(readers)} loads, not {kind}{hint}")
        elif staged and info.data["stages"] is not None:
            raise ValueError(f"the stages give it; leave {key} out")
        return value

    @property
    def closed_loop(self) -> bool:
        """Whether the engine releases requests as earlier ones finish (needs a timed run)."""
        return self.type in USER_TYPES
