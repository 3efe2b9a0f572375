"""The `prefixsim` command group and what every subcommand shares.

The cli package is the only code that chooses paths and writes files. Each subcommand lives
in its own module of this package and registers itself on `app`; `InputError` becomes one
line on stderr and exit code 2; results are written into a temporary folder and moved into
place only when complete.
"""


from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from prefixsim._version import __version__
from prefixsim.cli.lazy_group import LazyCommand, LazyGroup
from prefixsim.errors import InputError, is_users_os_error

RESULTS_ROOT = Path("results")


def fail_cleanly(command: Callable[..., Any]) -> Callable[..., Any]:
    """Report `InputError` as one line `prefixsim: error: ...` and exit 2, without a
    traceback. An OSError is one line too: exit 2 when the user can fix it (a full disk,
    `ulimit -f`, a name too long, no permission: docs/input-rules.md I19), else 1; a pipe
    closed by its reader (`| head`) ends the command quietly, exit 141. An empty path given
    to a path option (`-o ''`) is refused before the command starts."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            _refuse_empty_paths(kwargs)
            return command(*args, **kwargs)
        except InputError as exc:
            click.echo(f"prefixsim: error: {one_line(str(exc))}", err=True)
            sys.exit(2)
        except BrokenPipeError:  # the reader of the output left (`| head`): stop quietly
            _stdout_to_devnull()
            sys.exit(BROKEN_PIPE_EXIT)
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            click.echo(f"prefixsim: error: {one_line(where + (exc.strerror or str(exc)))}",
                       err=True)
            sys.exit(2 if is_users_os_error(exc) else 1)

    return wrapper


BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE: what a shell reports for a command a pipe closed on


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises nothing more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(devnull, sys.stdout.fileno())


class PathParam(click.Path):
    """click.Path that leaves an empty string as it is (a `path_type=Path` would turn it into
    `.`), so that `_refuse_empty_paths` names the option."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if value == "":
            return ""
        return super().convert(value, param, ctx)


def _refuse_empty_paths(values: dict[str, Any]) -> None:
    """An empty string given to a path option would silently mean the default (or `.`)."""
    context = click.get_current_context(silent=True)
    if context is None:
        return
    for param in context.command.params:
        if isinstance(param.type, click.Path) and values.get(param.name or "") == "":
            name = (param.human_readable_name if isinstance(param, click.Argument)
                    else max(param.opts, key=len) if param.opts else param.name)
            raise InputError("an empty path; give a name or leave the option out",
                             field=name)


def one_trace(argument: str | None, flag: str | None) -> str | None:
    """The trace a command was given as its TRACE argument or its --trace flag (either; the
    same file twice is fine, two different ones are refused)."""
    if argument is not None and flag is not None and Path(argument) != Path(flag):
        raise InputError(f"two traces given, {argument} and --trace {flag}; give one",
                         field="TRACE")
    return argument if argument is not None else flag


def one_line(text: str) -> str:
    """`text` on one line with terminal control characters shown as escapes (a name from a
    file must not move the cursor or retitle the terminal)."""
    text = " ".join(text.split())
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def safe_name(name: str) -> str:
    """A name from a file (a sweep spec's `name:`) made safe as one path component."""
    cleaned = re.sub(r"[^A-Za-z0-9._+-]+|\.{2,}", "-", name)
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip(".-")
    return cleaned[:80] or "sweep"


# ----------------------------------------------------------------------- printing
def format_value(value: object) -> str:
    """A summary value as the CLI prints it: 0.1235, 12,345.68, 1,024; a float under 0.001
    to 4 significant digits (a rate multiplier of 0.0000009537, not 0.0000)."""
    if isinstance(value, float):
        if value != 0 and abs(value) < 0.001:
            decimals = 3 - math.floor(math.log10(abs(value)))
            return f"{value:.{decimals}f}".rstrip("0")
        return f"{value:.4f}" if abs(value) < 10 else f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "-" if value is None else str(value)


# ---------------------------------------------------------------------------- CLI
# Every subcommand: its module is imported only when it is used (cli/lazy_group.py), and
# `prefixsim --help` lists the short help given here (a test checks it against the command's).
SUBCOMMANDS = (
    LazyCommand("accelerate", "prefixsim.cli.accelerate",
                "Compile the simulator's hot modules with Cython, for faster runs."),
    LazyCommand("calibrate", "prefixsim.cli.calibrate",
                "Time attention and GEMMs with torch on this machine, fit a cost model, write a"
                " profile."),
    LazyCommand("capacity", "prefixsim.cli.capacity",
                "Find the capacity of a fleet: each probe is a normal timed run (on the sweep"
                " executors);"),
    LazyCommand("curve", "prefixsim.cli.curve",
                "Hit rate against capacity for one or several policies."),
    LazyCommand("plot", "prefixsim.cli.report",
                "A custom line plot over the runs of a sweep folder (columns of sweep.parquet)."),
    LazyCommand("profile", "prefixsim.cli.profile",
                "Profiles of the fitted cost model: import public GPU measurements, validate,"
                " list."),
    LazyCommand("report", "prefixsim.cli.report",
                "Write DIR/report.html (self-contained) and DIR/plots/*.png for a run, sweep or"
                " tune folder (a"),
    LazyCommand("run", "prefixsim.cli.run",
                "Replay a trace and write summary.json, requests.parquet and config.yaml."),
    LazyCommand("sweep", "prefixsim.cli.sweep",
                "Run a sweep: SPEC.yaml has base: (a run config), grid: (dotted key -> list of"
                " values, all"),
    LazyCommand("trace", "prefixsim.cli.trace", "Inspect, convert and generate trace files."),
    LazyCommand("tune", "prefixsim.cli.tune",
                "Tune a run config with Optuna (pip install 'prefixsim[tune]'): SPEC.yaml has"
                " base: (a run"),
)


@click.group(cls=LazyGroup, lazy=SUBCOMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="prefixsim")
def app() -> None:
    """prefixsim: simulate what prefix (KV) caching does for LLM serving traffic.

    Replay a request trace through a radix-tree prefix cache and read hit rates, evictions
    and expirations (and, in timed mode, TTFT/TPOT/throughput). Start with
    `prefixsim run --help` or `prefixsim trace inspect --help`.
    """


