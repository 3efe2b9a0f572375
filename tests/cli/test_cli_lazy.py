"""`prefixsim --help` imports no subcommand module and none of the heavy libraries, and
lists what the loaded commands would (prefixsim/cli/lazy_group.py)."""

from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from prefixsim.cli.app import SUBCOMMANDS, app

HEAVY = ("pandas", "matplotlib", "numpy", "simpy", "pyarrow", "prefixsim.config",
         "prefixsim.pipeline")

_PROBE = """
import resource, sys
from prefixsim.cli import app
try:
    app(["--help"], prog_name="prefixsim")
except SystemExit:
    pass
usage = resource.getrusage(resource.RUSAGE_SELF)
print(",".join(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
print(usage.ru_utime + usage.ru_stime, file=sys.stderr)
"""


def test_help_imports_nothing_heavy() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY)],
                          capture_output=True, text=True, check=True, timeout=60)
    loaded, cpu = done.stderr.rstrip("\n").split("\n")[-2:]
    assert "Commands:" in done.stdout and "run" in done.stdout
    assert loaded == "", f"--help imported {loaded}"
    assert float(cpu) < 2.0  # about 0.2 s idle; the bar is loose for a loaded machine


def _help_text() -> str:
    return CliRunner().invoke(app, ["--help"], prog_name="prefixsim", terminal_width=100).output


def test_listing_matches_the_loaded_commands() -> None:
    lazy_text = _help_text()
    commands = app.load_all()
    assert {entry.name for entry in SUBCOMMANDS} == set(commands)
    assert _help_text() == lazy_text  # the table's short help is each command's own
    for entry in SUBCOMMANDS:
        command = commands[entry.name]
        assert command.callback is None or command.callback.__module__ == entry.module \
            or isinstance(command, click.Group)
        for limit in (40, 60, 84):
            assert entry.listed(limit) == command.get_short_help_str(limit), entry.name


def test_unknown_command_is_still_refused() -> None:
    result = CliRunner().invoke(app, ["runn"])
    assert result.exit_code == 2 and "No such command" in result.output
