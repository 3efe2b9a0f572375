"""One record's field checks (trace/fields.py), called directly: known answers and every
refusal word for word, with the field and the (file, line) it names."""

from __future__ import annotations

import json

import pytest
from fakes import refusal

from prefixsim.trace.fields import (
    MAX_TIME,
    MAX_TOKENS,
    ChainCheck,
    as_int,
    as_time,
    check_page_count,
    decode_json_line,
    id_list,
    int_field,
    lengths_and_ids,
    namespace_field,
    require,
    session_field,
)

WHERE = {"file": "t.jsonl", "line": 7}


# ------------------------------------------------------------------ one JSON line
def test_decode_json_line():
    assert decode_json_line('{"a": 1}\n', WHERE) == {"a": 1}
    assert refusal(decode_json_line, '{"a": 1', WHERE) == \
        "t.jsonl:7: not valid JSON (Expecting ',' delimiter)"
    assert refusal(decode_json_line, "[1, 2]", WHERE) == "t.jsonl:7: expected a JSON object"
    deep = "[" * 100_000 + "]" * 100_000
    assert refusal(decode_json_line, deep, WHERE) == \
        "t.jsonl:7: not valid JSON (too deeply nested)"


def test_require():
    assert require({"a": 0}, "a", WHERE) == 0
    for obj in ({}, {"a": None}):
        assert refusal(require, obj, "a", WHERE) == "t.jsonl:7: a: missing field"


# ------------------------------------------------------------------ integers
@pytest.mark.parametrize(("value", "expected"), [
    (5, 5), (5.0, 5), ("5", 5), (" 12 ", 12), ("1e3", 1000), ("1E3", 1000), ("2.0", 2),
    ("0", 0),
])
def test_as_int_known_answers(value, expected):
    got = as_int(value, "n", WHERE, allow_string=True)
    assert got == expected and type(got) is int


@pytest.mark.parametrize(("value", "text"), [
    ("5", "expected an integer, got '5'"),  # a string only where allowed (CSV cells)
    (True, "expected an integer, got True"),
    (None, "expected an integer, got None"),
    (2.5, "expected an integer, got 2.5"),
    (-1, "must be >= 0, got -1"),
    (MAX_TOKENS + 1, f"must be <= {MAX_TOKENS}, got {MAX_TOKENS + 1}"),
])
def test_as_int_refusals(value, text):
    assert refusal(as_int, value, "n", WHERE) == f"t.jsonl:7: n: {text}"


@pytest.mark.parametrize(("value", "text"), [
    ("x5", "expected an integer, got 'x5'"),
    ("2.5", "expected an integer, got 2.5"),  # a fraction in a cell
    ("1e400", "expected an integer, got inf"),
    ("12 tokens", "expected an integer, got '12 tokens'"),
])
def test_as_int_refuses_cells(value, text):
    assert refusal(as_int, value, "n", WHERE, allow_string=True) == f"t.jsonl:7: n: {text}"


def test_as_int_bounds_are_inclusive():
    assert as_int(3, "n", WHERE, minimum=3, maximum=3) == 3
    assert refusal(as_int, 2, "n", WHERE, minimum=3) == "t.jsonl:7: n: must be >= 3, got 2"
    assert refusal(as_int, 4, "n", WHERE, minimum=3, maximum=3) == \
        "t.jsonl:7: n: must be <= 3, got 4"


def test_int_field_defaults():
    assert int_field({"n": 0}, "n", WHERE) == 0  # 0 is allowed unless a minimum says not
    assert int_field({"n": MAX_TOKENS}, "n", WHERE) == MAX_TOKENS
    assert refusal(int_field, {"n": 9}, "n", WHERE, 0, 8) == "t.jsonl:7: n: must be <= 8, got 9"
    assert refusal(int_field, {}, "n", WHERE) == "t.jsonl:7: n: missing field"


# ------------------------------------------------------------------ times
def test_as_time():
    assert as_time(0, "t", WHERE) == 0.0 and type(as_time(3, "t", WHERE)) is float
    assert as_time(" 1.5 ", "t", WHERE, allow_string=True) == 1.5
    assert as_time(MAX_TIME, "t", WHERE) == MAX_TIME  # the bound itself is a time
    for value, text in [("1.5", "expected a number, got '1.5'"),
                        (True, "expected a number, got True"),
                        (float("nan"), "must be a finite number >= 0, got nan"),
                        (float("inf"), "must be a finite number >= 0, got inf"),
                        (-0.5, "must be a finite number >= 0, got -0.5"),
                        (MAX_TIME * 2, "must be <= 1e+16, got 2e+16")]:
        assert refusal(as_time, value, "t", WHERE) == f"t.jsonl:7: t: {text}"
    assert refusal(as_time, "soon", "t", WHERE, allow_string=True) == \
        "t.jsonl:7: t: expected a number, got 'soon'"


# ------------------------------------------------------------------ ids
def test_id_list():
    ids = [0, -(1 << 63), (1 << 63) - 1]
    assert id_list(ids, "hash_ids", WHERE) is ids and id_list([], "hash_ids", WHERE) == []
    for value in ([1, True], [1, 2.0], "1,2", None):
        assert refusal(id_list, value, "hash_ids", WHERE) == \
            "t.jsonl:7: hash_ids: expected a list of integers"
    for value in ([1 << 63], [-(1 << 63) - 1], [0, 1 << 64]):
        assert refusal(id_list, value, "hash_ids", WHERE) == \
            "t.jsonl:7: hash_ids: ids must fit in 64 bits"


