"""Compiled hot modules (prefixsim/accel/): the finder hands out only a copy built from the
source as it is now, the environment switches, and a real build whose runs give the same
results as the sources."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from fakes import cannot_compile

from prefixsim import accel
from prefixsim.accel import build as accel_build
from prefixsim.cli import app

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "traces" / "demo_chat.jsonl"


def test_every_hot_module_has_a_source():
    for module in accel.HOT_MODULES:
        assert accel.source_path(module).is_file(), module


def test_the_finder_takes_only_a_copy_built_from_the_current_source(tmp_path):
    module = "prefixsim.cache.segment_tree"
    finder = accel.CompiledFinder(tmp_path)
    assert finder.find_spec(module) is None  # nothing built
    stale = tmp_path / f"{module}-{accel.source_digest(b'# an older source')}{accel.EXT_SUFFIX}"
    stale.write_bytes(b"")
    assert finder.find_spec(module) is None  # built from another source: the source is used
    current = accel.compiled_path(module, tmp_path)
    current.write_bytes(b"")
    spec = finder.find_spec(module)
    assert spec is not None and spec.origin == str(current)
    assert finder.find_spec("prefixsim.cli.run") is None  # not a hot module
    assert accel.status(tmp_path)[module] and not accel.status(tmp_path)["prefixsim.engine.timed"]


def test_code_path_names_what_ran(monkeypatch):
    """The summary's code_path: no hot module compiled is "pure", all of the imported ones
    "compiled", some "mixed" (in_use: the hot modules whose file is a compiled copy)."""
    importlib.import_module("prefixsim.engine.timed")  # some hot modules imported
    imported = [name for name in accel.HOT_MODULES if name in sys.modules]
    monkeypatch.setattr(accel, "in_use", list)
    assert accel.code_path() == {"code_path": "pure", "compiled_modules": 0}
    monkeypatch.setattr(accel, "in_use", lambda: imported)
    assert accel.code_path() == {"code_path": "compiled", "compiled_modules": len(imported)}
    monkeypatch.setattr(accel, "in_use", lambda: imported[:1])
    assert accel.code_path()["code_path"] == ("mixed" if len(imported) > 1 else "compiled")


def test_a_compiled_copy_is_named_by_its_source_and_its_types():
    """A module with a .pxd of types is built from both (so a changed .pxd rebuilds it);
    one without, from its source alone."""
    typed, plain = "prefixsim.cache.page", "prefixsim.engine.timed"  # page cimports nothing
    assert accel.types_path(typed).is_file() and not accel.types_path(plain).exists()
    source = accel.source_path(typed).read_bytes()
    assert accel.build_input(typed) == source + b"\0" + accel.types_path(typed).read_bytes()
    assert accel.build_input(plain) == accel.source_path(plain).read_bytes()
    assert accel.source_digest(accel.build_input(typed)) != accel.source_digest(source)


def test_a_module_that_cimports_a_type_is_stale_with_it(tmp_path, monkeypatch):
    """s3fifo.pxd cimports page's Page (and the policy base): s3fifo's copy is built from
    page's source and .pxd too, so an edit of either renames (makes stale) both copies; a
    module that cimports nothing is named by its own files only. The segment tree's .pxd
    cimports four."""
    assert accel.cimported("prefixsim.cache.s3fifo") == ["prefixsim.cache.page",
                                                         "prefixsim.cache.policy"]
    assert accel.cimported("prefixsim.cache.segment_tree") == [
        "prefixsim.cache.cache_types", "prefixsim.cache.id_arrays",
        "prefixsim.cache.idle_ages", "prefixsim.cache.ordered_queue"]
    assert accel.cimported("prefixsim.cache.page") == []
    assert accel.cimported("prefixsim.engine.timed") == []
    s3fifo = accel.build_input("prefixsim.cache.s3fifo")
    page_parts = (accel.source_path("prefixsim.cache.page").read_bytes(),
                  accel.types_path("prefixsim.cache.page").read_bytes())
    assert all(part in s3fifo for part in page_parts)
    package = tmp_path / "prefixsim"
    for module in ("prefixsim.cache.s3fifo", "prefixsim.cache.page",
                   "prefixsim.cache.policy"):
        for path in (accel.source_path(module), accel.types_path(module)):
            copy = package.joinpath(*module.split(".")[1:]).with_suffix(path.suffix)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(path.read_bytes())
    monkeypatch.setattr(accel, "PACKAGE_DIR", package)
    before = {m: accel.compiled_path(m, tmp_path) for m in ("prefixsim.cache.s3fifo",
                                                             "prefixsim.cache.page")}
    page_pxd = package / "cache" / "page.pxd"
    page_pxd.write_bytes(page_pxd.read_bytes() + b"\n# edited\n")
    after = {m: accel.compiled_path(m, tmp_path) for m in before}
    assert all(after[m] != before[m] for m in before)
    # a cimport written either way is found
    (package / "cache" / "s3fifo.pxd").write_bytes(b"cimport prefixsim.cache.page\n")
    assert accel.cimported("prefixsim.cache.s3fifo") == ["prefixsim.cache.page"]


def test_a_cimported_pxd_without_a_compiled_module_is_part_of_the_build():
    """id_arrays.pxd gives inline C bodies to the segment tree (and so to the chunk replay that
    cimports it), id_arrays.py runs on the pure path and is never compiled: its files are part
    of both modules' build input (an edit makes their copies stale), not a hot module."""
    module = "prefixsim.cache.id_arrays"
    assert module not in accel.HOT_MODULES and accel.types_path(module).is_file()
    for user in ("prefixsim.cache.segment_tree", "prefixsim.engine.cache_only_fast"):
        assert module in accel.cimported(user)
        assert accel.types_path(module).read_bytes() in accel.build_input(user)


