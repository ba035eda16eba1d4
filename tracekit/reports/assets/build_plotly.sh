#!/usr/bin/env bash
# Rebuild plotly.min.js: a partial plotly.js bundle (scatter, bar, box, heatmap) of the plotly.js
# version the installed plotly (Python) generates figures for, minified with esbuild as plotly.js's
# own dist bundles are (its esbuild-config.js). Run from anywhere; needs node and npm.
# Usage: tracekit/reports/assets/build_plotly.sh [VERSION]   (default: plotly.offline.get_plotlyjs_version())
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="${1:-$(python3 -c 'from plotly.offline import get_plotlyjs_version as v; print(v())')}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm init -y >/dev/null
npm install --no-audit --no-fund --ignore-scripts "plotly.js@$version" esbuild@0.24 >/dev/null
cp "$here/plotly-bundle.js" entry.js
./node_modules/.bin/esbuild entry.js --bundle --minify --format=iife --global-name=Plotly --target=es2016 \
  --define:global=window --define:define.amd=false --define:process.env.NODE_DEBUG=false \
  --loader:.css=empty --legal-comments=inline --outfile="$here/plotly.min.js"
cp node_modules/plotly.js/LICENSE "$here/plotly.js.LICENSE"
echo "$version" > "$here/plotly.js.VERSION"
ls -l "$here/plotly.min.js"
