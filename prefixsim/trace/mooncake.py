"""Reader for Mooncake JSONL traces (the de-facto format for prefix-cache traces).

One JSON object per line: `timestamp` (integer ms from trace start), `input_length`,
`output_length`, `hash_ids` (chained ids, one per `block_size`-token block, default 512;
`len(hash_ids) == ceil(input_length / block_size)`). Optional `session_id`/`chat_id` is kept.
Writing traces and other formats live elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

from prefixsim.errors import InputError
from prefixsim.trace.readers import DEFAULT_BLOCK_SIZES, READERS, open_trace
from prefixsim.trace.record import Request

DEFAULT_BLOCK_SIZE = 512
DEFAULT_BLOCK_SIZES["mooncake"] = DEFAULT_BLOCK_SIZE


def _int_field(obj: dict, key: str, where: dict, minimum: int = 0) -> int:
    if key not in obj:
        raise InputError("missing field", field=key, **where)
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise InputError(f"expected an integer, got {value!r}", field=key, **where)
    if value < minimum:
        raise InputError(f"must be >= {minimum}, got {value}", field=key, **where)
    return value


def parse_line(obj: object, request_id: int, block_size: int, where: dict) -> Request:
    """Validate one decoded Mooncake object and build its request record."""
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", **where)
    timestamp = obj.get("timestamp")
    if timestamp is None:
        raise InputError("missing field", field="timestamp", **where)
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        raise InputError(f"expected a number, got {timestamp!r}", field="timestamp", **where)
    if not timestamp >= 0 or timestamp == float("inf"):
        raise InputError(
            f"must be a finite number >= 0, got {timestamp}", field="timestamp", **where
        )
    input_tokens = _int_field(obj, "input_length", where, minimum=1)
    output_tokens = _int_field(obj, "output_length", where, minimum=0)
    hash_ids = obj.get("hash_ids")
    if hash_ids is None:
        raise InputError("missing field", field="hash_ids", **where)
    if not isinstance(hash_ids, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in hash_ids
    ):
        raise InputError("expected a list of integers", field="hash_ids", **where)
    expected = -(-input_tokens // block_size)
    if len(hash_ids) != expected:
        raise InputError(
            f"has {len(hash_ids)} ids but input_length {input_tokens} needs "
            f"ceil({input_tokens}/{block_size}) = {expected} (is --block-size right?)",
            field="hash_ids",
            **where,
        )
    session = obj.get("session_id", obj.get("chat_id"))
    return Request(
        request_id=request_id,
        arrival_s=timestamp / 1000.0,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        page_ids=tuple(hash_ids),
        page_size_tokens=block_size,
        session_id=None if session is None else str(session),
    )


@READERS.register("mooncake")
def read_mooncake(
    path: Path, block_size: int | None = None, max_requests: int | None = None
) -> list[Request]:
    """Stream `path` and return its requests in file order."""
    block_size = block_size or DEFAULT_BLOCK_SIZE
    requests: list[Request] = []
    with open_trace(path) as handle:
        try:
            for line_no, raw in enumerate(handle, start=1):
                if max_requests is not None and len(requests) >= max_requests:
                    break
                if not raw.strip():
                    continue
                where = {"file": str(path), "line": line_no}
                try:
                    obj = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise InputError(f"not valid JSON ({exc.msg})", **where) from None
                requests.append(parse_line(obj, len(requests), block_size, where))
        except UnicodeDecodeError:
            raise InputError("not a UTF-8 text file", file=str(path)) from None
    if not requests:
        raise InputError("the trace holds no requests", file=str(path))
    return requests
