"""`prefixsim accelerate`'s build: the hot modules' current sources compiled with Cython in a
child process, with the C types of their `.pxd` files where they have one (pure-Python mode:
the declarations augment the source, whose semantics they keep), then moved into the cache
folder under the names the finder (accel/__init__.py) looks for."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from prefixsim.accel import (
    EXT_SUFFIX,
    HOT_MODULES,
    build_input,
    cache_dir,
    cimported,
    compiled_path,
    source_digest,
    source_path,
    types_path,
)


class AccelError(Exception):
    """A build that cannot run here (no Cython, no C compiler) or that failed."""


_BUILD_SCRIPT = """
import sys
from setuptools import Extension, setup
from Cython.Build import cythonize
build, jobs, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
extensions = [Extension(name, [path]) for name, path in zip(pairs[::2], pairs[1::2])]
setup(name="prefixsim-accel", script_args=["-q", "build_ext", "--build-lib", build + "/lib",
      "--build-temp", build + "/tmp", "-j", jobs],
      ext_modules=cythonize(extensions, language_level=3, quiet=True,
                            build_dir=build + "/c", include_path=["src"],
                            compiler_directives={"annotation_typing": False,
                                                 "binding": True}))
"""


def require_cython() -> None:
    """Raise AccelError, saying what to install, when Cython cannot be imported."""
    try:
        import Cython  # noqa: F401
    except ImportError:
        raise AccelError("needs Cython: pip install 'prefixsim[accel]'") from None


def build(folder: Path | None = None, jobs: int | None = None,
          elsewhere: Sequence[Path] = ()) -> list[Path]:
    """Compile every hot module whose current source (and types) has no compiled copy in
    `folder` (the cache by default) or in any of `elsewhere` (the install's folder, for
    `prefixsim accelerate`) yet, remove the copies in `folder` built from older sources,
    and return every hot module's compiled file (in `folder`, else where it was found)."""
    folder = cache_dir() if folder is None else folder

    def current(module: str) -> Path:
        for where in (folder, *elsewhere):
            path = compiled_path(module, where)
            if path.is_file():
                return path
        return compiled_path(module, folder)

    todo = [module for module in HOT_MODULES if not current(module).is_file()]
    if not todo:  # every copy is built from the current source already
        return [current(module) for module in HOT_MODULES]
    require_cython()
    jobs = jobs or min(len(todo), os.cpu_count() or 1)
    with tempfile.TemporaryDirectory(prefix="prefixsim-accel-") as temp:
        work = Path(temp)
        pairs: list[str] = []
        sources: dict[str, bytes] = {}
        # The copies keep the package's layout (with empty __init__ files), every hot
        # module's .pxd beside its place, so that `cimport prefixsim.cache.page` finds its
        # declarations and each module gets its dotted name.
        # A .pxd of another module that a hot one cimports (id_arrays.pxd: inline C
        # bodies, no compiled module of its own) goes beside its place too.
        typed = dict.fromkeys([*HOT_MODULES, *(other for module in HOT_MODULES
                                               for other in cimported(module))])
        for module in typed:
            parts = module.split(".")
            for depth in range(1, len(parts)):
                init = work.joinpath("src", *parts[:depth], "__init__.py")
                init.parent.mkdir(parents=True, exist_ok=True)
                init.touch()
            if types_path(module).is_file():  # Cython reads it beside the copy
                work.joinpath("src", *parts).with_suffix(".pxd").write_bytes(
                    types_path(module).read_bytes())
        for module in todo:
            sources[module] = build_input(module)  # what is built is what is digested
            copy = work.joinpath("src", *module.split(".")).with_suffix(".py")
            copy.write_bytes(source_path(module).read_bytes())
            pairs += [module, str(copy)]
        done = subprocess.run([sys.executable, "-c", _BUILD_SCRIPT, str(work / "build"),
                               str(jobs), *pairs], capture_output=True, text=True,
                              cwd=work, check=False)
        if done.returncode != 0:
            lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
            raise AccelError("the build failed (is a C compiler installed?): "
                             + (lines[-1] if lines else f"exit status {done.returncode}"))
        folder.mkdir(parents=True, exist_ok=True)
        for module, source in sources.items():
            made = (work / "build" / "lib").joinpath(*module.split(".")).with_suffix(EXT_SUFFIX)
            if not made.is_file():
                raise AccelError(f"the build left no compiled file for {module}")
            target = folder / f"{module}-{source_digest(source)}{EXT_SUFFIX}"
            partial = target.with_name(target.name + ".partial")
            shutil.copyfile(made, partial)
            os.replace(partial, target)  # a reader sees a whole file or none
            for old in folder.glob(f"{module}-*{EXT_SUFFIX}"):
                if old != target:
                    old.unlink(missing_ok=True)
    return [current(module) for module in HOT_MODULES]


def clear(folder: Path | None = None) -> int:
    """Remove every compiled copy; returns how many files were removed."""
    folder = cache_dir() if folder is None else folder
    removed = 0
    for path in folder.glob(f"prefixsim.*{EXT_SUFFIX}"):
        path.unlink(missing_ok=True)
        removed += 1
    return removed
