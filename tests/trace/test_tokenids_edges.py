"""The token-ids reader (trace/tokenids.py) at its edges: the alternative keys, defaults
a line may leave out, arrival in seconds or milliseconds, and every refusal word for word
with its line and field."""

from __future__ import annotations

import json
from pathlib import Path

from fakes import refusal

from prefixsim.trace import ReadOptions, read_trace

TOKEN_IDS = "token-ids"


def trace(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_keys_and_defaults_by_hand(tmp_path):
    # line 1 leaves out output, arrival and session: 0, 0 and none; line 2 takes its tokens
    # from input_ids, its output from output_tokens and arrives at 2.5 s (2500 ms); line 3
    # arrives at 1.25 s; a chat_id is not a session here (only session_id is)
    rows = [{"prompt_token_ids": [1, 2, 3]},
            {"input_ids": [1, 2, 3, 4, 5], "output_tokens": 7, "timestamp": 2500,
             "session_id": 12},
            {"token_ids": [9], "max_tokens": 4, "arrival_s": 1.25, "chat_id": 3}]
    requests = read_trace(trace(tmp_path / "t.jsonl", rows), TOKEN_IDS,
                          ReadOptions(block_size=2)).requests
    assert [(r.arrival_s, r.input_tokens, r.output_tokens, r.session_id)
            for r in requests] == [(0.0, 3, 0, None), (1.25, 1, 4, None), (2.5, 5, 7, "12")]
    # pages of two tokens chained, numbered in file order: [1, 2] is page 0 for both
    # prompts that start with it, [3] after it 1, [3, 4] 2, [5] 3, [9] 4
    assert [r.page_ids for r in requests] == [(0, 1), (4,), (0, 2, 3)]


def test_refusals_word_for_word(tmp_path):
    cases = [
        ({"input_ids": ["a"]}, "input_ids: expected a list of integers"),
        ({"token_ids": []}, "token_ids: must hold at least one token"),
        ({"output_length": 1}, "prompt_token_ids: missing field"),
        ({"prompt_token_ids": [1], "output_tokens": -1}, "output_tokens: must be >= 0, got -1"),
        ({"prompt_token_ids": [1], "arrival_s": -1}, "arrival_s: must be a finite number >= 0, "
         "got -1.0"),
        ({"prompt_token_ids": [1], "timestamp": "now"}, "timestamp: expected a number, got "
         "'now'"),
        ({"prompt_token_ids": [1], "session_id": 1.5}, "session_id: expected a string or an "
         "integer, got 1.5"),
    ]
    for row, message in cases:
        path = trace(tmp_path / "bad.jsonl", [{"prompt_token_ids": [5]}, row])
        assert refusal(read_trace, path, TOKEN_IDS) == f"{path}:2: {message}", row
