"""The structure rules of docs/architecture.md, checked with `ast` and by importing.

- The package's parts import one way, down the layer order of docs/architecture.md (a bare
  `from prefixsim import X` counts as importing the top of the package); hence no cycle.
- No function-local import of a prefixsim module (a hidden cycle).
- torch is imported only by profiles/calibrate.py, inside functions (an optional extra).
- No engine module imports pandas (the engine emits records; metrics/ makes frames).
- The top level holds at most 6 modules besides packages; every module imports cleanly.
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "prefixsim"

# docs/architecture.md, bottom to top: a part may import its own layer or any below it.
LAYERS = (
    ("_version", "errors", "registry", "presets", "accel"),
    ("trace",),
    ("cache",),
    ("costmodel",),
    ("profiles",),
    ("router",),
    ("config",),
    ("engine",),
    ("metrics",),
    ("analysis",),
    ("pipeline",),
    ("report",),
    ("sweep", "tune", "capacity"),
    ("cli",),
    ("__init__", "__main__"),
)
RANK = {part: rank for rank, layer in enumerate(LAYERS) for part in layer}


def _modules() -> dict[str, ast.Module]:
    return {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts): ast.parse(
            path.read_text(encoding="utf-8")
        )
        for path in PACKAGE.rglob("*.py")
    }


def _part(module: str) -> str:
    """The top-level part of the package a dotted module name belongs to (`prefixsim`
    itself, the public API, is `__init__`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _upward(modules: dict[str, ast.Module]) -> list[tuple[str, str]]:
    """(module, imported) pairs where a part imports a part of a higher layer."""
    found = []
    for module, tree in modules.items():
        for imported, _ in _imports(tree):
            if imported != "prefixsim" and not imported.startswith("prefixsim."):
                continue
            mine, theirs = _part(module), _part(imported)
            if mine != theirs and RANK[theirs] > RANK[mine]:
                found.append((module, imported))
    return found


def _imports(tree: ast.Module) -> list[tuple[str, bool]]:
    """(imported module, inside a function) for every import in `tree`."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module:
                found.append((child.module, in_function))
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, False)
    return found


def test_every_part_has_a_layer():
    parts = {_part(module) for module in _modules()}
    assert parts <= set(RANK), f"parts without a layer: {sorted(parts - set(RANK))}"


def test_parts_import_down_the_layers():
    assert not _upward(_modules())


def test_no_cycles_between_parts():
    edges: dict[str, set[str]] = defaultdict(set)
    for module, tree in _modules().items():
        for imported, _ in _imports(tree):
            if imported.startswith("prefixsim") and _part(imported) != _part(module):
                edges[_part(module)].add(_part(imported))

    def reaches(start: str) -> set[str]:
        seen: set[str] = set()
        stack = [start]
        while stack:
            for nxt in edges.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    cycles = sorted(part for part in list(edges) if part in reaches(part))
    assert not cycles, f"import cycle through {cycles}: {dict(edges)}"


def test_no_function_local_prefixsim_imports():
    local = [
        (module, imported)
        for module, tree in _modules().items()
        for imported, in_function in _imports(tree)
        if in_function and imported.startswith("prefixsim")
    ]
    assert not local


def test_torch_only_in_calibrate_and_lazily():
    users = {
        module: in_function
        for module, tree in _modules().items()
        for imported, in_function in _imports(tree)
        if imported == "torch" or imported.startswith("torch.")
    }
    assert set(users) <= {"prefixsim.profiles.calibrate"}
    assert all(users.values()), "torch must be imported inside functions"


def test_engine_makes_no_frames():
    users = [module for module, tree in _modules().items()
             if _part(module) == "engine"
             for imported, _ in _imports(tree) if imported.split(".")[0] == "pandas"]
    assert not users


# docs/architecture.md "One run: a one-way road": callers reach the run through the face
# of the pipeline package (`simulate`, its sinks and result), never a stage below it
ROAD_CALLERS = ("cli", "sweep", "tune", "__init__", "__main__", "report")
# what opening or writing a file looks like; the engine does neither
FILE_CALLS = {"open", "write_text", "write_bytes", "read_text", "read_bytes", "to_parquet",
              "write_table", "read_table", "ParquetFile", "ParquetWriter", "mkdir", "unlink",
              "TemporaryDirectory", "NamedTemporaryFile", "mkstemp", "mkdtemp"}


def _below_the_road(modules: dict[str, ast.Module]) -> list[tuple[str, str]]:
    """(module, imported) where a road caller imports a pipeline module, not the package."""
    return [(module, imported) for module, tree in modules.items()
            if _part(module) in ROAD_CALLERS
            for imported, _ in _imports(tree) if imported.startswith("prefixsim.pipeline.")]


def _file_calls(tree: ast.Module) -> list[str]:
    """Names of the file-opening calls in `tree`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in FILE_CALLS:
                found.append(name)
    return found


def test_runs_go_through_the_pipeline_package_face():
    assert not _below_the_road(_modules())


def test_engine_opens_no_file():
    opened = {module: calls for module, tree in _modules().items()
              if _part(module) == "engine" and (calls := _file_calls(tree))}
    assert not opened


def test_top_level_is_small():
    loose = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(loose) <= 6, loose


@pytest.mark.parametrize("module", sorted(
    ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    for path in PACKAGE.rglob("*.py") if path.name != "__main__.py"))
def test_every_module_imports(module):
    importlib.import_module(module)


def test_the_checks_can_fail():
    """A cycle, an upward import (a bare `from prefixsim import` included) and a local
    import planted in synthetic trees are found."""
    tree = ast.parse("def f():\n    from prefixsim.cache import tree\n")
    assert _imports(tree) == [("prefixsim.cache", True)]
    assert _part("prefixsim.cache.tree") == "cache" and _part("prefixsim") == "__init__"
    planted = {"prefixsim.engine.x": ast.parse("from prefixsim.metrics import summary\n"),
               "prefixsim.cache.y": ast.parse("from prefixsim import __version__\n"),
               "prefixsim.cli.z": ast.parse("from prefixsim.engine import timed\n")}
    assert _upward(planted) == [("prefixsim.engine.x", "prefixsim.metrics"),
                                ("prefixsim.cache.y", "prefixsim")]
    assert _below_the_road({"prefixsim.cli.z": ast.parse(
        "from prefixsim.pipeline.streamed import replay_streamed\n"
        "from prefixsim.pipeline import simulate\n")}) == [
        ("prefixsim.cli.z", "prefixsim.pipeline.streamed")]
    assert sorted(_file_calls(ast.parse("with open(p) as f: pass\nPath(p).write_text('x')\n"))
                  ) == ["open", "write_text"]
