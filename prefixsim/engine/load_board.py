"""LoadBoard: bounds on the load of every replica a router chooses among, kept as each
replica's counters change, so that a router reads the whole fleet's bounds as two lists in
replica order instead of asking each replica (docs/architecture.md "Routers").

For replica `slot`, `lows[slot]` is the load at the end of its decode run in progress and
`highs[slot]` a load it has not exceeded since its last completed step boundary: both equal
its exact load when no run is in progress. Replica writes them (`Replica._post_load`)
whenever its outstanding-token counter or its decode run changes; a router that reads a
replica's exact load may lower `highs[slot]` to it (the load only falls until the replica
next changes, and that change writes the entry again). The board owns no routing rule and
no replica state; it never reads a clock. Its two lists are made once (a replica holds
them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class LoadBoard:
    """Per-replica load bounds of one routed list (`replicas`, in the router's order)."""

    __slots__ = ("highs", "lows", "replicas")

    def __init__(self, replicas: Sequence[Any]) -> None:
        self.replicas = replicas
        self.lows = [0] * len(replicas)
        self.highs = [0] * len(replicas)
        for slot, replica in enumerate(replicas):
            replica.attach_load_board(self, slot)

    def serves(self, replicas: Sequence[Any]) -> bool:
        """Whether the board's slots are `replicas`' positions (the very list it was made
        over): a router handed another sequence must read the replicas themselves."""
        return replicas is self.replicas
