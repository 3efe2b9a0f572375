"""Validation of one record's fields, shared by the readers: each failure is an InputError
naming the field and the `where` (file, line) it was given."""

from __future__ import annotations

import json
import math

from prefixsim.errors import InputError

# Larger lengths are certainly corrupt: 16,777,216 tokens per request (the longest contexts
# models offer are ~10M tokens).
MAX_TOKENS = 1 << 24
# Page ids a reader may make up for one request (lengths-only and RAGPulse traces make one
# per page: 2^30 tokens at 16 tokens a page once took 6.7 GB), or a Parquet row group may
# average a row.
MAX_PAGES_PER_REQUEST = 1 << 20
# Budgets of a whole trace, checked before the memory is taken (docs/input-rules.md I7) and
# raised by `--max-trace-pages` (trace.max_pages): hash ids a Parquet file holds (8 bytes
# each in one array: 256 MiB) and page ids a reader makes up (a Python int in a tuple each,
# ~40 bytes: 160 MiB). A 9 kB Parquet file can declare 2^28 ids; 25 lengths-only rows of
# 2^24 tokens once took 1.3 GB.
MAX_TRACE_PAGES = 1 << 25
MAX_MADE_UP_PAGES = 1 << 22
# Larger time values are corrupt in any unit a reader takes (epoch microseconds are ~1.7e15).
MAX_TIME = 1e16


def decode_json_line(raw: str, where: dict) -> dict:
    """One JSON object from one line."""
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        message = getattr(exc, "msg", "too deeply nested")
        raise InputError(f"not valid JSON ({message})", **where) from None
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", **where)
    return obj


def require(obj: dict, key: str, where: dict) -> object:
    if key not in obj or obj[key] is None:
        raise InputError("missing field", field=key, **where)
    return obj[key]


def as_int(value: object, key: str, where: dict, minimum: int = 0,
           maximum: int = MAX_TOKENS, allow_string: bool = False) -> int:
    """An integer (or an integral float) within [minimum, maximum]; a numeric string only
    with `allow_string` (CSV cells are text; in JSON "10" is a wrong type, docs/input-rules.md
    I6)."""
    if isinstance(value, str) and allow_string:
        try:
            value = float(value.strip()) if "." in value or "e" in value.lower() \
                else int(value.strip())
        except ValueError:
            raise InputError(f"expected an integer, got {value!r}", field=key, **where) from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"expected an integer, got {value!r}", field=key, **where)
    if isinstance(value, float):
        if not value.is_integer():
            raise InputError(f"expected an integer, got {value!r}", field=key, **where)
        value = int(value)
    if value < minimum:
        raise InputError(f"must be >= {minimum}, got {value}", field=key, **where)
    if value > maximum:
        raise InputError(f"must be <= {maximum}, got {value}", field=key, **where)
    return value


def int_field(obj: dict, key: str, where: dict, minimum: int = 0,
              maximum: int = MAX_TOKENS) -> int:
    return as_int(require(obj, key, where), key, where, minimum, maximum)


def as_time(value: object, key: str, where: dict, allow_string: bool = False) -> float:
    """A finite, non-negative number (optionally given as a numeric string)."""
    if allow_string and isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise InputError(f"expected a number, got {value!r}", field=key, **where) from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"expected a number, got {value!r}", field=key, **where)
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise InputError(f"must be a finite number >= 0, got {value}", field=key, **where)
    if value > MAX_TIME:
        raise InputError(f"must be <= {MAX_TIME:g}, got {value:g}", field=key, **where)
    return value


def id_list(value: object, key: str, where: dict) -> list[int]:
    """A list of integer ids."""
    if not isinstance(value, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in value
    ):
        raise InputError("expected a list of integers", field=key, **where)
    if value and (min(value) < -(1 << 63) or max(value) >= 1 << 63):
        raise InputError("ids must fit in 64 bits", field=key, **where)
    return value


