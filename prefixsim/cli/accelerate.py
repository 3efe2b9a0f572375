"""`prefixsim accelerate`: compile the hot modules with Cython, show or clear the compiled
copies (prefixsim/accel/; docs/architecture.md "Compiled hot modules")."""

from __future__ import annotations

import time

import click

from prefixsim.accel import HOT_MODULES, cache_dir, status
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
    """Compile the simulator's hot modules with Cython, for faster runs (opt-in).

    The timed engine, the caches, the cost models and the routers are compiled from their
    sources, with C types where a module has a .pxd of them (the compressed cache of
    cache-only runs; same code, so the same results) into a cache folder:
    $PREFIXSIM_ACCEL_DIR, else ~/.cache/prefixsim/accel. Modules already compiled from
    their current source are skipped. Every later run uses a compiled module only while its
    source is the one it was built from: after an upgrade or an edit, run this again.
    PREFIXSIM_PURE=1 runs the sources regardless; a run's summary says which code ran
    (code_path).
    Needs Cython (pip install 'prefixsim[accel]') and a C compiler.

    \b
    Examples:
      prefixsim accelerate
      prefixsim accelerate --status
      prefixsim accelerate --clear
    """
    folder = cache_dir()
    if clear:
        click.echo(f"removed {accel_build.clear(folder)} compiled modules from {folder}")
        return
    if show_status:
        current = status(folder)
        for module, compiled in current.items():
            click.echo(f"{module:<40}{'compiled' if compiled else 'source'}")
        click.echo(f"{sum(current.values())} of {len(current)} hot modules compiled for "
                   f"their current source, in {folder}")
        return
    started = time.perf_counter()
    try:
        accel_build.require_cython()
        todo = sum(not compiled for compiled in status(folder).values())
        if todo:
            click.echo(f"compiling {todo} of {len(HOT_MODULES)} hot modules with Cython "
                       "(a minute or more) ...", err=True)
        built = accel_build.build(folder, jobs)
    except accel_build.AccelError as exc:
        raise InputError(str(exc)) from None
    click.echo(f"{len(built)} hot modules compiled in {folder} ({todo} built now, in "
               f"{time.perf_counter() - started:.0f} s); runs use them from now on "
               "(PREFIXSIM_PURE=1: the sources)")
