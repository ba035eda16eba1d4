#!/usr/bin/env bash
# The integrations as a new user meets them: a fresh clone of this repository (its committed
# HEAD), a new virtual environment, the install line of docs/integrations.md, then each example
# run on 2 CPU ranks exactly as the docs say and read back by `tracekit analyze`.
#
#   bash examples/integrations/fresh_venv_check.sh [WORK_DIR]      (about 3 minutes once wheels are cached)
set -euo pipefail
source_repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="${1:-$(mktemp -d)}"
rm -rf "$work/tracekit" "$work/venv"
git clone -q "$source_repo" "$work/tracekit"
python3 -m venv "$work/venv"
# shellcheck disable=SC1091
source "$work/venv/bin/activate"
cd "$work/tracekit"
python -m pip install -q torch==2.13.0 '.[capture,transformers,lightning]'
export OMP_NUM_THREADS=1
torchrun --nproc_per_node 2 examples/integrations/hf_trainer.py --out-dir tk-trainer
python examples/integrations/lightning_ddp.py --out-dir tk-lightning
torchrun --nproc_per_node 2 examples/integrations/accelerate_loop.py --out-dir tk-accelerate
for out in tk-trainer tk-lightning tk-accelerate; do
  tracekit analyze "$out" --json "$out.json" > "$out.txt"
  echo "$out: $(sed -n 2p "$out.txt")"
done
echo "fresh clone and venv: $work"
