"""Benches on both code paths: the pure sources and the hot modules compiled by
`prefixsim accelerate` (docs/architecture.md "Compiled hot modules").

A process picks its path when it first imports the hot modules, so a bench measures the
other path in a child process of itself: `compiled_env` builds the compiled copies (into the
usual cache folder, or PREFIXSIM_ACCEL_DIR; a rebuild is quick when nothing changed) and
returns the environment that makes a child use them; `pure_env` one that makes it run the
sources; `run_child` runs the bench script again with arguments and returns its output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pure_env() -> dict[str, str]:
    return {**os.environ, "PREFIXSIM_PURE": "1", "PREFIXSIM_ACCEL": "0"}


def compiled_env() -> tuple[dict[str, str] | None, str]:
    """(environment, "") with the hot modules compiled, or (None, why not)."""
    env = {**os.environ, "PREFIXSIM_PURE": "0", "PREFIXSIM_ACCEL": "1"}
    done = subprocess.run([sys.executable, "-m", "prefixsim", "accelerate"], env=env,
                          capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
        return None, lines[-1] if lines else f"exit status {done.returncode}"
    return env, ""


def run_child(script: Path, args: list[str], env: dict[str, str]) -> str:
    """The output of `python script args` in `env` (its errors go to ours)."""
    done = subprocess.run([sys.executable, str(script), *args], env=env, stdout=subprocess.PIPE,
                          text=True, check=True, cwd=ROOT)
    return done.stdout


def describe() -> str:
    """This process's path, as a run's summary says it (code_path, compiled modules)."""
    from prefixsim import accel

    path = accel.code_path()
    return f"{path['code_path']} ({path['compiled_modules']} hot modules compiled)"
