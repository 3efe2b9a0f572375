"""The Mooncake reader's exact path (trace/mooncake.py) at its edges: namespaces (each its
own id space for the chain check, kept on the request), a row's own `block_size`, format
detection against Bailian rows, and refusals word for word with their line and field.
(The fast path's edges: test_mooncake_fast_edges.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from fakes import refusal

from prefixsim.trace import detect_format, read_trace
from prefixsim.trace.record import Request


def row(t: int, tokens: int, ids: list, **extra) -> dict:
    return {"timestamp": t, "input_length": tokens, "output_length": 2, "hash_ids": ids,
            **extra}


def trace(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_namespaces_are_kept_and_chained_apart(tmp_path):
    # page 2 follows 1 in namespace a and 3 in namespace b: chained within each; read_trace
    # then gives the four (namespace, id) pairs ids of their own (docs/cache-semantics.md R2)
    rows = [row(0, 1024, [1, 2], namespace="a"), row(5, 1024, [3, 2], namespace="b"),
            row(9, 512, [1])]
    requests = read_trace(trace(tmp_path / "ns.jsonl", rows), "mooncake").requests
    assert [r.namespace for r in requests] == ["a", "b", None]
    assert [r.page_ids for r in requests] == [(0, 1), (2, 3), (4,)]
    # the same rows without namespaces are not chained: 2 follows 1, then 3
    plain = trace(tmp_path / "plain.jsonl", [row(0, 1024, [1, 2]), row(5, 1024, [3, 2])])
    assert refusal(read_trace, plain, "mooncake") == (
        f"{plain}:2: hash_ids: id 2 at position 1 follows 3 here but 1 earlier (ids are not "
        "chained prefix hashes)")


def test_a_bad_namespace_names_its_line(tmp_path):
    path = trace(tmp_path / "bad.jsonl", [row(0, 512, [1]), row(1, 512, [2], namespace=7)])
    assert refusal(read_trace, path, "mooncake") == \
        f"{path}:2: namespace: expected a non-empty string, got 7"


def test_a_rows_block_size_wins(tmp_path):
    # 40 tokens at a 16-token block size: 3 ids; a block size of 1 is a page per token
    rows = [row(0, 40, [1, 2, 3], block_size=16), row(1, 2, [8, 9], block_size=1),
            row(2, 600, [4, 5])]
    for extra in ({}, {"namespace": "t"}):  # the fast path, then the exact one
        requests = read_trace(trace(tmp_path / "b.jsonl", [{**r, **extra} for r in rows]),
                              "mooncake").requests
        assert [r.page_size_tokens for r in requests] == [16, 1, 512]
    path = trace(tmp_path / "zero.jsonl", [row(0, 512, [1]), row(1, 40, [2], block_size=0)])
    assert refusal(read_trace, path, "mooncake") == \
        f"{path}:2: block_size: must be >= 1, got 0"


def test_a_row_is_what_the_line_says(tmp_path):
    # the fast path keeps the ids; the exact one (a namespace) numbers its pairs anew
    for namespace, first, second in ((None, (7, 8), (9,)), ("t", (0, 1), (2,))):
        requests = read_trace(trace(tmp_path / "one.jsonl", [
            row(1500, 513, [7, 8], session_id="s", namespace=namespace),
            row(2250, 1, [9], session_id="s", namespace=namespace)]), "mooncake").requests
        assert list(requests) == [Request(0, 0.0, 513, 2, first, 512, "s", namespace),
                                  Request(1, 0.75, 1, 2, second, 512, "s", namespace)]


def test_bailian_rows_are_not_mooncake(tmp_path):
    mooncake = trace(tmp_path / "m.jsonl", [row(0, 512, [1])])
    bailian = trace(tmp_path / "b.jsonl", [row(0, 16, [1], chat_id=3, parent_chat_id=-1)])
    assert detect_format(mooncake) == "mooncake"
    assert detect_format(bailian) == "bailian"


def test_an_id_twice_in_one_prompt_is_not_chained(tmp_path):
    # a chained id names its whole prefix, so a prompt cannot hold one twice: the exact
    # check took the first such line (the chunked one did not) and refused only a second
    path = trace(tmp_path / "twice.jsonl", [row(0, 1024, [5, 6]), row(1, 1536, [7, 8, 7])])
    assert refusal(read_trace, path, "mooncake") == (
        f"{path}:2: hash_ids: id 7 at position 2 follows 8 here but None earlier (ids are not "
        "chained prefix hashes)")
