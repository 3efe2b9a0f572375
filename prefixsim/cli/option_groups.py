"""Click options that reach a command as one object, and the executor options sweep and tune
share.

`grouped(into, cls, *options)` declares options named after the fields of the frozen
dataclass `cls` and hands the command `into=cls(**their values)` instead of one parameter
each. `executor_options` is `--executor`, `--address`, `-j` and `--dask-dashboard` as one
`ExecutorOptions` (`workers`). This module leaves the options' meaning to the commands and
the dataclasses.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import click

from prefixsim.sweep import EXECUTORS, ExecutorOptions

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def grouped(into: str, cls: type, *options: Decorator) -> Decorator:
    """`options` (click.option decorators, one per field of `cls`, in help order) whose
    values the command receives as the keyword argument `into`, a `cls`."""
    names = [field.name for field in dataclasses.fields(cls)]

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def with_group(*args: Any, **kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in names}
            return command(*args, **{into: cls(**values)}, **kwargs)

        for option in reversed(options):
            with_group = option(with_group)
        return with_group

    return decorate


def executor_options(jobs_help: str) -> Decorator:
    """`--executor`, `--address`, `-j` and `--dask-dashboard` as `workers`, an
    ExecutorOptions."""
    return grouped(
        "workers", ExecutorOptions,
        click.option("--executor", type=click.Choice(EXECUTORS.names()), default="local",
                     show_default=True,
                     help="local: worker processes here (joblib); dask / ray: a cluster "
                          "(pip install 'prefixsim[dask]' or 'prefixsim[ray]')."),
        click.option("--address", help="Scheduler address of a running Dask or Ray cluster; "
                                       "without it a local cluster of -j workers is started."),
        click.option("-j", "--jobs", "n_jobs", type=click.IntRange(min=1), help=jobs_help),
        click.option("--dask-dashboard", metavar="HOST:PORT",
                     help="Serve the local Dask cluster's dashboard here, e.g. 127.0.0.1:8787 "
                          "(off by default: it has no login; needs bokeh)."))
