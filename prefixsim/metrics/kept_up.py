"""Whether a timed run's fleet kept up with the load it was offered (docs/load.md, "kept
up"; docs/results.md): the rule `prefixsim capacity` judges each probe by
(capacity/verdict.py), and the summary keys and the warning a run reports it with.

The rule: at least KEPT_UP_SHARE of the requests completed (the others were rejected: a
prompt plus its output longer than a replica's KV pool or the model's context), and, under
an open-loop load (the trace's own times, or a rate), the queue did not grow: the mean TTFT
of the last quarter of the requests in arrival order is at most GROWTH_LIMIT times the
first quarter's.
On a finite trace every admitted request is served in the end, so a fleet that falls behind
shows as a growing queue, not as missing completions. A closed loop (users) cannot build a
backlog: there only the completions count. A staged load changes its rate on purpose, so
its queue is judged stage by stage (each rate stage on its own rows: metrics/stages.py),
and the run kept up when every stage did (`with_stages`).

This module reads a requests frame and counts; it runs and writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

KEPT_UP_SHARE = 0.98
GROWTH_LIMIT = 2.0
KEPT_UP_KEYS = ("kept_up", "ttft_growth", "kept_up_warning")


def ttft_growth(requests: pd.DataFrame) -> float:
    """Last quarter's mean TTFT / the first quarter's, in arrival order (0 when unknown:
    fewer than four requests, or no TTFT in the first quarter; infinite when the last
    quarter got no first token at all)."""
    if "ttft_ms" not in requests or "arrival_s" not in requests:
        return 0.0
    ttft = requests.sort_values("arrival_s", kind="stable")["ttft_ms"].to_numpy(dtype=float)
    quarter = len(ttft) // 4
    if quarter == 0:
        return 0.0
    first, last = _mean(ttft[:quarter]), _mean(ttft[-quarter:])
    if not np.isfinite(last):
        return math.inf  # the last quarter never got a first token
    return float(last / first) if first > 0 else 0.0


def _mean(values: np.ndarray) -> float:
    """Mean of the finite values (NaN when there are none), without numpy's warning."""
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if len(finite) else math.nan


def rejection_limit(pool_tokens: int | None,
                    max_model_len: int | None) -> tuple[str, str]:
    """(what a rejected request's prompt plus output was longer than, what would serve it):
    the smaller of the model's context and one replica's KV pool decides."""
    if max_model_len is not None and (pool_tokens is None or max_model_len < pool_tokens):
        return (f"the model's context (max_model_len) of {max_model_len:,} tokens",
                "a model with a longer context would serve them (or --max-model-len, where "
                "the model supports more)")
    pool = f" of {pool_tokens:,} tokens" if pool_tokens is not None else ""
    return (f"a replica's KV pool{pool}", "a larger KV pool would serve them (a larger GPU, "
            "more GPUs per replica: --tp, or more --cache-tokens)")


def kept_up_keys(requests: pd.DataFrame, open_loop: bool, pool_tokens: int | None,
                 max_model_len: int | None = None) -> dict[str, Any]:
    """`kept_up`, `ttft_growth` (open loop only), `rejected_warning` when any request was
    rejected (how many, the limit they were over, the longest rejected prompt) and
    `kept_up_warning` when the fleet did not keep up (what failed, with the figures, and
    what to try). `requests`: a timed run's frame (`status`, `arrival_s`, `ttft_ms`,
    `input_tokens`); a request is rejected when its prompt plus output is over the smaller
    of `pool_tokens` (one replica's KV pool) and `max_model_len` (the model's context)."""
    total = len(requests)
    rejected = requests["status"] == "rejected" if total else None
    num_rejected = int(rejected.sum()) if total else 0
    keys: dict[str, Any] = {}
    reasons = []
    if num_rejected:
        longest = int(requests.loc[rejected, "input_tokens"].max())
        limit, remedy = rejection_limit(pool_tokens, max_model_len)
        keys["rejected_warning"] = (
            f"{num_rejected:,} of {total:,} requests were rejected: a prompt plus its output "
            f"longer than {limit} (the longest rejected prompt has {longest:,} tokens); no "
            "latency figure counts them")
        if total - num_rejected < KEPT_UP_SHARE * total:
            reasons.append(f"only {(total - num_rejected) / total:.1%} of the requests "
                           f"completed (at least {KEPT_UP_SHARE:.0%} keep up); {remedy}")
    if open_loop:
        growth = ttft_growth(requests)
        keys["ttft_growth"] = growth
        if growth > GROWTH_LIMIT:
            reasons.append(f"the queue grew: the last quarter's mean TTFT is {growth:,.1f}x "
                           "the first quarter's, so the latencies measure a backlog, not "
                           "the server; more replicas, GPUs per replica (--tp) or a faster "
                           "GPU would keep up (`prefixsim capacity --search replicas` finds "
                           "the fewest replicas that do)")
    keys["kept_up"] = not reasons
    if reasons:
        keys["kept_up_warning"] = "the fleet did not keep up: " + "; and ".join(reasons)
    return keys


def with_stages(keys: dict[str, Any], stages: list[dict[str, Any]]) -> dict[str, Any]:
    """A staged run's `kept_up` keys (`kept_up_keys` of the whole run, judged on its
    completions only) with its stages' verdicts: it kept up when every stage did, and the
    warning names the stages that did not, each with its offered rate and why (its queue's
    growth, or its share of rejected requests)."""
    behind = stages_behind(stages)
    if not behind:
        return keys
    keys = dict(keys)
    whose = "those stages'" if len(behind) > 1 else "its"
    reason = (f"the fleet fell behind in {named_stages(behind)}, so {whose} latencies "
              "measure a backlog, not the server")
    earlier = keys.get("kept_up_warning")
    keys["kept_up"] = False
    keys["kept_up_warning"] = (f"{earlier}; and {reason}" if earlier
                               else f"the fleet did not keep up: {reason}")
    return keys


def stages_behind(stages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries of `stages` (a summary's) whose stage did not keep up."""
    return [stage for stage in stages if stage.get("kept_up") is False]


def named_stages(behind: list[dict[str, Any]]) -> str:
    """`stages 1 (4 req/s: the queue grew 3.2x), 3 (...)`: stages that did not keep up,
    each with its rate and why."""
    return f"stage{'s' if len(behind) > 1 else ''} {', '.join(map(_stage_reason, behind))}"


def _stage_reason(stage: dict[str, Any]) -> str:
    """`3 (60 req/s: the queue grew 10.7x)`: a stage that did not keep up, and why."""
    rate = f"{stage['rate']:g} req/s: " if stage.get("rate") is not None else ""
    growth = stage.get("ttft_growth")
    if growth is not None and growth > GROWTH_LIMIT:
        return f"{stage['stage']} ({rate}the queue grew {growth:,.1f}x)"
    rejected = 1 - (stage.get("completed") or 0) / max(1, stage.get("num_requests") or 0)
    return f"{stage['stage']} ({rate}{rejected:.1%} of its requests rejected)"
