"""Compiled copies of the simulator's hot modules (docs/architecture.md "Compiled hot
modules"): which modules, where the copies are kept, and the finder that imports them.

The modules in `HOT_MODULES` are compiled with Cython, as they are or with the C types of a
`.pxd` beside the source (Cython's pure-Python mode: the declarations augment the source
and keep its semantics, so the results are the same), at install where a C compiler exists
(setup.py, into the package's `_compiled` folder, `install_dir()`; where it cannot, the
folder holds `NOT_BUILT` with the one-line reason, `install_notice()`), and by `prefixsim
accelerate` into a cache folder (`PREFIXSIM_ACCEL_DIR`, else
`$XDG_CACHE_HOME/prefixsim/accel`, else `~/.cache/prefixsim/accel`). Each compiled file is
named by its module and a digest of what it was built from (the source and its `.pxd`).
The finder looks in the cache folder, then the install folder. Using them is an explicit
opt-in at the entry point: `opt_in()`
(the CLI's `main` calls it first; a script may) installs a finder ahead of the normal ones
and sets PREFIXSIM_ACCEL=1, so that the processes it starts (sweep workers) install it when
they import the package (`install_if_asked`). The finder hands out a compiled module only
when one exists for the source as it is now: an edited module is imported from its source
until it is compiled again, so a stale build is never run. `PREFIXSIM_PURE=1` turns the
finder off. A plain `import prefixsim` without PREFIXSIM_ACCEL runs the sources.

Owned here: the module list, the cache layout and the finder; build.py compiles (in a child
process: Cython, then setuptools' build_ext). Left out: anything that changes what the
modules compute.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]

# the timed engine's and the cache-only replay's per-request and per-page code
HOT_MODULES: tuple[str, ...] = (
    "prefixsim.cache.accounting",
    "prefixsim.cache.aging",
    "prefixsim.cache.belady",
    "prefixsim.cache.cache_types",
    "prefixsim.cache.fifo",
    "prefixsim.cache.idle_ages",
    "prefixsim.cache.gdsf",
    "prefixsim.cache.lfu",
    "prefixsim.cache.lru",
    "prefixsim.cache.page",
    "prefixsim.cache.policy",
    "prefixsim.cache.priority",
    "prefixsim.cache.s3fifo",
    "prefixsim.cache.segment_tree",
    "prefixsim.cache.ttl_first",
    "prefixsim.cache.ordered_queue",
    "prefixsim.cache.workload_aware",
    "prefixsim.costmodel.engines",
    "prefixsim.costmodel.layer_kinds",
    "prefixsim.costmodel.operator_times",
    "prefixsim.costmodel.protocol",
    "prefixsim.costmodel.roofline",
    "prefixsim.costmodel.roofline_base",
    "prefixsim.engine.cache_only_fast",
    "prefixsim.engine.cache_samples",
    "prefixsim.engine.decode_run",
    "prefixsim.engine.decode_steps",
    "prefixsim.engine.frontend",
    "prefixsim.engine.itl",
    "prefixsim.engine.records",
    "prefixsim.engine.replica",
    "prefixsim.engine.replica_memory",
    "prefixsim.engine.request_state",
    "prefixsim.engine.scheduler",
    "prefixsim.engine.state_log",
    "prefixsim.engine.timed",
    "prefixsim.metrics.pricing",
    "prefixsim.router.index",
    "prefixsim.router.prefix_aware",
    "prefixsim.trace.columns",
    "prefixsim.trace.record",
)

EXT_SUFFIX: str = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def cache_dir() -> Path:
    """Where compiled modules are kept."""
    explicit = os.environ.get("PREFIXSIM_ACCEL_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "prefixsim" / "accel"


NOT_BUILT = "NOT_BUILT"  # in the install folder: why the install compiled nothing


def install_dir() -> Path:
    """Where the install put its compiled modules (setup.py)."""
    return PACKAGE_DIR / "_compiled"


def build_notice(reason: str) -> str:
    """The one line an install without compiled modules prints, and the CLI repeats."""
    return (f"prefixsim: note: the hot modules were not compiled at install ({reason}); "
            "the pure-Python path runs (`prefixsim accelerate` compiles them later)")


def install_notice() -> str | None:
    """The install's notice when it compiled nothing and no compiled copy of the current
    sources exists anywhere (`prefixsim accelerate` not run since), else None."""
    try:
        marker = install_dir() / NOT_BUILT
        if not marker.is_file():
            return None
        if any(status().values()):
            return None
        lines = marker.read_text(errors="replace").splitlines()
    except OSError:
        return None
    return lines[0] if lines else None


def folders() -> list[Path]:
    """The folders the finder reads, in order: the cache, then the install's."""
    return [cache_dir(), install_dir()]


def source_path(module: str) -> Path:
    """The source file of a module of this package."""
    return PACKAGE_DIR.joinpath(*module.split(".")[1:]).with_suffix(".py")


def types_path(module: str) -> Path:
    """The module's augmenting declarations (Cython's pure-Python mode: a `.pxd` beside the
    source giving its classes and locals C types), which may not exist."""
    return source_path(module).with_suffix(".pxd")


_CIMPORT = re.compile(  # `from prefixsim.x.y cimport Z` or `cimport prefixsim.x.y`
    rb"^\s*(?:from\s+(prefixsim(?:\.\w+)+)\s+cimport|cimport\s+(prefixsim(?:\.\w+)+))",
    re.MULTILINE)


