"""GDSF: GreedyDual-Size-Frequency, cost-aware: value = frequency x recompute cost per byte.

The cost of losing a page is the prefill time to recompute its tokens. Per token, prefill
costs the linear layers (constant) plus attention over the tokens before it (linear in the
position), so a page deep in a long prompt is dearer per byte than a page at its head.
With the run's cost model (`bind_prefill_time`, done by the simulator) the cost per token at a
position is the time of a COST_CHUNK_TOKENS-token prefill chunk after that many cached
tokens, divided by the chunk (compute-bound, so weights are amortised as in a busy server).
Without one the proxy is `1 + position_tokens / ATTENTION_EQUAL_TOKENS`, where
ATTENTION_EQUAL_TOKENS is the context length at which a token's attention FLOPs equal its
linear-layer FLOPs: 2 * P / (4 * layers * q_heads * head_dim) ~ 26,700 for Llama-3.1-8B
(docs/cost-models.md roofline: P ~ 7.0e9, 32 layers, 32 heads, head dim 128).
Positions assume full pages before this one (depth x page tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prefixsim.cache.aging import GreedyDualPolicy
from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES

if TYPE_CHECKING:
    from prefixsim.cache.segment_tree import Segment

ATTENTION_EQUAL_TOKENS = 26_700.0
PrefillTime = Callable[[int, int], float]
COST_CHUNK_TOKENS = 2048


def proxy_cost_per_token(position_tokens: float) -> float:
    """Relative prefill cost of one token at `position_tokens` (1.0 at the head)."""
    return 1.0 + position_tokens / ATTENTION_EQUAL_TOKENS


@POLICIES.register("gdsf")
class GDSF(GreedyDualPolicy):
    """Key = L + (hits + 1) * cost / bytes; cost/bytes = recompute cost per token."""

    def __init__(self, cost_per_token_s: Callable[[float], float] | None = None) -> None:
        super().__init__()
        self.cost_per_token = cost_per_token_s or proxy_cost_per_token
        self._memo: dict[float, float] = {}

    def bind_prefill_time(self, prefill_time_s: PrefillTime) -> None:
        """Price recomputation with the run's cost model: `prefill_time_s(new_tokens,
        cached_tokens)` is the seconds of one prefill chunk (the cache does not import the
        cost model; the simulator passes this function)."""

        def cost_per_token_s(position_tokens: float) -> float:
            return prefill_time_s(COST_CHUNK_TOKENS, int(position_tokens)) / COST_CHUNK_TOKENS

        self.cost_per_token = cost_per_token_s
        self._memo.clear()

    # A page deeper in a prompt is dearer per token (attention), so along a compressed
    # cache's segment the value only grows: its last page's is the segment's key.
    node_uniform = True
    # block mode on segments: each page's priority kept as set, each page queued
    run_valued = True

    def value(self, page: Page) -> float:
        # tokens before the page: its ancestors are full pages (a partial page is a last one)
        position = 0 if page.parent is None else page.depth * page.parent.num_tokens
        return (page.num_hits + 1) * self._cost(position)

    def segment_value(self, segment: Segment) -> float:
        """`value` of the segment's last page: its parent is the page before it in the
        segment, or the parent segment's last page."""
        size = len(segment.ids)
        depth = segment.depth + size - 1
        if size > 1:
            position = depth * segment.page_tokens
        elif segment.parent is None:
            position = 0
        else:
            position = depth * segment.parent.last_tokens
        return (segment.num_hits + 1) * self._cost(position)

    def run_values(self, depth: int, count: int, page_tokens: int, parent_tokens: int,
                   num_hits: int) -> list[float]:
        """`value` of `count` pages from `depth` on, each hit `num_hits` times, the first
        below a page of `parent_tokens` (0: none), the rest below pages of `page_tokens`
        (cache/policy.py `run_values`)."""
        values = [(num_hits + 1) * self._cost(depth * parent_tokens)]
        for i in range(1, count):
            values.append((num_hits + 1) * self._cost((depth + i) * page_tokens))
        return values

    def _cost(self, position: int) -> float:
        cost = self._memo.get(position)
        if cost is None:
            cost = self._memo[position] = self.cost_per_token(position)
        return cost
