"""Overview of one Kineto trace: steps, per-step GPU shares, DataLoader, syncs, idle gaps.

Usage: python tests/truth/independent/overview.py PATH [--exclude N,...] [--gaps K]
Prints what an expert reads first; the numbers in corpus.py come from this output.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import (
    BLOCKING_SYNC_CALLS,
    clip,
    gaps,
    gpu_shares,
    intersect,
    is_comm_kernel,
    length,
    load_kineto,
    load_nsys,
    union,
)

FETCH = ("DataLoader", "__next__", "enumerate(DataLoader)")


def is_sync_call(name: str) -> bool:
    return name in BLOCKING_SYNC_CALLS or name.endswith("Synchronize")


def is_fetch(name: str) -> bool:
    return "DataLoader" in name and ("__next__" in name or "enumerate" in name)


def main() -> None:  # noqa: PLR0912, PLR0915
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--exclude", default="", help="step indexes (0-based) to exclude")
    ap.add_argument("--gaps", type=int, default=15)
    ap.add_argument("--nsys-rank", type=int, default=None, help="the path is an nsys SQLite export: which process")
    a = ap.parse_args()
    t = load_nsys(Path(a.path))[a.nsys_rank] if a.nsys_rank is not None else load_kineto(Path(a.path))
    ev = t.events
    print(
        "meta:",
        {
            k: (v if k != "distributedInfo" else {kk: vv for kk, vv in v.items() if kk != "pg_config"})
            for k, v in t.meta.items()
        },
    )
    kinds = collections.Counter(e[0] for e in ev)
    print("kinds:", dict(kinds))
    gpu = [e for e in ev if e[0] in ("kernel", "memcpy", "memset")]
    streams = collections.Counter((e[2], e[3]) for e in gpu)
    print("gpu (pid,tid) lanes:", dict(streams))
    steps = sorted((e for e in ev if e[0] == "cpu" and e[1].startswith("ProfilerStep#")), key=lambda e: e[4])
    print(f"ProfilerStep count: {len(steps)}")
    for i, s in enumerate(steps):
        print(f"  [{i}] {s[1]} {(s[5] - s[4]) / 1e6:.3f} ms tid={s[3]}")
    if gpu:
        g0, g1 = min(e[4] for e in gpu), max(e[5] for e in gpu)
        print(
            f"GPU span {(g1 - g0) / 1e6:.3f} ms; "
            f"trace span {(max(e[5] for e in ev) - min(e[4] for e in ev)) / 1e6:.3f} ms"
        )
    # kernels by class
    kern = [e for e in ev if e[0] == "kernel"]
    comm = collections.Counter(e[1][:60] for e in kern if is_comm_kernel(e[1]))
    print("comm kernels:", dict(comm))
    excl = {int(x) for x in a.exclude.split(",") if x}
    windows = [(s[4], s[5]) for i, s in enumerate(steps) if i not in excl]
    if gpu:
        for i, s in enumerate(steps):
            sh = gpu_shares(gpu, [(s[4], s[5])])
            print(f"  step[{i}] " + " ".join(f"{k}={v:.2f}" for k, v in sh.items()))
        if windows:
            sh = gpu_shares(gpu, windows)
            print(f"steady (excluding {sorted(excl)}): " + " ".join(f"{k}={v:.2f}" for k, v in sh.items()))
        whole = [(g0, g1)]
        sh = gpu_shares(gpu, whole)
        print("whole GPU span: " + " ".join(f"{k}={v:.2f}" for k, v in sh.items()))
    # dataloader
    fetch = [e for e in ev if e[0] == "cpu" and is_fetch(e[1])]
    print(f"DataLoader fetch ranges: {len(fetch)}")
    for f in fetch:
        print(f"  {f[1][:70]} {(f[5] - f[4]) / 1e6:.3f} ms at +{(f[4] - (steps[0][4] if steps else 0)) / 1e6:.3f}")
    # syncs per step
    rt = [e for e in ev if e[0] == "runtime"]
    print("runtime call names:", collections.Counter(e[1] for e in rt).most_common(25))
    syncs = [e for e in rt if is_sync_call(e[1])]
    gsync = [e for e in ev if e[0] == "sync"]
    print("GPU-side cuda_sync events:", collections.Counter(e[1] for e in gsync))
    for i, s in enumerate(steps):
        c = collections.Counter(e[1] for e in syncs if s[4] <= e[4] < s[5])
        dur = sum(e[5] - e[4] for e in syncs if s[4] <= e[4] < s[5])
        print(f"  step[{i}] sync calls {dict(c)} total {dur / 1e6:.3f} ms")
    if gpu:
        busy = union((e[4], e[5]) for e in gpu)
        fu = union((f[4], f[5]) for f in fetch)
        for i, s in enumerate(steps):
            idle = gaps(busy, s[4], s[5])
            dl = length(intersect(idle, clip(fu, s[4], s[5])))
            print(
                f"  step[{i}] GPU idle {length(idle) / 1e6:.3f} ms, "
                f"of which under fetch {dl / 1e6:.3f} ms ({100 * dl / (s[5] - s[4]):.2f}% of step)"
            )
        # biggest gaps in the windows and what ends them
        by_corr = {}
        for e in rt:
            c = e[6].get("correlation")
            if c is not None:
                by_corr[c] = e
        starts = sorted(gpu, key=lambda e: e[4])
        allg = []
        for lo, hi in windows or [(g0, g1)]:
            allg += gaps(busy, lo, hi)
        allg.sort(key=lambda g: g[0] - g[1])
        import bisect

        keys = [e[4] for e in starts]
        cpu = [e for e in ev if e[0] == "cpu"]
        for gs, ge in allg[: a.gaps]:
            k = bisect.bisect_left(keys, ge)
            nxt = starts[k] if k < len(starts) else None
            launch = by_corr.get(nxt[6].get("correlation")) if nxt else None
            when = "none"
            if launch:
                when = "before gap" if launch[4] <= gs else f"+{(launch[4] - gs) / 1e3:.1f}us after gap start"
            host = [c for c in cpu if c[4] < ge and c[5] > gs and (launch is None or c[3] == launch[3])]
            host.sort(key=lambda c: -(min(c[5], ge) - max(c[4], gs)))
            hs = "; ".join(f"{c[1][:40]}({(c[5] - c[4]) / 1e3:.0f}us)" for c in host[:4])
            print(
                f"gap {(ge - gs) / 1e3:.1f}us at +{(gs - (steps[0][4] if steps else g0)) / 1e6:.3f}ms ended by "
                f"{nxt[0] if nxt else '-'} {nxt[1][:40] if nxt else ''} "
                f"launch {launch[1] if launch else '-'} {when} | host: {hs}"
            )
    print("step durations median:", statistics.median([(s[5] - s[4]) / 1e6 for s in steps]) if steps else None)


if __name__ == "__main__":
    main()