def cimported(module: str) -> list[str]:
    """The package's modules whose extension types `module`'s `.pxd` cimports (s3fifo.pxd
    cimports page's Page), directly or through theirs, in a fixed order."""
    found: list[str] = []
    todo = [module]
    while todo:
        types = types_path(todo.pop())
        if not types.is_file():
            continue
        for match in _CIMPORT.finditer(types.read_bytes()):
            name = (match.group(1) or match.group(2)).decode()
            if name not in found and name != module:
                found.append(name)
                todo.append(name)
    return sorted(found)


def _own_input(module: str) -> bytes:
    source = source_path(module).read_bytes()
    types = types_path(module)
    return source + (b"\0" + types.read_bytes() if types.is_file() else b"")


def build_input(module: str) -> bytes:
    """What a compiled copy is built from: the source, its `.pxd` when there is one, and
    those of every module it cimports a type from. A compiled module holds the layout of the
    types it cimports and needs their compiled module at import, so it is current only
    while they are: a change to page.py or page.pxd makes s3fifo's copy stale too, and the
    two are then imported from their sources together."""
    data = _own_input(module)
    for other in cimported(module):
        data += b"\0" + other.encode() + b"\0" + _own_input(other)
    return data


def source_digest(source: bytes) -> str:
    """The digest a compiled file is named by: the source's bytes and this interpreter."""
    digest = hashlib.sha256(source)
    digest.update(sys.implementation.cache_tag.encode())
    return digest.hexdigest()[:20]


def compiled_path(module: str, folder: Path | None = None) -> Path:
    """Where the compiled copy of `module`'s current source is (or would be) kept."""
    folder = cache_dir() if folder is None else folder
    return folder / f"{module}-{source_digest(build_input(module))}{EXT_SUFFIX}"


class CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled copy of a hot module built from its current source, if any, in
    the first of `folders` that has one."""

    def __init__(self, *folders: Path) -> None:
        self.folders = folders

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in HOT_MODULES:
            return None
        for folder in self.folders:
            try:
                compiled = compiled_path(fullname, folder)
                if not compiled.is_file():
                    continue
            except OSError:
                continue
            loader = importlib.machinery.ExtensionFileLoader(fullname, str(compiled))
            return importlib.util.spec_from_file_location(fullname, compiled, loader=loader)
        return None


def install() -> CompiledFinder | None:
    """Put a CompiledFinder first on `sys.meta_path` when a folder of compiled modules
    exists (one `stat` each otherwise) and `PREFIXSIM_PURE` is not set. The cache is
    optional: a cache folder that cannot be read (a home folder that cannot be entered) is
    skipped with one line on stderr (docs/input-rules.md I18); the install's folder is read
    when it exists, else the sources run."""
    if os.environ.get("PREFIXSIM_PURE", "") not in ("", "0"):
        return None
    found = []
    try:
        folder = cache_dir()
        if folder.is_dir():
            found.append(folder)
    except (OSError, RuntimeError) as exc:  # RuntimeError: no home folder to be found
        reason = getattr(exc, "strerror", None) or str(exc)
        print(f"prefixsim: warning: compiled modules not used: cannot read their folder "
              f"({reason})", file=sys.stderr)
    try:
        if install_dir().is_dir():
            found.append(install_dir())
    except OSError:
        pass
    if not found:
        return None
    for finder in sys.meta_path:
        if isinstance(finder, CompiledFinder):
            return finder
    finder = CompiledFinder(*found)
    sys.meta_path.insert(0, finder)
    return finder


ASK = "PREFIXSIM_ACCEL"  # set to 1: the processes of a run import the compiled copies


def opt_in() -> CompiledFinder | None:
    """Use the compiled hot modules, where built, in this process and in the processes it
    starts (sweep workers inherit ASK). Call it before anything else of prefixsim is
    imported: the CLI's entry point does; a script may, or set PREFIXSIM_ACCEL=1."""
    os.environ[ASK] = "1"
    return install()


def install_if_asked() -> CompiledFinder | None:
    """`install()` when this process was asked to (ASK set, by `opt_in` in a parent process
    or by the user); called by `import prefixsim`, which imports nothing hot itself."""
    if os.environ.get(ASK, "") in ("", "0"):
        return None
    return install()


def status(folder: Path | None = None) -> dict[str, bool]:
    """Module -> whether a compiled copy of its current source is in `folder` (None: in
    any folder the finder reads)."""
    if folder is not None:
        return {module: compiled_path(module, folder).is_file() for module in HOT_MODULES}
    found = [status(where) for where in folders()]
    return {module: any(one[module] for one in found) for module in HOT_MODULES}


def in_use() -> list[str]:
    """The hot modules imported so far from compiled copies."""
    return [name for name in HOT_MODULES
            if (module := sys.modules.get(name)) is not None
            and str(getattr(module, "__file__", "")).endswith(EXT_SUFFIX)]


def code_path() -> dict[str, str | int]:
    """Which code this process ran, for a run's summary: `code_path` "pure" (every hot
    module imported so far from its source), "compiled" (every one from a compiled copy)
    or "mixed", and `compiled_modules`, how many hot modules ran compiled."""
    imported = [name for name in HOT_MODULES if name in sys.modules]
    compiled = len(in_use())
    path = "pure" if compiled == 0 else "compiled" if compiled == len(imported) else "mixed"
    return {"code_path": path, "compiled_modules": compiled}
