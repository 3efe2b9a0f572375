"""The immutable request record every trace reader produces.

A request is an arrival time, its prompt as a chain of page ids, and its output length.
Page ids are *chained*: an id names the whole prefix up to and including its page, so equal
ids mean equal prefixes. This module does not read files or know about any format.
"""

from __future__ import annotations

from dataclasses import dataclass

_set_field = object.__setattr__  # how a frozen dataclass's own __init__ sets its fields


@dataclass(frozen=True, slots=True, init=False)
class Request:
    """One request of a trace.

    `page_ids[i]` names the prefix ending with page i; every page holds `page_size_tokens`
    tokens except the last, which holds the remainder (`input_tokens - P*(n-1)`).
    `namespace` (tenant, model, LoRA or cache salt; docs/cache-semantics.md R2) is kept as read;
    pages of different namespaces never match because `read_trace` gives each (namespace, id)
    its own id when a trace sets any (trace/namespaces.py).
    """

    request_id: int
    arrival_s: float
    input_tokens: int
    output_tokens: int
    page_ids: tuple[int, ...]
    page_size_tokens: int
    session_id: str | None = None
    namespace: str | None = None

    def __init__(self, request_id: int, arrival_s: float, input_tokens: int,
                 output_tokens: int, page_ids: tuple[int, ...], page_size_tokens: int,
                 session_id: str | None = None, namespace: str | None = None) -> None:
        # the dataclass's own __init__, written out: compiled it runs as C, where the
        # generated one stays interpreted (docs/architecture.md "Compiled hot modules")
        _set_field(self, "request_id", request_id)
        _set_field(self, "arrival_s", arrival_s)
        _set_field(self, "input_tokens", input_tokens)
        _set_field(self, "output_tokens", output_tokens)
        _set_field(self, "page_ids", page_ids)
        _set_field(self, "page_size_tokens", page_size_tokens)
        _set_field(self, "session_id", session_id)
        _set_field(self, "namespace", namespace)

    @property
    def num_pages(self) -> int:
        return len(self.page_ids)

    def page_tokens(self) -> list[int]:
        """Token count of each page: P for all but the last, the remainder for the last."""
        n = len(self.page_ids)
        if n == 0:
            return []
        size = self.page_size_tokens
        return [size] * (n - 1) + [self.input_tokens - size * (n - 1)]

    def matchable_pages(self, prompt_tokens: int) -> int:
        """Pages a timed admission may match: those ending at or before token L - 1 of a
        prompt of `prompt_tokens`, so the cap is page-aligned (docs/cache-semantics.md R3; P=1: L -
        1 pages). After a preemption the prompt also holds generated tokens, which no page
        names, so every page of the input may match. The one place the timed cap is written:
        the replica's admission, its router view and the router's stale view all use it."""
        if self.input_tokens <= prompt_tokens - 1:
            return len(self.page_ids)
        return (prompt_tokens - 1) // self.page_size_tokens

    def prefix_tokens(self, num_pages: int) -> int:
        """Tokens of the first `num_pages` pages (before any cap)."""
        if num_pages <= 0:
            return 0
        if num_pages >= len(self.page_ids):
            return self.input_tokens
        return num_pages * self.page_size_tokens
