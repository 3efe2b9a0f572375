"""Known-answer tests of every trace reader, format detection and page-size conversion.

Each fixture is tiny and its expected page ids / sessions / hit tokens are worked by hand in
the test's docstring; the coarsening test is differential (coarsened fine pages against
pages built directly at the coarse size from the same token content).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.analysis.characterize import token_hit_rate
from prefixsim.errors import InputError
from prefixsim.trace import ReadOptions, detect_format, read_trace
from prefixsim.trace.pages import coarsen
from prefixsim.trace.record import Request


def write_lines(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def hit_tokens(requests: list[Request]) -> list[int]:
    """Per-request hit tokens of an unbounded cache (naive: longest seen prefix, cap L-1)."""
    seen: set[int] = set()
    out = []
    for r in requests:
        k = 0
        while k < r.num_pages and r.page_ids[k] in seen:
            k += 1
        seen.update(r.page_ids)
        tokens = r.input_tokens if k == r.num_pages else k * r.page_size_tokens
        out.append(min(tokens, r.input_tokens - 1) if k else 0)
    return out


def test_bailian_sessions_follow_parent_chain(tmp_path):
    """Chat 1 is a root, 2 answers 1, 3 answers 2: all three are session "1"; chat 9 is its
    own root. Pages are 16 tokens: 20 tokens -> 2 ids, 40 -> 3 ids."""
    rows = [
        {"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 20,
         "output_length": 3, "type": "text", "turn": 1, "hash_ids": [7, 8]},
        {"chat_id": 2, "parent_chat_id": 1, "timestamp": 2.0, "input_length": 40,
         "output_length": 3, "type": "text", "turn": 2, "hash_ids": [7, 8, 9]},
        {"chat_id": 9, "parent_chat_id": -1, "timestamp": 1.0, "input_length": 5,
         "output_length": 1, "type": "search", "turn": 1, "hash_ids": [30]},
        {"chat_id": 3, "parent_chat_id": 2, "timestamp": 3.0, "input_length": 48,
         "output_length": 3, "type": "text", "turn": 3, "hash_ids": [7, 8, 9]},
    ]
    path = write_lines(tmp_path / "qwen.jsonl", rows)
    assert detect_format(path) == "bailian"
    requests = read_trace(path).requests
    assert [r.session_id for r in requests] == ["1", "9", "1", "1"]
    assert [r.arrival_s for r in requests] == [0.0, 0.5, 1.5, 2.5]  # shifted to start at 0
    assert [r.request_id for r in requests] == [0, 1, 2, 3]
    assert requests[0].page_size_tokens == 16
    # request 2 (40 tokens) reuses pages 7, 8 = 32 tokens; request 3 (48) all 3 pages = 47
    assert hit_tokens(requests) == [0, 0, 32, 47]


def test_azure_prefix_models(tmp_path):
    """Two rows 4.314579 s apart. With `none` nothing is shared (hit 0); with shared:32 and
    16-token pages both prompts start with the same 2 pages, so the second hits 32 tokens."""
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:15:46.6805900,374,44\n"
                    "2023-11-16 18:15:50.9951690,396,109\n")
    assert detect_format(path) == "azure"
    plain = read_trace(path)
    assert plain.labels["prefix_model"].startswith("none")
    assert [r.arrival_s for r in plain.requests] == pytest.approx([0.0, 4.314579])
    assert hit_tokens(plain.requests) == [0, 0]
    assert [r.num_pages for r in plain.requests] == [24, 25]
    shared = read_trace(path, options=ReadOptions(prefix_model="shared:32"))
    assert "synthetic" in shared.labels["prefix_model"]
    assert hit_tokens(shared.requests) == [0, 32]
    with pytest.raises(InputError, match="prefix model") as caught:
        read_trace(path, options=ReadOptions(prefix_model="zipf"))
    assert caught.value.field == "trace.prefix_model"


def test_burstgpt_and_vidur(tmp_path):
    burst = tmp_path / "burst.csv"
    burst.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,"
                     "Session ID\n7.5,GPT-4,100,20,120,Conversation log,s1\n"
                     "2,ChatGPT,33,0,33,API log,\n")
    assert detect_format(burst) == "burstgpt"
    requests = read_trace(burst).requests
    assert [(r.arrival_s, r.input_tokens, r.output_tokens, r.session_id) for r in requests] \
        == [(0.0, 33, 0, None), (5.5, 100, 20, "s1")]  # shifted to start at 0
    vidur = tmp_path / "vidur.csv"
    vidur.write_text("request_id,arrived_at,num_prefill_tokens,num_decode_tokens\n"
                     "0,0.25,17,3\n1,0.5,16,4\n")
    assert detect_format(vidur) == "vidur"
    requests = read_trace(vidur, options=ReadOptions(block_size=8)).requests
    assert [r.num_pages for r in requests] == [3, 2]
    assert [r.arrival_s for r in requests] == [0.0, 0.25]


def test_token_ids_chain_pages_by_content(tmp_path):
    """Page size 8. A = tokens 1..20 (pages 0,1,2), B = 1..16 then 99 (shares 2 full pages,
    then differs), C = A again (hits all 20 tokens, capped at 19)."""
    a = list(range(1, 21))
    rows = [{"prompt_token_ids": a, "output_length": 2, "arrival_s": 0.0},
            {"input_ids": a[:16] + [99], "max_tokens": 1, "timestamp": 1000},
            {"token_ids": a, "arrival_s": 2.0, "session_id": 5}]
    path = write_lines(tmp_path / "tok.jsonl", rows)
    assert detect_format(path) == "token-ids"
    requests = read_trace(path, options=ReadOptions(block_size=8)).requests
    assert [r.page_ids for r in requests] == [(0, 1, 2), (0, 1, 3), (0, 1, 2)]
    assert hit_tokens(requests) == [0, 16, 19]
    assert requests[1].arrival_s == 1.0 and requests[2].session_id == "5"


def _ragpulse(folder: Path) -> Path:
    folder.mkdir()
    write_lines(folder / "1_sys_prompt.jsonl", [{"sys_prompt_id": 100, "token_length": 10}])
    write_lines(folder / "2_passages.jsonl", [{"passage_id": 1, "token_length": 8},
                                              {"passage_id": 2, "token_length": 8}])
    write_lines(folder / "4_user_input.jsonl", [{"user_input_id": 200, "token_length": 3}])
    parts = {"sys_prompt": [100], "history": [], "web_search": [], "user_input": [200]}
    return write_lines(folder / "0_trace.jsonl", [
        {"timestamp": "5", "input_length": 30, "output_length": 4, "session_id": "a",
         "hash_ids": {**parts, "passages_ids": [1]}},
        {"timestamp": "3", "input_length": 30, "output_length": 4, "session_id": "b",
         "hash_ids": {**parts, "passages_ids": [2]}},
        {"timestamp": "9", "input_length": 30, "output_length": 4, "session_id": "a",
         "hash_ids": {**parts, "passages_ids": [1]}},
    ])


def test_ragpulse_chains_chunk_sequences(tmp_path):
    """4-token pages over sys(10) + passage(8) + user(3) + 9 template tokens = 30 tokens,
    8 pages: p0, p1 = sys; p2 = sys[8:10] + passage[0:2]; p3 = passage; p4 = passage[6:8] +
    user[0:2]; then the partial chunk page and the template tail are private. Sorted by time,
    b (t=3) comes first; a (passage 1) shares only p0, p1 with b = 8 tokens; the second a
    shares the 5 chunk pages = 20 tokens."""
    trace = _ragpulse(tmp_path / "rag")
    for path in (trace, trace.parent):
        assert detect_format(path) == "ragpulse"
        requests = read_trace(path, options=ReadOptions(block_size=4)).requests
        assert [r.session_id for r in requests] == ["b", "a", "a"]
        assert [r.num_pages for r in requests] == [8, 8, 8]
        assert hit_tokens(requests) == [0, 8, 20]


def _conversation(path: Path, name: str) -> Path:
    path.write_text(json.dumps({"id": name, "block_size": 64, "hash_id_scope": "local",
                                "requests": [
        {"t": 0.0, "type": "n", "in": 130, "out": 5, "hash_ids": [1, 2]},
        {"t": 5.0, "type": "subagent", "agent_id": "x", "requests": [
            {"t": 1.0, "type": "n", "in": 70, "out": 2, "hash_ids": [1]}]},
        {"t": 9.0, "type": "s", "in": 200, "out": 5, "hash_ids": [1, 2, 3]},
    ]}))
    return path


def test_kv_cache_tester_nested_subagents_and_arrivals(tmp_path):
    """130 tokens = 2 named 64-token blocks + a 2-token private tail; the sub-agent starts
    at 5 s and its request at 5 + 1 = 6 s, sharing block 1 (64 tokens); the last request
    (200 = 3*64 + 8) shares blocks 1, 2 (128 tokens). Two files: ids never collide, and the
    second conversation starts at a seeded exponential gap."""
    folder = tmp_path / "kv"
    folder.mkdir()
    one = _conversation(folder / "trace_a.json", "a")
    requests = read_trace(one).requests
    assert [(r.arrival_s, r.session_id) for r in requests] == [(0, "a"), (6, "a/x"), (9, "a")]
    assert [r.num_pages for r in requests] == [3, 2, 4]
    assert hit_tokens(requests) == [0, 64, 128]
    _conversation(folder / "trace_b.json", "b")
    assert detect_format(folder) == "kv-cache-tester"
    data = read_trace(folder, options=ReadOptions(session_rate_per_s=0.01, seed=3))
    assert "poisson" in data.labels["arrival_model"]
    by_session = {}
    for r in data.requests:
        by_session.setdefault(r.session_id, []).append(r)
    start_b = by_session["b"][0].arrival_s
    assert start_b == pytest.approx(np.random.default_rng(3).exponential(100.0))
    again = read_trace(folder, options=ReadOptions(session_rate_per_s=0.01, seed=3)).requests
    assert again == data.requests
    assert set(by_session["a"][0].page_ids).isdisjoint(by_session["b"][0].page_ids)
    other = read_trace(folder, options=ReadOptions(session_rate_per_s=0.01, seed=4)).requests
    assert other[-1].arrival_s != data.requests[-1].arrival_s
    with pytest.raises(InputError, match="64 tokens"):
        read_trace(one, options=ReadOptions(block_size=16))


def test_mooncake_row_block_size_and_detection(tmp_path):
    path = write_lines(tmp_path / "x.txt", [
        {"timestamp": 10, "input_length": 20, "output_length": 1, "hash_ids": [4, 5],
         "block_size": 16}])
    assert detect_format(path) == "mooncake"
    assert read_trace(path).requests[0].page_size_tokens == 16
    assert read_trace(path, options=ReadOptions(block_size=512)).requests[0].page_size_tokens \
        == 16
    plain = write_lines(tmp_path / "y.jsonl", [
        {"timestamp": 10, "input_length": 20, "output_length": 1, "hash_ids": [4, 5]}])
    with pytest.raises(InputError, match="ceil"):
        read_trace(plain)
    assert read_trace(plain, options=ReadOptions(block_size=16)).requests[0].num_pages == 2


def test_coarsen_known_answer_and_refusals():
    """Fine 16-token pages [1..5] of a 70-token prompt -> 32-token pages: runs (1,2),
    (3,4), (5) named by their last ids [2, 4, 5]."""
    fine = Request(0, 0.0, 70, 1, (1, 2, 3, 4, 5), 16)
    assert coarsen(fine, 32).page_ids == (2, 4, 5)
    assert coarsen(fine, 64).page_ids == (4, 5)
    assert coarsen(fine, 128).page_ids == (5,)
    assert coarsen(fine, 16) is fine
    with pytest.raises(InputError, match="finer"):
        coarsen(fine, 8)
    with pytest.raises(InputError, match="multiple"):
        coarsen(fine, 24)


@settings(max_examples=60, deadline=None)
@given(prompts=st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=40),
                        min_size=1, max_size=12),
       fine=st.sampled_from([1, 2, 4]), factor=st.sampled_from([1, 2, 3, 4]))
def test_coarsening_equals_direct_coarse_pages(tmp_path_factory, prompts, fine, factor):
    """Coarsening fine token-id pages gives the same per-request hits as chaining the same
    tokens directly at the coarse size (a differential test; small alphabet = much reuse)."""
    path = tmp_path_factory.mktemp("tok") / "t.jsonl"
    write_lines(path, [{"prompt_token_ids": p, "arrival_s": float(i)}
                       for i, p in enumerate(prompts)])
    fine_reqs = read_trace(path, options=ReadOptions(block_size=fine)).requests
    direct = read_trace(path, options=ReadOptions(block_size=fine * factor)).requests
    coarse = [coarsen(r, fine * factor) for r in fine_reqs]
    assert [r.num_pages for r in coarse] == [r.num_pages for r in direct]
    assert hit_tokens(coarse) == hit_tokens(direct)
    assert token_hit_rate(coarse) == pytest.approx(token_hit_rate(direct))