def test_the_digest_follows_the_source():
    assert accel.source_digest(b"a = 1\n") != accel.source_digest(b"a = 2\n")
    assert accel.source_digest(b"a = 1\n") == accel.source_digest(b"a = 1\n")


def test_install_needs_a_cache_folder_and_no_pure_switch(tmp_path, monkeypatch):
    before = list(sys.meta_path)
    try:
        monkeypatch.setenv("PREFIXSIM_ACCEL_DIR", str(tmp_path / "absent"))
        monkeypatch.setattr(accel, "install_dir", lambda: tmp_path / "absent-install")
        monkeypatch.delenv("PREFIXSIM_PURE", raising=False)
        assert accel.install() is None
        monkeypatch.setenv("PREFIXSIM_ACCEL_DIR", str(tmp_path))
        monkeypatch.setenv("PREFIXSIM_PURE", "1")
        assert accel.install() is None
        monkeypatch.setenv("PREFIXSIM_PURE", "0")
        finder = accel.install()
        assert finder is not None and sys.meta_path[0] is finder
        assert accel.install() is finder  # once
    finally:
        sys.meta_path[:] = before


def _finders_after_import(env: dict[str, str]) -> str:
    """The meta path finders of a fresh `import prefixsim`, and what it imported."""
    code = ("import sys, prefixsim; from prefixsim import accel; "
            "print(any(isinstance(f, accel.CompiledFinder) for f in sys.meta_path), "
            "sorted(m for m in sys.modules if m.startswith('prefixsim.')))")
    return subprocess.run([sys.executable, "-c", code], env=env, check=True,
                          capture_output=True, text=True, cwd=ROOT).stdout.strip()


def test_compiled_modules_are_an_explicit_opt_in(tmp_path):
    """`import prefixsim` installs no finder and imports nothing hot unless asked
    (PREFIXSIM_ACCEL=1, which the CLI's `main` sets through `opt_in` for its workers)."""
    env = {**os.environ, "PREFIXSIM_ACCEL_DIR": str(tmp_path), "PREFIXSIM_PURE": "0"}
    env.pop("PREFIXSIM_ACCEL", None)
    assert _finders_after_import(env) == "False ['prefixsim._version', 'prefixsim.accel']"
    assert _finders_after_import({**env, "PREFIXSIM_ACCEL": "1"}).startswith("True")


