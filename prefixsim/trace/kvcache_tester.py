"""Reader for kv-cache-tester conversations (one JSON document per file, or a folder).

A file: `id`, `block_size` (64), `hash_id_scope` ("local": ids mean something only inside
the file; the one scope read, another is refused), `requests`: each `t` (s from the
conversation's start), `in`, `out`, `hash_ids` (chained, one per *full* block:
`len == floor(in/block_size)`), or a nested sub-agent
`{type: "subagent", t, agent_id, requests: [...]}` whose requests' `t` count from the
sub-agent's start (at the parent's clock). Local ids are renumbered into one global space
per file; the partial last block, which the file does not name, gets a fresh private id.

Files carry no absolute time, so placing conversations on one timeline is a modelling
choice, made explicit here: in file-name order, conversation k starts at the k-th event of a
Poisson process of rate `session_rate_per_s` (the first at 0), drawn from `seed`.
Sessions are `<file id>` and `<file id>/<agent_id>` for sub-agents.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from prefixsim.errors import InputError
from prefixsim.trace.fields import as_int, as_time, id_list, text
from prefixsim.trace.readers import (
    DEFAULT_BLOCK_SIZES,
    FOLDER_SNIFFERS,
    READERS,
    ReadContext,
    first_undecodable_line,
    sniffer,
    trace_files,
)
from prefixsim.trace.record import Request

DEFAULT_BLOCK_SIZES["kv-cache-tester"] = 64
MAX_DEPTH = 8


class _Conversation:
    """Turns one decoded file into requests at an absolute start time."""

    def __init__(self, path: Path, ctx: ReadContext, out: list[Request], next_id: int) -> None:
        self.path, self.ctx, self.out = path, ctx, out
        self.local: dict[int, int] = {}
        self.next_id = next_id
        self.block_size = 64

    def where(self, field: str) -> dict:
        return {"file": str(self.path), "field": field}

    def read(self, doc: object, start_s: float) -> None:
        if not isinstance(doc, dict):
            raise InputError("expected a JSON object (one conversation)", file=str(self.path))
        block = as_int(doc.get("block_size", 64), "block_size", {"file": str(self.path)},
                       minimum=1)
        given = self.ctx.options.block_size
        if given is not None and given != block:
            raise InputError(f"the file's pages are {block} tokens, not {given}",
                             file=str(self.path), field="block_size")
        self.block_size = block
        scope = doc.get("hash_id_scope", "local")
        if scope != "local":  # ids shared across files would be read as unrelated pages
            raise InputError(f"expected \"local\" (ids that mean something inside this file "
                             f"only: the one scope read), got {scope!r:.60}",
                             file=str(self.path), field="hash_id_scope")
        name = text(str(doc.get("id", self.path.stem)), "id", {"file": str(self.path)})
        self.walk(doc.get("requests"), "requests", start_s, name, 0)

    def walk(self, items: object, key: str, start_s: float, session: str, depth: int) -> None:
        if not isinstance(items, list):
            raise InputError("expected a list of requests", file=str(self.path), field=key)
        if depth > MAX_DEPTH:
            raise InputError(f"sub-agents nested deeper than {MAX_DEPTH}",
                             file=str(self.path), field=key)
        last_t = 0.0
        for index, item in enumerate(items):
            if self.ctx.full(len(self.out)):
                return
            field = f"{key}[{index}]"
            try:
                if not isinstance(item, dict):
                    raise InputError("expected an object", file=str(self.path), field=field)
                t = as_time(item.get("t"), f"{field}.t", {"file": str(self.path)})
                if t < last_t:
                    raise InputError(f"t = {t} is before the previous request's {last_t} "
                                     "(requests must be in time order)", **self.where(f"{field}.t"))
                last_t = t
                if item.get("type") == "subagent":
                    agent = text(str(item.get("agent_id", index)), f"{field}.agent_id",
                                 {"file": str(self.path)})
                    self.walk(item.get("requests"), f"{field}.requests", start_s + t,
                              f"{session}/{agent}", depth + 1)
                    continue
                self.out.append(self.request(item, field, start_s + t, session))
            except InputError as error:
                self.ctx.bad(error)

    def request(self, item: dict, field: str, arrival_s: float, session: str) -> Request:
        where = {"file": str(self.path)}
        input_tokens = as_int(item.get("in"), f"{field}.in", where, minimum=1)
        output_tokens = as_int(item.get("out", 0), f"{field}.out", where)
        ids = id_list(item.get("hash_ids"), f"{field}.hash_ids", where)
        size = self.block_size
        if len(ids) != input_tokens // size:
            raise InputError(f"has {len(ids)} ids but in = {input_tokens} needs "
                             f"floor({input_tokens}/{size}) = {input_tokens // size}",
                             **self.where(f"{field}.hash_ids"))
        local = self.local
        pages = []
        for local_id in ids:
            global_id = local.get(local_id)
            if global_id is None:
                global_id = local[local_id] = self.next_id
                self.next_id += 1
            pages.append(global_id)
        if input_tokens % size:
            pages.append(self.next_id)  # the unnamed partial block: private
            self.next_id += 1
        return Request(request_id=len(self.out), arrival_s=arrival_s, input_tokens=input_tokens,
                       output_tokens=output_tokens, page_ids=tuple(pages), page_size_tokens=size,
                       session_id=session)


def _load(path: Path) -> object:
    try:
        with path.open("rb") as handle:
            return json.loads(handle.read().removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", file=str(path),
                         line=first_undecodable_line(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg})", file=str(path), line=exc.lineno) \
            from None
    except RecursionError:
        raise InputError("not valid JSON (too deeply nested)", file=str(path)) from None


def read_kv_cache_tester(path: Path, ctx: ReadContext) -> list[Request]:
    if not path.exists():
        raise InputError("no such file", file=str(path))
    files = [p for p in trace_files(path) if p.suffix == ".json"] if path.is_dir() else [path]
    if not files:
        raise InputError("no .json conversation files in the folder", file=str(path))
    rate = ctx.options.session_rate_per_s
    if not rate > 0 or rate == float("inf"):
        raise InputError(f"must be a finite number > 0, got {rate}", field="session_rate_per_s")
    gaps = np.random.default_rng(ctx.options.seed).exponential(1.0 / rate, len(files))
    starts = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
    ctx.labels["arrival_model"] = (
        f"poisson conversation starts, rate {rate:g}/s, seed {ctx.options.seed} (modelled; "
        "the files carry no absolute time)"
    )
    out: list[Request] = []
    next_id = 0
    for file, start_s in zip(files, starts, strict=True):
        if ctx.full(len(out)):
            break
        try:
            conversation = _Conversation(file, ctx, out, next_id)
            conversation.read(_load(file), float(start_s))
            next_id = conversation.next_id
        except InputError as error:
            ctx.bad(error)
    return out


READERS.register("kv-cache-tester")(read_kv_cache_tester)


def _is_conversation(first: object, text: str) -> bool:
    if isinstance(first, dict):  # a one-line conversation; the reader checks `requests`
        return "requests" in first and "hash_ids" not in first
    head = text[:4096]
    return head.lstrip().startswith("{") and '"requests"' in head and (
        '"hash_id_scope"' in head or '"block_size"' in head)


def _looks_like_conversation(first: object, text: str, path: Path) -> bool:
    return _is_conversation(first, text)


sniffer("kv-cache-tester")(_looks_like_conversation)


def _is_folder(folder: Path) -> bool:
    files = [p for p in trace_files(folder) if p.suffix == ".json"]
    if not files:
        return False
    with files[0].open("rb") as handle:
        text = handle.read(4096).decode("utf-8", errors="replace")
    return _is_conversation(None, text)


FOLDER_SNIFFERS.append(("kv-cache-tester", _is_folder))
