"""Makes the shared helper modules of `tests/` (`fakes.py`, `cli_helpers.py`, `fast_path.py`,
`radix_reference.py`) importable by name from every test folder, and holds the fixtures
they share (`each_cache`).

The test folders are not packages (pytest's default "prepend" import mode puts each test
file's folder on `sys.path`), so the shared helpers live on the path this file adds.
"""

import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


@pytest.fixture(params=["segments", "reference"])
def each_cache(request, monkeypatch):
    """Runs a test on each cache in turn, the package's and the per-page reference
    (`fakes.CACHE_CLASSES`): the test module's name `Cache` is set to the class. A module
    opts in with `pytestmark = pytest.mark.usefixtures("each_cache")`; a test keeps to one
    with `pytest.mark.parametrize("each_cache", ["reference"], indirect=True)`."""
    from fakes import CACHE_CLASSES

    monkeypatch.setattr(request.module, "Cache", CACHE_CLASSES[request.param])
    return CACHE_CLASSES[request.param]
