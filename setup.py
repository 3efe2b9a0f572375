"""Build hook: compile the simulator's hot modules with Cython at install, where a C compiler
exists (docs/architecture.md "Compiled hot modules").

Everything else about the package is in pyproject.toml. After setuptools' `build_py` has laid
out the package, `prefixsim.accel.build` compiles every module of `HOT_MODULES` (with the C
types of its `.pxd`, if any) into the package's `_compiled` folder: the installed copy's for
a wheel, the source tree's for an editable install. Where that cannot be done (no Cython, no
C compiler, a failed build) the install goes on without them: one line on stderr, and the
same line in `_compiled/NOT_BUILT`, which the `prefixsim` command repeats once per run in a
terminal (and `prefixsim accelerate --status` always), so the user learns the pure-Python
path runs. PREFIXSIM_NO_COMPILE=1 skips the build.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class CompiledDistribution(Distribution):
    """A platform wheel: the compiled modules are for this interpreter and platform."""

    def has_ext_modules(self) -> bool:
        return os.environ.get("PREFIXSIM_NO_COMPILE", "") in ("", "0")


class BuildWithCompiledModules(build_py):
    """build_py, then the compiled hot modules into the package's `_compiled` folder."""

    def run(self) -> None:
        super().run()
        editable = getattr(self, "editable_mode", False)
        package = ROOT / "prefixsim" if editable else Path(self.build_lib) / "prefixsim"
        compile_hot_modules(package / "_compiled")


def compile_hot_modules(folder: Path) -> None:
    sys.path.insert(0, str(ROOT))  # prefixsim/__init__ imports only accel and _version
    try:
        from prefixsim.accel import NOT_BUILT, build_notice
        from prefixsim.accel import build as accel_build
    finally:
        sys.path.pop(0)
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / NOT_BUILT
    if os.environ.get("PREFIXSIM_NO_COMPILE", "") not in ("", "0"):
        reason = "PREFIXSIM_NO_COMPILE was set"
    else:
        try:
            accel_build.build(folder)
            marker.unlink(missing_ok=True)
            return
        except accel_build.AccelError as exc:
            reason = str(exc)
    accel_build.clear(folder)  # nothing from an earlier build in a reused build folder
    notice = build_notice(reason)
    print(notice, file=sys.stderr)
    marker.write_text(notice + "\n")


setup(distclass=CompiledDistribution, cmdclass={"build_py": BuildWithCompiledModules})
