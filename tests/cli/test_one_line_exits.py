"""How every command ends when it does not finish: a usage error Click finds (a bad option
value, a missing argument, an unknown option) is one line `prefixsim: error: ...` and exit 2
like any bad input (docs/input-rules.md I1).
"""


import pytest
from cli_helpers import DEMO, invoke, one_line_error


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
