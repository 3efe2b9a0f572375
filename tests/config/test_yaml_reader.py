"""The one reader of user YAML, by hand: every refusal word for word with file and line,
exponents, BOMs, aliases counted, and command-line values read the same way
(prefixsim/errors.py `read_yaml_lines`, `yaml_scalar`)."""

import pytest

from prefixsim import errors
from prefixsim.errors import InputError, quoted, read_yaml, read_yaml_lines, yaml_scalar


def refusal(path):
    with pytest.raises(InputError) as error:
        read_yaml(path)
    assert error.value.file == str(path)
    return error.value.message, error.value.line, error.value.field


def test_files_that_cannot_be_read(tmp_path):
    assert refusal(tmp_path / "none.yaml") == ("no such file", None, None)
    assert refusal(tmp_path) == ("no such file", None, None)  # a folder is no file
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" + b"#" * errors.MAX_YAML_BYTES)
    assert refusal(big) == ("larger than 1,048,576 bytes; not a config file", None, None)
    exact = tmp_path / "exact.yaml"
    exact.write_bytes(b"a: 1\n#" + b"#" * (errors.MAX_YAML_BYTES - 6))
    assert len(exact.read_bytes()) == errors.MAX_YAML_BYTES and read_yaml(exact) == {"a": 1}
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("a: caf\u00e9\n".encode("latin-1"))
    assert refusal(latin) == ("not a UTF-8 text file", None, None)


def test_a_file_that_cannot_be_opened(tmp_path, monkeypatch):
    path = tmp_path / "r.yaml"
    path.write_text("a: 1\n")

    def refuse(self, mode="r"):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(type(path), "open", refuse)
    assert refusal(path) == ("cannot read (Permission denied)", None, None)


def test_yaml_problems_with_their_lines(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("a: 1\nb:\n  c: 2\n  c: 3\n")
    assert refusal(path) == ("key given twice in one mapping", 4, "c")
    path.write_text("a: 1\nb: [1,\n")
    message, line, field = refusal(path)
    assert message.startswith("not valid YAML (") and line == 3 and field is None
    assert "\n" not in message
    path.write_text("a: 1\n  b: 2\n")
    assert refusal(path) == ("not valid YAML (mapping values are not allowed here)", 2, None)
    path.write_text("[" * 5000 + "]" * 5000)
    assert refusal(path) == ("not valid YAML (too deeply nested)", None, None)


def test_aliases_are_counted_expanded(tmp_path, monkeypatch):
    monkeypatch.setattr(errors, "MAX_YAML_VALUES", 20)
    path = tmp_path / "r.yaml"
    path.write_text("a: &a [1, 2, 3, 4]\nb: [*a, *a, *a]\n")  # 1 + 2 keys + 5 + 16 = 24
    assert refusal(path) == ("holds more than 20 values once its aliases are expanded",
                             None, None)
    path.write_text("a: &a [1, 2, 3, 4]\nb: [*a, *a]\n")       # 1 + 2 + 5 + 11 = 19
    assert read_yaml(path)["b"] == [[1, 2, 3, 4]] * 2
    assert errors._count_values({"a": [1, (2, 3)], "b": {4}}, 100) == 10  # 1 + 2 keys + 7
    assert errors._count_values(list(range(50)), 10) == 11  # stops once past the budget


def test_what_a_file_reads_as(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_bytes("\ufeffa: 1e3\nb: 5E-3\nc: '1e3'\nd: 1.0e+2\ne: 12\n".encode())
    data, lines = read_yaml_lines(path)
    assert data == {"a": 1000.0, "b": 0.005, "c": "1e3", "d": 100.0, "e": 12}
    assert dict(lines) == {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
    path.write_text("")
    assert read_yaml(path) is None
    path.write_text("- 1\n- {x: y}\n")
    assert read_yaml(path) == [1, {"x": "y"}]


def test_command_line_values_read_as_a_file_reads_them():
    assert yaml_scalar("1e3") == 1000.0 and yaml_scalar("'1e3'") == "1e3"
    assert yaml_scalar("[1, 2]") == [1, 2] and yaml_scalar("") is None
    for text, problem in [("{a: 1, a: 2}", "key 'a' given twice"),
                          ("[1,", None), ("[" * 5000, "too deeply nested")]:
        with pytest.raises(ValueError) as error:
            yaml_scalar(text)
        message = str(error.value)
        shown = repr(text) if len(text) < 100 else f"{'[' * 60!r}... (5,000 characters)"
        assert message.startswith("not a YAML value (") and message.endswith(f": {shown}")
        if problem is not None:
            assert message == f"not a YAML value ({problem}): {shown}"
        assert "\n" not in message


def test_a_long_value_is_quoted_by_its_start():
    assert quoted("x" * 60) == repr("x" * 60)  # at the limit: whole
    assert quoted("x" * 61) == f"{'x' * 60!r}... (61 characters)"
    assert quoted("ab'c", limit=3) == "\"ab'\"... (4 characters)"
    assert quoted("") == "''"


def test_problems_in_the_parsers_own_words(tmp_path, monkeypatch):
    path = tmp_path / "r.yaml"
    path.write_text("a: 1\nb: [1,\n")
    assert refusal(path) == (
        "not valid YAML (expected the node content, but found '<stream end>')", 3, None)
    path.write_text("a: \x01\n")  # a reader error: no `problem`, its own words
    assert refusal(path) == (
        'not valid YAML (unacceptable character #x0001: special characters are not allowed '
        'in "<unicode string>", position 3)', None, None)
    path.write_text("a: {[1]: 2}\n")  # an unhashable key: the parser's refusal, not None
    assert refusal(path) == ("not valid YAML (found unhashable key)", 1, None)
    assert str(pytest.raises(ValueError, yaml_scalar, "[1,").value) == \
        "not a YAML value (expected the node content, but found '<stream end>'): '[1,'"
    assert str(pytest.raises(ValueError, yaml_scalar, "a: \x01").value) == (
        'not a YAML value (unacceptable character #x0001: special characters are not '
        'allowed in "<unicode string>", position 3): \'a: \\x01\'')
    monkeypatch.setattr(errors, "MAX_YAML_VALUES", 20)
    path.write_text("a: &a [1, 2, 3, 4]\nb: [*a, *a, 1]\n")   # exactly 20 values
    assert read_yaml(path)["b"][2] == 1


def test_a_field_error_at_the_top_names_its_field_alone():
    error = {"ctx": {"error": errors.FieldError("gpu", "unknown")}}
    assert errors.field_of(error, "") == "gpu"
    assert errors.field_of(error, "hardware") == "hardware.gpu"
    assert errors.field_of({"ctx": {"error": ValueError("x")}}, "cache") == "cache"
    assert errors.field_of({}, "cache") == "cache"
