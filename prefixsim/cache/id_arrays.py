"""Reads and edits of the page-id arrays the compressed cache keeps (`array("q")`: a
segment's ids, a request's, a block of requests'; cache/segment_tree.py).

Each function is one array operation, written here as Python. Compiled (docs/architecture.md
"Compiled hot modules"), a module that cimports `id_arrays.pxd` runs the inline C body the
`.pxd` gives each of them instead: the same operation on the array's buffer (Cython's
`cpython.array`), with no int object per id read, no slice object per run copied, and no
bounds or type check. So callers pass arrays of 64-bit ids (`is_id_array`) and positions
within them; `tests/cache/test_id_arrays.py` checks the two bodies agree. This module owns no
state and is itself never compiled.
"""

from __future__ import annotations

from array import array


def is_id_array(ids: object) -> bool:
    """Whether `ids` is an array the other functions take: exactly `array`, typecode "q"."""
    return type(ids) is array and ids.typecode == "q"


def id_count(ids: array) -> int:
    """The number of ids."""
    return len(ids)


def id_at(ids: array, i: int) -> int:
    """The id at position `i` (0 <= i < len(ids))."""
    return ids[i]


def id_run(ids: array, start: int, stop: int) -> array:
    """A new array of `ids[start:stop]` (0 <= start <= stop <= len(ids))."""
    return ids[start:stop]


def same_ids(ids: array, start: int, other: array, length: int) -> bool:
    """Whether `ids[start:start + length]` equals `other[:length]` (both that long)."""
    return ids[start:start + length] == (other if length == len(other) else other[:length])


def drop_first(ids: array, k: int) -> None:
    """Remove the first `k` ids in place (0 <= k <= len(ids))."""
    del ids[:k]


def drop_last(ids: array, k: int) -> None:
    """Remove the last `k` ids in place (0 <= k <= len(ids))."""
    del ids[len(ids) - k:]
