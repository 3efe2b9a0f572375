"""The page-id array operations (cache/id_arrays.py) and their C bodies (id_arrays.pxd):
known answers on the Python functions, then the same calls through a small module compiled
here that cimports the .pxd, compared on random arrays and positions."""

from __future__ import annotations

import subprocess
import sys
from array import array
from pathlib import Path

import pytest
from fakes import cannot_compile
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixsim.cache import id_arrays

ROOT = Path(__file__).resolve().parents[2]


def test_known_answers():
    ids = array("q", [7, -3, 2**62, 5])
    assert id_arrays.is_id_array(ids)
    assert not id_arrays.is_id_array(array("l", [1]))  # another typecode
    assert not id_arrays.is_id_array([7, -3])
    assert id_arrays.id_count(ids) == 4
    assert id_arrays.id_at(ids, 2) == 2**62
    run = id_arrays.id_run(ids, 1, 3)
    assert run == array("q", [-3, 2**62]) and run is not ids
    assert id_arrays.id_run(ids, 2, 2) == array("q")
    assert id_arrays.same_ids(ids, 1, array("q", [-3, 2**62, 0]), 2)
    assert not id_arrays.same_ids(ids, 1, array("q", [-3, 5]), 2)
    assert id_arrays.same_ids(ids, 0, ids, 4)
    head = array("q", ids)
    id_arrays.drop_first(head, 3)
    assert head == array("q", [5])
    tail = array("q", ids)
    id_arrays.drop_last(tail, 1)
    assert tail == array("q", [7, -3, 2**62])
    id_arrays.drop_last(tail, 0)
    assert tail == array("q", [7, -3, 2**62])


_SHIM = """\
# cython: language_level=3
cimport prefixsim.cache.id_arrays as _ids
from cpython.array cimport array

def is_id_array(x): return _ids.is_id_array(x)
def id_count(array a): return _ids.id_count(a)
def id_at(array a, Py_ssize_t i): return _ids.id_at(a, i)
def id_run(array a, Py_ssize_t start, Py_ssize_t stop): return _ids.id_run(a, start, stop)
def same_ids(array a, Py_ssize_t start, array b, Py_ssize_t n):
    return _ids.same_ids(a, start, b, n)
def drop_first(array a, Py_ssize_t k): _ids.drop_first(a, k)
def drop_last(array a, Py_ssize_t k): _ids.drop_last(a, k)
"""


@pytest.fixture(scope="module")
def c_bodies(tmp_path_factory):
    """The .pxd's inline bodies behind Python-callable wrappers, compiled in a temporary
    folder (the repository on Cython's include path, as the hot modules' build has it)."""
    work = tmp_path_factory.mktemp("id_arrays_shim")
    (work / "id_shim.pyx").write_text(_SHIM)
    build = ("from setuptools import setup; from Cython.Build import cythonize; "
             f"setup(ext_modules=cythonize(['id_shim.pyx'], include_path=[{str(ROOT)!r}], "
             "quiet=True), script_args=['build_ext', '--inplace', '-q'])")
    subprocess.run([sys.executable, "-c", build], cwd=work, check=True, capture_output=True)
    sys.path.insert(0, str(work))
    try:
        import id_shim
    finally:
        sys.path.remove(str(work))
    return id_shim


id_lists = st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=12)


@pytest.mark.heavy  # compiles a module: .ci/run's Cython step
@pytest.mark.skipif(cannot_compile() is not None, reason=str(cannot_compile()))
@settings(max_examples=200, deadline=None)
@given(values=id_lists, other=id_lists, data=st.data())
def test_the_c_bodies_do_what_the_python_does(c_bodies, values, other, data):
    ids = array("q", values)
    n = len(ids)
    i = data.draw(st.integers(0, n - 1))
    start = data.draw(st.integers(0, n))
    stop = data.draw(st.integers(start, n))
    k = data.draw(st.integers(0, n))
    for candidate in (ids, array("l", values), values, None):
        assert c_bodies.is_id_array(candidate) == id_arrays.is_id_array(candidate)
    assert c_bodies.id_count(ids) == id_arrays.id_count(ids)
    assert c_bodies.id_at(ids, i) == id_arrays.id_at(ids, i)
    run = c_bodies.id_run(ids, start, stop)
    assert run == id_arrays.id_run(ids, start, stop) and run.typecode == "q"
    # a shared stretch, then maybe a difference
    prefix = array("q", values[start:stop]) + array("q", other)
    length = data.draw(st.integers(0, min(n - start, len(prefix))))
    assert (c_bodies.same_ids(ids, start, prefix, length)
            == id_arrays.same_ids(ids, start, prefix, length))
    for drop in ("drop_first", "drop_last"):
        mine, theirs = array("q", values), array("q", values)
        getattr(c_bodies, drop)(mine, k)
        getattr(id_arrays, drop)(theirs, k)
        assert mine == theirs
        mine.append(1)  # still a working array after the resize
        assert mine[-1] == 1
