"""`prefixsim accelerate`: compile the hot modules with Cython, show or clear the compiled
copies (prefixsim/accel/; docs/architecture.md "Compiled hot modules")."""

from __future__ import annotations

import time

import click

import prefixsim.accel as accel
from prefixsim.accel import HOT_MODULES
from prefixsim.accel import build as accel_build
from prefixsim.cli.app import app, fail_cleanly
from prefixsim.errors import InputError


@app.command("accelerate")
@click.option("--status", "show_status", is_flag=True,
              help="Say which hot modules have a compiled copy of their current source.")
@click.option("--clear", is_flag=True, help="Remove the compiled copies (runs use the sources).")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Modules compiled at once (default: the CPU count).")
@fail_cleanly
def accelerate(show_status: bool, clear: bool, jobs: int | None) -> None:
    """Compile the simulator's hot modules with Cython, for faster runs.

    The install compiles them already where it finds Cython and a C compiler (into the
    package's _compiled folder); this command is for the rest: after an edit of the
    sources, or an install that had no compiler. The timed engine, the caches, the cost
    models and the routers are compiled from their sources, with C types where a module
    has a .pxd of them (the compressed cache of cache-only runs; same code, so the same
    results) into a cache folder: $PREFIXSIM_ACCEL_DIR, else ~/.cache/prefixsim/accel.
    Modules already compiled from their current source (in either folder) are skipped.
    Every later run uses a compiled module only while its source is the one it was built
    from: after an upgrade or an edit, run this again.
    PREFIXSIM_PURE=1 runs the sources regardless; a run's summary says which code ran
    (code_path).
    Needs Cython (pip install 'prefixsim[accel]') and a C compiler.

    \b
    Examples:
      prefixsim accelerate
      prefixsim accelerate --status
      prefixsim accelerate --clear
    """
    folder, installed = accel.cache_dir(), accel.install_dir()
    if clear:
        click.echo(f"removed {accel_build.clear(folder)} compiled modules from {folder}")
        return
    if show_status:
        cached, at_install = accel.status(folder), accel.status(installed)
        for module in HOT_MODULES:
            where = ("compiled (cache)" if cached[module] else
                     "compiled (install)" if at_install[module] else "source")
            click.echo(f"{module:<40}{where}")
        either = sum(cached[m] or at_install[m] for m in HOT_MODULES)
        click.echo(f"{either} of {len(HOT_MODULES)} hot modules compiled for their current "
                   f"source (cache: {folder}; install: {installed})")
        notice = accel.install_notice()
        if notice is not None:
            click.echo(notice)
        return
    started = time.perf_counter()
    if all(accel.status().values()):
        click.echo(f"all {len(HOT_MODULES)} hot modules are compiled for their current "
                   f"source already (cache: {folder}; install: {installed})")
        return
    try:
        accel_build.require_cython()
        todo = sum(not compiled for compiled in accel.status().values())
        if todo:
            click.echo(f"compiling {todo} of {len(HOT_MODULES)} hot modules with Cython "
                       "(a minute or more) ...", err=True)
        built = accel_build.build(folder, jobs, elsewhere=[installed])
    except accel_build.AccelError as exc:
        raise InputError(str(exc)) from None
    click.echo(f"{len(built)} hot modules compiled ({todo} built now into {folder}, in "
               f"{time.perf_counter() - started:.0f} s; the others were already); runs use "
               "them from now on (PREFIXSIM_PURE=1: the sources)")
