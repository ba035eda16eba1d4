"""pipit saxpy MPI (nsys, old schema): iterations and where each one's time goes.

Usage: python tests/truth/independent/pipit_saxpy.py

Iterations are found from the repeated structure: each starts with a pair of MPI_Send NVTX
ranges (5 pairs). The first iteration holds one-time work (MPI connection set-up: its first
MPI_Send takes 34 ms against 11 ms later) and is excluded; the last ends at the last GPU
activity's following MPI_Recv end. Per iteration window, on the GPU: kernel, copies, idle; the
idle is split by what the host thread was doing: in an MPI range (blocking host
communication) or in no instrumented range at all (CPU work in main(), confirmed by the CPU
samples: `main`, `std::abs` in the verification loop). The old export has two runtime rows
per call (``cudaMemcpy`` and ``cudaMemcpy_v3020``, same correlation id): count by correlation.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import itertools

from _common import SHARED, clip, gaps, intersect, length, load_nsys, union


def main() -> None:
    t = load_nsys(SHARED / "nsys" / "pipit-saxpy-mpi-a100-oldschema.sqlite")[0]
    ev = t.events
    sends = sorted(e for e in ev if e[0] == "cpu" and e[1] == "MPI_Send")
    starts = [s[4] for i, s in enumerate(sends) if i % 2 == 0]
    recvs = sorted(e for e in ev if e[0] == "cpu" and e[1] == "MPI_Recv")
    bounds = [*starts, recvs[-1][5]]
    windows = list(itertools.pairwise(bounds))
    print("iterations (ms):", [round((b - a) / 1e6, 1) for a, b in windows])
    kern = union((e[4], e[5]) for e in ev if e[0] == "kernel")
    copy = union((e[4], e[5]) for e in ev if e[0] == "memcpy")
    busy = union([*kern, *copy])
    mpi = union((e[4], e[5]) for e in ev if e[0] == "cpu" and e[1].startswith("MPI_"))
    corr = {e[6]["correlation"] for e in ev if e[0] == "runtime" and e[1].startswith("cudaMemcpy")}
    print("synchronous cudaMemcpy calls (distinct correlation ids):", len(corr))
    for label, ws in (("all 5", windows), ("steady (excluding iteration 0)", windows[1:])):
        total = sum(b - a for a, b in ws)
        k = sum(length(clip(kern, a, b)) for a, b in ws)
        c = sum(length(clip(copy, a, b)) for a, b in ws)
        idle = [g for a, b in ws for g in gaps(busy, a, b)]
        m = length(intersect(union(idle), mpi))
        h = length(idle) - m
        print(
            f"{label}: window {total / 1e6:.1f} ms; compute {100 * k / total:.2f}% copies {100 * c / total:.2f}% "
            f"idle {100 * length(idle) / total:.2f}% (host in MPI {100 * m / total:.2f}%, "
            f"host CPU work {100 * h / total:.2f}%)"
        )
    g0 = min(e[4] for e in ev if e[0] in ("kernel", "memcpy"))
    g1 = max(e[5] for e in ev if e[0] in ("kernel", "memcpy"))
    total = g1 - g0
    print(
        f"whole GPU span {total / 1e6:.1f} ms: compute {100 * length(clip(kern, g0, g1)) / total:.2f}% "
        f"copies {100 * length(clip(copy, g0, g1)) / total:.2f}% idle {100 * length(gaps(busy, g0, g1)) / total:.2f}% "
        f"(host in MPI {100 * length(intersect(gaps(busy, g0, g1), mpi)) / total:.2f}%)"
    )


if __name__ == "__main__":
    main()
