"""Makes the shared helper modules of `tests/` (`fakes.py`, `cli_helpers.py`, `fast_path.py`)
importable by name from every test folder.

The test folders are not packages (pytest's default "prepend" import mode puts each test
file's folder on `sys.path`), so the shared helpers live on the path this file adds.
"""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
