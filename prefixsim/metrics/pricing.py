"""Prompt-caching economics: price a run's tokens like a hosted API does
(docs/cache-semantics.md R17).

Per request, with L prompt tokens, h cached (hit) tokens and o output tokens:
  read   = billable cached tokens: 0 below the provider's minimum cacheable prompt, else
           the hit rounded down to the provider's step above that minimum (OpenAI: 1,024 +
           k * 128); a prompt shorter than the minimum is neither read nor written.
  write  = L - read for a cacheable prompt (the prompt is cached up to its end, as with a
           cache breakpoint at the last block), priced by the run's TTL class: the 1-hour
           write price when the TTL exceeds 5 minutes, else the 5-minute price.
  cost   = (L - read - write) * input + write * write_price + read * read_price + o * output.
The no-cache baseline prices every prompt token as uncached input. Prices are USD per
million tokens. For self-hosted serving, `prefill_savings` gives the GPU-seconds of prefill
the cache saves, from a cost model. Not here: batch discounts, long-context tiers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from prefixsim.costmodel import CostModel, chunk_time_function
from prefixsim.errors import InputError, located, read_yaml_lines

FIVE_MINUTES_S = 300.0


@dataclass(frozen=True, slots=True)
class Pricing:
    """A provider's prompt-caching price list (USD per million tokens) and rules."""

    name: str
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    cache_read_usd_per_mtok: float
    cache_write_usd_per_mtok: float
    cache_write_1h_usd_per_mtok: float
    min_cacheable_tokens: int = 0
    cache_step_tokens: int = 1


# List prices as published by the providers: Anthropic Claude Sonnet 4 and Haiku 3.5
# (writes 1.25x input for 5 min, 2x for 1 h; reads 0.1x; minimum 1,024 / 2,048 tokens);
# OpenAI GPT-4.1 (automatic caching from 1,024 tokens in 128-token steps, reads 0.25x,
# no write surcharge and no 1 h class: the 1 h price equals input).
PRESETS: dict[str, Pricing] = {
    "anthropic": Pricing("anthropic", 3.0, 15.0, 0.30, 3.75, 6.0, 1024, 1),
    "anthropic-haiku": Pricing("anthropic-haiku", 0.80, 4.0, 0.08, 1.0, 1.6, 2048, 1),
    "openai": Pricing("openai", 2.0, 8.0, 0.50, 2.0, 2.0, 1024, 128),
}


@dataclass(frozen=True, slots=True)
class PriceSource:
    """Where and when a preset's prices were read: the provider's page and the month
    (YYYY-MM) its list prices were taken from. Providers change prices: check the page."""

    model: str
    as_of: str
    url: str


PRESET_SOURCES: dict[str, PriceSource] = {
    "anthropic": PriceSource("Claude Sonnet 4", "2025-06",
                             "https://www.anthropic.com/pricing#api"),
    "anthropic-haiku": PriceSource("Claude Haiku 3.5", "2025-06",
                                   "https://www.anthropic.com/pricing#api"),
    "openai": PriceSource("GPT-4.1", "2025-06", "https://openai.com/api/pricing/"),
}


# Bounds of a pricing file's values: a price past this many USD per million tokens is a
# typo (and 1e308 would overflow a run's cost to inf); a token count must fit in 64 bits.
MAX_USD_PER_MTOK = 1e6
MAX_PRICED_TOKENS = (1 << 63) - 1


def _check_price_field(value: object, key: str, integral: bool, path: Path) -> None:
    """A price is a finite number >= 0 and a token count an integer >= 0, never a boolean
    or a string (docs/input-rules.md I4: `.nan` would price every run at NaN, `true` at 1)."""
    kind = (int,) if integral else (int, float)
    limit = MAX_PRICED_TOKENS if integral else MAX_USD_PER_MTOK
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value) \
            or not 0 <= value <= limit:
        expected = "an integer" if integral else "a finite number"
        raise InputError(f"must be {expected} in [0, {limit:g}], got {value!r:.40}",
                         file=str(path), field=key)


