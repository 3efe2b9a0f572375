"""The Mooncake reader's fast path (trace/mooncake_fast.py, Arrow into columns) against its
exact per-line path: the same requests, time shift and reordering for every file, or, when
a file is bad, the same one-line error (the fast path gives up and the exact path decides)."""

import json

import pytest
from fast_path import assert_same_reads
from fast_path import read_both as read_both_ways
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixsim.errors import InputError
from prefixsim.trace import ReadOptions, mooncake, read_trace
from prefixsim.trace.columns import RequestColumns


def read_both(path, options=None):
    return read_both_ways(path, "mooncake", mooncake, "read_fast", options)


rows = st.fixed_dictionaries(
    {"timestamp": st.one_of(st.integers(0, 10**6), st.floats(0, 1e6)),
     "input_length": st.integers(1, 2000), "output_length": st.integers(0, 50)},
    optional={"session_id": st.one_of(st.text(max_size=5), st.integers(0, 9), st.none()),
              "note": st.integers()})


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rows, min_size=1, max_size=30), st.sampled_from([None, 64, 512]),
       st.booleans(), st.booleans(), st.sampled_from(["ok", "float_len", "bool_id", "string",
                                                       "unchained", "null"]))
def test_fast_and_exact_paths_agree(tmp_path, lines, block_size, bom, blanks, flaw):
    """Chained ids over a few shared chains, times out of order, optional fields, a BOM,
    blank lines and one kind of flaw: both paths give the same requests or the same error."""
    size = block_size or 512
    out = []
    for i, row in enumerate(lines):
        count = -(-row["input_length"] // size)
        chain = i % 3
        row = {**row, "hash_ids": [chain * 10_000 + k for k in range(count)]}
        if block_size is not None and i % 2:
            row["block_size"] = block_size
        out.append(row)
    bad = out[len(out) // 2]
    if flaw == "float_len":
        bad["input_length"] = float(bad["input_length"])
    elif flaw == "bool_id":
        bad["hash_ids"][0] = True
    elif flaw == "string":
        bad["output_length"] = str(bad["output_length"])
    elif flaw == "unchained":
        bad["hash_ids"] = [99_999] + bad["hash_ids"][1:] if len(bad["hash_ids"]) > 1 \
            else [5]
    elif flaw == "null":
        bad["timestamp"] = None
    text = "\n".join(json.dumps(row) + ("\n" if blanks and i % 4 == 1 else "")
                     for i, row in enumerate(out)) + "\n"
    path = tmp_path / "t.jsonl"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    options = ReadOptions(block_size=block_size)
    assert_same_reads(*read_both(path, options))


def test_a_plain_file_goes_the_fast_way(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": i, "input_length": 600, "output_length": 1,
                                        "hash_ids": [1, 2 + i]}) + "\n" for i in range(10)))
    assert isinstance(read_trace(path).requests, RequestColumns)


def test_deep_nesting_never_reaches_arrow(tmp_path):
    """A line nested 100,000 deep would overflow Arrow's recursive parser: the scan sends it
    to the exact path, which refuses it in one line."""
    path = tmp_path / "deep.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": '
                    + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(InputError, match="deep.jsonl"):
        read_trace(path, "mooncake")


def test_max_requests_stops_early(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": i, "input_length": 600, "output_length": 1,
                                        "hash_ids": [1, 2 + i]}) + "\n" for i in range(100)))
    fast, exact = read_both(path, ReadOptions(max_requests=7))
    assert len(fast.requests) == 7 and list(fast.requests) == list(exact.requests)


@pytest.mark.parametrize("text", ["null", " null", "\n\nnull\n", "null\n" + json.dumps(
    {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}) + "\n",
    "[]\n", "7\n"])
def test_a_file_whose_first_value_is_not_an_object_never_reaches_arrow(tmp_path, text):
    """Arrow's JSON reader (pyarrow 26) crashes the process on a file whose first value is
    `null`: the scan sends any file that does not open with an object to the exact path,
    which names the line; Arrow still reads one that opens with whitespace then `{`."""
    from prefixsim.trace.mooncake_fast import record_lines

    path = tmp_path / "t.jsonl"
    path.write_text(text)
    assert record_lines(path) is None
    with pytest.raises(InputError, match="t.jsonl") as error:
        read_trace(path, "mooncake")
    assert "\n" not in str(error.value)
    path.write_text("\n  " + json.dumps(
        {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}) + "\n")
    assert record_lines(path) == 1
