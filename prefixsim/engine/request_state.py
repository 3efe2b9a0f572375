"""The mutable state of one request inside the timed engine, and its frozen final record.

`RequestState` is owned by the replica that serves it (the router only reads it through the
replica's load figures). `ServedRecord` is what the engine emits when the request ends;
metrics turn the records into `requests.parquet`. Token fields:

  prompt_tokens   tokens to prefill: the input, plus tokens generated before a preemption
  computed_tokens tokens of the prompt whose KV exists (cached prefix + computed chunks)
  tree_tokens     prompt tokens held by cache pages on the request's locked path
  private_tokens  KV tokens charged to the request alone (cache reservation, R13)

A request whose prefix loads asynchronously from a lower tier or the shared pool
(docs/cache-semantics.md R15) stays `waiting` while it loads, holding its loaded KV and its
first chunk's reservation (`loaded_chunk_tokens`), as vLLM v1's WAITING_FOR_REMOTE_KVS.
"""

from __future__ import annotations

from typing import NamedTuple

from prefixsim.cache import Page
from prefixsim.cache.classes import DEFAULT_RULE
from prefixsim.engine.records import Status
from prefixsim.trace import Request

WAITING, RUNNING, COMPLETED, REJECTED = "waiting", "running", "completed", "rejected"
HELD = -1  # a replica's `admit`: admitted, its prefix loading off the batch (async loads)


class RequestState:
    """One request's progress through a replica (mutable, engine-internal)."""

    __slots__ = (
        "request", "replica", "status", "arrival_s", "admitted_s", "first_token_s",
        "finish_s", "cached_tokens", "recomputed_tokens", "preemptions", "prompt_tokens",
        "computed_tokens", "tree_tokens", "private_tokens", "num_tree_pages", "tip",
        "generated_tokens", "target_tokens", "rule", "cached_tokens_host",
        "cached_tokens_disk", "cached_tokens_pool", "load_s", "last_token_s",
        "decode_replica", "decode_source", "gap_pending", "loaded_chunk_tokens",
    )

    def __init__(self, request: Request, arrival_s: float) -> None:
        self.request = request
        self.replica = 0
        self.status = WAITING
        self.arrival_s = arrival_s
        self.admitted_s: float | None = None
        self.first_token_s: float | None = None
        self.finish_s: float | None = None
        self.cached_tokens = 0
        self.recomputed_tokens = 0
        self.preemptions = 0
        self.prompt_tokens = request.input_tokens
        self.computed_tokens = 0
        self.tree_tokens = 0
        self.private_tokens = 0
        self.num_tree_pages = 0
        self.tip: Page | None = None
        self.generated_tokens = 0
        self.target_tokens = max(1, request.output_tokens)
        self.rule = DEFAULT_RULE  # the request's cache class (cache/classes.py)
        self.cached_tokens_host = 0  # of cached_tokens, loaded from host DRAM (R15)
        self.cached_tokens_disk = 0
        self.cached_tokens_pool = 0  # of cached_tokens, read from the shared pool (R18)
        self.load_s = 0.0  # lower-tier load time not yet charged to a step
        # async loads (R15): the first chunk's KV reserved at admission, held while the
        # prefix loads off the batch; > 0 marks a request holding its loaded KV in `waiting`
        self.loaded_chunk_tokens = 0
        self.last_token_s = 0.0  # when a preempted or handed-off request's last token came
        self.decode_replica: int | None = None  # disaggregated: the replica that decodes it
        self.decode_source = None  # disaggregated: the prefill replica still holding its KV
        self.gap_pending = False  # its next token is its first (pulled by a decode replica)

    @property
    def prefilling(self) -> bool:
        return self.computed_tokens < self.prompt_tokens

    @property
    def remaining_prefill_tokens(self) -> int:
        return self.prompt_tokens - self.computed_tokens

    @property
    def remaining_decode_tokens(self) -> int:
        return self.target_tokens - self.generated_tokens

    @property
    def context_tokens(self) -> int:
        """Tokens a decode step attends to: the input and every token generated (after a
        preemption the prompt already holds the tokens generated before it)."""
        return self.request.input_tokens + self.generated_tokens

    @property
    def outstanding_tokens(self) -> int:
        """Work left: prefill tokens still to compute plus tokens still to generate."""
        return self.remaining_prefill_tokens + self.remaining_decode_tokens


class ServedRecord(NamedTuple):
    """What the timed engine observed for one request (a row of requests.parquet).

    Times in simulated seconds (`*_s`) or milliseconds (`*_ms`); NaN where a request never
    reached that point (rejected) and `tpot_ms` NaN for one output token. `output_tokens` is
    what was generated: a trace's 0 is served as 1 (the prefill's token). `cached_tokens` is
    the hit at first admission; prompt tokens computed again after preemptions are
    `recomputed_tokens` (docs/cache-semantics.md R14).
    """

    request_id: int
    session_id: str | None
    status: Status
    replica: int
    arrival_s: float
    first_token_s: float
    finish_s: float
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    queue_ms: float
    ttft_ms: float
    tpot_ms: float
    e2el_ms: float
    preemptions: int
    recomputed_tokens: int
    cached_tokens_host: int = 0  # of cached_tokens, loaded from host DRAM (R15)
    cached_tokens_disk: int = 0  # of cached_tokens, loaded from disk
    cached_tokens_pool: int = 0  # of cached_tokens, read from the shared KV pool (R18)
    decode_replica: int | None = None  # disaggregated serving: the replica that decoded it


NAN = float("nan")


def served_record(state: RequestState, emission_s: float = 0.0) -> ServedRecord:
    """The final record of a finished (completed or rejected) request; its first token and
    finish times are when the client saw them, `emission_s` after their steps."""
    return ServedRecord._make(served_row(state, emission_s))


def served_row(state: RequestState, emission_s: float = 0.0) -> tuple:
    """`served_record`'s values as a plain tuple, in `ServedRecord`'s field order (what the
    engine's record table takes: no named tuple built per request)."""
    arrival = state.arrival_s
    first = NAN if state.first_token_s is None else state.first_token_s + emission_s
    finish = NAN if state.finish_s is None else state.finish_s + emission_s
    admitted = NAN if state.admitted_s is None else state.admitted_s
    generated = state.generated_tokens
    tpot = (finish - first) / (generated - 1) * 1e3 if generated > 1 else NAN
    request = state.request
    return (request.request_id, request.session_id, state.status, state.replica, arrival,
            first, finish, request.input_tokens, state.cached_tokens, generated,
            (admitted - arrival) * 1e3,  # queue_ms
            (first - arrival) * 1e3,  # ttft_ms
            tpot,  # tpot_ms
            (finish - arrival) * 1e3,  # e2el_ms
            state.preemptions, state.recomputed_tokens, state.cached_tokens_host,
            state.cached_tokens_disk, state.cached_tokens_pool, state.decode_replica)