def test_opt_in_asks_the_processes_started_later(tmp_path, monkeypatch):
    before = list(sys.meta_path)
    try:
        monkeypatch.setenv("PREFIXSIM_ACCEL_DIR", str(tmp_path))
        monkeypatch.delenv("PREFIXSIM_PURE", raising=False)
        monkeypatch.delenv(accel.ASK, raising=False)
        assert accel.install_if_asked() is None
        finder = accel.opt_in()
        assert finder is not None and os.environ[accel.ASK] == "1"
        assert accel.install_if_asked() is finder
    finally:
        sys.meta_path[:] = before


def test_a_build_without_cython_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "Cython", None)  # import Cython raises ImportError
    monkeypatch.setenv("PREFIXSIM_ACCEL_DIR", str(tmp_path))
    monkeypatch.setattr(accel, "install_dir", lambda: tmp_path / "no-install")
    result = CliRunner().invoke(app, ["accelerate"])
    assert result.exit_code == 2
    assert result.output.strip() == ("prefixsim: error: needs Cython: "
                                     "pip install 'prefixsim[accel]'")
    assert not list(tmp_path.iterdir())


def test_status_and_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFIXSIM_ACCEL_DIR", str(tmp_path))
    monkeypatch.setattr(accel, "install_dir", lambda: tmp_path / "no-install")
    accel.compiled_path("prefixsim.cache.lru", tmp_path).write_bytes(b"")
    result = CliRunner().invoke(app, ["accelerate", "--status"])
    assert result.exit_code == 0
    assert f"1 of {len(accel.HOT_MODULES)} hot modules compiled" in result.output
    result = CliRunner().invoke(app, ["accelerate", "--clear"])
    assert result.exit_code == 0 and "removed 1 compiled modules" in result.output
    assert not list(tmp_path.iterdir())


def test_a_build_skips_modules_compiled_in_the_install_folder(tmp_path, monkeypatch):
    """`prefixsim accelerate` compiles only what has no copy of its current source in the
    cache or the install's folder: with every module in the latter it needs no Cython and
    builds nothing, and returns the install's copies."""
    monkeypatch.setitem(sys.modules, "Cython", None)  # a build would fail
    installed, cache = tmp_path / "install", tmp_path / "cache"
    installed.mkdir()
    for module in accel.HOT_MODULES:
        accel.compiled_path(module, installed).write_bytes(b"")
    built = accel_build.build(cache, elsewhere=[installed])
    assert built == [accel.compiled_path(m, installed) for m in accel.HOT_MODULES]
    assert not cache.exists()
    accel.compiled_path("prefixsim.cache.lru", installed).unlink()
    with pytest.raises(accel_build.AccelError, match="needs Cython"):
        accel_build.build(cache, elsewhere=[installed])


def test_the_finder_reads_the_cache_then_the_install_folder(tmp_path, monkeypatch):
    """A copy in the cache folder wins over the install's; either is taken alone; `status`
    without a folder counts both, and `install()` needs only one of them to exist."""
    cache, installed = tmp_path / "cache", tmp_path / "install"
    cache.mkdir(), installed.mkdir()
    finder = accel.CompiledFinder(cache, installed)
    module = "prefixsim.engine.timed"
    assert finder.find_spec(module) is None
    accel.compiled_path(module, installed).write_bytes(b"")
    assert finder.find_spec(module).origin == str(accel.compiled_path(module, installed))
    accel.compiled_path(module, cache).write_bytes(b"")
    assert finder.find_spec(module).origin == str(accel.compiled_path(module, cache))
    monkeypatch.setenv("PREFIXSIM_ACCEL_DIR", str(tmp_path / "absent"))
    monkeypatch.setattr(accel, "install_dir", lambda: installed)
    monkeypatch.delenv("PREFIXSIM_PURE", raising=False)
    assert accel.status()[module] and sum(accel.status().values()) == 1
    before = list(sys.meta_path)
    try:  # without the finder a PREFIXSIM_ACCEL=1 test process installed at its start
        sys.meta_path[:] = [f for f in before if not isinstance(f, accel.CompiledFinder)]
        assert accel.install().folders == (installed,)
    finally:
        sys.meta_path[:] = before


