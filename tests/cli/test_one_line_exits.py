"""How every command ends when it does not finish: a usage error Click finds (a bad option
value, a missing argument, an unknown option) is one line `prefixsim: error: ...` and exit 2
like any bad input, and Ctrl-C is one line `prefixsim: interrupted` and exit 130, keeping
what a sweep finished for --resume (docs/input-rules.md I1, I14, I18, I19).
"""

import json

import pytest
from cli_helpers import DEMO, invoke, one_line_error

import prefixsim.cli.sweep  # noqa: F401 - registers the commands the tests patch
import prefixsim.cli.trace  # noqa: F401
import prefixsim.sweep.runner


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "folder").mkdir()
    (tmp_path / "spec.yaml").write_text("name: n\n")
    return tmp_path


# arguments -> what the one line names (Click's words, the option's longest name)
USAGE_ERRORS = {
    "run -o FILE": (["run", "--cache-only", "-o", "afile", DEMO], ["--output", "afile"]),
    "curve -o DIR": (["curve", "-o", "folder", DEMO], ["--output", "folder"]),
    "plot -o DIR": (["plot", "-o", "folder", "folder"], ["--output", "folder"]),
    "report FILE": (["report", "afile"], ["DIR: ", "afile"]),
    "trace generate -o DIR": (["trace", "generate", "--preset", "chat", "--requests", "5",
                               "-o", "folder"], ["--output", "folder"]),
    "cache tokens": (["run", "--cache-only", "--cache-tokens", "10 GB", DEMO],
                     ["--cache-tokens: ", "10 GB"]),
    "ttl nan": (["run", "--cache-only", "--ttl", "nan", DEMO], ["--ttl: ", "nan"]),
    "sweep -j 0": (["sweep", "-j", "0", "spec.yaml"], ["--jobs: ", "0 is not in the range"]),
    "tune --trials 0": (["tune", "--trials", "0", "spec.yaml"], ["--trials: "]),
    "unknown option": (["run", "--bogus"], ["--bogus", "; try '", " run --help'"]),
    "missing argument": (["sweep"], ["SPEC.yaml", " sweep --help'"]),
    "missing option": (["trace", "generate", "--preset", "chat"],
                       ["--requests", " trace generate --help'"]),
    "extra argument": (["sweep", "a", "b"], ["unexpected extra argument"]),
    "unknown command": (["bogus"], ["No such command 'bogus'", " --help'"]),
    "unknown subcommand": (["trace", "bogus"], ["'bogus'", " trace --help'"]),
}


@pytest.mark.parametrize("name", USAGE_ERRORS)
def test_a_usage_error_is_one_line_naming_the_option(files, name):
    """Click printed four lines (usage, hint, a blank line, `Error: Invalid value ...`)."""
    args, expected = USAGE_ERRORS[name]
    one_line_error(invoke(*args), *expected)
    assert sorted(p.name for p in files.iterdir()) == ["afile", "folder", "spec.yaml"]


def test_help_and_a_bare_group_still_show_the_help():  # as before
    assert invoke("run", "--help").exit_code == 0
    assert "trace generate [OPTIONS]" in invoke("trace", "generate", "-h").output
    bare = invoke("trace")
    assert "Commands:" in bare.output and "inspect" in bare.output
    assert invoke("--version").exit_code == 0


def test_ctrl_c_in_a_command_is_one_line_and_130(monkeypatch):
    """`trace inspect` (and every command) printed Click's `\\nAborted!` and exited 1."""

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(prefixsim.cli.trace, "read_trace", interrupted)
    result = invoke("trace", "inspect", DEMO)
    assert result.exit_code == 130
    assert result.stderr == "prefixsim: interrupted\n"


def test_an_interrupted_sweep_resumes_with_its_finished_runs(tmp_path, monkeypatch):
    trace = tmp_path / "t.jsonl"
    trace.write_text(DEMO.read_text())
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"name": "n", "base": {"trace": {"path": "t.jsonl"},
                                                      "cache_only": True},
                                "grid": {"cache.capacity_tokens": [1000, 2000, 4000, 8000]}}))
    out = tmp_path / "sweep"
    stored = prefixsim.sweep.runner.write_run
    calls = []

    def write_then_interrupt(*args, **kwargs):
        stored(*args, **kwargs)
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(prefixsim.sweep.runner, "write_run", write_then_interrupt)
    result = invoke("sweep", spec, "-o", out, "-j", "1", "--quiet")
    assert result.exit_code == 130 and result.stderr == "prefixsim: interrupted\n"
    monkeypatch.setattr(prefixsim.sweep.runner, "write_run", stored)
    resumed = invoke("sweep", spec, "-o", out, "-j", "1", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "2 ran, 0 failed, 2 already finished" in resumed.output
