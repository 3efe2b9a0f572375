#!/usr/bin/env bash
# Mutation testing with mutmut: mutate one part of the package, run that part's tests.
#
#   bench/mutation.sh cache       # cache/segment_tree.py with tests/cache
#   bench/mutation.sh cache all   # every module of cache/ with tests/cache
#   bench/mutation.sh engine      # engine/ with tests/engine
#   bench/mutation.sh costmodel   # costmodel/ (calibrate.py aside: torch) with tests/costmodel
#   bench/mutation.sh metrics prefixsim/metrics/kept_up.py   # one module of metrics/
#   bench/mutation.sh capacity all                           # capacity/ with tests/capacity
#   bench/mutation.sh router all                             # router/ with tests/router
#   bench/mutation.sh config all                             # config/ with tests/config
#   bench/mutation.sh trace prefixsim/trace/readers.py       # one module of trace/
#   bench/mutation.sh pipeline prefixsim/pipeline/timed.py   # one module of pipeline/
#   bench/mutation.sh report prefixsim/report/data.py        # one module of report/ (or tune/)
#   MUTATION_TESTS=tests/test_hf_config.py bench/mutation.sh presets prefixsim/presets/hf_config.py
#   bench/mutation.sh analysis all                           # analysis/ with tests/analysis
#   bench/mutation.sh sweep prefixsim/sweep/store.py         # one module of sweep/
#   bench/mutation.sh profiles all                           # profiles/ (calibrate.py aside)
#   bench/mutation.sh cli prefixsim/cli/files.py             # one module of cli/
#   bench/mutation.sh config prefixsim/errors.py             # a module outside the parts
#
# It works in a scratch copy of the tracked tree (MUTATION_DIR, default
# /tmp/prefixsim-mutation-PART) whose [tool.mutmut] is rewritten for the part, so the work
# tree is left alone and a rerun continues where the last one stopped (delete the folder
# to start afresh; MUTATION_RERUN=1 reruns only the survivors, after tests were added).
# MUTATION_TESTS="tests/metrics tests/pipeline/test_load.py" picks the tests run (default:
# tests/PART). Prints mutmut's survivors and the score: killed / (killed + survived)
#   bench/mutation.sh costmodel prefixsim/costmodel/collectives.py   # one module
#
# (timeouts count as killed; mutants no test reaches count as survived). Needs
# `pip install -e '.[dev]'` (mutmut is in the dev extra). The Python that runs mutmut is
# $PYTHON, else the active virtualenv's, else `python3` on the PATH: Python 3.12 or later
# for the cache (below 3.12 mutmut's stats step can crash on it; a warning says so). The
# README's "Testing" section lists the survivors of the last cache run and why each is
# equivalent or accepted.
set -euo pipefail
py="${PYTHON:-${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}}"
py="$(command -v "${py:-python3}")" || { echo "bench/mutation.sh: no python" >&2; exit 2; }
case "$py" in /*) ;; *) py="$PWD/$py" ;; esac  # absolute: the script changes folder
cd "$(dirname "$0")/.."
part="${1:-cache}"
scope="${2:-scored}"
if ! "$py" -c "import sys; sys.exit(sys.version_info < (3, 12))"; then
  # mutmut's stats step sets a ContextVar on every call of a mutated function, also from
  # the finaliser of a cache the garbage collector frees (SegmentCache.__del__); before
  # 3.12 that re-entry can free the context's HAMT under the running set (CPython issue
  # gh-148891): a segfault or a LookupError in the stats step, at random. Seen with
  # cache/segment_tree.py on 3.11.7; a 3.12 virtualenv runs it.
  echo "bench/mutation.sh: $py is older than Python 3.12: mutmut's stats step may crash" \
       "(CPython gh-148891); PYTHON=<a 3.12+ venv's python> avoids it" >&2
fi
if ! "$py" -c "import mutmut" 2>/dev/null; then
  echo "bench/mutation.sh: $py cannot import mutmut; pip install -e '.[dev]' (or set PYTHON)" >&2
  exit 2
fi
case "$part" in
  cache|engine|costmodel|metrics|capacity|router|config|trace|pipeline|report|tune|presets|analysis|sweep|profiles|cli) ;;
  *) echo "usage: bench/mutation.sh cache|engine|costmodel|metrics|capacity|router|config|trace|pipeline|report|tune|presets|analysis|sweep|profiles|cli [all|MODULE.py]" >&2; exit 2 ;;
esac
case "$scope" in
  all) mutate="\"prefixsim/$part/*\"" ;;
  *.py)
    [ -f "$scope" ] || { echo "bench/mutation.sh: no such module: $scope" >&2; exit 2; }
    mutate="\"$scope\"" ;;
  *)
    case "$part" in
      cache) mutate='"prefixsim/cache/segment_tree.py"' ;;
      *) mutate="\"prefixsim/$part/*\"" ;;
    esac ;;
esac
# one folder per part and scope, so two scopes never mix their mutants
tag="$part${scope:+-$(basename "$scope" .py)}"
work="${MUTATION_DIR:-/tmp/prefixsim-mutation-$tag}"
mkdir -p "$work"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$work"
cd "$work"
python3 - "$part" "$mutate" <<'PY'
import os, re, sys
part, mutate = sys.argv[1], sys.argv[2]
tests = os.environ.get("MUTATION_TESTS", f"tests/{part}").split()
text = open("pyproject.toml").read()
section = f'''[tool.mutmut]
source_paths = ["prefixsim"]
only_mutate = [{mutate}]
# Protocols are not mutated: a test reads their member names, which mutmut rewrites.
do_not_mutate = ["prefixsim/profiles/calibrate.py", "prefixsim/cache/policy.py",
                 "prefixsim/costmodel/protocol.py"]
also_copy = ["traces", "docs", "bench", "README.md"]
pytest_add_cli_args_test_selection = {tests!r}
pytest_add_cli_args = ["-q", "-x", "-p", "no:cacheprovider"]
'''
text = re.sub(r"\[tool\.mutmut\].*?(?=\n\[|\Z)", section, text, flags=re.S)
open("pyproject.toml", "w").write(text)
PY
if [ "${MUTATION_RERUN:-0}" = 1 ] && [ -d mutants ]; then
  # after adding tests: run again only the mutants that survived or that no test reached
  # (mutmut maps the new tests to functions first; the other verdicts stand)
  mapfile -t again < <("$py" - <<'PY'
import json, pathlib
for meta in pathlib.Path("mutants").rglob("*.py.meta"):
    for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
        if code in (0, 33):
            print(name)
PY
)
  echo "rerunning ${#again[@]} surviving mutants" >&2
  [ "${#again[@]}" -eq 0 ] || "$py" -m mutmut run "${again[@]}" > mutmut-rerun.log 2>&1 || true
else
  "$py" -m mutmut run > mutmut-run.log 2>&1 || true
fi
"$py" - <<'PY'
import json, pathlib
counts = {"killed": 0, "survived": 0, "timeout": 0, "no tests": 0, "other": 0}
survivors = []
for meta in sorted(pathlib.Path("mutants").rglob("*.py.meta")):
    for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
        kind = {0: "survived", 1: "killed", None: "other", 33: "no tests", 24: "timeout",
                -24: "timeout", 36: "timeout", 152: "timeout"}.get(code, "killed")
        counts[kind] += 1
        if kind in ("survived", "no tests"):
            survivors.append(name)
print("\n".join(survivors))
dead = counts["killed"] + counts["timeout"]
alive = counts["survived"] + counts["no tests"]
print(f"mutants: {counts}")
print(f"score: {dead}/{dead + alive} = {dead / max(dead + alive, 1):.1%} killed")
if counts["other"] and not dead + alive:
    log = max(pathlib.Path(".").glob("mutmut-*run.log"), key=lambda p: p.stat().st_mtime)
    raise SystemExit(f"bench/mutation.sh: mutmut ran none of the {counts['other']} mutants;"
                     f" see {log.resolve()}")
PY