def test_an_install_that_compiled_nothing_says_so_until_something_is_built(
        tmp_path, monkeypatch, capsys):
    """The install's NOT_BUILT line is the notice while no compiled copy of the current
    sources exists in either folder; `prefixsim` prints it once on stderr when that is a
    terminal, and not when PREFIXSIM_PURE=1 asks for the sources or stderr is a pipe."""
    installed, cache = tmp_path / "install", tmp_path / "cache"
    installed.mkdir()
    monkeypatch.setattr(accel, "install_dir", lambda: installed)
    monkeypatch.setenv("PREFIXSIM_ACCEL_DIR", str(cache))
    assert accel.install_notice() is None  # an install that compiled them, or an old one
    line = accel.build_notice("the build failed (is a C compiler installed?): cc: not found")
    (installed / accel.NOT_BUILT).write_text(line + "\n")
    assert accel.install_notice() == line
    from prefixsim import __main__ as entry
    monkeypatch.setenv(accel.ASK, "0")  # main's opt_in sets it; restored after the test
    before = list(sys.meta_path)
    try:
        for pure, terminal, expected in (("0", True, line + "\n"), ("1", True, ""),
                                         ("0", False, "")):
            monkeypatch.setenv("PREFIXSIM_PURE", pure)
            monkeypatch.setattr(sys, "argv", ["prefixsim", "--version"])
            monkeypatch.setattr(sys.stderr, "isatty", lambda t=terminal: t)
            with pytest.raises(SystemExit):
                entry.main()
            assert capsys.readouterr().err == expected
    finally:
        sys.meta_path[:] = before
    cache.mkdir()
    accel.compiled_path("prefixsim.cache.lru", cache).write_bytes(b"")
    assert accel.install_notice() is None  # `prefixsim accelerate` has built some


def _run(out: Path, env: dict[str, str], *args: str) -> dict:
    subprocess.run([sys.executable, "-m", "prefixsim", "run", "--trace", str(DEMO),
                    "--max-requests", "400", "-o", str(out), "--quiet", *args],
                   env=env, check=True, cwd=ROOT)
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, str]:
    """A real build of every hot module (typed where a .pxd says so); the environment of a
    process that imports them."""
    cache = tmp_path_factory.mktemp("accel")
    built = accel_build.build(cache)
    assert len(built) == len(accel.HOT_MODULES) and all(path.is_file() for path in built)
    env = {**os.environ, "PREFIXSIM_ACCEL_DIR": str(cache), "PREFIXSIM_PURE": "0",
           accel.ASK: "1"}
    used = subprocess.run(
        [sys.executable, "-c", "import prefixsim.pipeline, prefixsim.engine.timed; "
         "from prefixsim import accel; print(len(accel.in_use()))"],
        env=env, check=True, capture_output=True, text=True, cwd=ROOT)
    assert int(used.stdout) == len(accel.HOT_MODULES)
    return env


@pytest.mark.heavy  # Cython: .ci/run's second step
@pytest.mark.skipif(cannot_compile() is not None, reason=str(cannot_compile()))
def test_compiled_runs_equal_the_sources(tmp_path, compiled):
    """A timed run (two replicas, prefix_aware) and cache-only runs on the compressed cache
    (typed when compiled: bounded LRU, sliding and fixed TTLs, priority) with the compiled
    modules give the records and figures of the sources."""
    pure = {**os.environ, "PREFIXSIM_PURE": "1"}
    cases = (("timed", ("--replicas", "2", "--router", "prefix_aware")),
             ("lru", ("--cache-only", "--policy", "lru", "--cache-tokens", "20000")),
             ("sliding", ("--cache-only", "--ttl", "30")),
             ("fixed", ("--cache-only", "--policy", "ttl", "--cache-tokens", "30000",
                        "--ttl", "20", "--ttl-mode", "fixed")),
             ("priority", ("--cache-only", "--policy", "priority", "--cache-tokens", "8000")))
    for name, args in cases:
        fast = _run(tmp_path / f"{name}-compiled", compiled, *args)
        slow = _run(tmp_path / f"{name}-pure", pure, *args)
        timing = {"command"} | {key for key in fast if "wall" in key}  # the -o path differs
        paths = {"code_path", "compiled_modules"}  # the summary says which code ran
        assert (fast["code_path"], slow["code_path"]) == ("compiled", "pure")
        assert fast["compiled_modules"] > 0 == slow["compiled_modules"]
        assert {k: v for k, v in fast.items() if k not in timing | paths} == \
            {k: v for k, v in slow.items() if k not in timing | paths}
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / f"{name}-compiled" / "requests.parquet"),
            pd.read_parquet(tmp_path / f"{name}-pure" / "requests.parquet"))


