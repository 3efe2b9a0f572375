"""Synthetic production-like workloads: `generate(preset, num_requests, seed)` -> requests.

Sessions start by the preset's arrival process; each picks a workload (by share of
requests), shared prefixes (Zipf), documents, and runs its turns with think times. A
`kind: shared_prefix` preset is a benchmark client's workload instead (shared_prefix.py).
Deterministic: the same preset, count, rate and seed give the same requests.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from prefixsim.errors import InputError
from prefixsim.trace.fields import MAX_TOKENS
from prefixsim.trace.generate.arrivals import session_starts
from prefixsim.trace.generate.model import Corpus, Pager, Row, session_rows
from prefixsim.trace.generate.preset import PRESETS, Preset, SharedPrefixPreset, load_preset
from prefixsim.trace.generate.shared_prefix import SharedPrefix, Stage, shared_prefix_requests
from prefixsim.trace.readers import MAX_SPAN_S
from prefixsim.trace.record import Request

__all__ = ["PRESETS", "Preset", "SharedPrefixPreset", "generate", "load_preset"]


# The most requests one generated trace holds: it is built in memory (about 1 kB a request
# with its page ids); a larger workload is several files or a preset at a higher rate.
MAX_GENERATED_REQUESTS = 10_000_000
# Sessions of one workload whose first prompt is over its max_context_tokens, none having
# fitted, after which the preset is refused (else generating would never end).
UNFIT_SESSIONS = 1000


def generate(preset: Preset | SharedPrefixPreset, num_requests: int, seed: int,
             rate_per_s: float | None = None,
             on_progress: Callable[[int], None] | None = None,
             source: str | None = None) -> list[Request]:
    """`num_requests` requests (the earliest ones) in arrival order, session ids kept;
    `on_progress(n)` is told of the rows each session added (until num_requests); `source`
    (the preset's file) is named by an error in a preset key; more than
    MAX_GENERATED_REQUESTS is refused before anything is made, and a rate so low that the
    requests would span more than a trace may (MAX_SPAN_S) once they are (docs/input-rules.md
    I7)."""
    if num_requests > MAX_GENERATED_REQUESTS:
        raise InputError(f"must be <= {MAX_GENERATED_REQUESTS:,} (the trace is built in "
                         f"memory), got {num_requests:,}", field="--requests")
    # a span too long is the rate's: the caller's when given, else the preset's
    rate_key = "--rate" if rate_per_s is not None else \
        "rate_per_s" if isinstance(preset, SharedPrefixPreset) else "arrival.rate_per_s"
    rate_file = None if rate_per_s is not None else source
    if isinstance(preset, SharedPrefixPreset):
        return _within_span(_shared_prefix(preset, num_requests, seed, rate_per_s),
                            rate_key, rate_file)
    rng = np.random.default_rng(seed)
    pager = Pager(preset.page_size_tokens)
    corpora = [Corpus(i, w, rng) for i, w in enumerate(preset.workloads)]
    shares = np.array([w.weight for w in preset.workloads])
    shares = shares / shares.sum()
    expected = np.array([w.turns.expected() for w in preset.workloads])
    session_p = shares / expected
    mean_turns = 1.0 / session_p.sum()
    session_p = session_p / session_p.sum()
    rate = rate_per_s if rate_per_s is not None else preset.arrival.rate_per_s
    starts = session_starts(preset.arrival, rate / mean_turns, rng)
    rows: list[Row] = []
    session = reported = 0
    fitted = [False] * len(corpora)  # whether a session of the workload made a request
    started = [0] * len(corpora)
    while len(rows) < num_requests:
        if on_progress is not None and session:
            on_progress(min(len(rows), num_requests) - reported)
            reported = min(len(rows), num_requests)
        start_s = next(starts)
        pick = int(rng.choice(len(corpora), p=session_p)) if len(corpora) > 1 else 0
        corpus = corpora[pick]
        workload = corpus.workload
        spawn: list = []
        label = f"s{session}"
        made = session_rows(corpus, pager, rng, session, label, start_s,
                            workload.turns.sample(rng), spawn=spawn)
        rows += made
        _check_outputs(made, pick, source)
        started[pick] += 1
        fitted[pick] = fitted[pick] or bool(made)
        if not fitted[pick] and started[pick] >= UNFIT_SESSIONS:
            raise InputError(
                f"the first prompt of {started[pick]:,} sessions of workload "
                f"{workload.name!r} in a row was longer than {workload.max_context_tokens:,} "
                "tokens: no request would ever be made; raise it or shorten the prompts",
                file=source, field=f"workloads.{pick}.max_context_tokens")
        session += 1
        for number, (sub_start, picks) in enumerate(spawn):
            made = session_rows(corpus, pager, rng, session, f"{label}/a{number}", sub_start,
                                workload.subagents.turns.sample(rng), picks=picks)
            rows += made
            _check_outputs(made, pick, source)
            session += 1
    rows.sort(key=lambda row: row.arrival_s)
    del rows[num_requests:]
    return _within_span([
        Request(index, round(row.arrival_s, 3), row.input_tokens, row.output_tokens,
                row.page_ids, preset.page_size_tokens, row.session)
        for index, row in enumerate(rows)
    ], rate_key, rate_file)


def _check_outputs(rows: list[Row], workload: int, source: str | None) -> None:
    """An InputError when a drawn output length is over what a trace may hold (MAX_TOKENS:
    the readers would refuse the file written)."""
    most = max((row.output_tokens for row in rows), default=0)
    if most > MAX_TOKENS:
        raise InputError(f"drew an output of {most:,} tokens, over the {MAX_TOKENS:,} a "
                         "request may have: give the distribution a max", file=source,
                         field=f"workloads.{workload}.output_tokens")


def _within_span(requests: list[Request], rate_key: str, source: str | None) -> list[Request]:
    """`requests`, or an InputError naming the rate (`rate_key` of `source`) when they span
    more than a trace may (MAX_SPAN_S): a rate so low that the readers would refuse the
    file written (or think times so long)."""
    span_s = requests[-1].arrival_s - requests[0].arrival_s if requests else 0.0
    if span_s > MAX_SPAN_S:
        raise InputError(f"the workload would span {span_s:.3g} s, over the {MAX_SPAN_S:g} s "
                         "a trace may (~31 years): raise the rate", file=source,
                         field=rate_key)
    return requests


def _shared_prefix(preset: SharedPrefixPreset, num_requests: int, seed: int,
                   rate_per_s: float | None) -> list[Request]:
    """One stage of `num_requests` at the rate (after the warm-up probe when asked for)."""
    spec = SharedPrefix(preset.num_groups, preset.prompts_per_group,
                        preset.system_prompt_tokens, preset.question_tokens,
                        preset.output_tokens, preset.page_size_tokens)
    rate = rate_per_s if rate_per_s is not None else preset.rate_per_s
    warm = spec.num_prompts if preset.warmup else 0
    requests = shared_prefix_requests(spec, [Stage(rate, num_requests / rate)], seed,
                                      warmup=preset.warmup)
    return requests[:warm + num_requests]
