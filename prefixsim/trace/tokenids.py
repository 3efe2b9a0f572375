"""Reader for token-id JSONL: each line holds a prompt's token ids.

Fields: `prompt_token_ids` (or `input_ids` / `token_ids`): list of ints; `output_length`
(or `output_tokens` / `max_tokens`), default 0; arrival as `arrival_s` (seconds) or
`timestamp` (ms, as Mooncake), default 0; optional `session_id`. Page ids are chained at the
chosen page size (--block-size, default 16): a page's id names (its parent's id, its tokens),
so equal ids mean equal token prefixes, exactly.
"""

from __future__ import annotations

from pathlib import Path

from prefixsim.errors import InputError
from prefixsim.trace.fields import as_int, as_time, id_list, session_field
from prefixsim.trace.readers import (
    DEFAULT_BLOCK_SIZES,
    READERS,
    ReadContext,
    read_json_lines,
    sniffer,
)
from prefixsim.trace.record import Request

DEFAULT_BLOCK_SIZES["token-ids"] = 16
TOKEN_KEYS = ("prompt_token_ids", "input_ids", "token_ids")
OUTPUT_KEYS = ("output_length", "output_tokens", "max_tokens")


class PageChainer:
    """Interns (parent id, page tokens) -> a small chained page id."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.ids: dict[tuple[int, tuple[int, ...]], int] = {}

    def chain(self, tokens: list[int]) -> tuple[int, ...]:
        size, ids, parent, out = self.block_size, self.ids, -1, []
        for start in range(0, len(tokens), size):
            parent = ids.setdefault((parent, tuple(tokens[start:start + size])), len(ids))
            out.append(parent)
        return tuple(out)


def _first(obj: dict, keys: tuple[str, ...]) -> tuple[str, object]:
    for key in keys:
        if obj.get(key) is not None:
            return key, obj[key]
    return keys[0], None


def read_token_ids(path: Path, ctx: ReadContext) -> list[Request]:
    block_size = ctx.block_size("token-ids")
    chainer = PageChainer(block_size)

    def parse(obj: dict, request_id: int, where: dict) -> Request:
        key, tokens = _first(obj, TOKEN_KEYS)
        if tokens is None:
            raise InputError("missing field", field=key, **where)
        tokens = id_list(tokens, key, where)
        if not tokens:
            raise InputError("must hold at least one token", field=key, **where)
        out_key, output = _first(obj, OUTPUT_KEYS)
        output_tokens = 0 if output is None else as_int(output, out_key, where)
        if obj.get("arrival_s") is not None:
            arrival_s = as_time(obj["arrival_s"], "arrival_s", where)
        elif obj.get("timestamp") is not None:
            arrival_s = as_time(obj["timestamp"], "timestamp", where) / 1000.0
        else:
            arrival_s = 0.0
        session = session_field(obj, where, ("session_id",))
        return Request(
            request_id=request_id, arrival_s=arrival_s, input_tokens=len(tokens),
            output_tokens=output_tokens, page_ids=chainer.chain(tokens),
            page_size_tokens=block_size, session_id=session,
        )

    return read_json_lines(path, ctx, parse)


READERS.register("token-ids")(read_token_ids)


def _looks_like_token_ids(first: object, text: str, path: Path) -> bool:
    return isinstance(first, dict) and any(isinstance(first.get(k), list) for k in TOKEN_KEYS)


sniffer("token-ids")(_looks_like_token_ids)
