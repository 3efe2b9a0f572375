#!/usr/bin/env bash
# The GPU checks of one short device session, prepared ahead (docs/cost-models.md
# "Calibration", "Checked against kernel timings"): on a machine with a CUDA GPU and torch,
# in the repository root,
#
#   bench/gpu_session.sh OUT_DIR [WHEEL_DIR]
#
# 1. the CUDA-marked tests of the calibration (the varlen decode kernel against per-sequence
#    SDPA, the bandwidth probe), 90 s at most;
# 2. bench/gpu_kernels.py measure -> OUT_DIR/<gpu>-kernels.json (about a minute on an H200;
#    170 s at most, and the file is rewritten after every section);
# 3. bench/calibrate_gpu.sh llama-3.1-8b OUT_DIR -> OUT_DIR/cuda-<gpu>-llama-3.1-8b.json and
#    its validation on fresh shapes (220 s at most).
# Logs go to OUT_DIR too. Each step runs under `timeout`, so a stuck step costs its limit and
# the next still runs: the whole script ends inside 8.5 minutes.
#
# A machine without prefixsim's dependencies (a bare CUDA image with torch, numpy, pandas,
# click, PyYAML already there) takes the rest as wheels: download them here for its Python,
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform manylinux2014_x86_64 -d WHEEL_DIR simpy pydantic pydantic_core \
#     annotated-types typing-inspection typing_extensions
# and pass WHEEL_DIR: they are installed into a temporary folder put on PYTHONPATH.
# Afterwards, on any machine: .venv/bin/python bench/gpu_kernels.py compare OUT_DIR/*-kernels.json
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench/gpu_session.sh OUT_DIR [WHEEL_DIR]}
WHEELS=${2:-}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
if [[ -n "$WHEELS" ]]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/prefixsim-site "$WHEELS"/*.whl || exit 2
  export PYTHONPATH="/tmp/prefixsim-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)' 2>/dev/null; then
  echo "gpu_session.sh: no CUDA GPU visible to torch; nothing measured" >&2
  exit 2
fi
mkdir -p "$OUT"
GPU=$("$PY" -c 'import torch; from prefixsim.profiles.calibrate import guess_hardware_preset as g; print(g(torch.cuda.get_device_name(0)) or "gpu")')
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
  --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
"$PY" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
echo "== tests marked cuda"
timeout 90 "$PY" -m pytest -q -p no:cacheprovider -m cuda tests/profiles/test_calibrate.py \
  2>&1 | tee "$OUT/pytest-cuda.log" | tail -n 15
echo "== kernel timings"
timeout 170 "$PY" bench/gpu_kernels.py measure -o "$OUT/$GPU-kernels.json" 2>&1 \
  | tee "$OUT/kernels.log" | cut -c1-200
echo "== calibration"
PYTHON="$PY" timeout 220 bash bench/calibrate_gpu.sh llama-3.1-8b "$OUT" 2>&1 \
  | tee "$OUT/calibrate.log"
ls -la "$OUT"