def check_page_count(num_ids: int, input_tokens: int, block_size: int, where: dict,
                     key: str = "hash_ids", exact_blocks: bool = False) -> None:
    """`num_ids` must be ceil(input/block) (or floor when ids cover only full blocks)."""
    expected = input_tokens // block_size if exact_blocks else -(-input_tokens // block_size)
    if num_ids != expected:
        rule = "floor" if exact_blocks else "ceil"
        raise InputError(
            f"has {num_ids} ids but input length {input_tokens} needs "
            f"{rule}({input_tokens}/{block_size}) = {expected} (is --block-size right?)",
            field=key, **where,
        )


def lengths_and_ids(obj: dict, block_size: int, where: dict) -> tuple[int, int, list[int]]:
    """A hash-id row's `input_length` (>= 1), `output_length` and `hash_ids`, the ids'
    count checked against the input length at `block_size` tokens a page (Mooncake and
    Bailian rows; each check names its field)."""
    input_tokens = int_field(obj, "input_length", where, minimum=1)
    output_tokens = int_field(obj, "output_length", where, minimum=0)
    hash_ids = id_list(require(obj, "hash_ids", where), "hash_ids", where)
    check_page_count(len(hash_ids), input_tokens, block_size, where)
    return input_tokens, output_tokens, hash_ids


class ChainCheck:
    """Checks that chained ids are consistent: an id always follows the same parent id.

    Costs one dict entry per distinct id; `parent_of` maps id -> parent id (None first).
    """

    def __init__(self) -> None:
        self.parent_of: dict[int, int | None] = {}

    def check(self, ids: list[int] | tuple[int, ...], where: dict, key: str = "hash_ids",
              namespace: str | None = None) -> None:
        """Raise if an id follows a different parent than before, in an earlier line or
        earlier in this one (an id twice in a prompt names two prefixes: trace/chains.py
        refuses it too). Ids of a `namespace` are their own id space (docs/cache-semantics.md
        R2: read_trace gives them distinct ids), so they are checked as (namespace, id)
        pairs. Nothing is recorded from a line that is refused."""
        if namespace is not None:
            ids = [(namespace, page_id) for page_id in ids]
        parent_of = self.parent_of
        here: dict = {}  # this line's ids and their parents
        parent = None
        for position, page_id in enumerate(ids):
            known = parent_of.get(page_id, here.get(page_id, _UNSEEN))
            here.setdefault(page_id, parent)
            if known is not _UNSEEN and known != parent:
                raise InputError(
                    f"id {_raw(page_id)} at position {position} follows {_raw(parent)} here "
                    f"but {_raw(known)} earlier (ids are not chained prefix hashes)",
                    field=key, **where,
                )
            parent = page_id
        parent = None
        for page_id in ids:
            parent_of.setdefault(page_id, parent)
            parent = page_id


_UNSEEN = object()


def _raw(page_id: object) -> object:
    """The id as the file wrote it (a namespaced id is checked as (namespace, id))."""
    return page_id[1] if isinstance(page_id, tuple) else page_id


def session_field(obj: dict, where: dict,
                  keys: tuple[str, ...] = ("session_id", "chat_id")) -> str | None:
    """The optional session id (the first of `keys` present) as text: a string or an
    integer, never a list, mapping, boolean or float (which would become their repr,
    docs/input-rules.md I6)."""
    key = next((k for k in keys if k in obj), keys[0])
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"expected a string or an integer, got {value!r:.60}", field=key,
                         **where)
    return text(value, key, where) if isinstance(value, str) else str(value)


def text(value: str, key: str, where: dict) -> str:
    """`value`, a string a reader keeps, unless it holds a lone surrogate (`"\\ud800"`, which
    JSON may escape but UTF-8 cannot hold: the results, Arrow and Parquet would fail on it
    after the run); a byte that is not UTF-8 never gets this far (numbered_lines)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        raise InputError(f"holds a lone surrogate (\\u{code:04x}), which is not UTF-8 text",
                         field=key, **where) from None
    return value


def namespace_field(obj: dict, where: dict, key: str = "namespace") -> str | None:
    """An optional non-empty namespace string (docs/cache-semantics.md R2); None when absent or
    null."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"expected a non-empty string, got {value!r}", field=key, **where)
    return text(value, key, where)
