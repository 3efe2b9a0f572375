"""Bench: textbook S3-FIFO and LRU as flat page caches (no radix tree), on a trace's pages.

A reference for prefixsim's s3fifo (prefixsim/cache/s3fifo.py), which can only evict
unlocked leaves: here any page is evictable, each page is one object of its token size, the
token capacity is split 10% small FIFO / 90% main FIFO (2-bit CLOCK) with a ghost of ids
evicted from small (as many tokens as main), and a request's hit is its longest resident
prefix (Part A counting, capped at L - 1). Shows whether a loss to LRU is S3-FIFO's own on
the trace or the tree's.

    .venv/bin/python bench/s3fifo_flat.py [TRACE]
"""

from __future__ import annotations

import sys
from collections import OrderedDict, deque
from pathlib import Path

from prefixsim.trace import Request, load_trace

MOONCAKE = Path(__file__).resolve().parents[2] / "shared/traces/mooncake/conversation_trace.jsonl"


def prefix_hit(request: Request, resident) -> int:
    """Part A hit tokens: the longest resident prefix, capped at L - 1."""
    tokens = request.page_tokens()
    k = 0
    for page_id in request.page_ids:
        if page_id not in resident:
            break
        k += 1
    return min(sum(tokens[:k]), request.input_tokens - 1) if k else 0


def flat_lru(requests: list[Request], capacity: int) -> float:
    pages: OrderedDict[int, int] = OrderedDict()
    used = hits = 0
    for request in requests:
        hits += prefix_hit(request, pages)
        for page_id, size in zip(request.page_ids, request.page_tokens(), strict=True):
            if page_id in pages:
                pages.move_to_end(page_id)
                continue
            while used + size > capacity and pages:
                used -= pages.popitem(last=False)[1]
            pages[page_id] = size
            used += size
    return hits / sum(r.input_tokens for r in requests)


class FlatS3FIFO:
    """Small/main/ghost FIFOs over page objects, evicting any page (no tree)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.small_cap = 0.1 * capacity
        self.ghost_cap = capacity - self.small_cap
        self.small: deque[int] = deque()
        self.main: deque[int] = deque()
        self.ghost: OrderedDict[int, int] = OrderedDict()
        self.where: dict[int, str] = {}  # resident page -> "S" or "M"
        self.freq: dict[int, int] = {}
        self.size: dict[int, int] = {}
        self.small_used = self.main_used = self.ghost_used = 0

    def evict_main(self) -> None:
        while self.main:
            page_id = self.main.popleft()
            if self.where.get(page_id) != "M":
                continue
            if self.freq[page_id] > 0:
                self.freq[page_id] -= 1
                self.main.append(page_id)
                continue
            del self.where[page_id]
            self.main_used -= self.size[page_id]
            return

    def evict_small(self) -> None:
        while self.small:
            page_id = self.small.popleft()
            if self.where.get(page_id) != "S":
                continue
            size = self.size[page_id]
            self.small_used -= size
            if self.freq[page_id] > 0:
                self.where[page_id] = "M"
                self.freq[page_id] = 0
                self.main.append(page_id)
                self.main_used += size
                continue
            del self.where[page_id]
            self.ghost[page_id] = size
            self.ghost_used += size
            while self.ghost_used > self.ghost_cap and len(self.ghost) > 1:
                self.ghost_used -= self.ghost.popitem(last=False)[1]
            return

    def access(self, page_id: int, size: int) -> None:
        if page_id in self.where:
            self.freq[page_id] = min(self.freq[page_id] + 1, 3)
            return
        while self.small_used + self.main_used + size > self.capacity and (
                self.small or self.main):
            if self.small_used >= self.small_cap and self.small:
                self.evict_small()
            else:
                self.evict_main()
        self.size[page_id] = size
        self.freq[page_id] = 0
        if page_id in self.ghost:
            self.ghost_used -= self.ghost.pop(page_id)
            self.where[page_id] = "M"
            self.main.append(page_id)
            self.main_used += size
        else:
            self.where[page_id] = "S"
            self.small.append(page_id)
            self.small_used += size


def flat_s3fifo(requests: list[Request], capacity: int) -> float:
    cache = FlatS3FIFO(capacity)
    hits = 0
    for request in requests:
        hits += prefix_hit(request, cache.where)
        for page_id, size in zip(request.page_ids, request.page_tokens(), strict=True):
            cache.access(page_id, size)
    return hits / sum(r.input_tokens for r in requests)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else MOONCAKE
    if not path.is_file():
        print(f"skipped: {path} is absent")
        return
    requests = load_trace(path)
    print(f"trace: {path.name}: {len(requests):,} requests")
    print(f"{'capacity':>12}{'flat lru':>10}{'flat s3fifo':>13}")
    for capacity in (1_000_000, 4_000_000, 16_000_000):
        print(f"{capacity:>12,}{flat_lru(requests, capacity):>10.4f}"
              f"{flat_s3fifo(requests, capacity):>13.4f}")


if __name__ == "__main__":
    main()