def test_check_page_count():
    check_page_count(3, 1025, 512, WHERE)  # ceil: a partial last page has an id
    check_page_count(2, 1025, 512, WHERE, exact_blocks=True)  # floor: full pages only
    assert refusal(check_page_count, 2, 1025, 512, WHERE) == (
        "t.jsonl:7: hash_ids: has 2 ids but input length 1025 needs ceil(1025/512) = 3 (is "
        "--block-size right?)")
    assert refusal(check_page_count, 3, 1025, 512, WHERE, key="ids", exact_blocks=True) == (
        "t.jsonl:7: ids: has 3 ids but input length 1025 needs floor(1025/512) = 2 (is "
        "--block-size right?)")


def test_lengths_and_ids():
    row = {"input_length": 600, "output_length": 0, "hash_ids": [4, 5]}
    assert lengths_and_ids(row, 512, WHERE) == (600, 0, [4, 5])
    assert refusal(lengths_and_ids, {**row, "input_length": 0}, 512, WHERE) == \
        "t.jsonl:7: input_length: must be >= 1, got 0"
    assert refusal(lengths_and_ids, {**row, "output_length": -1}, 512, WHERE) == \
        "t.jsonl:7: output_length: must be >= 0, got -1"
    assert refusal(lengths_and_ids, {**row, "hash_ids": [4, "5"]}, 512, WHERE) == \
        "t.jsonl:7: hash_ids: expected a list of integers"
    assert refusal(lengths_and_ids, {**row, "input_length": MAX_TOKENS + 1}, 512, WHERE) == \
        f"t.jsonl:7: input_length: must be <= {MAX_TOKENS}, got {MAX_TOKENS + 1}"


# ------------------------------------------------------------------ chains
def test_chain_check_names_the_position_and_both_parents():
    chains = ChainCheck()
    chains.check([1, 2, 3], WHERE)
    chains.check([1, 2, 4], WHERE)  # a branch: 4 follows 2, as 3 did
    assert chains.parent_of == {1: None, 2: 1, 3: 2, 4: 2}
    assert refusal(chains.check, [5, 2], WHERE) == (
        "t.jsonl:7: hash_ids: id 2 at position 1 follows 5 here but 1 earlier (ids are not "
        "chained prefix hashes)")
    assert refusal(chains.check, [2], WHERE, key="ids") == (
        "t.jsonl:7: ids: id 2 at position 0 follows None here but 1 earlier (ids are not "
        "chained prefix hashes)")


def test_chain_check_keeps_namespaces_apart():
    chains = ChainCheck()
    chains.check([1, 2], WHERE, namespace="a")
    chains.check([7, 2], WHERE, namespace="b")  # b's id 2 is another page
    chains.check([2], WHERE)  # and so is the id 2 of no namespace
    assert chains.parent_of[("a", 2)] == ("a", 1) and chains.parent_of[("b", 2)] == ("b", 7)
    assert refusal(chains.check, [9, 2], WHERE, namespace="a") == (
        "t.jsonl:7: hash_ids: id 2 at position 1 follows 9 here but 1 earlier (ids are not "
        "chained prefix hashes)")


# ------------------------------------------------------------------ sessions, namespaces
def test_session_field():
    assert session_field({"session_id": "s1"}, WHERE) == "s1"
    assert session_field({"chat_id": 42}, WHERE) == "42"
    assert session_field({"session_id": None, "chat_id": 3}, WHERE) is None  # the first key
    assert session_field({}, WHERE) is None
    assert refusal(session_field, {"chat_id": [1]}, WHERE) == \
        "t.jsonl:7: chat_id: expected a string or an integer, got [1]"
    assert refusal(session_field, {"conv": 1.5}, WHERE, keys=("conv",)) == \
        "t.jsonl:7: conv: expected a string or an integer, got 1.5"
    assert refusal(session_field, {"session_id": True}, WHERE) == \
        "t.jsonl:7: session_id: expected a string or an integer, got True"
    long = {"session_id": {"k": "v" * 100}}
    assert len(refusal(session_field, long, WHERE).split("got ")[1]) == 60


def test_namespace_field():
    assert namespace_field({"namespace": "team-a"}, WHERE) == "team-a"
    assert namespace_field({"tenant": "b"}, WHERE, key="tenant") == "b"
    assert namespace_field({}, WHERE) is None and namespace_field({"namespace": None}, WHERE) \
        is None
    for value in ("", 3, ["a"]):
        assert refusal(namespace_field, {"namespace": value}, WHERE) == \
            f"t.jsonl:7: namespace: expected a non-empty string, got {value!r}"


def test_a_real_decoder_error_text_is_kept():
    # the text in brackets is json's own message for the line, not a paraphrase
    try:
        json.loads('{"a": }')
    except json.JSONDecodeError as exc:
        assert refusal(decode_json_line, '{"a": }', WHERE) == \
            f"t.jsonl:7: not valid JSON ({exc.msg})"
