"""Prefill/decode disaggregation (docs/architecture.md "Disaggregated serving"), as
Mooncake, Dynamo or vLLM's P/D connectors run it.

Prefill replicas (ordinary replicas with a `KVTransfer`) compute prompts with their prefix
caches and sample the first token; a request with more tokens to generate is then handed
to the decode replica with the least outstanding work, which pulls its KV when it can hold
the request's whole future (its prompt's KV and every token still to generate, beside what
its running requests will still grow by, beyond the decode tokens their step in progress
holds already: so a decode replica never preempts). The pull goes
over the prefill replica's outbound link (per GPU, as each GPU sends its share of a token's
KV; transfers queue one behind another: latency + bytes / bandwidth). When it lands, the
prefill replica frees the request's KV and unlocks its cached prefix; the decode replica
decodes it, its first token there carrying the wait since the prefill's token (one ITL gap).
Decode replicas keep no prefix cache. Not here: layer-wise streaming of KV during the
prefill, decode replicas that preempt, prefill on decode replicas.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prefixsim.cache.pool import LinkDirection
from prefixsim.engine.replica import Replica
from prefixsim.engine.request_state import RUNNING, RequestState


@dataclass(frozen=True, slots=True)
class Disaggregation:
    """How many replicas prefill and decode, and their KV link (bytes/s per GPU)."""

    prefill_replicas: int
    decode_replicas: int
    link_bytes_s: float = 50e9
    link_latency_s: float = 0.0002

    def __post_init__(self) -> None:
        if self.prefill_replicas < 1 or self.decode_replicas < 1:
            raise ValueError("disaggregation needs >= 1 prefill and >= 1 decode replica")

    @property
    def num_replicas(self) -> int:
        return self.prefill_replicas + self.decode_replicas


class KVTransfer:
    """Hands prefilled requests to decode replicas and times their KV over the links."""

    def __init__(self, spec: Disaggregation, kv_bytes_per_token: int,
                 transfer_time_s: Callable[[int, float], float]) -> None:
        self.spec = spec
        self.kv_bytes_per_token = kv_bytes_per_token
        self.transfer_time_s = transfer_time_s
        self.decoders: Sequence[DecodeReplica] = ()
        self.links = [LinkDirection(spec.link_bytes_s, spec.link_latency_s)
                      for _ in range(spec.prefill_replicas)]

    def hand_off(self, state: RequestState, source: Replica) -> None:
        """`state` finished its prefill on `source`: the least-loaded decode replica (ties:
        the lower index) takes it."""
        target = min(self.decoders, key=lambda r: (r.outstanding_tokens, r.index))
        state.decode_replica = target.index
        target.receive(state, source)

    def book(self, source: Replica, num_tokens: int, now: float) -> float:
        """Seconds from `now` until `num_tokens` of KV have crossed `source`'s link."""
        return self.links[source.index].book(num_tokens * self.kv_bytes_per_token, now,
                                             self.transfer_time_s)


class DecodeReplica(Replica):
    """A replica that only decodes requests prefilled elsewhere (see the module docstring)."""

    DEFERS_EVICTION = False  # a pull reserves memory mid-run

    def __init__(self, *args, transfer: KVTransfer, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.transfer_in = transfer
        self.incoming: deque[RequestState] = deque()
        self.pulling: dict[RequestState, int] = {}  # KV reserved here, transfer in flight

    def receive(self, state: RequestState, source: Replica) -> None:
        """A prefill replica hands `state` over: it queues until it can be pulled."""
        state.decode_source = source
        self.incoming.append(state)
        self._outstanding += state.outstanding_tokens
        self._pull()

    def _pull(self) -> None:
        """Start pulling queued requests, first come first served, while they fit."""
        cache, env = self.cache, self.env
        while self.incoming and (len(self.running) + len(self.pulling)
                                 < self.scheduler.max_num_seqs):
            state = self.incoming[0]
            growth = sum(s.remaining_decode_tokens for s in self.running) + sum(
                s.remaining_decode_tokens for s in self.pulling) - self._reserved_ahead()
            kv = state.request.input_tokens
            if kv + state.remaining_decode_tokens + growth > self._available():
                return
            self.incoming.popleft()
            self._reserve(kv)
            self.pulling[state] = kv
            wait = self.transfer_in.book(state.decode_source, kv, env.now)
            env.process(self._land(state, wait))
        if self.incoming and cache.capacity_tokens is not None and not self.running \
                and not self.pulling:
            state = self.incoming[0]
            raise RuntimeError(f"decode replica {self.index} can never hold request "
                               f"{state.request.request_id}")

    def _reserved_ahead(self) -> int:
        """Decode tokens the run in progress holds already and has not yet generated: the
        running requests' remaining tokens count them, so the growth still to come is the
        remaining tokens less these (a run reserves its `covered` steps when it starts and
        credits its tokens when it ends; stepping one by one, covered is 1). With them
        left out the fit test reads the same at every moment of a run, mid-step or at a
        boundary, whether the run is one timeout or many."""
        run = self._run
        return 0 if run is None else self._covered * run[1].num_seqs

    def _land(self, state: RequestState, wait_s: float):
        yield self.env.timeout(wait_s)
        kv = self.pulling.pop(state)
        state.decode_source.release_handed_off(state)
        state.decode_source = None
        state.private_tokens = kv
        state.tip = None
        state.tree_tokens = state.num_tree_pages = 0
        state.status = RUNNING
        state.gap_pending = True
        self.running.append(state)
        wake = self._wake
        if wake is not None and not wake.triggered:
            wake.succeed()

    def _after_step(self) -> None:
        self._pull()

    def _held_private_tokens(self) -> int:
        return sum(self.pulling.values())

    def _queued_outstanding(self) -> int:
        return sum(s.outstanding_tokens for group in (self.incoming, self.pulling)
                   for s in group)
