"""hta-sampled-2rank: evidence that the events are a sparse sample of the real trace.

Usage: python tests/truth/independent/sampled.py

In a complete Kineto trace every runtime call's ``External id`` names the CPU op that issued
it, and External ids / correlation ids are nearly consecutive. Here no runtime call finds its
CPU op, the kept CPU ops cover ~1.4% of the External id range, and consecutive kept launch
correlation ids jump by 20+ most of the time: most kernels (and ops) were dropped, so GPU
"idle" in this file is largely missing kernels, and no verdict can rest on it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import itertools

from _common import SHARED, load_kineto


def main() -> None:
    for r in (0, 1):
        t = load_kineto(SHARED / "kineto" / "hta-sampled-2rank" / f"sampled_rank-{r}.json.gz")
        ev = t.events
        ext = sorted(e[6]["External id"] for e in ev if e[0] == "cpu" and "External id" in e[6])
        rt = [e for e in ev if e[0] == "runtime"]
        ext_set = set(ext)
        orphan = sum(1 for e in rt if e[6].get("External id") not in ext_set)
        corr = sorted(e[6]["correlation"] for e in rt if "correlation" in e[6])
        jumps = [b - a for a, b in itertools.pairwise(corr)]
        big = sum(1 for j in jumps if j >= 20)
        print(
            f"rank {r}: {len(ext)} CPU ops over External ids {ext[0]}..{ext[-1]} "
            f"({100 * len(ext) / (ext[-1] - ext[0] + 1):.1f}% kept); runtime calls without their CPU op: "
            f"{orphan}/{len(rt)}; correlation jumps >= 20: {big}/{len(jumps)}"
        )


if __name__ == "__main__":
    main()
