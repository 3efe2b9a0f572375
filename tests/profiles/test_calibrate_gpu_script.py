"""bench/calibrate_gpu.sh, the prepared CUDA calibration, as far as a CPU machine allows:
its dry run prints the two calibrate commands, those commands parse, and without a CUDA GPU
the script and the command refuse in one line with exit code 2."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixsim.cli import app

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "calibrate_gpu.sh"
SESSION = SCRIPT.with_name("gpu_session.sh")


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"}, check=False)


def test_dry_run_prints_the_calibration_commands(tmp_path):
    done = _script("--dry-run", "llama-2-7b", str(tmp_path))
    assert done.returncode == 0, done.stderr
    commands = [line[2:] for line in done.stdout.splitlines() if line.startswith("+ ")]
    profile = f"{tmp_path}/cuda-gpu-llama-2-7b.json"
    assert commands[0].endswith(f"calibrate --model llama-2-7b --device cuda --quiet -o "
                                f"{profile}")
    assert commands[1].endswith(f"calibrate --validate {profile} --quiet")


@pytest.mark.heavy  # torch: .ci/run's second step
@pytest.mark.skipif(_cuda(), reason="a CUDA GPU is present: the refusal is not reached")
def test_without_cuda_the_script_and_the_command_refuse(tmp_path):
    done = _script("llama-2-7b", str(tmp_path))
    assert done.returncode == 2 and "no CUDA GPU" in done.stderr
    assert not list(tmp_path.iterdir())
    args = shlex.split(_script("--dry-run", "llama-2-7b", str(tmp_path)).stdout.splitlines()[0]
                       .removeprefix("+ "))
    result = CliRunner().invoke(app, args[args.index("calibrate"):])
    assert result.exit_code == 2 and "CUDA" in result.output


@pytest.mark.heavy  # torch: .ci/run's second step
@pytest.mark.skipif(_cuda(), reason="a CUDA GPU is present: the refusal is not reached")
def test_the_gpu_session_script_refuses_without_cuda(tmp_path):
    """bench/gpu_session.sh (the prepared device session) stops before measuring or writing
    anything when torch sees no GPU."""
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(SESSION), str(out)], capture_output=True, text=True,
                          env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
                          check=False)
    assert done.returncode == 2 and "no CUDA GPU" in done.stderr
    assert not out.exists()
