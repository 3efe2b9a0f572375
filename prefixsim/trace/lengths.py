"""Readers for lengths-only CSV traces: Azure LLM inference 2023, BurstGPT, Vidur/Splitwise.

These traces carry no prefix information, so page ids come from a declared *prefix model*
(`ReadOptions.prefix_model`):
  none           every page is distinct: no request shares anything (the default; the
                 honest reading of a lengths-only trace)
  shared:TOKENS  synthetic: every prompt starts with the same TOKENS-token prefix (a common
                 system prompt); full pages inside it are shared. Results say "synthetic".
Pages are 16 tokens unless --block-size says otherwise.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from prefixsim.errors import InputError
from prefixsim.trace.fields import MAX_TOKENS, as_int, as_time
from prefixsim.trace.readers import (
    DEFAULT_BLOCK_SIZES,
    PREFIX_MODEL_FORMATS,
    READERS,
    ReadContext,
    first_undecodable_line,
    open_trace,
    sniffer,
)
from prefixsim.trace.record import Request

LENGTHS_BLOCK_SIZE = 16


def check_prefix_model(spec: str) -> int:
    """The shared tokens of a prefix model spec (`none`: 0; `shared:TOKENS`, 1 <= TOKENS <=
    MAX_TOKENS); anything else is an InputError naming trace.prefix_model. Checked whatever
    the trace's format, so a bad spec never passes unnoticed on a format that ignores it."""
    if spec == "none":
        return 0
    name, _, value = spec.partition(":")
    if name != "shared" or not value.isascii() or not value.isdigit() \
            or not 1 <= int(value) <= MAX_TOKENS:
        raise InputError(
            f"unknown prefix model {spec!r} (valid: none, shared:TOKENS with 1 <= TOKENS <= "
            f"{MAX_TOKENS})", field="trace.prefix_model")
    return int(value)


