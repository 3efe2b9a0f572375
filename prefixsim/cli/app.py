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
from collections.abc import Callable, Iterator
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
INTERRUPTED_EXIT = 130  # 128 + SIGINT: what a shell reports for a command Ctrl-C ended


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
            raise InputError("an empty path; give a name or leave the option out",
                             field=_param_name(param))


def _param_name(param: click.Parameter) -> str:
    """How a refusal names an option (its longest flag, `--output`) or argument (`TRACE`)."""
    if isinstance(param, click.Argument) or not param.opts:
        return param.human_readable_name
    return max(param.opts, key=len)


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
class CommandLine(LazyGroup):
    """The `prefixsim` group: Click parses and dispatches, but a usage error (a bad option
    value, a missing argument, an unknown option or command) of any command or subcommand
    is one line `prefixsim: error: ...`, exit 2, and Ctrl-C (KeyboardInterrupt) anywhere
    past start-up is one line `prefixsim: interrupted`, exit 130, after the clean-ups on
    its way out have run (docs/input-rules.md I1, I18), where Click would print its usage
    block or `Aborted!` and exit 1. A group called without a command still shows its help."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        with _one_line_exits():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _one_line_exits():  # the subcommands are parsed and run within
            return super().invoke(ctx)


_SHOWS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2


@contextlib.contextmanager
def _one_line_exits() -> Iterator[None]:
    try:
        yield
    except click.ClickException as exc:
        if isinstance(exc, _SHOWS_HELP):
            raise
        click.echo(f"prefixsim: error: {one_line(_click_message(exc))}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("prefixsim: interrupted", err=True)
        sys.exit(INTERRUPTED_EXIT)


def _click_message(exc: click.ClickException) -> str:
    """Click's message for `exc` as the readers word theirs: a bad value as `OPTION: what
    is wrong` (`--trials: 0 is not in the range x>=1.`); any other usage error (a missing
    argument, an unknown option) in Click's words, its hint to the help on the same line."""
    if isinstance(exc, click.BadParameter) and not isinstance(exc, click.MissingParameter):
        hint = exc.param_hint if exc.param_hint is not None else \
            _param_name(exc.param) if exc.param is not None else None
        if isinstance(hint, list | tuple):
            hint = max(hint, key=len)
        if hint:
            return f"{hint}: {exc.message}"
    text = exc.format_message()
    ctx = exc.ctx if isinstance(exc, click.UsageError) else None
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        help_option = max(ctx.help_option_names, key=len)
        text = f"{text.rstrip('.')}; try '{ctx.command_path} {help_option}'"
    return text


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


@click.group(cls=CommandLine, lazy=SUBCOMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="prefixsim")
def app() -> None:
    """prefixsim: simulate what prefix (KV) caching does for LLM serving traffic.

    Replay a request trace through a radix-tree prefix cache and read hit rates, evictions
    and expirations (and, in timed mode, TTFT/TPOT/throughput). Start with
    `prefixsim run --help` or `prefixsim trace inspect --help`.
    """


