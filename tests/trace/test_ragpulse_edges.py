"""The RAGPulse reader (trace/ragpulse.py) at its edges: the chunk pager's page ids by hand
(shared while the chunk sequence is shared, private after), ids whose Python hashes are
equal, and the tables' and lines' refusals word for word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import refusal

from prefixsim.trace import ReadOptions, detect_format, read_trace
from prefixsim.trace.ragpulse import ChunkPager


def test_pages_by_hand():
    # 16-token pages: chunk 1 (20 tokens) then chunk 2 (12): page 0 is 1[0:16]; page 1 is
    # 1[16:20] + 2[0:12] after page 0; 34 tokens in all: a third, partial page is private
    pager = ChunkPager(16)
    assert pager.page_ids([(1, 20), (2, 12)], 34) == (0, 1, -1)
    assert pager.page_ids([(1, 20), (3, 12)], 32) == (0, 2)  # the second page differs
    assert pager.page_ids([(1, 16)], 16) == (0,)
    assert pager.page_ids([(2, 16)], 40) == (3, -2, -3)  # 2 first: a new first page
    assert pager.page_ids([], 5) == (-4,)
    assert pager.page_ids([(1, 15)], 15) == (-5,)  # 15 tokens of chunk 1: no full page


def test_a_first_page_is_never_taken_for_a_page_after_another():
    pager = ChunkPager(16)
    assert pager.page_ids([(1, 16), (2, 16), (4, 16)], 48) == (0, 1, 2)
    assert pager.page_ids([(4, 16)], 16) == (3,)  # chunk 4 first, not after page 1


def test_ids_with_equal_python_hashes_are_different_pages():
    a, b = 5, 5 + (1 << 61) - 1  # hash(a) == hash(b): a 64-bit hash of the tuple merged them
    assert hash((-1, ((a, 0, 16),))) == hash((-1, ((b, 0, 16),)))
    pager = ChunkPager(16)
    assert pager.page_ids([(a, 16)], 16) != pager.page_ids([(b, 16)], 16)


def folder(tmp_path: Path, lines: list[dict], tables: dict[str, list[dict]]) -> Path:
    (tmp_path / "0_trace.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    for name, rows in tables.items():
        (tmp_path / name).write_text("".join(json.dumps(x) + "\n" for x in rows))
    return tmp_path


def line(**fields) -> dict:
    return {"timestamp": "1.5", "input_length": 40, "output_length": 3,
            "hash_ids": {"sys_prompt": [1], "user_input": [2]}, **fields}


TABLES = {"1_sys_prompt.jsonl": [{"sys_prompt_id": 1, "token_length": 20}],
          "5_user_input.jsonl": [{"user_input_id": 2, "token_length": 12}]}


def test_a_plain_folder(tmp_path):
    (only,) = read_trace(folder(tmp_path, [line()], TABLES)).requests
    assert only.page_ids == (0, 1, -1) and only.page_size_tokens == 16


@pytest.mark.parametrize(("fields", "text"), [
    ({"hash_ids": [1, 2]}, "hash_ids: expected an object of id lists"),
    ({"hash_ids": {"extra": [1]}}, "hash_ids: unknown part 'extra' (valid: sys_prompt, "
                                   "passages_ids, history, web_search, user_input)"),
    ({"hash_ids": {"history": 3}}, "hash_ids.history: expected a list of ids"),
    ({"hash_ids": {"history": [9]}},
     "hash_ids.history: id 9 is in no id -> length table beside the trace"),
    ({"hash_ids": {"history": [True]}},
     "hash_ids.history: id True is in no id -> length table beside the trace"),
    ({"input_length": 31}, "input_length: 31 is less than its chunks' 32 tokens"),
    ({"input_length": 0}, "input_length: must be >= 1, got 0"),
])
def test_line_refusals_word_for_word(tmp_path, fields, text):
    root = folder(tmp_path, [line(**fields)], TABLES)
    assert refusal(read_trace, root) == f"{root / '0_trace.jsonl'}:1: {text}"


@pytest.mark.parametrize(("rows", "text"), [
    ([{"a_id": 1, "b_id": 2, "token_length": 3}], "expected one *_id field"),
    ([{"sys_prompt_id": 1, "token_length": 0}], "token_length: must be >= 1, got 0"),
    ([{"sys_prompt_id": 1 << 63, "token_length": 5}],
     f"sys_prompt_id: must be <= {1 << 62}, got {1 << 63}"),
    ([{"sys_prompt_id": 1, "token_length": 5}, {"sys_prompt_id": 1, "token_length": 6}],
     "sys_prompt_id: id 1 has two lengths"),
])
def test_table_refusals_word_for_word(tmp_path, rows, text):
    root = folder(tmp_path, [line()], {**TABLES, "1_sys_prompt.jsonl": rows})
    line_no = len(rows)
    assert refusal(read_trace, root) == f"{root / '1_sys_prompt.jsonl'}:{line_no}: {text}"


def test_a_folder_without_one_trace(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps(line()) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps(line()) + "\n")
    (tmp_path / "1_sys_prompt.jsonl").write_text(json.dumps(TABLES["1_sys_prompt.jsonl"][0]))
    assert refusal(read_trace, tmp_path, "ragpulse") == \
        f"{tmp_path}: expected one RAGPulse trace (0_trace.jsonl) in the folder"


def test_a_trace_named_otherwise_is_found_by_its_content(tmp_path):
    root = folder(tmp_path, [line()], TABLES)
    (root / "0_trace.jsonl").rename(root / "requests.jsonl")
    (root / "notes.txt").write_text("{}")
    assert detect_format(root) == "ragpulse"
    assert len(read_trace(root).requests) == 1
    (root / "requests.jsonl").write_bytes(b"\xef\xbb\xbf" + (root / "requests.jsonl")
                                          .read_bytes())  # a byte-order mark changes nothing
    assert len(read_trace(root).requests) == 1


def test_a_second_trace_like_file_is_not_a_table(tmp_path):
    root = folder(tmp_path, [line()], TABLES)
    (root / "copy.jsonl").write_text(json.dumps(line()) + "\n")
    assert len(read_trace(root).requests) == 1


def test_a_table_line_that_is_not_json_names_its_file_and_line(tmp_path):
    root = folder(tmp_path, [line()], TABLES)
    table = root / "5_user_input.jsonl"
    table.write_text(table.read_text() + "{oops\n")
    assert refusal(read_trace, root).startswith(f"{table}:2: not valid JSON")


def test_a_line_by_hand(tmp_path):
    # chunks of 20 + 12 tokens fill a 32-token prompt exactly (not less than its chunks);
    # the timestamp may be text; only session_id names a session (a chat_id does not)
    lines = [line(input_length=32, timestamp="2.5", session_id="u1"),
             line(timestamp=4, chat_id=7)]
    first, second = read_trace(folder(tmp_path, lines, TABLES)).requests
    assert (first.arrival_s, first.input_tokens, first.page_ids, first.session_id) == (
        0.0, 32, (0, 1), "u1")
    assert (second.arrival_s, second.session_id) == (1.5, None)


def test_refusals_of_the_entry_point(tmp_path):
    missing = tmp_path / "gone"
    assert refusal(read_trace, missing, "ragpulse") == f"{missing}: no such file"
    root = folder(tmp_path, [line(), line(timestamp="later")], TABLES)
    assert refusal(read_trace, root) == \
        f"{root / '0_trace.jsonl'}:2: timestamp: expected a number, got 'later'"
    untimed = {key: value for key, value in line().items() if key != "timestamp"}
    root = folder(tmp_path, [line(), untimed], TABLES)
    assert refusal(read_trace, root) == f"{root / '0_trace.jsonl'}:2: timestamp: missing field"


def test_made_up_pages_are_charged_whole(tmp_path):
    # 40 tokens are 3 pages of 16 (not 2.5, not 2): two lines need 6, so a budget of 5
    # refuses the second line and a budget of 6 takes both
    root = folder(tmp_path, [line(), line(timestamp="2")], TABLES)
    assert len(read_trace(root, options=ReadOptions(max_pages=6)).requests) == 2
    assert refusal(read_trace, root, options=ReadOptions(max_pages=5)) == (
        f"{root / '0_trace.jsonl'}:2: input_length: the trace needs more than 5 pages; read "
        "fewer requests (--max-requests), coarser pages (--block-size) or raise "
        "--max-trace-pages")