class PrefixModel:
    """Page ids for a lengths-only request under a declared prefix model."""

    def __init__(self, spec: str, block_size: int) -> None:
        self.block_size = block_size
        self.shared_tokens = check_prefix_model(spec)
        self.spec = spec
        self.num_shared_pages = self.shared_tokens // block_size
        self.next_id = self.num_shared_pages

    @property
    def label(self) -> str:
        if self.spec == "none":
            return "none (lengths only: no prefix sharing)"
        return f"synthetic {self.spec} (not in the trace)"

    def page_ids(self, input_tokens: int) -> tuple[int, ...]:
        num_pages = -(-input_tokens // self.block_size)
        shared = min(self.num_shared_pages, input_tokens // self.block_size)
        start = self.next_id
        self.next_id += num_pages - shared
        return tuple(range(shared)) + tuple(range(start, start + num_pages - shared))


Column = tuple[str, ...]  # accepted header names of one column (case-insensitive)


def read_lengths_csv(
    path: Path, ctx: ReadContext, format_name: str, time_col: Column, input_col: Column,
    output_col: Column, parse_time: Callable[[str, dict, str], float],
    session_col: Column = (),
) -> list[Request]:
    block_size = ctx.block_size(format_name)
    model = PrefixModel(ctx.options.prefix_model, block_size)
    ctx.labels["prefix_model"] = model.label
    requests: list[Request] = []
    with open_trace(path) as handle:
        try:
            rows = csv.reader(handle)
            header = next(rows, None)
            if header is None:
                return requests
            names = [name.strip().lower() for name in header]

            def column(accepted: Column, required: bool = True) -> int | None:
                for name in accepted:
                    if name.lower() in names:
                        return names.index(name.lower())
                if required:
                    raise InputError("missing column", file=str(path), line=1,
                                     field=accepted[0])
                return None

            t_i, in_i, out_i = column(time_col), column(input_col), column(output_col)
            s_i = column(session_col, required=False) if session_col else None
            width = max(i for i in (t_i, in_i, out_i, s_i) if i is not None) + 1
            for row in rows:
                if ctx.full(len(requests)):
                    break
                if not row or not "".join(row).strip():
                    continue
                where = {"file": str(path), "line": rows.line_num}
                try:
                    if len(row) < width:
                        raise InputError(f"has {len(row)} columns, expected {len(header)}",
                                         **where)
                    arrival_s = parse_time(row[t_i], where, header[t_i])
                    input_tokens = as_int(row[in_i], header[in_i], where, minimum=1,
                                          allow_string=True)
                    output_tokens = as_int(row[out_i], header[out_i], where, minimum=0,
                                           allow_string=True)
                    ctx.charge_pages(-(-input_tokens // block_size), where, header[in_i])
                except InputError as error:
                    ctx.bad(error)
                    continue
                session = row[s_i].strip() if s_i is not None and row[s_i].strip() else None
                requests.append(Request(
                    request_id=len(requests), arrival_s=arrival_s, input_tokens=input_tokens,
                    output_tokens=output_tokens, page_ids=model.page_ids(input_tokens),
                    page_size_tokens=block_size, session_id=session,
                ))
        except UnicodeDecodeError:
            raise InputError("not a UTF-8 text file", file=str(path),
                             line=first_undecodable_line(path)) from None
        except csv.Error as exc:
            raise InputError(f"not valid CSV ({exc})", file=str(path)) from None
    return requests


def _seconds(value: str, where: dict, key: str) -> float:
    return as_time(value, key, where, allow_string=True)


class _WallClock:
    """Azure timestamps (`2023-11-16 18:15:46.6805900`) -> seconds since the first row."""

    def __init__(self) -> None:
        self.origin: tuple[int, float] | None = None

    def __call__(self, value: str, where: dict, key: str) -> float:
        text = value.strip()
        base, _, fraction = text.partition(".")
        try:
            moment = datetime.fromisoformat(base).replace(tzinfo=UTC)
            frac = float("0." + fraction) if fraction else 0.0
            if fraction and not fraction.isdigit():
                raise ValueError(fraction)
        except ValueError:
            raise InputError(f"expected a date and time, got {value!r}", field=key,
                             **where) from None
        seconds = int(moment.timestamp())
        if self.origin is None:
            self.origin = (seconds, frac)
        return (seconds - self.origin[0]) + (frac - self.origin[1])


for _name in ("azure", "burstgpt", "vidur"):
    DEFAULT_BLOCK_SIZES[_name] = LENGTHS_BLOCK_SIZE
    PREFIX_MODEL_FORMATS.add(_name)


def read_azure(path: Path, ctx: ReadContext) -> list[Request]:
    """Azure LLM inference trace 2023: TIMESTAMP, ContextTokens, GeneratedTokens."""
    return read_lengths_csv(path, ctx, "azure", ("TIMESTAMP",), ("ContextTokens",),
                            ("GeneratedTokens",), _WallClock())


READERS.register("azure")(read_azure)


def read_burstgpt(path: Path, ctx: ReadContext) -> list[Request]:
    """BurstGPT: Timestamp (s), Request tokens, Response tokens, Session ID where present."""
    return read_lengths_csv(path, ctx, "burstgpt", ("Timestamp",), ("Request tokens",),
                            ("Response tokens",), _seconds,
                            session_col=("Session ID", "session_id"))


READERS.register("burstgpt")(read_burstgpt)


def read_vidur(path: Path, ctx: ReadContext) -> list[Request]:
    """Vidur / Splitwise request CSV: arrived_at (s), num_prefill_tokens, num_decode_tokens."""
    return read_lengths_csv(path, ctx, "vidur", ("arrived_at",), ("num_prefill_tokens",),
                            ("num_decode_tokens",), _seconds)


READERS.register("vidur")(read_vidur)


def _header(text: str) -> set[str]:
    first = next((line for line in text.splitlines() if line.strip()), "")
    return {name.strip().strip('"').lower() for name in first.split(",")}


def _looks_like_azure(first: object, text: str, path: Path) -> bool:
    return {"timestamp", "contexttokens", "generatedtokens"} <= _header(text)


sniffer("azure")(_looks_like_azure)


def _looks_like_burstgpt(first: object, text: str, path: Path) -> bool:
    return {"timestamp", "request tokens", "response tokens"} <= _header(text)


sniffer("burstgpt")(_looks_like_burstgpt)


def _looks_like_vidur(first: object, text: str, path: Path) -> bool:
    return {"arrived_at", "num_prefill_tokens", "num_decode_tokens"} <= _header(text)


sniffer("vidur")(_looks_like_vidur)
