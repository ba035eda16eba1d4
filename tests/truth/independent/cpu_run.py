"""A CPU-only (gloo) capture of N ranks: per-step host decomposition and collective waiting.

Usage: python tests/truth/independent/cpu_run.py CAPTURE_DIR [--exclude 0]

Per rank, on the training (main) thread, inside each ProfilerStep:
  data     DataLoader __next__ ranges
  comm     time in collective calls on the main thread (c10d::*, gloo:*) plus time the main
           thread is in no op at all while one of its rank's gloo collectives is in flight
           (DDP's reducer waiting for the gradient all-reduce inside backward, or a blocking
           collective): waiting for communication, not compute (DESIGN.md)
  compute  time in any other op (leaf-or-not cpu_op on the main thread), not data, not comm
  other    the rest (Python between ops, sleeps, no collective in flight)
Collectives: the k-th ``c10d::allreduce_`` call on each rank's main thread is matched with
the k-th of every other rank (same process group: the default one). Its execution is the
k-th ``gloo:all_reduce`` (in start order) on the rank's gloo threads. Arrival = the call's
start; latency = the minimum gloo:all_reduce duration over ranks; wait(r) = duration(r) -
latency; the last arriver is the straggler candidate, and its lateness (its arrival minus the
median arrival of the others) is compared with the others' waiting.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import clip, intersect, length, load_kineto, subtract, union

ANNOT_PREFIX = ("ProfilerStep#", "tracekit.phase/", "## ")


def is_comm_op(name: str) -> bool:
    return name.startswith(("c10d::", "gloo:", "mpi:", "record_param_comms"))


def rank_facts(path: Path) -> dict:
    t = load_kineto(path)
    ev = t.events
    steps = sorted((e for e in ev if e[0] == "cpu" and e[1].startswith("ProfilerStep#")), key=lambda e: e[4])
    main = steps[0][3]
    ops = [e for e in ev if e[0] == "cpu" and e[3] == main and not e[1].startswith(ANNOT_PREFIX)]
    fetch = union((e[4], e[5]) for e in ops if "DataLoader" in e[1] and "__next__" in e[1])
    comm_main = union((e[4], e[5]) for e in ops if is_comm_op(e[1]))
    gloo = sorted((e for e in ev if e[0] == "cpu" and e[3] != main and e[1].startswith("gloo:")), key=lambda e: e[4])
    inflight = union((e[4], e[5]) for e in gloo)
    any_op = union((e[4], e[5]) for e in ops)
    calls = sorted((e for e in ops if e[1].startswith("c10d::allreduce")), key=lambda e: e[4])
    phases = [e for e in ev if e[0] == "cpu" and e[3] == main and e[1].startswith("tracekit.phase/")]
    return {
        "rank": t.meta.get("distributedInfo", {}).get("rank"),
        "steps": steps,
        "fetch": fetch,
        "comm_main": comm_main,
        "inflight": inflight,
        "any_op": any_op,
        "calls": calls,
        "gloo": gloo,
        "phases": phases,
    }


def decompose(f: dict, lo: int, hi: int) -> dict[str, float]:
    w = [(lo, hi)]
    data = clip(f["fetch"], lo, hi)
    uncovered = subtract(w, clip(f["any_op"], lo, hi))
    comm = union(clip(f["comm_main"], lo, hi) + intersect(uncovered, clip(f["inflight"], lo, hi)))
    comm = subtract(comm, data)
    compute = subtract(subtract(clip(f["any_op"], lo, hi), data), comm)
    total = hi - lo
    d = {
        "data": length(data),
        "comm": length(comm),
        "compute": length(compute),
    }
    d["other"] = total - sum(d.values())
    return {k: 100 * v / total for k, v in d.items()} | {"step_ms": total / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("--exclude", default="")
    a = ap.parse_args()
    excl = {int(x) for x in a.exclude.split(",") if x}
    facts = [rank_facts(p) for p in sorted(Path(a.capture).glob("rank*.pt.trace.json.gz"))]
    facts.sort(key=lambda f: f["rank"])
    agg: dict[int, dict[str, float]] = {}
    for f in facts:
        rows = []
        for _i, s in enumerate(f["steps"]):
            d = decompose(f, s[4], s[5])
            rows.append(d)
            ph = {p[1].split("/")[1]: round((p[5] - p[4]) / 1e6, 1) for p in f["phases"] if s[4] <= p[4] < s[5]}
            print(f"r{f['rank']} {s[1]} " + " ".join(f"{k}={v:.1f}" for k, v in d.items()) + f" phases(ms)={ph}")
        keep = [(s[4], s[5]) for i, s in enumerate(f["steps"]) if i not in excl]
        tot = sum(hi - lo for lo, hi in keep)
        sums = dict.fromkeys(("data", "comm", "compute", "other"), 0.0)
        for lo, hi in keep:
            d = decompose(f, lo, hi)
            for k in sums:
                sums[k] += d[k] * (hi - lo) / tot
        agg[f["rank"]] = sums
        print(f"r{f['rank']} steady (excl {sorted(excl)}): " + " ".join(f"{k}={v:.2f}" for k, v in sums.items()))
    keys = ("data", "comm", "compute", "other")
    print("mean over ranks: " + " ".join(f"{k}={statistics.mean(agg[r][k] for r in agg):.2f}" for k in keys))
    # collectives
    n = min(len(f["calls"]) for f in facts)
    print(f"collective calls per rank: {[len(f['calls']) for f in facts]}; gloo ops: {[len(f['gloo']) for f in facts]}")
    waits = {f["rank"]: 0 for f in facts}
    explained = {f["rank"]: 0 for f in facts}
    last_count: dict[int, int] = {}
    lat_sum = 0
    for k in range(n):
        arr = {f["rank"]: f["calls"][k][4] for f in facts}
        dur = {f["rank"]: f["gloo"][k][5] - f["gloo"][k][4] for f in facts if k < len(f["gloo"])}
        lat = min(dur.values())
        lat_sum += lat
        last = max(arr, key=arr.get)
        last_count[last] = last_count.get(last, 0) + 1
        for r, d in dur.items():
            waits[r] += d - lat
            explained[r] += max(0, min(d - lat, arr[last] - arr[r]))
        others = [arr[r] for r in arr if r != last]
        late = arr[last] - statistics.median(others)
        print(
            f"[{k}] latency {lat / 1e6:.1f} ms; last r{last} late by {late / 1e6:.1f} ms vs median; "
            "wait ms " + " ".join(f"r{r}:{(dur[r] - lat) / 1e6:.0f}" for r in sorted(dur))
        )
    print("last arriver counts:", last_count)
    print("total wait per rank (ms):", {r: round(v / 1e6, 1) for r, v in waits.items()})
    print(
        "of which explained by the last arriver's lateness (ms):", {r: round(v / 1e6, 1) for r, v in explained.items()}
    )
    print(f"sum of latencies (ms): {lat_sum / 1e6:.1f}")


if __name__ == "__main__":
    main()
