"""Helpers shared by the command-line tests: the demo trace, a CliRunner call, and the check
of a one-line refusal (docs/input-rules.md I1).

Owns only what several test files need; fakes of the engine's parts are in `fakes.py`.
"""

from pathlib import Path

from click.testing import CliRunner, Result

from prefixsim.cli import app

REPO = Path(__file__).parents[1]
DEMO = REPO / "traces" / "demo_chat.jsonl"


def invoke(*args: object) -> Result:
    """Runs `prefixsim ARGS...` in process (each argument passed through `str`)."""
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line_error(result: Result, *expected: str) -> str:
    """Exit 2, exactly one stderr line `prefixsim: error: ...` holding each expected text and
    no traceback (docs/input-rules.md I1); returns the line."""
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("prefixsim: error: "), result.stderr
    assert "Traceback" not in result.output
    for text in expected:
        assert text in lines[0], (text, lines[0])
    return lines[0]
