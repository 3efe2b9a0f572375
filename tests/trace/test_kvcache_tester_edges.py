"""The kv-cache-tester reader (trace/kvcache_tester.py) at its edges: defaults a file may
leave out, page ids by hand (full blocks named, the partial one private), sub-agents to the
nesting limit, detection, and every refusal word for word with the field it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import refusal

from prefixsim.trace import ReadOptions, detect_format, read_trace
from prefixsim.trace.kvcache_tester import MAX_DEPTH

KV = "kv-cache-tester"


def conversation(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


def request(t: float = 0.0, tokens: int = 10, ids: list | None = None, **extra) -> dict:
    return {"t": t, "in": tokens, "out": 2, "hash_ids": ids or [], **extra}


def test_defaults_a_file_may_leave_out(tmp_path):
    path = conversation(tmp_path / "talk.json", {"requests": [
        {"t": 0, "in": 130, "hash_ids": [5, 6]}]})  # no id, block_size, scope or out
    (only,) = read_trace(path, KV).requests
    assert only.session_id == "talk" and only.page_size_tokens == 64
    assert only.output_tokens == 0 and only.input_tokens == 130


def test_page_ids_by_hand(tmp_path):
    # ids name full 64-token blocks only: 128 tokens are two named pages, 130 add a
    # private third; local ids become one global space, a fresh id for each new local one
    path = conversation(tmp_path / "c.json", {"id": "c", "block_size": 64, "requests": [
        request(0, 128, [1, 2]), request(1, 130, [1, 2]), request(2, 1, [])]})
    pages = [r.page_ids for r in read_trace(path, KV).requests]
    assert pages == [(0, 1), (0, 1, 2), (3,)]


def test_sub_agents_nest_to_the_limit(tmp_path):
    def nested(depth: int) -> dict:
        inner: dict = request(0.5, 10)
        for level in range(depth):
            inner = {"type": "subagent", "t": 1.0, "agent_id": f"a{level}",
                     "requests": [inner]}
        return {"id": "c", "requests": [inner]}

    data = read_trace(conversation(tmp_path / "ok.json", nested(MAX_DEPTH)), KV)
    (deepest,) = data.requests
    assert deepest.session_id == "c/" + "/".join(f"a{k}" for k in reversed(range(MAX_DEPTH)))
    assert data.time_shift_s == pytest.approx(MAX_DEPTH * 1.0 + 0.5)  # each level's clock
    path = conversation(tmp_path / "deep.json", nested(MAX_DEPTH + 1))
    field = "requests[0]" + ".requests[0]" * MAX_DEPTH + ".requests"
    assert refusal(read_trace, path, KV) == \
        f"{path}: {field}: sub-agents nested deeper than {MAX_DEPTH}"


@pytest.mark.parametrize(("doc", "text"), [
    ([1, 2], "expected a JSON object (one conversation)"),
    ({"requests": {}}, "requests: expected a list of requests"),
    ({"requests": [7]}, "requests[0]: expected an object"),
    ({"requests": [request(-1)]}, "requests[0].t: must be a finite number >= 0, got -1.0"),
    ({"requests": [request(2), request(1)]},
     "requests[1].t: t = 1.0 is before the previous request's 2.0 (requests must be in time "
     "order)"),
    ({"requests": [request(tokens=0)]}, "requests[0].in: must be >= 1, got 0"),
    ({"requests": [request(out=-1)]}, "requests[0].out: must be >= 0, got -1"),
    ({"requests": [request(tokens=64)]},
     "requests[0].hash_ids: has 0 ids but in = 64 needs floor(64/64) = 1"),
    ({"requests": [request(ids=[1.5])]}, "requests[0].hash_ids: expected a list of integers"),
    ({"block_size": 0, "requests": []}, "block_size: must be >= 1, got 0"),
    ({"hash_id_scope": "global", "requests": []},
     "hash_id_scope: expected \"local\" (ids that mean something inside this file only: the "
     "one scope read), got 'global'"),
    ({"requests": [{"type": "subagent", "t": 0, "requests": 5}]},
     "requests[0].requests: expected a list of requests"),
])
def test_refusals_word_for_word(tmp_path, doc, text):
    path = conversation(tmp_path / "c.json", doc)
    assert refusal(read_trace, path, KV) == f"{path}: {text}"


def test_a_block_size_other_than_the_file_s(tmp_path):
    path = conversation(tmp_path / "c.json", {"block_size": 64, "requests": [request()]})
    assert refusal(read_trace, path, KV, ReadOptions(block_size=16)) == \
        f"{path}: block_size: the file's pages are 64 tokens, not 16"
    assert len(read_trace(path, KV, ReadOptions(block_size=64)).requests) == 1


def test_json_refusals_name_the_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"requests": [}')
    assert refusal(read_trace, path, KV) == f"{path}:1: not valid JSON (Expecting value)"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert refusal(read_trace, path, KV) == f"{path}: not valid JSON (too deeply nested)"


def test_a_byte_order_mark_changes_nothing(tmp_path):
    path = tmp_path / "c.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"requests": [request()]}).encode())
    assert len(read_trace(path, KV).requests) == 1


def test_detection_of_files_and_folders(tmp_path):
    doc = {"id": "c", "block_size": 64, "requests": [request()]}
    assert detect_format(conversation(tmp_path / "one.json", doc)) == KV
    spread = tmp_path / "spread.json"  # a pretty-printed file: its head, not its first line
    spread.write_text(json.dumps(doc, indent=2))
    assert detect_format(spread) == KV
    scoped = tmp_path / "scoped.json"
    scoped.write_text(json.dumps({"hash_id_scope": "local", "requests": []}, indent=2))
    assert detect_format(scoped) == KV
    for other in ({"requests": [], "note": 1}, {"x": 1, "block_size": 64}):
        plain = tmp_path / "plain.json"
        plain.write_text(json.dumps(other, indent=2))
        with pytest.raises(Exception, match="cannot detect"):
            detect_format(plain)
    folder = tmp_path / "folder"
    folder.mkdir()
    conversation(folder / "a.json", doc)
    (folder / "notes.txt").write_text("not a conversation")
    assert detect_format(folder) == KV
    assert [r.session_id for r in read_trace(folder).requests] == ["c"]


def test_a_sub_agent_without_an_id_is_named_by_its_place(tmp_path):
    path = conversation(tmp_path / "c.json", {"id": "c", "requests": [
        request(0), {"type": "subagent", "t": 1, "requests": [request(0)]}]})
    assert [r.session_id for r in read_trace(path, KV).requests] == ["c", "c/1"]


def test_detection_edges(tmp_path):
    line = tmp_path / "line.json"  # one line with hash_ids beside requests: not a conversation
    line.write_text(json.dumps({"requests": [], "hash_ids": [1]}))
    with pytest.raises(Exception, match="cannot detect"):
        detect_format(line)
    indented = tmp_path / "indented.json"  # whitespace before the document
    indented.write_text("\n   " + json.dumps({"block_size": 64, "requests": []}, indent=2))
    assert detect_format(indented) == KV
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.json").write_bytes(b'{\n "id": "\xff",\n "block_size": 64, "requests": []}')
    assert detect_format(folder) == KV  # a byte that is not UTF-8 does not stop detection


def test_what_the_reader_refuses_before_a_file_is_read(tmp_path):
    missing, empty = tmp_path / "gone.json", tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a conversation")
    assert refusal(read_trace, missing, KV) == f"{missing}: no such file"
    assert refusal(read_trace, empty, KV) == f"{empty}: no .json conversation files in the folder"
    path = conversation(tmp_path / "c.json", {"requests": [request()]})
    for rate in (0.0, -1.0, float("inf"), float("nan")):
        assert refusal(read_trace, path, KV, ReadOptions(session_rate_per_s=rate)) == \
            f"session_rate_per_s: must be a finite number > 0, got {rate}"


def test_the_arrival_model_is_labelled(tmp_path):
    path = conversation(tmp_path / "c.json", {"requests": [request()]})
    data = read_trace(path, KV, ReadOptions(session_rate_per_s=0.25, seed=9))
    assert data.labels["arrival_model"] == (
        "poisson conversation starts, rate 0.25/s, seed 9 (modelled; the files carry no "
        "absolute time)")


def test_max_requests_stops_between_files(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("a", "b", "c"):
        conversation(folder / f"{name}.json", {"id": name, "requests": [request(0, 10),
                                                                        request(1, 10)]})
    data = read_trace(folder, KV, ReadOptions(max_requests=2))
    assert [r.session_id for r in data.requests] == ["a", "a"]
    data = read_trace(folder, KV, ReadOptions(max_requests=3))
    assert sorted(r.session_id for r in data.requests) == ["a", "a", "b"]
