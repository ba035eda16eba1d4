#!/usr/bin/env bash
# Every predicted gain against the measured one, on one GPU, in at most 8 minutes
# (benchmarks/gpu_calibration.py says what each case is, what it measures and what it writes).
#
#   benchmarks/gpu_calibration.sh [--out DIR] [--only CASE]...   on a machine with one NVIDIA GPU
#   benchmarks/gpu_calibration.sh --cpu [--out DIR]              every case small on CPU: a smoke test (CI)
#   benchmarks/gpu_calibration.sh --bundle                       here: pack the packages the GPU machine lacks
#
# The packages the GPU machine lacks travel as .whl/site.tar.xz (benchmarks/gpu_setup.sh says how).
set -euo pipefail
source "$(dirname "$0")/gpu_setup.sh"
exec "$PY" -m benchmarks.gpu_calibration "$@"
