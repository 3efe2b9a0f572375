"""Reader for Mooncake JSONL traces (the de-facto format for prefix-cache traces).

One JSON object per line: `timestamp` (integer ms from trace start), `input_length`,
`output_length`, `hash_ids` (chained ids, one per `block_size`-token block, default 512;
`len(hash_ids) == ceil(input_length / block_size)`). Optional `session_id`/`chat_id` is kept;
an optional `namespace` (tenant, model, LoRA or cache salt: docs/cache-semantics.md R2) is kept,
and pages of different namespaces never match (their ids are separate id spaces);
an optional per-row `block_size` (written by `prefixsim trace convert` for non-512 pages)
says that row's page size and wins over --block-size (which defaults to 512 in a run).
Writing traces lives in trace/write.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prefixsim.trace.fields import (
    ChainCheck,
    as_time,
    int_field,
    lengths_and_ids,
    namespace_field,
    require,
    session_field,
)
from prefixsim.trace.mooncake_fast import read_fast, restart_progress
from prefixsim.trace.readers import (
    DEFAULT_BLOCK_SIZES,
    READERS,
    ReadContext,
    read_json_lines,
    sniffer,
)
from prefixsim.trace.record import Request

DEFAULT_BLOCK_SIZE = 512
DEFAULT_BLOCK_SIZES["mooncake"] = DEFAULT_BLOCK_SIZE


def parse_line(obj: dict, request_id: int, block_size: int, where: dict,
               chains: ChainCheck | None = None) -> Request:
    """Validate one decoded Mooncake object and build its request record."""
    timestamp_ms = as_time(require(obj, "timestamp", where), "timestamp", where)
    input_tokens, output_tokens, hash_ids = lengths_and_ids(obj, block_size, where)
    namespace = namespace_field(obj, where)
    if chains is not None:
        chains.check(hash_ids, where, namespace=namespace)
    session = session_field(obj, where)
    return Request(
        request_id=request_id,
        arrival_s=timestamp_ms / 1000.0,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        page_ids=tuple(hash_ids),
        page_size_tokens=block_size,
        session_id=session,
        namespace=namespace,
    )


def read_mooncake(path: Path, ctx: ReadContext) -> Sequence[Request]:
    """Stream `path` and return its requests in file order: by the fast path
    (mooncake_fast.py, as columns) when the file is plain, else line by line with every
    check naming its line."""
    given = ctx.options.block_size or DEFAULT_BLOCK_SIZE
    fast = read_fast(path, ctx, given)
    if fast is not None:
        return fast
    restart_progress(ctx)  # the exact path reads from the start again
    chains = ChainCheck()

    def parse(obj: dict, request_id: int, where: dict) -> Request:
        block_size = _row_block_size(obj, where) if "block_size" in obj else given
        return parse_line(obj, request_id, block_size, where, chains)

    return read_json_lines(path, ctx, parse)


READERS.register("mooncake")(read_mooncake)


def _row_block_size(obj: dict, where: dict) -> int:
    return int_field(obj, "block_size", where, minimum=1)


def _looks_like_mooncake(first: object, text: str, path: Path) -> bool:
    return isinstance(first, dict) and isinstance(first.get("hash_ids"), list) \
        and "input_length" in first and "chat_id" not in first


sniffer("mooncake")(_looks_like_mooncake)
