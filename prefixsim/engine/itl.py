"""`ItlSegments`: the inter-token gaps a timed run produced, kept by column.

Each step, decode run or stall the engine times adds one (gap seconds, tokens produced)
pair (engine/replica.py); metrics/serving.py weighs the ITL distribution by the tokens. A
long run adds millions, so the pairs live in two arrays (16 bytes a pair) rather than as
tuples (about 100), and reach numpy without a copy. To readers it is a sequence of
(gap, tokens) tuples.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence

import numpy as np


class ItlSegments(Sequence):
    """(gap seconds, tokens) pairs in the order added: `append`, then `arrays()`."""

    __slots__ = ("gaps", "tokens")

    def __init__(self, pairs: Iterable[tuple[float, int]] = ()) -> None:
        self.gaps = array("d")
        self.tokens = array("q")
        for gap, tokens in pairs:
            self.append((gap, tokens))

    def append(self, pair: tuple[float, int]) -> None:
        gap, tokens = pair
        self.gaps.append(gap)
        self.tokens.append(tokens)

    def extend(self, other: ItlSegments) -> None:
        self.gaps.extend(other.gaps)
        self.tokens.extend(other.tokens)

    def __len__(self) -> int:
        return len(self.gaps)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return (self.gaps[index], self.tokens[index])

    def __iter__(self) -> Iterator[tuple[float, int]]:
        return zip(self.gaps, self.tokens, strict=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(gaps float64, tokens int64), views of the arrays (no copy)."""
        if not len(self.gaps):
            return np.zeros(0, np.float64), np.zeros(0, np.int64)
        return (np.frombuffer(self.gaps, dtype=np.float64),
                np.frombuffer(self.tokens, dtype=np.int64))
