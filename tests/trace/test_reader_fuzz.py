"""Every reader, fed broken input, fails with one InputError line naming file (line, field),
exit code 2 and no traceback; or, with --skip-bad-lines, skips and counts the bad records.

Two sources of broken input: the hand-made corpus in tests/data/broken/ (each file with the
line and field its error must name) and hypothesis, which mutates one field of a valid
record of each format into any JSON value, drops it, or writes arbitrary text or bytes.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixsim.cli import app
from prefixsim.errors import InputError
from prefixsim.trace import READERS, ReadOptions, read_trace

BROKEN = Path(__file__).parents[1] / "data" / "broken"

# file -> (line, field) the error must name (None = not applicable)
CORPUS = {
    "mooncake_truncated.jsonl": (2, None),
    "mooncake_wrong_type.jsonl": (2, "input_length"),
    "mooncake_negative_length.jsonl": (2, "output_length"),
    "mooncake_huge_length.jsonl": (2, "input_length"),
    "mooncake_missing_field.jsonl": (2, "hash_ids"),
    "mooncake_unchained.jsonl": (2, "hash_ids"),
    "mooncake_nan_time.jsonl": (2, "timestamp"),
    "empty.jsonl": (None, None),
    "garbage.bin": (None, None),
    "bailian_bad_parent.jsonl": (2, "parent_chat_id"),
    "azure_bad_time.csv": (3, "TIMESTAMP"),
    "azure_short_row.csv": (3, None),
    "burstgpt_zero_request.csv": (3, "Request tokens"),
    "vidur_negative_decode.csv": (3, "num_decode_tokens"),
    "tokenids_empty_prompt.jsonl": (2, "prompt_token_ids"),
    "ragpulse_unknown_chunk": (2, "hash_ids.passages_ids"),
    "kvcache_unsorted_t.json": (None, "requests[2].t"),
    "kvcache_wrong_count.json": (None, "requests[0].hash_ids"),
    "kvcache_truncated.json": (1, None),
}


def test_corpus_is_complete():
    assert sorted(CORPUS) == sorted(p.name for p in BROKEN.iterdir())


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_broken_file_gives_one_line_error(name):
    path = BROKEN / name
    with pytest.raises(InputError) as caught:
        read_trace(path)
    error = caught.value
    line, field = CORPUS[name]
    assert error.file is not None and Path(error.file).name in (name, "0_trace.jsonl")
    assert error.line == line
    assert error.field == field
    result = CliRunner().invoke(app, ["trace", "inspect", str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    message = result.output.strip()
    assert message.startswith("prefixsim: error: ") and "\n" not in message
    assert str(path.name) in message or "0_trace.jsonl" in message


@pytest.mark.parametrize("name", [n for n, (line, _) in CORPUS.items()
                                  if line not in (None, 1)])
def test_skip_bad_lines_skips_and_counts(name):
    data = read_trace(BROKEN / name, options=ReadOptions(skip_bad_lines=True))
    assert data.skipped_lines == 1
    assert len(data.requests) == 1
    result = CliRunner().invoke(app, ["trace", "inspect", str(BROKEN / name),
                                      "--skip-bad-lines", "--json"])
    assert result.exit_code == 0, result.output
    assert "skipped 1 bad lines" in result.output


# --------------------------------------------------------------------------- hypothesis
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=8,
)

VALID_LINES = {
    "mooncake": {"timestamp": 5, "input_length": 600, "output_length": 7, "hash_ids": [1, 2],
                 "session_id": "a"},
    "bailian": {"chat_id": 4, "parent_chat_id": -1, "timestamp": 1.5, "input_length": 20,
                "output_length": 3, "type": "text", "turn": 1, "hash_ids": [7, 8]},
    "token-ids": {"prompt_token_ids": [5, 6, 7], "output_length": 4, "arrival_s": 0.5},
    "ragpulse": {"timestamp": "5", "input_length": 30, "output_length": 4, "session_id": "a",
                 "hash_ids": {"sys_prompt": [100], "passages_ids": [1], "history": [],
                              "web_search": [], "user_input": [200]}},
}
CSV_HEADERS = {
    "azure": ("TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:15:46.6805900,374,44"),
    "burstgpt": ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
                 "5,ChatGPT,472,18,490,Conversation log"),
    "vidur": ("arrived_at,num_prefill_tokens,num_decode_tokens", "0.5,100,20"),
}
RAG_TABLES = {"1_sys_prompt.jsonl": '{"sys_prompt_id": 100, "token_length": 10}\n',
              "2_passages.jsonl": '{"passage_id": 1, "token_length": 8}\n',
              "4_user_input.jsonl": '{"user_input_id": 200, "token_length": 3}\n'}
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _read_or_input_error(path: Path, fmt: str) -> None:
    try:
        data = read_trace(path, fmt)
    except InputError as error:
        assert error.file is not None
        assert "\n" not in str(error)
        return
    assert data.requests and all(r.input_tokens >= 1 for r in data.requests)
    for r in data.requests:
        assert len(r.page_ids) == -(-r.input_tokens // r.page_size_tokens)


def _write_folder(text: str | bytes, fmt: str, folder: Path) -> Path:
    if fmt == "ragpulse":
        for name, content in RAG_TABLES.items():
            (folder / name).write_text(content)
        path = folder / "0_trace.jsonl"
    else:
        path = folder / "trace.txt"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


@pytest.mark.parametrize("fmt", sorted(VALID_LINES))
@FUZZ
@given(key=st.text(max_size=12), value=JSON_VALUES, drop=st.booleans(), data=st.data())
def test_jsonl_readers_fuzzed_fields(fmt, key, value, drop, data):
    line = dict(VALID_LINES[fmt])
    key = data.draw(st.sampled_from(sorted(line))) if data.draw(st.booleans()) else key
    if drop:
        line.pop(key, None)
    else:
        line[key] = value
    text = json.dumps(VALID_LINES[fmt]) + "\n" + json.dumps(line) + "\n"
    with tempfile.TemporaryDirectory() as folder:
        _read_or_input_error(_write_folder(text, fmt, Path(folder)), fmt)


@pytest.mark.parametrize("fmt", sorted(READERS.names()))
@FUZZ
@given(blob=st.binary(max_size=200) | st.text(max_size=200))
def test_every_reader_survives_garbage(fmt, blob):
    with tempfile.TemporaryDirectory() as folder:
        _read_or_input_error(_write_folder(blob, fmt, Path(folder)), fmt)


@pytest.mark.parametrize("fmt", sorted(CSV_HEADERS))
@FUZZ
@given(cells=st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12),
                      min_size=0, max_size=7))
def test_csv_readers_fuzzed_rows(fmt, cells):
    header, good = CSV_HEADERS[fmt]
    text = f"{header}\n{good}\n{','.join(cells)}\n"
    with tempfile.TemporaryDirectory() as folder:
        _read_or_input_error(_write_folder(text, fmt, Path(folder)), fmt)


@FUZZ
@given(path=st.sampled_from(["t", "in", "out", "hash_ids", "type", "requests"]),
       value=JSON_VALUES, nested=st.booleans())
def test_kv_cache_tester_fuzzed(path, value, nested):
    request = {"t": 1.0, "type": "n", "in": 130, "out": 5, "hash_ids": [1, 2]}
    request[path] = value
    items = [request]
    if nested:
        items = [{"type": "subagent", "t": 0.5, "agent_id": "x", "requests": items}]
    doc = {"id": "c", "block_size": 64, "requests": items}
    with tempfile.TemporaryDirectory() as folder:
        _read_or_input_error(_write_folder(json.dumps(doc), "kv-cache-tester", Path(folder)),
                             "kv-cache-tester")
