"""Request classes: per-class TTL and priority, and the minimum cacheable prompt (R12, R16).

Hosted APIs give each request a cache lifetime (Anthropic: 5 minutes, or 1 hour when asked;
OpenAI: about 5-10 minutes) and cache nothing below a minimum prompt (1,024 or 2,048 tokens).
A class is picked per request by the first rule whose conditions all hold: a regular
expression on the session id, a minimum prompt length, and a seeded share of sessions (a
hash of the session id, or of the request id without one, so a session stays in one class).
Requests matching no rule get the cache's default TTL and priority 0. A request shorter than
`min_cacheable_tokens` bypasses the cache: no match, no insert, no hit; with prefix caching
off (`enabled=False`, vLLM's --no-enable-prefix-caching) every request does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from prefixsim.cache.session_regex import SessionPattern
from prefixsim.trace import Request


@dataclass(frozen=True, slots=True)
class RequestClass:
    """One class and the conditions that select it (None = no condition)."""

    name: str
    ttl_s: float | None = None  # None: the cache's default TTL
    priority: int = 0
    session_regex: str | None = None
    min_input_tokens: int | None = None
    share: float | None = None  # fraction of sessions, 0 < share <= 1


@dataclass(frozen=True, slots=True)
class RequestRule:
    """What the cache does for one request."""

    cacheable: bool
    ttl_s: float | None
    priority: int
    class_name: str


DEFAULT_RULE = RequestRule(True, None, 0, "default")
BYPASS_RULE = RequestRule(False, None, 0, "uncacheable")


# A class's session_regex sees at most this many leading characters of a session id, so the
# cost of one match is bounded whatever the trace holds (and each match is timed:
# session_regex.py).
MAX_SESSION_ID_CHARS = 256


def unit_hash(key: str, seed: int) -> float:
    """A reproducible number in [0, 1) for `key` (no global RNG, no wall clock)."""
    digest = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class CacheRules:
    """Per-request cache rules from classes and the minimum cacheable prompt."""

    def __init__(
        self, classes: Sequence[RequestClass] = (), min_cacheable_tokens: int = 0, seed: int = 0,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled  # False: prefix caching off, every request bypasses the cache
        self.classes = list(classes)
        self.min_cacheable_tokens = min_cacheable_tokens
        self.seed = seed
        self._patterns = [
            None if c.session_regex is None else SessionPattern(c.session_regex)
            for c in self.classes
        ]

    @property
    def needs_ttl(self) -> bool:
        """Whether some class sets its own TTL (the cache then needs a TTL rule)."""
        return any(c.ttl_s is not None for c in self.classes)

    def for_request(self, request: Request) -> RequestRule:
        if not self.enabled or request.input_tokens < self.min_cacheable_tokens:
            return BYPASS_RULE
        for cls, pattern in zip(self.classes, self._patterns, strict=True):
            if pattern is not None and (
                request.session_id is None
                or not pattern.search(request.session_id[:MAX_SESSION_ID_CHARS])
            ):
                continue
            if cls.min_input_tokens is not None and request.input_tokens < cls.min_input_tokens:
                continue
            if cls.share is not None:
                key = request.session_id or f"request:{request.request_id}"
                if unit_hash(key, self.seed) >= cls.share:
                    continue
            return RequestRule(True, cls.ttl_s, cls.priority, cls.name)
        return DEFAULT_RULE
