"""Reader for Alibaba Bailian / Qwen usage traces (JSONL).

Fields: `chat_id`, `parent_chat_id` (-1 = a root), `timestamp` (seconds, float),
`input_length`, `output_length`, `type` (text/search/image/file), `turn`, `hash_ids`
(chained ids of 16-token blocks, `len == ceil(input_length/16)`). A request's session is the
root of its chat tree, followed through `parent_chat_id` (a parent not in the file is taken
as the root).
"""

from __future__ import annotations

from pathlib import Path

from prefixsim.errors import InputError
from prefixsim.trace.fields import ChainCheck, as_int, as_time, lengths_and_ids, require
from prefixsim.trace.readers import (
    DEFAULT_BLOCK_SIZES,
    READERS,
    ReadContext,
    read_json_lines,
    sniffer,
)
from prefixsim.trace.record import Request

DEFAULT_BLOCK_SIZES["bailian"] = 16


def read_bailian(path: Path, ctx: ReadContext) -> list[Request]:
    block_size = ctx.block_size("bailian")
    chains = ChainCheck()
    root_of: dict[int, int] = {}

    def parse(obj: dict, request_id: int, where: dict) -> Request:
        chat_id = as_int(require(obj, "chat_id", where), "chat_id", where, minimum=0,
                         maximum=1 << 62)  # -1 is the root marker, never a chat
        parent = as_int(obj.get("parent_chat_id", -1), "parent_chat_id", where,
                        minimum=-1, maximum=1 << 62)
        arrival_s = as_time(require(obj, "timestamp", where), "timestamp", where,
                            allow_string=True)
        input_tokens, output_tokens, hash_ids = lengths_and_ids(obj, block_size, where)
        if parent == chat_id:
            raise InputError("a chat cannot be its own parent", field="parent_chat_id",
                             **where)
        chains.check(hash_ids, where)
        root = chat_id if parent < 0 else root_of.get(parent, parent)
        root_of[chat_id] = root
        return Request(
            request_id=request_id,
            arrival_s=arrival_s,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            page_ids=tuple(hash_ids),
            page_size_tokens=block_size,
            session_id=str(root),
        )

    return read_json_lines(path, ctx, parse)


READERS.register("bailian")(read_bailian)


def _looks_like_bailian(first: object, text: str, path: Path) -> bool:
    return isinstance(first, dict) and "chat_id" in first and "hash_ids" in first


sniffer("bailian")(_looks_like_bailian)