def load_pricing(spec: str) -> Pricing:
    """A preset name, or a YAML file with the Pricing fields (name optional)."""
    if spec in PRESETS:
        return PRESETS[spec]
    path = Path(spec)
    if not path.is_file():
        raise InputError(
            f"unknown pricing {spec!r} (presets: {', '.join(sorted(PRESETS))}, or a YAML file)",
            field="cache.pricing",
        )
    data, lines = read_yaml_lines(path)
    try:
        return _pricing_from(data or {}, path)
    except InputError as exc:  # named with its line
        raise located(exc, str(path), lines) from None


def _pricing_from(data: Any, path: Path) -> Pricing:
    if not isinstance(data, dict):
        raise InputError("expected a mapping of pricing fields", file=str(path))
    known = {f.name for f in fields(Pricing)}
    for key in data:
        if key not in known:
            raise InputError("unknown key", file=str(path), field=str(key))
    data.setdefault("name", path.stem)
    try:
        pricing = Pricing(**data)
    except TypeError as exc:
        raise InputError(str(exc), file=str(path)) from None
    for f in fields(Pricing):
        if f.name != "name":
            _check_price_field(getattr(pricing, f.name), f.name, f.type == "int", path)
    if pricing.cache_step_tokens < 1:
        raise InputError("must be >= 1", file=str(path), field="cache_step_tokens")
    return pricing


