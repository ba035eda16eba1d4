"""The capture stage: run a training step on N ranks under torch.profiler with NVTX and
``record_function`` phases, and write traces plus a phase-timing summary.

torch, accelerate and nvtx (the ``capture`` extra) are imported only when used, and this
package never imports polars or plotly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.lazy import lazy_exports

if TYPE_CHECKING:
    from tracekit.capture.config import CaptureConfig, load_config
    from tracekit.capture.launcher import capture
    from tracekit.capture.profiler import PHASES, Profiler
    from tracekit.capture.workloads import Workload, WorkloadContext

__all__ = ["PHASES", "CaptureConfig", "Profiler", "Workload", "WorkloadContext", "capture", "load_config"]

_WHERE = {
    "PHASES": "profiler",
    "Profiler": "profiler",
    "CaptureConfig": "config",
    "load_config": "config",
    "capture": "launcher",
    "Workload": "workloads",
    "WorkloadContext": "workloads",
}


__getattr__ = lazy_exports(__name__, _WHERE, globals())
