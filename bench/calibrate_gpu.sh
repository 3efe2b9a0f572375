#!/usr/bin/env bash
# The CUDA calibration path as one prepared script (docs/cost-models.md "Calibration"):
# time the model's kernels with torch on this machine's GPU, write the profile with its
# held-out errors, then re-measure fresh random shapes with every one held out.
#
#   bench/calibrate_gpu.sh [MODEL] [OUT_DIR]        # defaults: llama-3.1-8b, .
#   bench/calibrate_gpu.sh --dry-run [MODEL] [OUT_DIR]   # print the commands only
#
# Writes OUT_DIR/cuda-<gpu preset or "gpu">-MODEL.json. Without a CUDA GPU visible to
# torch it measures nothing and exits 2. No GPU was at hand when it was written, so it has not
# produced a shipped profile yet; the shipped GPU profiles are imported from Vidur's data.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DRY=0
if [[ "${1:-}" == "--dry-run" ]]; then DRY=1; shift; fi
MODEL=${1:-llama-3.1-8b}
OUT=${2:-.}
run() { echo "+ $*"; if [[ $DRY == 0 ]]; then "$@"; fi; }
if [[ $DRY == 0 ]]; then
  if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)' 2>/dev/null; then
    echo "calibrate_gpu.sh: no CUDA GPU visible to torch (install '.[calibrate]' with a CUDA wheel); nothing measured" >&2
    exit 2
  fi
  GPU=$("$PY" -c 'import torch; from prefixsim.profiles.calibrate import guess_hardware_preset as g; print(g(torch.cuda.get_device_name(0)) or "gpu")')
else
  GPU=gpu
fi
PROFILE="$OUT/cuda-$GPU-$MODEL.json"
mkdir -p "$OUT"
run "$PY" -m prefixsim calibrate --model "$MODEL" --device cuda --quiet -o "$PROFILE"
run "$PY" -m prefixsim calibrate --validate "$PROFILE" --quiet
echo "profile: $PROFILE"
