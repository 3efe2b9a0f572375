"""The house rules of design.md that code structure can break, checked with `ast`.

- Imports between the package's parts (trace, cache, costmodel, engine, ...) form no cycle.
- No function-local import of a prefixsim module (a hidden cycle).
- torch is imported only by costmodel/calibrate.py, inside functions (an optional extra).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "prefixsim"


def _modules() -> dict[str, ast.Module]:
    return {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts): ast.parse(
            path.read_text(encoding="utf-8")
        )
        for path in PACKAGE.rglob("*.py")
    }


def _part(module: str) -> str:
    """The top-level part of the package a dotted module name belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


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


def test_parts_import_one_way():
    edges: dict[str, set[str]] = defaultdict(set)
    for module, tree in _modules().items():
        for imported, _ in _imports(tree):
            if imported.startswith("prefixsim.") and _part(imported) != _part(module):
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
    assert set(users) <= {"prefixsim.costmodel.calibrate"}
    assert all(users.values()), "torch must be imported inside functions"


def test_the_checks_can_fail():
    """A cycle and a local import planted in a synthetic tree are found."""
    tree = ast.parse("def f():\n    from prefixsim.cache import tree\n")
    assert _imports(tree) == [("prefixsim.cache", True)]
    assert _part("prefixsim.cache.tree") == "cache" and _part("prefixsim") == "__init__"
