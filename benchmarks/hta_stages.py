"""HTA's stages on one folder of traces: load, temporal, overlap, idle time, kernels.

Every stage runs on every rank (the idle time breakdown is asked for all ranks, since its
default is rank 0 only and tracekit analyzes them all). Prints the seconds of each stage as
JSON.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import warnings


def main(trace_dir: str) -> None:
    """Time HTA 0.5.0 on ``trace_dir``."""
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis  # noqa: PLC0415 (after silencing its warnings)

    stages: dict[str, float] = {}
    began = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=trace_dir)
    stages["load"] = time.perf_counter() - began
    ranks = sorted(analysis.t.traces)
    steps = {
        "temporal_breakdown": lambda: analysis.get_temporal_breakdown(visualize=False),
        "comm_comp_overlap": lambda: analysis.get_comm_comp_overlap(visualize=False),
        "idle_time_breakdown": lambda: analysis.get_idle_time_breakdown(ranks=ranks, visualize=False),
        "gpu_kernel_breakdown": lambda: analysis.get_gpu_kernel_breakdown(visualize=False),
    }
    for name, step in steps.items():
        start = time.perf_counter()
        step()
        stages[name] = time.perf_counter() - start
    print(json.dumps({"seconds": time.perf_counter() - began, "stages": stages, "ranks": len(ranks)}))


if __name__ == "__main__":
    main(sys.argv[1])
