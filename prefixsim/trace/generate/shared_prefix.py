"""The shared-prefix workload that serving benchmark clients send, as requests.

inference-perf's `sharedPrefix` data (and vLLM's `prefix_repetition` benchmark dataset) build
`num_groups` groups of `prompts_per_group` prompts: every prompt of a group starts with the
group's system prompt and ends with a question of its own, and every request asks for
exactly `output_tokens` tokens (`ignore_eos`). Prompts are drawn round-robin from one
shuffled list, so request i uses prompt i mod (groups x prompts): whole prompts recur every
`groups x prompts` requests and their system prompts every request of the group.

Arrivals come in stages (`Stage`: a rate and a duration), as a load sweep runs them; within a
stage the gaps are exponential draws rescaled so that the stage's `rate x duration` requests
fill it (how inference-perf spaces a constant-rate stage). `warmup` first sends every prompt
once (the saturation probe a sweep starts with), so the stages meet a warm cache.

Token counts are what the server sees after tokenisation: a benchmark's nominal lengths (128
system + 64 question tokens) come out a little longer once retokenised (the bundled vLLM runs
measured 203 tokens on average), so callers pass the measured lengths. Pages are chained
ids of `page_size_tokens` tokens; a page that straddles the system prompt and the question
belongs to its prompt alone. Leaves out: prompt-length jitter, chat templates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from prefixsim.trace.generate.model import SHARED, Pager
from prefixsim.trace.record import Request


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    """The prompts of a shared-prefix benchmark (token counts as the server tokenises them)."""

    num_groups: int = 10
    prompts_per_group: int = 10
    system_prompt_tokens: int = 128
    question_tokens: int = 64
    output_tokens: int = 64
    page_size_tokens: int = 16

    def __post_init__(self) -> None:
        for name in ("num_groups", "prompts_per_group", "system_prompt_tokens",
                     "question_tokens", "output_tokens", "page_size_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")

    @property
    def num_prompts(self) -> int:
        return self.num_groups * self.prompts_per_group

    @property
    def input_tokens(self) -> int:
        return self.system_prompt_tokens + self.question_tokens

    def prompt_pages(self) -> list[tuple[int, ...]]:
        """Chained page ids of every prompt, prompt g * prompts_per_group + q being question
        q of group g (shared pages interned, so equal prefixes get equal ids)."""
        pager = Pager(self.page_size_tokens)
        return [
            pager.pages([((SHARED, "system", group), self.system_prompt_tokens),
                         ((SHARED, "question", group, question), self.question_tokens)])
            for group in range(self.num_groups)
            for question in range(self.prompts_per_group)
        ]


@dataclass(frozen=True, slots=True)
class Stage:
    """`rate_per_s` requests per second for `duration_s` seconds."""

    rate_per_s: float
    duration_s: float

    def __post_init__(self) -> None:
        if not 0 < self.rate_per_s < float("inf") or not 0 < self.duration_s < float("inf"):
            raise ValueError(f"a stage needs a finite rate and duration > 0, got {self}")

    @property
    def num_requests(self) -> int:
        return max(1, round(self.rate_per_s * self.duration_s))


def stage_arrivals(stage: Stage, start_s: float, rng: np.random.Generator) -> np.ndarray:
    """Arrival times of one stage: exponential gaps rescaled to fill [start, start + duration)."""
    gaps = rng.exponential(1.0, stage.num_requests + 1)
    return start_s + np.cumsum(gaps)[:-1] / gaps.sum() * stage.duration_s


def shared_prefix_requests(spec: SharedPrefix, stages: Sequence[Stage], seed: int,
                           warmup: bool = True, gap_s: float = 10.0) -> list[Request]:
    """Requests of `stages` run back to back (`gap_s` apart), after a warm-up that sends every
    prompt once, 10 ms apart, when `warmup`. Session ids name the stage and the group
    (`warmup/g3`, `stage0/g7`, ...), so a caller can pick one stage's requests out of the
    records."""
    rng = np.random.default_rng(seed)
    pages = spec.prompt_pages()
    order = rng.permutation(spec.num_prompts)
    rows: list[tuple[float, int, str]] = []
    now = 0.0
    if warmup:
        spacing = 0.01
        rows += [(i * spacing, int(order[i]), "warmup") for i in range(spec.num_prompts)]
        now = spec.num_prompts * spacing + gap_s
    for number, stage in enumerate(stages):
        times = stage_arrivals(stage, now, rng)
        rows += [(float(t), int(order[i % spec.num_prompts]), f"stage{number}")
                 for i, t in enumerate(times)]
        now += stage.duration_s + gap_s
    per_group = spec.prompts_per_group
    return [
        Request(index, round(arrival, 6), spec.input_tokens, spec.output_tokens, pages[prompt],
                spec.page_size_tokens, f"{stage}/g{prompt // per_group}")
        for index, (arrival, prompt, stage) in enumerate(rows)
    ]
