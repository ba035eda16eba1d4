"""Host syncs per step of a Kineto trace: blocking runtime calls and pageable D2H copies.

Usage: python tests/truth/independent/syncs.py PATH [PATH ...]

Counted as a sync: cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize (and
the hip* names), and a synchronous cudaMemcpy (not ...Async). Reported beside them, not added:
copies to pageable host memory (they block the host too, but PyTorch's .item()/.cpu() issues
the copy *and* a cudaStreamSynchronize, so adding both counts one sync point twice), and
cudaStreamWaitEvent (a GPU-side wait, not a host sync).
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import BLOCKING_SYNC_CALLS, load_kineto


def main() -> None:
    for p in sys.argv[1:]:
        t = load_kineto(Path(p))
        ev = t.events
        steps = sorted((e for e in ev if e[0] == "cpu" and e[1].startswith("ProfilerStep#")), key=lambda e: e[4])
        rt = [e for e in ev if e[0] == "runtime"]
        pageable = [e for e in ev if e[0] == "memcpy" and "DtoH" in e[1] and "Pageable" in e[1]]
        launch_of = {e[6].get("correlation"): e for e in rt}
        print(
            Path(p).name, "total blocking calls:", collections.Counter(e[1] for e in rt if e[1] in BLOCKING_SYNC_CALLS)
        )
        for s in steps:
            c = collections.Counter(e[1] for e in rt if e[1] in BLOCKING_SYNC_CALLS and s[4] <= e[4] < s[5])
            dur = sum(e[5] - e[4] for e in rt if e[1] in BLOCKING_SYNC_CALLS and s[4] <= e[4] < s[5])
            pg = sum(
                1
                for e in pageable
                if (lc := launch_of.get(e[6].get("correlation"))) is not None and s[4] <= lc[4] < s[5]
            )
            print(f"  {s[1]}: {sum(c.values())} syncs {dict(c)} ({dur / 1e6:.3f} ms blocked); pageable D2H copies {pg}")


if __name__ == "__main__":
    main()
