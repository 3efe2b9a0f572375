"""Generator presets: every knob of a synthetic workload, validated, from YAML.

A preset is an arrival process plus one or more workloads (a mix, weighted by share of
requests). A workload describes sessions: which shared prefixes a prompt starts with
(`prefix_layers`, each a Zipf-popular set of variants, or per-request unique content),
retrieved documents (`documents`), messages, answers, think times and turns, and how a
session's next prompt is built (`history: append` = previous prompt + answer + new message;
`rebuild` = prefixes + fresh documents + past turns + new message). Errors name the key.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from prefixsim.errors import (
    FieldError,
    InputError,
    field_of,
    located,
    read_yaml_lines,
    validation_message,
)
from prefixsim.trace.fields import MAX_PAGES_PER_REQUEST, MAX_TOKENS

PRESET_DIR = Path(__file__).resolve().parents[3] / "traces"
PRESETS = ("chat", "agent", "rag", "api-mixed", "shared-prefix")


class Model(BaseModel):
    """Every preset section: frozen, unknown keys refused, numbers finite (an infinite or
    NaN length cannot become a token count; a distribution's `max` may be infinite)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Dist(Model):
    """A distribution of a positive quantity, clipped to [min, max]. Its values are never
    negative (a token count or a time: `value: -700` was clipped to one token)."""

    dist: Literal["fixed", "lognormal", "exponential", "uniform", "choice"]
    value: float | None = Field(None, ge=0)
    values: list[Annotated[float, Field(ge=0)]] | None = None
    weights: list[float] | None = None
    median: float | None = Field(None, gt=0)
    sigma: float | None = Field(None, ge=0)
    mean: float | None = Field(None, gt=0)
    low: float | None = Field(None, ge=0)
    high: float | None = Field(None, ge=0)
    min: float = Field(0.0, ge=0)
    max: float = Field(math.inf, allow_inf_nan=True)

    @model_validator(mode="after")
    def _params(self) -> Dist:
        needs = {"fixed": ("value",), "lognormal": ("median", "sigma"),
                 "exponential": ("mean",), "uniform": ("low", "high"),
                 "choice": ("values", "weights")}[self.dist]
        for name in needs:
            if getattr(self, name) is None:
                raise ValueError(f"{self.dist} needs {name!r}")
        if self.min > self.max:
            raise ValueError("min is above max")
        if self.dist == "choice" and (
            len(self.values) != len(self.weights) or not self.values
            or min(self.weights) < 0 or sum(self.weights) <= 0
        ):
            raise ValueError("choice needs as many non-negative weights as values")
        return self

    def sample(self, rng: np.random.Generator) -> float:
        if self.dist == "fixed":
            value = float(self.value)
        elif self.dist == "lognormal":
            value = float(rng.lognormal(math.log(self.median), self.sigma))
        elif self.dist == "exponential":
            value = float(rng.exponential(self.mean))
        elif self.dist == "uniform":
            value = float(rng.uniform(self.low, self.high))
        else:
            weights = np.array(self.weights) / sum(self.weights)
            value = float(self.values[int(rng.choice(len(self.values), p=weights))])
        return min(max(value, self.min), self.max)

    def tokens(self, rng: np.random.Generator) -> int:
        return max(1, int(round(self.sample(rng))))


class Arrival(Model):
    """Session starts: poisson, gamma (burstiness cv) or diurnal (sinusoidal rate)."""

    process: Literal["poisson", "gamma", "diurnal"] = "poisson"
    rate_per_s: float = Field(1.0, gt=0, description="requests per second (all workloads)")
    cv: float = Field(1.0, ge=1e-3, le=1e3,  # the gamma's shape 1/cv^2 stays a number
                      description="gamma: coefficient of variation of gaps")
    amplitude: float = Field(0.5, ge=0, le=1, description="diurnal: relative swing of rate")
    period_s: float = Field(86400.0, gt=0, description="diurnal: period")


class Layer(Model):
    """One shared prefix segment: `variants` contents, picked with Zipf(`zipf_s`) popularity;
    `variants: 0` = unique content for every request (e.g. a timestamp line)."""

    variants: int = Field(1, ge=0)
    zipf_s: float = Field(1.0, ge=0)
    tokens: Dist


class Documents(Model):
    """Retrieved documents from a shared corpus, in the order retrieved (varying positions)."""

    corpus: int = Field(1000, ge=1)
    zipf_s: float = Field(1.0, ge=0)
    tokens: Dist
    per_request: Dist
    shuffle: bool = Field(True, description="random order (a document at varying positions)")


class Turns(Model):
    """Requests per session: `min` - 1 + a geometric count, with mean `mean`, capped at max."""

    mean: float = Field(1.0, ge=1)
    min: int = Field(1, ge=1)
    max: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _order(self) -> Turns:
        if not self.min <= self.mean or self.min > self.max:
            raise ValueError("needs min <= mean and min <= max")
        return self

    def expected(self) -> float:
        p = 1.0 / (self.mean - self.min + 1)
        cap = self.max - self.min + 1
        return self.min - 1 + ((1 - (1 - p) ** cap) / p if p < 1 else 1.0)

    def sample(self, rng: np.random.Generator) -> int:
        extra = int(rng.geometric(1.0 / (self.mean - self.min + 1)))
        return min(self.min - 1 + extra, self.max)


class Subagents(Model):
    """After each turn, with `probability`, an agent starts a sub-agent session sharing its
    prefix layers; it runs `turns` steps of its own."""

    probability: float = Field(0.0, ge=0, le=1)
    turns: Turns = Turns()


class Workload(Model):
    name: str
    weight: float = Field(1.0, gt=0, description="share of requests")
    prefix_layers: list[Layer] = []
    documents: Documents | None = None
    first_message: Dist
    next_message: Dist
    history: Literal["append", "rebuild"] = "append"
    turns: Turns = Turns()
    think_time_s: Dist
    output_tokens: Dist
    decode_tokens_per_s: float = Field(50.0, gt=0)
    max_context_tokens: int = Field(1_000_000, ge=1, le=MAX_TOKENS)  # a trace's limit
    subagents: Subagents = Subagents()


class Preset(Model):
    name: str
    description: str = ""
    page_size_tokens: int = Field(512, ge=1)
    arrival: Arrival = Arrival()
    workloads: list[Workload] = Field(min_length=1)

    @model_validator(mode="after")
    def _pages_per_request(self) -> Preset:
        for number, workload in enumerate(self.workloads):
            _check_pages(workload.max_context_tokens, self.page_size_tokens,
                         f"workloads.{number}.max_context_tokens")
        return self

    @model_validator(mode="after")
    def _shared_contents(self) -> Preset:
        """Every layer variant and corpus document is drawn and held (with its Zipf weight)
        before the first request, and each pick costs a pass over its layer's weights:
        their total has a budget, MAX_SHARED_CONTENTS (docs/input-rules.md I7)."""
        total = 0
        for number, workload in enumerate(self.workloads):
            sizes = [(f"prefix_layers.{index}.variants", layer.variants)
                     for index, layer in enumerate(workload.prefix_layers)]
            if workload.documents is not None:
                sizes.append(("documents.corpus", workload.documents.corpus))
            for key, size in sizes:
                total += size
                if total > MAX_SHARED_CONTENTS:
                    raise FieldError(f"workloads.{number}.{key}", f"{size:,} brings the "
                                     f"preset's layer variants and corpus documents to "
                                     f"{total:,}, more than {MAX_SHARED_CONTENTS:,} (each is "
                                     "made and held in memory before the first request)")
        return self


class SharedPrefixPreset(Model):
    """A benchmark client's shared-prefix workload (`kind: shared_prefix`; the generator is
    shared_prefix.py): groups of prompts sharing a system prompt, fixed output lengths,
    arrivals at `rate_per_s` (exponential gaps rescaled to fill the run), optionally after a
    warm-up that sends every prompt once."""

    kind: Literal["shared_prefix"]
    name: str
    description: str = ""
    page_size_tokens: int = Field(16, ge=1)
    num_groups: int = Field(10, ge=1)
    prompts_per_group: int = Field(10, ge=1)
    system_prompt_tokens: int = Field(128, ge=1)
    question_tokens: int = Field(64, ge=1)
    output_tokens: int = Field(64, ge=1, le=MAX_TOKENS)
    rate_per_s: float = Field(10.0, gt=0, allow_inf_nan=False)
    warmup: bool = False

    @model_validator(mode="after")
    def _sizes(self) -> SharedPrefixPreset:
        tokens = self.system_prompt_tokens + self.question_tokens
        if tokens > MAX_TOKENS:
            raise FieldError("question_tokens", f"a prompt of system_prompt_tokens + "
                             f"question_tokens = {tokens:,} is over the {MAX_TOKENS:,} a "
                             "request may have")
        _check_pages(tokens, self.page_size_tokens, "page_size_tokens")
        prompts = self.num_groups * self.prompts_per_group
        if prompts > MAX_PROMPTS:
            raise FieldError("prompts_per_group", f"num_groups x prompts_per_group = "
                             f"{prompts:,} prompts, more than {MAX_PROMPTS:,} (each is held "
                             "in memory)")
        return self


MAX_PROMPTS = 1_000_000  # prompts of a shared-prefix preset (built before any request)
# Layer variants and corpus documents of a preset, all workloads together (each drawn, held
# and weighted before any request; a pick costs a pass over its layer's weights).
MAX_SHARED_CONTENTS = 1_000_000


def _check_pages(tokens: int, page_size: int, key: str) -> None:
    """A FieldError on `key` when a prompt of `tokens` would have more pages than a request
    may (MAX_PAGES_PER_REQUEST, as the readers refuse)."""
    pages = -(-tokens // page_size)
    if pages > MAX_PAGES_PER_REQUEST:
        raise FieldError(key, f"a prompt of {tokens:,} tokens in {page_size}-token pages has "
                         f"{pages:,} pages, more than {MAX_PAGES_PER_REQUEST:,} a request may")


def preset_path(name_or_path: str) -> Path:
    """A built-in preset name (traces/<name>.yaml) or a YAML path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        return path
    return PRESET_DIR / f"{name_or_path}.yaml"


def load_preset(name_or_path: str) -> Preset | SharedPrefixPreset:
    path = preset_path(name_or_path)
    if not path.is_file():
        raise InputError(f"no preset {name_or_path!r} (built in: {', '.join(PRESETS)})",
                         file=str(path), field="preset")
    data, lines = read_yaml_lines(path)
    model = SharedPrefixPreset if isinstance(data, dict) and "kind" in data else Preset
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = field_of(first, ".".join(str(part) for part in first["loc"]))
        error = InputError(validation_message(first), file=str(path), field=key)
        raise located(error, str(path), lines) from None
