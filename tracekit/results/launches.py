"""The result of the kernel launch statistics (:mod:`tracekit.analyzers.launches`): a registered
section's Structs, in the results layer so that reports and users read them typed
(``msgspec.convert(analysis.sections["launches"].data, LaunchStats)``).
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

#: The units a field declares (:class:`~tracekit.results.vocab.Unit`'s values).
_NS: Final = {"unit": "ns"}
_PCT: Final = {"unit": "pct"}


class LaunchRank(msgspec.Struct, frozen=True, kw_only=True):
    """One rank's kernel launches over its measured steps (each field's title and unit are what
    the reports show: :mod:`tracekit.results.sections`)."""

    rank: Annotated[int, msgspec.Meta(title="rank")]
    #: kernels that started in the measured windows
    kernels: Annotated[int, msgspec.Meta(title="kernels")]
    kernels_per_step: Annotated[float | None, msgspec.Meta(title="kernels per step")]
    #: the kernels' durations
    median_kernel_ns: Annotated[float | None, msgspec.Meta(title="median kernel", extra=_NS)]
    p95_kernel_ns: Annotated[float | None, msgspec.Meta(title="p95 kernel", extra=_NS)]
    #: from the host's launch call to the kernel's start (kernels whose launch was recorded)
    median_queue_ns: Annotated[float | None, msgspec.Meta(title="median queue delay", extra=_NS)]
    p95_queue_ns: Annotated[float | None, msgspec.Meta(title="p95 queue delay", extra=_NS)]
    #: the host's launch call (cudaLaunchKernel and kin): its duration
    median_launch_call_ns: Annotated[float | None, msgspec.Meta(title="median launch call", extra=_NS)]
    #: kernels that ran for less time than their own launch call took on the host
    shorter_than_launch: Annotated[int, msgspec.Meta(title="shorter than their launch call")]
    shorter_than_launch_pct: Annotated[float | None, msgspec.Meta(title="shorter than their launch call", extra=_PCT)]


class LaunchStats(msgspec.Struct, frozen=True, kw_only=True):
    """Kernel launches per rank (empty on a CPU-only run)."""

    per_rank: list[LaunchRank]
