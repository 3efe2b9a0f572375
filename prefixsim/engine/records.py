"""Frozen per-request records the engines emit; metrics.py turns them into DataFrames."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CacheOnlyRecord:
    """What cache-only replay observed for one request (no timing)."""

    request_id: int
    session_id: str | None
    status: str
    arrival_s: float
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cached_tokens_host: int = 0  # of cached_tokens, loaded from host DRAM (R15)
    cached_tokens_disk: int = 0  # of cached_tokens, loaded from disk
