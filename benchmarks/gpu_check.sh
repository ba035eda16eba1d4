#!/usr/bin/env bash
# Every check of tracekit's CUDA paths on one GPU, in at most 8 minutes (benchmarks/gpu_check.py
# says what each checks and what it writes).
#
#   benchmarks/gpu_check.sh [--out DIR] [--only CHECK]...   on a machine with one NVIDIA GPU
#   benchmarks/gpu_check.sh --cpu [--out DIR]               the same checks on CPU: a smoke test (CI)
#   benchmarks/gpu_check.sh --bundle                        here: pack the packages the GPU machine lacks
#
# The packages the GPU machine lacks travel as .whl/site.tar.xz (benchmarks/gpu_setup.sh says how).
set -euo pipefail
source "$(dirname "$0")/gpu_setup.sh"
exec "$PY" -m benchmarks.gpu_check "$@"
