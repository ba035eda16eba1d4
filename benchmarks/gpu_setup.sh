# The set-up both GPU scripts share (sourced by gpu_check.sh and gpu_calibration.sh, from the
# repository's root): --bundle packs the packages the GPU machine lacks; otherwise PYTHONPATH is
# made to hold tracekit (this checkout) and, where they do not import, the bundled packages, and
# the optional C decoder is built in place when a compiler is there. Sets PY.
#
# The GPU machine has torch with CUDA, accelerate, numpy, scipy, click, rich and jinja2, and no
# package index. What else tracekit needs (polars, msgspec, isal, plotly, nvtx) travels as
# .whl/site.tar.xz, which --bundle makes from the wheels for CPython 3.12 on x86-64 (about
# 37 MB: xz packs them tighter than the wheels' own zip, under the 64 MiB a call may carry).
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
BUNDLE="$ROOT/.whl/site.tar.xz"
PACKAGES=(polars==2.1.0 polars-runtime-32==2.1.0 msgspec==0.22.0 isal==1.9.1 plotly==7.1.0 nvtx==0.2.17)

if [[ "${1:-}" == "--bundle" ]]; then
  tmp="$(mktemp -d)"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$tmp/wheels" "${PACKAGES[@]}"
  mkdir -p "$tmp/site" "$ROOT/.whl"
  for wheel in "$tmp"/wheels/*.whl; do "$PY" -m zipfile -e "$wheel" "$tmp/site"; done
  tar -cf - -C "$tmp/site" . | xz -9 -T0 > "$BUNDLE"
  rm -rf "$tmp"
  echo "wrote $BUNDLE ($(du -h "$BUNDLE" | cut -f1)); carry .whl to the GPU machine"
  exit 0
fi

export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PY" -c "import polars, msgspec, isal, plotly, nvtx" 2>/dev/null; then
  if [[ ! -f "$BUNDLE" ]]; then
    echo "$(basename "$0" .sh): polars, msgspec, isal, plotly or nvtx is missing and $BUNDLE is not here (--bundle makes it)" >&2
    exit 2
  fi
  SITE="${TMPDIR:-/tmp}/tracekit-gpu-check-site"
  rm -rf "$SITE" && mkdir -p "$SITE"
  tar -xJf "$BUNDLE" -C "$SITE"
  export PYTHONPATH="$ROOT:$SITE${PYTHONPATH#"$ROOT"}"
fi
if ! "$PY" -c "import tracekit.readers._kineto_columns" 2>/dev/null; then
  timeout 120 "$PY" setup.py -q build_ext --inplace >/dev/null 2>&1 || echo "$(basename "$0" .sh): the C decoder was not built (msgspec decodes)"
fi
