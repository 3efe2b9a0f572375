"""What every subcommand shares, on commands built here: one-line errors and their exit
codes, empty paths, one trace from two places, safe names (prefixsim/cli/app.py)."""

import errno
import importlib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from prefixsim.cli.app import (
    BROKEN_PIPE_EXIT,
    PathParam,
    fail_cleanly,
    format_value,
    one_line,
    one_trace,
    safe_name,
)
from prefixsim.errors import InputError

app_module = importlib.import_module("prefixsim.cli.app")  # the package's `app` is the group


def command_raising(error):
    @click.command()
    @fail_cleanly
    def command():
        raise error

    return command


@pytest.mark.parametrize(("error", "code", "line"), [
    (InputError("must be > 0", file="r.yaml", line=3, field="cache.ttl_s"), 2,
     "prefixsim: error: r.yaml:3: cache.ttl_s: must be > 0"),
    (InputError("two\n  lines\x1b[2J"), 2, "prefixsim: error: two lines\\x1b[2J"),
    (OSError(errno.ENOSPC, "No space left on device", "out/x.parquet"), 2,
     "prefixsim: error: out/x.parquet: No space left on device"),
    (OSError(errno.EACCES, "Permission denied"), 2, "prefixsim: error: Permission denied"),
    (OSError(errno.EIO, "Input/output error", "disk"), 1,
     "prefixsim: error: disk: Input/output error"),
    (OSError("a message only"), 1, "prefixsim: error: a message only"),
])
def test_errors_are_one_line_with_their_exit_code(error, code, line):
    result = CliRunner().invoke(command_raising(error), [])
    assert result.exit_code == code
    assert result.stderr == line + "\n" and result.stdout == ""


def test_a_closed_pipe_ends_quietly(monkeypatch):
    moved = []
    monkeypatch.setattr(app_module, "_stdout_to_devnull", lambda: moved.append(True))
    result = CliRunner().invoke(command_raising(BrokenPipeError()), [])
    assert result.exit_code == BROKEN_PIPE_EXIT == 141
    assert result.output == "" and moved == [True]


def test_other_errors_pass_through():
    result = CliRunner().invoke(command_raising(ValueError("bug")), [])
    assert result.exit_code == 1 and isinstance(result.exception, ValueError)


def test_an_empty_path_is_refused_naming_the_option():
    ran = []

    @click.command()
    @click.argument("trace", type=PathParam(), required=False)
    @click.option("-o", "--output", type=PathParam())
    @click.option("--name")
    @fail_cleanly
    def command(trace, output, name):
        ran.append((trace, output, name))

    result = CliRunner().invoke(command, ["-o", ""])
    assert (result.exit_code, result.stderr) == (
        2, "prefixsim: error: --output: an empty path; give a name or leave the option out\n")
    result = CliRunner().invoke(command, [""])
    assert result.stderr == \
        "prefixsim: error: TRACE: an empty path; give a name or leave the option out\n"
    assert CliRunner().invoke(command, ["--name", "", "t.jsonl"]).exit_code == 0
    assert ran == [("t.jsonl", None, "")]  # an empty text option is no path
    assert PathParam().convert("", None, None) == ""
    assert PathParam().convert("a/b", None, None) == "a/b"
    # called outside a command: no context, nothing to check
    assert fail_cleanly(lambda **kw: kw)(output="") == {"output": ""}


def test_one_trace_from_an_argument_or_a_flag():
    assert one_trace("a.jsonl", None) == "a.jsonl"
    assert one_trace(None, "b.jsonl") == "b.jsonl"
    assert one_trace(None, None) is None
    assert one_trace("./a.jsonl", "a.jsonl") == "./a.jsonl"  # the same file twice
    with pytest.raises(InputError) as error:
        one_trace("a.jsonl", "b.jsonl")
    assert (error.value.field, error.value.message) == (
        "TRACE", "two traces given, a.jsonl and --trace b.jsonl; give one")


def test_one_line_escapes_what_would_move_the_terminal():
    assert one_line("a\n b\t\tc  ") == "a b c"
    assert one_line("x\x1b]0;title\x07y") == "x\\x1b]0;title\\x07y"
    assert one_line("naïve ünits") == "naïve ünits"  # printable text stays as it is
    assert one_line("a\u200bb") == "a\\u200bb"


@pytest.mark.parametrize(("name", "safe"), [
    ("my sweep", "my-sweep"), ("../../etc", "etc"), ("a..b", "a-b"), ("...", "sweep"),
    ("", "sweep"), ("-x-", "x"), ("a  b//c", "a-b-c"), ("v1.2+cu", "v1.2+cu"),
    ("x" * 100, "x" * 80), ("über", "ber"),
])
def test_safe_names(name, safe):
    assert safe_name(name) == safe


def test_click_messages_as_the_readers_word_theirs():
    message = app_module._click_message
    option, argument = click.Option(["-j", "--jobs"]), click.Argument(["trace"])
    assert message(click.BadParameter("0 is too few", param=option)) == "--jobs: 0 is too few"
    assert message(click.BadParameter("bad", param=argument)) == "TRACE: bad"
    assert message(click.BadParameter("bad", param_hint="--custom")) == "--custom: bad"
    assert message(click.BadParameter("bad", param_hint=["-x", "--longer"])) == "--longer: bad"
    assert message(click.BadParameter("bad")) == "Invalid value: bad"
    command = click.Command("cmd")
    ctx = click.Context(command, info_name="cmd")
    assert message(click.UsageError("No such option X.", ctx)) == \
        "No such option X; try 'cmd --help'"
    assert message(click.UsageError(".hidden thing", ctx)) == \
        ".hidden thing; try 'cmd --help'"
    bare = click.Context(click.Command("cmd", add_help_option=False), info_name="cmd")
    assert message(click.UsageError("No such option.", bare)) == "No such option."
    assert message(click.UsageError("No context.")) == "No context."
    assert message(click.ClickException("plain.")) == "plain."
    missing = click.MissingParameter(ctx=ctx, param=argument)
    assert message(missing).startswith("Missing argument 'TRACE'")


def test_path_params_keep_click_words_for_other_values(tmp_path):
    param, ctx = click.Option(["--config"]), click.Context(click.Command("c"))
    with pytest.raises(click.BadParameter) as error:
        PathParam(exists=True).convert(str(tmp_path / "none"), param, ctx)
    assert error.value.param is param and error.value.ctx is ctx
    assert PathParam(path_type=Path).convert("", None, None) == ""  # not `.`


@pytest.mark.parametrize(("name", "safe"), [
    ("MySweep", "MySweep"), ("a- -b", "a-b"), ("Xa", "Xa"), ("aX", "aX"),
])
def test_more_safe_names(name, safe):
    assert safe_name(name) == safe


def test_numbers_from_ten_get_two_decimals():
    assert (format_value(9.99999), format_value(10.0), format_value(10.5)) == (
        "10.0000", "10.00", "10.50")
