"""The session model behind `prefixsim trace generate`: prompts as segment sequences, pages
as chained ids.

A prompt is a list of segments `(content key, tokens)`. Keys of shared content (prefix-layer
variants, corpus documents) are global, so two sessions that pick the same ones share pages;
everything else (messages, answers, tool results, unique layers) is private to its session.
Pages of `page_size_tokens` are named by chaining: a page made only of shared content gets
the interned id of (parent id, its pieces); any other page gets a fresh id. With
`history: append` a turn's prompt extends the previous one, so its full pages keep their ids.
All randomness comes from one seeded generator, drawn in a fixed order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefixsim.errors import InputError
from prefixsim.trace.generate.preset import Layer, Workload

Segment = tuple[tuple[int, ...], int]  # (content key, tokens); key[0] == 0 means private
SHARED, PRIVATE = 1, 0


@dataclass(frozen=True, slots=True)
class Row:
    arrival_s: float
    session: str
    input_tokens: int
    output_tokens: int
    page_ids: tuple[int, ...]


def zipf_weights(n: int, s: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1) ** s
    return weights / weights.sum()


# The most page ids one generated trace holds in its requests (each a pointer in a tuple,
# most an int of its own: ~9 GB at the limit, as 10^7 chat requests of ~25 pages take).
MAX_GENERATED_PAGES = 1 << 28


class Pager:
    """Chained page ids for segment sequences (shared pages interned, private ones fresh);
    counts the ids it hands out, and refuses (InputError) to go past MAX_GENERATED_PAGES
    (docs/input-rules.md I7)."""

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.shared: dict[tuple, int] = {}
        self.next_id = 0
        self.handed_out = 0  # page ids in every tuple `pages` returned

    def fresh(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def pages(self, segments: list[Segment], keep: tuple[int, ...] = (),
              keep_tokens: int = 0) -> tuple[int, ...]:
        """Page ids of `segments`; the first len(keep) pages (covering `keep_tokens`, all
        full) are known to be unchanged and keep their ids."""
        size = self.page_size
        out = list(keep)
        parent = out[-1] if out else -1
        private = False
        pieces: list[tuple] = []
        fill, position = 0, 0
        for key, length in segments:
            offset = 0
            if position + length <= keep_tokens:
                position += length
                private = private or key[0] == PRIVATE
                continue
            if position < keep_tokens:
                offset = keep_tokens - position
            position += length
            private = private or key[0] == PRIVATE
            while offset < length:
                take = min(size - fill, length - offset)
                pieces.append((key, offset))
                offset += take
                fill += take
                if fill == size:
                    parent = self._page(parent, pieces, private)
                    out.append(parent)
                    pieces, fill = [], 0
        if fill:
            out.append(self._page(parent, pieces, private))
        self.handed_out += len(out)
        if self.handed_out > MAX_GENERATED_PAGES:
            raise InputError(f"the workload needs more than {MAX_GENERATED_PAGES:,} page ids, "
                             "held in memory: ask for fewer requests or larger pages "
                             "(page_size_tokens)", field="--requests")
        return tuple(out)

    def _page(self, parent: int, pieces: list[tuple], private: bool) -> int:
        if private:
            return self.fresh()
        key = (parent, tuple(pieces))
        page = self.shared.get(key)
        if page is None:
            page = self.shared[key] = self.fresh()
        return page


class Corpus:
    """Shared contents of one workload: layer variants and documents, lengths fixed once."""

    def __init__(self, index: int, workload: Workload, rng: np.random.Generator) -> None:
        self.index = index
        self.workload = workload
        self.layers = [self._table(layer, rng) for layer in workload.prefix_layers]
        docs = workload.documents
        self.doc_tokens = [] if docs is None else [docs.tokens.tokens(rng)
                                                   for _ in range(docs.corpus)]
        self.doc_weights = None if docs is None else zipf_weights(docs.corpus, docs.zipf_s)

    @staticmethod
    def _table(layer: Layer, rng: np.random.Generator) -> tuple[list[int], np.ndarray | None]:
        if layer.variants == 0:
            return [], None
        lengths = [layer.tokens.tokens(rng) for _ in range(layer.variants)]
        return lengths, zipf_weights(layer.variants, layer.zipf_s)

    def prefix(self, rng: np.random.Generator, picks: list[int] | None,
               private: int) -> tuple[list[Segment], list[int]]:
        """Layer segments; `picks` are a session's variant choices (drawn when None)."""
        segments, chosen = [], []
        for number, (layer, (lengths, weights)) in enumerate(
                zip(self.workload.prefix_layers, self.layers, strict=True)):
            if weights is None:
                segments.append(((PRIVATE, private, number), layer.tokens.tokens(rng)))
                chosen.append(-1)
                continue
            pick = picks[number] if picks else int(rng.choice(len(lengths), p=weights))
            segments.append(((SHARED, self.index, number, pick), lengths[pick]))
            chosen.append(pick)
        return segments, chosen

    def documents(self, rng: np.random.Generator) -> list[Segment]:
        docs = self.workload.documents
        if docs is None:
            return []
        count = min(int(round(docs.per_request.sample(rng))), docs.corpus)
        if count <= 0:
            return []
        picked = rng.choice(docs.corpus, size=count, replace=False, p=self.doc_weights)
        if not docs.shuffle:
            picked = np.sort(picked)
        return [((SHARED, self.index, -1, int(d)), self.doc_tokens[int(d)]) for d in picked]


def session_rows(corpus: Corpus, pager: Pager, rng: np.random.Generator, session: int,
                 label: str, start_s: float, num_turns: int, picks: list[int] | None = None,
                 spawn: list | None = None) -> list[Row]:
    """All requests of one session (private key `session`, id `label`) from `start_s`;
    sub-agents it starts are appended to `spawn` as (start time, its layer picks)."""
    w = corpus.workload
    rows: list[Row] = []
    now = start_s
    prefix, picks = corpus.prefix(rng, picks, session)
    docs = corpus.documents(rng)
    history: list[Segment] = []
    message = ((PRIVATE, session, 0), w.first_message.tokens(rng))
    prev_ids: tuple[int, ...] = ()
    prev_tokens = 0
    for turn in range(num_turns):
        if w.history == "append" or turn == 0:
            segments = prefix + docs + history + [message]
        else:
            prefix, _ = corpus.prefix(rng, picks, session * 1000 + turn)
            segments = prefix + corpus.documents(rng) + history + [message]
        input_tokens = sum(length for _, length in segments)
        if input_tokens > w.max_context_tokens:
            break
        if w.history == "append" and turn:
            keep = prev_tokens // pager.page_size
            ids = pager.pages(segments, prev_ids[:keep], keep * pager.page_size)
        else:
            ids = pager.pages(segments)
        output = w.output_tokens.tokens(rng)
        rows.append(Row(now, label, input_tokens, output, ids))
        prev_ids, prev_tokens = ids, input_tokens
        answer = ((PRIVATE, session, 2 * turn + 1), output)
        history = history + [message, answer]
        message = ((PRIVATE, session, 2 * turn + 2), w.next_message.tokens(rng))
        now += output / w.decode_tokens_per_s + w.think_time_s.sample(rng)
        if spawn is not None and w.subagents.probability and \
                rng.random() < w.subagents.probability:
            spawn.append((now, picks))
    return rows