@pytest.mark.heavy
@pytest.mark.skipif(cannot_compile() is not None, reason=str(cannot_compile()))
def test_the_typed_cache_passes_its_differential_tests_compiled(compiled):
    """The compressed cache's own tests run on the compiled, typed copy (segment_tree.pxd):
    hypothesis against RadixCache on random traces (hits, counters, pages, timeseries),
    unchained ids, known answers, the cache-only summaries with and without it."""
    check = subprocess.run(
        [sys.executable, "-c", "import prefixsim.cache.segment_tree as s; "
         "print(s.__file__.endswith('.py'), type(s.Segment.__dict__['depth']).__name__)"],
        env=compiled, check=True, capture_output=True, text=True, cwd=ROOT)
    assert check.stdout.split() == ["False", "getset_descriptor"]  # compiled, typed fields
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "tests/cache/test_segment_tree.py", "tests/metrics/test_cache_only_timeseries.py"],
        env=compiled, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:]


def _package_copy(folder: Path) -> Path:
    """What an install builds from (pyproject.toml, setup.py, README.md, prefixsim/), copied
    so the build writes nothing into the working tree."""
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copyfile(ROOT / name, folder / name)
    shutil.copytree(ROOT / "prefixsim", folder / "prefixsim",
                    ignore=shutil.ignore_patterns("__pycache__", "_compiled"))
    return folder


@pytest.mark.heavy  # Cython and setuptools in the environment (--no-build-isolation)
@pytest.mark.skipif(importlib.util.find_spec("Cython") is None, reason="Cython not installed")
def test_an_install_without_a_c_compiler_works_and_says_so(tmp_path):
    """`pip install` with the C compiler hidden (CC names no program): the install
    succeeds with the sources and NOT_BUILT (one line, the notice), a cache-only run works
    and says it ran the pure path, with nothing on stderr when that is a pipe (the notice is
    for a terminal: the test above), and `accelerate --status` ends with the notice."""
    (tmp_path / "src").mkdir()
    source, target = _package_copy(tmp_path / "src"), tmp_path / "site"
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc"), "PIP_NO_INPUT": "1",
           "PREFIXSIM_ACCEL_DIR": str(tmp_path / "cache")}
    env.pop(accel.ASK, None)
    env.pop("PREFIXSIM_PURE", None)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--no-build-isolation", "--target", str(target), str(source)],
                          env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    marker = target / "prefixsim" / "_compiled" / accel.NOT_BUILT
    notice = marker.read_text().strip()
    assert notice.startswith("prefixsim: note: the hot modules were not compiled at install")
    assert "C compiler" in notice and len(notice.splitlines()) == 1
    assert not list(marker.parent.glob(f"*{accel.EXT_SUFFIX}"))
    run_env = {**env, "PYTHONPATH": str(target)}
    out = tmp_path / "run"
    ran = subprocess.run([sys.executable, "-m", "prefixsim", "run", "--trace", str(DEMO),
                          "--cache-only", "--max-requests", "200", "-o", str(out), "--quiet"],
                         env=run_env, capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stderr == ""  # a pipe: output as with compiled modules (a terminal: the line)
    assert json.loads((out / "summary.json").read_text())["code_path"] == "pure"
    status = subprocess.run([sys.executable, "-m", "prefixsim", "accelerate", "--status"],
                            env=run_env, capture_output=True, text=True, cwd=tmp_path)
    assert status.returncode == 0 and status.stdout.splitlines()[-1] == notice