def billed_tokens(
    input_tokens: np.ndarray, cached_tokens: np.ndarray, pricing: Pricing
) -> tuple[np.ndarray, np.ndarray]:
    """(read, write) billable tokens per request under the provider's caching rules."""
    minimum = pricing.min_cacheable_tokens
    step = pricing.cache_step_tokens
    cacheable = input_tokens >= max(minimum, 1)
    over = np.maximum(cached_tokens - minimum, 0)
    read = np.where(cacheable & (cached_tokens >= minimum), minimum + over // step * step, 0)
    read = np.minimum(read, cached_tokens)
    write = np.where(cacheable, input_tokens - read, 0)
    return read, write


def pricing_summary(
    requests: pd.DataFrame, pricing: Pricing, ttl_s: float | None | Sequence[float | None]
) -> dict[str, object]:
    """cost_total_usd, cost_no_cache_usd and the billed token counts of a run; `ttl_s` is
    the run's TTL or one per request (its class's), which picks the write price."""
    inputs = requests["input_tokens"].to_numpy(dtype=np.int64)
    cached = requests["cached_tokens"].to_numpy(dtype=np.int64)
    outputs = requests["output_tokens"].to_numpy(dtype=np.int64)
    read, write = billed_tokens(inputs, cached, pricing)
    ttls = ttl_s if isinstance(ttl_s, Sequence) else [ttl_s] * len(inputs)
    long_ttl = np.array([t is not None and t > FIVE_MINUTES_S for t in ttls], dtype=bool)
    write_usd = np.where(long_ttl, pricing.cache_write_1h_usd_per_mtok,
                         pricing.cache_write_usd_per_mtok) @ write if len(write) else 0.0
    uncached = inputs.sum() - read.sum() - write.sum()
    output_usd = outputs.sum() * pricing.output_usd_per_mtok
    total = (uncached * pricing.input_usd_per_mtok + write_usd
             + read.sum() * pricing.cache_read_usd_per_mtok + output_usd) / 1e6
    no_cache = (inputs.sum() * pricing.input_usd_per_mtok + output_usd) / 1e6
    source = PRESET_SOURCES.get(pricing.name) if PRESETS.get(pricing.name) == pricing else None
    return {
        "cost_pricing": pricing.name,
        "cost_prices_as_of": (f"{source.model} list prices of {source.as_of} ({source.url})"
                              if source is not None else "user-supplied price list"),
        "cost_total_usd": float(total),
        "cost_no_cache_usd": float(no_cache),
        "cost_saved_usd": float(no_cache - total),
        "cost_cache_read_tokens": int(read.sum()),
        "cost_cache_write_tokens": int(write.sum()),
        "cost_uncached_input_tokens": int(uncached),
    }


def prefill_time_s(
    cost_model: CostModel, new_tokens: int, cached_tokens: int, chunk_tokens: int,
    chunk_times: dict[tuple[int, int], float] | None = None,
) -> float:
    """One request's prefill alone: `new_tokens` after `cached_tokens`, in chunks.
    `chunk_times`: a memo of (chunk tokens, context tokens) -> step time shared by calls on
    one cost model (a cost model is pure; chunks at the same place recur across prompts,
    every prompt's first chunks without a cache); the sum is the same, in the same order."""
    if chunk_times is None:
        chunk_times = {}
    chunk_s = chunk_time_function(cost_model)
    total = 0.0
    done = 0
    while done < new_tokens:
        n = min(chunk_tokens, new_tokens - done)
        key = (n, cached_tokens + done)
        step_s = chunk_times.get(key)
        if step_s is None:
            chunk_times[key] = step_s = chunk_s(n, cached_tokens + done)
        total += step_s
        done += n
    return total


def prefill_times_s(
    cost_model: CostModel, new_tokens: np.ndarray, cached_tokens: np.ndarray,
    chunk_tokens: int, chunk_times: dict[tuple[int, int], float] | None = None,
) -> np.ndarray:
    """`prefill_time_s` of many requests at once (int arrays of new and cached tokens):
    bit for bit the same seconds, each request's chunk times added in the same order, with
    the chunks at the same place taken together (one cost-model call per distinct
    (chunk tokens, context tokens) that `chunk_times` does not hold yet)."""
    if chunk_times is None:
        chunk_times = {}
    chunk_s = chunk_time_function(cost_model)
    new = np.asarray(new_tokens, dtype=np.int64)
    cached = np.asarray(cached_tokens, dtype=np.int64)
    totals = np.zeros(len(new), dtype=np.float64)
    done = 0
    live = np.flatnonzero(new > 0)
    while len(live):
        sizes, contexts, inverse = _distinct_pairs(np.minimum(chunk_tokens, new[live] - done),
                                                   cached[live] + done)
        steps = []
        for key in zip(sizes.tolist(), contexts.tolist(), strict=True):
            step_s = chunk_times.get(key)
            if step_s is None:
                chunk_times[key] = step_s = chunk_s(*key)
            steps.append(step_s)
        totals[live] += np.array(steps, dtype=np.float64)[inverse]
        done += chunk_tokens
        live = live[new[live] > done]
    return totals


def _distinct_pairs(first: np.ndarray, second: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (first, second) pairs of two non-empty arrays of non-negative integers,
    as two arrays (in sorted order), and each element's index among them: one int64 key a
    pair where it fits, else a sort of rows."""
    span = int(second.max()) + 1
    if (int(first.max()) + 1) * span < 2**62:
        keys, inverse = np.unique(first * span + second, return_inverse=True)
        return keys // span, keys % span, inverse.ravel()
    rows, inverse = np.unique(np.stack([first, second], axis=1), axis=0, return_inverse=True)
    return rows[:, 0], rows[:, 1], inverse.ravel()


def prefill_savings(
    requests: pd.DataFrame, cost_model: CostModel, num_gpus: int, chunk_tokens: int
) -> dict[str, float]:
    """GPU-seconds of prefill with the cache's hits and without any cache (self-hosted).

    Each request's prefill is timed alone (no batching with others), chunked like the
    scheduler (`chunk_tokens` per step), on `num_gpus` GPUs (tensor parallel): a figure for
    comparing caches, not a serving simulation (the timed mode is that).
    """
    lengths = requests["input_tokens"].to_numpy(dtype=np.int64)
    cached = requests["cached_tokens"].to_numpy(dtype=np.int64)
    chunk_times: dict[tuple[int, int], float] = {}

    def total_s(new: np.ndarray, done: np.ndarray) -> float:
        """Sum over requests in order (as a loop would add them: a running sum, which
        `cumsum` is), each distinct (new, cached) pair timed once."""
        if len(new) == 0:
            return 0.0
        pair_new, pair_done, inverse = _distinct_pairs(new, done)
        times = prefill_times_s(cost_model, pair_new, pair_done, chunk_tokens, chunk_times)
        return float(np.cumsum(times[inverse])[-1])

    with_cache = total_s(lengths - cached, cached)
    without = total_s(lengths, np.zeros_like(lengths))
    return {
        "prefill_gpu_s": with_cache * num_gpus,
        "prefill_gpu_s_no_cache": without * num_gpus,
        "prefill_gpu_s_saved": (without - with_cache) * num_gpus,
    }
