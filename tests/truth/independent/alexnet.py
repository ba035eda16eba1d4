"""alexnet-a100-cuda-sync: PARAM's AlexNet inference benchmark; where its one measured forward goes.

Usage: python tests/truth/independent/alexnet.py [PATH]

PATH: another trace of the same benchmark (``kineto/hta-critical-path/simple-add.json.gz`` is
one, a later run with the same ranges); by default ``kineto/hta-misc/alexnet-a100-cuda-sync``.

No ProfilerStep. The PARAM annotations nest: ``[param|cuda]`` (the whole 43.4 s run) holds a
warm-up forward (``...|warmup|forward``, 12.76 s: cuDNN autotune, lazy init) and one measured
forward (``...|measure|forward``: an outer 79.7 ms range holding PARAM's ``clear_cache`` and an
inner 36.4 ms range, the model itself). 30 s before any of it go to CUDA context creation
(``cudaDeviceGetStreamPriorityRange`` 29.9 s). The steady window is the inner measured forward.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import SHARED, clip, gaps, gpu_shares, intersect, length, load_kineto, union
from idle_causes import explain


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else SHARED / "kineto" / "hta-misc" / "alexnet-a100-cuda-sync.json.gz"
    t = load_kineto(path)
    ev = t.events
    measured = [e for e in ev if e[0] == "cpu" and e[1].endswith("|measure|forward]")]
    inner = min(measured, key=lambda e: e[5] - e[4])
    lo, hi = inner[4], inner[5]
    gpu = [e for e in ev if e[0] in ("kernel", "memcpy", "memset")]
    print(f"measured forward: {(hi - lo) / 1e6:.3f} ms")
    print("GPU shares:", {k: round(v, 2) for k, v in gpu_shares(gpu, [(lo, hi)]).items()})
    busy = union((e[4], e[5]) for e in gpu)
    idle = gaps(busy, lo, hi)
    rt = [e for e in ev if e[0] == "runtime" and lo <= e[4] < hi]
    per = collections.defaultdict(int)
    for e in rt:
        per[e[1]] += e[5] - e[4]
    print(
        "runtime time in window (ms):",
        {k: round(v / 1e6, 3) for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:6]},
    )
    malloc = union((e[4], e[5]) for e in rt if e[1] == "cudaMalloc")
    print(
        f"GPU idle {length(idle) / 1e6:.3f} ms ({100 * length(idle) / (hi - lo):.2f}%), "
        f"of which the host is in cudaMalloc {length(intersect(idle, malloc)) / 1e6:.3f} ms "
        f"({100 * length(intersect(idle, malloc)) / (hi - lo):.2f}% of the window)"
    )
    print("syncs in window:", collections.Counter(e[1] for e in rt if "Synchronize" in e[1]))
    g0, g1 = min(e[4] for e in gpu), max(e[5] for e in gpu)
    print(
        f"whole trace: GPU busy {100 * length(clip(busy, g0, g1)) / (g1 - g0):.2f}% "
        f"of the GPU span {(g1 - g0) / 1e6:.0f} ms"
    )
    print("--- idle causes over the whole GPU span (no steps):")
    explain(path, set(), "gpu")


if __name__ == "__main__":
    main()
