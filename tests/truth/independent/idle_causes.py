"""GPU idle gaps of one Kineto rank, each explained by the work that ends it.

Usage: python tests/truth/independent/idle_causes.py PATH [--exclude 0,...] [--window steps|gpu|trace|range:SUFFIX]

Rule (DESIGN.md): the GPU op that ends a gap was launched (runtime call, by correlation id;
a node of a CUDA/HIP graph carries the correlation id of its graph launch, so a gap inside a
replay is read through the graph launch) either before the gap began -> the GPU waited on
something else: ``switch`` when the gap lasts at most 20 us (the GPU moving on to queued
work), ``unobservable`` when no GPU op is recorded before the gap (it waited behind work the
trace does not hold), ``peer`` when that op is a communication kernel, ``dependency`` when the
trace shows what it waited on (a ``*StreamWaitEvent``/``*StreamWaitValue`` call, or the GPU's
``Stream Wait Event`` record, on its stream or of no known stream, after the launch of the
previous op of its stream and no later than its own launch; its stream free and its launch
returned at least 20 us before the gap began, which began as an op of another stream ended;
an earlier op of its graph replay, same correlation id, started before it), else
``device_gap`` (ops queued on one stream, the device's own gap); or after -> the host was
late, unless the op then waited longer after its launch returned (beyond 20 us of launch
latency) than the host took to launch it (then as if launched before), and what the
launching thread did between the gap start and the launch is the cause:
  ``data``       >50% of that time under a DataLoader fetch range
  ``host_sync``  >50% under a blocking sync call (cuda*Synchronize, synchronous cudaMemcpy,
                 a D2H copy to pageable memory)
  ``alloc``      >50% in cudaMalloc/cudaFree/cudaHostAlloc (allocator growth)
  ``launch``     the late time is no longer than a few dispatch intervals of that thread
                 (<= max(50 us, 5 x median interval between its launch calls in the window)):
                 the host dispatches ops one by one and the GPU drains faster than it is fed
  ``host_work``  longer: the thread issued no launch for many dispatch intervals, it was
                 doing CPU work that launches nothing
A host-late gap that began while its launching thread sat in tracekit capture's own step-end
sync (the last ``cudaDeviceSynchronize`` of a ProfilerStep, after every ``tracekit.phase/``
range of it has ended; or within ``SWITCH`` of its return; a gap cut by a window's start began
where the GPU fell idle) is ``capture_sync``: the measurement drained the queue, not the
training. Gaps with no ending op (trailing idle of a window) are ``tail``; an ending op with no launch
in the trace is ``unobservable`` when it starts before the trace's first runtime call
(launched before the profiler recorded the host), else ``unexplained``. ``--window trace``
measures from the trace's first to its last event (where the GPU's first op comes late);
``--window range:SUFFIX`` the shortest host range whose name ends with SUFFIX.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import itertools
import re

from _common import BLOCKING_SYNC_CALLS, gaps, intersect, is_comm_kernel, length, load_kineto, load_nsys, union

LAUNCHES = ("LaunchKernel", "MemcpyAsync", "MemsetAsync", "GraphLaunch", "LaunchCooperativeKernel", "Memcpy", "Memset")
ALLOC = ("cudaMalloc", "cudaFree", "cudaHostAlloc", "hipMalloc", "hipFree", "cudaMallocHost")
SWITCH = 20_000  # ns: the longest a GPU takes to start queued work (switch, launch latency)
WAIT_CALL = re.compile(r"^(?:cuda|cu|hip)StreamWait(?:Event|Value)", re.IGNORECASE)
WAIT_SYNC = re.compile(r"stream[ _]wait[ _]event", re.IGNORECASE)


def stream_of(e: tuple) -> tuple:
    """(device, stream) of a GPU op or sync: Kineto's args, else the nsys row's pid/tid."""
    return (e[2], e[6].get("stream", e[3]))


class Waits:
    """What a queued op could have waited on: its stream's previous op, the stream waits, the
    nodes of its graph replay."""

    def __init__(self, gpu: list[tuple], events: list[tuple], by_corr: dict) -> None:
        self.by_corr = by_corr
        self.ops: dict[tuple, list[tuple]] = collections.defaultdict(list)
        self.first_of_corr: dict[object, int] = {}
        for e in gpu:
            self.ops[stream_of(e)].append((e[4], e[5], e[6].get("correlation")))
            c = e[6].get("correlation")
            if c is not None:
                self.first_of_corr[c] = min(e[4], self.first_of_corr.get(c, e[4]))
        for v in self.ops.values():
            v.sort()
        self.starts = {k: [o[0] for o in v] for k, v in self.ops.items()}
        syncs = {e[6].get("correlation"): e for e in events if e[0] == "sync" and WAIT_SYNC.search(e[1])}
        calls = [e for e in events if e[0] == "runtime" and WAIT_CALL.search(e[1])]
        called = {e[6].get("correlation") for e in calls}
        # (time, (device, stream) or None where no GPU record names the stream)
        self.marks = [(e[4], stream_of(syncs[c]) if (c := e[6].get("correlation")) in syncs else None) for e in calls]
        self.marks += [(e[4], stream_of(e)) for c, e in syncs.items() if c not in called]

    def waited(self, op: tuple, launch: tuple, gs: int, ge: int, ended_at_gs: bool) -> bool:
        key = stream_of(op)
        i = bisect.bisect_left(self.starts[key], ge) - 1
        prev = self.ops[key][i] if i >= 0 else None
        since = None
        if prev is not None:
            prev_launch = self.by_corr.get(prev[2])
            since = prev_launch[4] if prev_launch is not None else prev[0]
        event = any((k is None or k == key) and t <= launch[4] and (since is None or t > since) for t, k in self.marks)
        ready = max(prev[1] if prev is not None else launch[5], launch[5])
        other = ended_at_gs and ready + SWITCH <= gs
        corr = op[6].get("correlation")
        inside = "GraphLaunch" in launch[1] and self.first_of_corr.get(corr, ge) < ge
        return event or other or inside


def is_launch(name: str) -> bool:
    return any(k in name for k in LAUNCHES)


def _capture_syncs(ev: list[tuple], steps: list[tuple]) -> list[tuple]:
    """tracekit capture's step-end syncs: in each ProfilerStep, its last cudaDeviceSynchronize
    when it starts after every tracekit.phase/ range of the step has ended."""
    out = []
    for s in steps:
        phases = [e[5] for e in ev if e[0] == "cpu" and e[1].startswith("tracekit.phase/") and s[4] <= e[4] < s[5]]
        calls = [e for e in ev if e[0] == "runtime" and e[1] == "cudaDeviceSynchronize" and s[4] <= e[4] < s[5]]
        if phases and calls:
            last = max(calls, key=lambda e: e[4])
            if last[4] >= max(phases):
                out.append(last)
    return out


def explain(  # noqa: PLR0912, PLR0915
    path: Path, exclude: set[int], window: str, verbose: int = 0, nsys_rank: int | None = None
) -> dict[str, float]:
    t = load_nsys(path)[nsys_rank] if nsys_rank is not None else load_kineto(path)
    ev = t.events
    gpu = [e for e in ev if e[0] in ("kernel", "memcpy", "memset")]
    busy = union((e[4], e[5]) for e in gpu)
    steps = sorted((e for e in ev if e[0] == "cpu" and e[1].startswith("ProfilerStep#")), key=lambda e: e[4])
    if window == "steps" and steps:
        windows = [(s[4], s[5]) for i, s in enumerate(steps) if i not in exclude]
    elif window == "trace":
        windows = [(min(e[4] for e in ev), max(e[5] for e in ev))]
    elif window.startswith("range:"):  # the shortest host range whose name ends with the rest
        inner = min((e for e in ev if e[0] == "cpu" and e[1].endswith(window[6:])), key=lambda e: e[5] - e[4])
        windows = [(inner[4], inner[5])]
    else:
        windows = [(min(e[4] for e in gpu), max(e[5] for e in gpu))]
    rt = [e for e in ev if e[0] == "runtime"]
    by_corr = {e[6]["correlation"]: e for e in rt if "correlation" in e[6]}
    first_rt = min((e[4] for e in rt), default=None)
    waits = Waits(gpu, ev, by_corr)
    ends = {e[5] for e in gpu}
    starts = sorted(gpu, key=lambda e: e[4])
    first_gpu = starts[0][4]
    keys = [e[4] for e in starts]
    fetch = union(
        (e[4], e[5])
        for e in ev
        if e[0] == "cpu" and "DataLoader" in e[1] and ("__next__" in e[1] or "enumerate" in e[1])
    )
    pageable_d2h = {e[6].get("correlation") for e in ev if e[0] == "memcpy" and "DtoH" in e[1] and "Pageable" in e[1]}
    sync_by_tid: dict[object, list] = collections.defaultdict(list)
    alloc_by_tid: dict[object, list] = collections.defaultdict(list)
    launch_by_tid: dict[object, list] = collections.defaultdict(list)
    for e in rt:
        if e[1] in BLOCKING_SYNC_CALLS or e[1].endswith("Synchronize") or e[6].get("correlation") in pageable_d2h:
            sync_by_tid[e[3]].append((e[4], e[5]))
        if e[1] in ALLOC:
            alloc_by_tid[e[3]].append((e[4], e[5]))
        if is_launch(e[1]):
            launch_by_tid[e[3]].append(e[4])
    sync_u = {k: union(v) for k, v in sync_by_tid.items()}
    capture_syncs = _capture_syncs(ev, steps)
    busy_ends = [hi for _, hi in busy]
    alloc_u = {k: union(v) for k, v in alloc_by_tid.items()}
    interval = {}
    for k, v in launch_by_tid.items():
        v.sort()
        inside = [b - a for a, b in itertools.pairwise(v) if any(lo <= a < hi for lo, hi in windows)]
        interval[k] = statistics.median(inside) if inside else 0
    total = sum(hi - lo for lo, hi in windows)
    out: dict[str, float] = collections.Counter()
    count: dict[str, int] = collections.Counter()
    rows = []
    for lo, hi in windows:
        for gs, ge in gaps(busy, lo, hi):
            k = bisect.bisect_left(keys, ge)
            nxt = starts[k] if k < len(starts) and starts[k][4] == ge else None
            launch = by_corr.get(nxt[6].get("correlation")) if nxt else None
            queued = launch is not None and (launch[4] <= gs or ge - (launch[5] + SWITCH) > min(launch[4], ge) - gs)
            if nxt is None:
                cause = "tail"
            elif launch is None:
                cause = "unobservable" if first_rt is not None and ge < first_rt else "unexplained"
            elif queued and ge <= first_gpu:
                cause = "unobservable"
            elif queued and launch[4] <= gs and ge - gs <= SWITCH and gs in ends:
                cause = "switch"
            elif queued and nxt[0] == "kernel" and is_comm_kernel(nxt[1]):
                cause = "peer"
            elif queued:
                cause = "dependency" if waits.waited(nxt, launch, gs, ge, gs in ends) else "device_gap"
            else:
                late = [(gs, min(launch[4], ge))]
                late_len = length(late)
                tid = launch[3]
                # where the GPU fell idle: a gap cut by the window's start began at the last busy end
                began = busy_ends[i - 1] if gs == lo and (i := bisect.bisect_right(busy_ends, gs)) > 0 else gs
                if any(c[3] == tid and c[4] <= began <= c[5] + SWITCH for c in capture_syncs):
                    cause = "capture_sync"
                elif length(intersect(late, fetch)) > late_len / 2:
                    cause = "data"
                elif length(intersect(late, sync_u.get(tid, []))) > late_len / 2:
                    cause = "host_sync"
                elif length(intersect(late, alloc_u.get(tid, []))) > late_len / 2:
                    cause = "alloc"
                elif late_len <= max(50_000, 5 * interval.get(tid, 0)):
                    cause = "launch"
                else:
                    cause = "host_work"
            out[cause] += ge - gs
            count[cause] += 1
            rows.append((ge - gs, gs, cause, nxt[1][:50] if nxt else ""))
    idle = sum(out.values())
    print(f"{path.name}: window {total / 1e6:.3f} ms, idle {idle / 1e6:.3f} ms ({100 * idle / total:.2f}%)")
    print("median launch interval per thread (us):", {k: v / 1e3 for k, v in interval.items()})
    for c, v in sorted(out.items(), key=lambda kv: -kv[1]):
        print(f"  {c:12s} {v / 1e6:9.3f} ms {100 * v / total:6.2f}% of window, {count[c]} gaps")
    if verbose:
        rows.sort(reverse=True)
        for d, gs, c, n in rows[:verbose]:
            print(f"    gap {d / 1e3:9.1f} us at +{(gs - windows[0][0]) / 1e6:9.3f} ms {c:10s} ended by {n}")
    return {c: 100 * v / total for c, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--exclude", default="")
    ap.add_argument("--window", default="steps")
    ap.add_argument("-v", type=int, default=0)
    ap.add_argument("--nsys-rank", type=int, default=None)
    a = ap.parse_args()
    explain(Path(a.path), {int(x) for x in a.exclude.split(",") if x}, a.window, a.v, a.nsys_rank)


if __name__ == "__main__":
    main()
