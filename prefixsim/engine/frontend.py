"""The serving frontend between a client's send and the scheduler (docs/cost-models.md
"Serving overheads"): a fixed time (HTTP, hand-off to the engine) and the prompt's
tokenising and block hashing, which vLLM's API server runs on one thread
(a single-worker executor), so concurrent long prompts queue for it.

Owns that queue only: one tokenizer per replica's API server, requests taking the first
free one in the order they are sent. Leaves the fixed and per-token times to the cost
model's `ServingOverheads`.
"""

from __future__ import annotations

import heapq

from prefixsim.costmodel import ServingOverheads


class FrontendQueue:
    """When each request sent reaches the scheduler, with `servers` tokenizers."""

    __slots__ = ("frontend_s", "per_token_s", "free_at")

    def __init__(self, overheads: ServingOverheads, servers: int) -> None:
        self.frontend_s = overheads.frontend_s
        self.per_token_s = overheads.frontend_s_per_prompt_token
        self.free_at = [0.0] * max(1, servers)  # a heap of the tokenizers' free times

    def reaches_scheduler_s(self, sent_s: float, input_tokens: int) -> float:
        """A request of `input_tokens` sent at `sent_s` (not before any earlier send) is
        tokenised on the first free tokenizer, then handed over `frontend_s` later."""
        start = max(sent_s, self.free_at[0])
        done = start + self.per_token_s * input_tokens
        heapq.heapreplace(self.free_at, done)
        return done + self.frontend_s
