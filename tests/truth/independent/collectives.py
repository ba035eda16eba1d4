"""Match communication kernels across the ranks of one job and split their time.

Usage: python tests/truth/independent/collectives.py FILE [FILE ...]   (one Kineto file per rank)

The k-th communication kernel of a rank (in start order, on any stream) is matched with the
k-th of every other rank; their names must agree. For each instance:
  latency  = the minimum duration over ranks (the collective's own cost, DESIGN.md)
  wait(r)  = duration(r) - latency (time rank r spent in the kernel waiting for peers)
  last     = the rank whose kernel started last (arrived last); the others' waiting is
             explained by it when wait(r) ~ start(last) - start(r)
Needs a shared clock (the param traces share the host clock; checked by the spread of the
ProfilerStep starts).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import is_comm_kernel, load_kineto


def main() -> None:
    per_rank = {}
    for p in sys.argv[1:]:
        t = load_kineto(Path(p))
        rank = t.meta.get("distributedInfo", {}).get("rank")
        comm = sorted((e for e in t.events if e[0] == "kernel" and is_comm_kernel(e[1])), key=lambda e: e[4])
        steps = [e for e in t.events if e[0] == "cpu" and e[1].startswith("ProfilerStep#")]
        per_rank[rank] = (comm, steps)
    ranks = sorted(per_rank)
    t0 = min(per_rank[r][1][0][4] for r in ranks)
    print("step starts (ms from earliest):", {r: round((per_rank[r][1][0][4] - t0) / 1e6, 3) for r in ranks})
    print("step durations (ms):", {r: round((per_rank[r][1][0][5] - per_rank[r][1][0][4]) / 1e6, 3) for r in ranks})
    n = min(len(per_rank[r][0]) for r in ranks)
    print("comm kernels per rank:", {r: len(per_rank[r][0]) for r in ranks})
    tot_wait = dict.fromkeys(ranks, 0)
    tot_dur = dict.fromkeys(ranks, 0)
    tot_lat = 0
    for k in range(n):
        inst = {r: per_rank[r][0][k] for r in ranks}
        names = {e[1][:28] for e in inst.values()}
        durs = {r: e[5] - e[4] for r, e in inst.items()}
        lat = min(durs.values())
        tot_lat += lat
        last = max(ranks, key=lambda r: inst[r][4])
        first = min(ranks, key=lambda r: inst[r][4])
        for r in ranks:
            tot_wait[r] += durs[r] - lat
            tot_dur[r] += durs[r]
        print(
            f"[{k}] {'/'.join(names)} latency {lat / 1e3:.1f} us; last arriver r{last} "
            f"(+{(inst[last][4] - inst[first][4]) / 1e3:.1f} us after r{first}); "
            "wait us " + " ".join(f"r{r}:{(durs[r] - lat) / 1e3:.0f}" for r in ranks)
        )
    print("total comm kernel time per rank (ms):", {r: round(v / 1e6, 3) for r, v in tot_dur.items()})
    print("total waiting per rank (ms):", {r: round(v / 1e6, 3) for r, v in tot_wait.items()})
    print(f"sum of latencies (ms): {tot_lat / 1e6:.3f}")


if __name__ == "__main__":
    main()
