"""FIFO: evict the leaf that was inserted first; hits do not change the order."""

from __future__ import annotations

from itertools import count

from prefixsim.cache.page import Page
from prefixsim.cache.policy import POLICIES, Policy


@POLICIES.register("fifo")
class FIFO(Policy):
    """First in, first out by insertion order (a re-inserted page starts at the back)."""

    def __init__(self) -> None:
        self._order: dict[int, int] = {}
        self._next = count()

    def key(self, page: Page) -> float:
        return self._order[page.page_id]

    def on_insert(self, page: Page) -> None:
        self._order[page.page_id] = next(self._next)

    def on_evict(self, page: Page) -> None:
        self._order.pop(page.page_id, None)
