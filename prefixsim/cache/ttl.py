"""TTL as a cache rule (docs/cache-semantics.md R12), independent of the eviction policy.

Sliding TTL (default, as hosted APIs do): deadline = last access + ttl. Fixed TTL:
deadline = creation + ttl. A page is alive through its deadline and gone after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class TTLMode(StrEnum):
    SLIDING = "sliding"
    FIXED = "fixed"


@dataclass(frozen=True, slots=True)
class TTLRule:
    """How long an unlocked page may stay resident without being used."""

    ttl_s: float
    mode: TTLMode = TTLMode.SLIDING

    def __post_init__(self) -> None:
        if not self.ttl_s >= 0:
            raise ValueError(f"ttl_s must be >= 0, got {self.ttl_s}")

    @property
    def refreshes_on_access(self) -> bool:
        return self.mode is TTLMode.SLIDING
