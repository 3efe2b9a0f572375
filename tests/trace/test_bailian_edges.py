"""The Bailian reader (trace/bailian.py) at its edges: sessions through parents by hand
(a parent later in the file or not in it, chat 0, a chain longer than two), the fields a
row may leave out or give as text, detection, and every refusal word for word with the
field it names."""

from __future__ import annotations

import json
from pathlib import Path

from fakes import refusal

from prefixsim.trace import ReadOptions, detect_format, read_trace

BAILIAN = "bailian"


def chat(chat_id: int, parent: int | None = -1, t: object = 0.0, tokens: int = 20,
         ids: list | None = None, **extra) -> dict:
    row = {"chat_id": chat_id, "timestamp": t, "input_length": tokens, "output_length": 3,
           "type": "text", "turn": 1, "hash_ids": [chat_id * 10, chat_id * 10 + 1]
           if ids is None else ids, **extra}
    if parent is not None:
        row["parent_chat_id"] = parent
    return row


def trace(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_sessions_by_hand(tmp_path):
    # 0 is a chat like any other (not the root marker); 5 -> 4 -> 0 is one session "0"; 7
    # names a parent (99) the file does not hold: 99 is taken as the root; 8 names 6, which
    # comes later in the file, so 6 is not known yet and 8's root is 6 itself; a row
    # without parent_chat_id is a root
    rows = [chat(0, t=0.0), chat(4, 0, t=1.0), chat(5, 4, t=2.0), chat(7, 99, t=3.0),
            chat(8, 6, t=4.0), chat(6, t=5.0), chat(3, None, t=6.0)]
    requests = read_trace(trace(tmp_path / "q.jsonl", rows), BAILIAN).requests
    assert [r.session_id for r in requests] == ["0", "0", "0", "99", "6", "6", "3"]


def test_request_fields_by_hand(tmp_path):
    # 20 tokens in 16-token pages: two ids; the timestamp may be text (as the real trace
    # writes it); the block size is Bailian's 16 unless the options say otherwise
    rows = [chat(1, t="1.25", tokens=20, ids=[3, 4]), chat(2, t=2.5, tokens=16, ids=[9])]
    first, second = read_trace(trace(tmp_path / "q.jsonl", rows), BAILIAN).requests
    assert (first.request_id, first.arrival_s, first.input_tokens, first.output_tokens,
            first.page_ids, first.page_size_tokens) == (0, 0.0, 20, 3, (3, 4), 16)
    assert (second.request_id, second.arrival_s, second.page_ids) == (1, 1.25, (9,))
    assert [r.page_ids for r in read_trace(trace(tmp_path / "q.jsonl", rows), BAILIAN,
                                           ReadOptions(max_requests=1)).requests] == [(3, 4)]


def test_detected_by_its_fields(tmp_path):
    assert detect_format(trace(tmp_path / "a.jsonl", [chat(1)])) == BAILIAN
    # Mooncake rows have hash_ids but no chat_id; rows with chat_id but no hash_ids are
    # not Bailian either
    mooncake = {"timestamp": 0, "input_length": 20, "output_length": 1, "hash_ids": [1]}
    assert detect_format(trace(tmp_path / "m.jsonl", [mooncake])) == "mooncake"
    no_ids = {key: value for key, value in chat(1).items() if key != "hash_ids"}
    path = trace(tmp_path / "n.jsonl", [no_ids])
    assert "cannot detect the trace format" in refusal(detect_format, path)


def test_refusals_word_for_word(tmp_path):
    cases = [
        (chat(1, 1), "parent_chat_id: a chat cannot be its own parent"),
        (chat(-1), "chat_id: must be >= 0, got -1"),
        (chat((1 << 62) + 1), f"chat_id: must be <= {1 << 62}, got {(1 << 62) + 1}"),
        (chat(1, -2), "parent_chat_id: must be >= -1, got -2"),
        (chat(1, (1 << 62) + 1), f"parent_chat_id: must be <= {1 << 62}, got {(1 << 62) + 1}"),
        (chat(1, "3"), "parent_chat_id: expected an integer, got '3'"),
        (chat(1, t="soon"), "timestamp: expected a number, got 'soon'"),
        ({key: value for key, value in chat(1).items() if key != "chat_id"},
         "chat_id: missing field"),
        ({key: value for key, value in chat(1).items() if key != "timestamp"},
         "timestamp: missing field"),
    ]
    for row, message in cases:
        path = trace(tmp_path / "bad.jsonl", [chat(7, t=0.0, tokens=16, ids=[70]), row])
        assert refusal(read_trace, path, BAILIAN) == f"{path}:2: {message}", row


def test_chains_checked_with_the_line(tmp_path):
    # page 70 first holds a one-page prefix, then the second page of another: ids chained
    rows = [chat(1, ids=[70, 71], tokens=20), chat(2, ids=[5, 70], tokens=20)]
    path = trace(tmp_path / "q.jsonl", rows)
    message = refusal(read_trace, path, BAILIAN)
    assert message.startswith(f"{path}:2: hash_ids: ")
