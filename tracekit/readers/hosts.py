"""The host a trace was recorded on, where the file says: ranks of one host share one clock.

A Kineto trace records it as ``host_name`` in some builds; else torch's
``tensorboard_trace_handler`` names its files ``HOST_PID.TIME.pt.trace.json[.gz]`` (its default
worker name), which is believed only when PID is the process of the trace's own host events (a
name such as ``worker0_step_12.1694128201545.pt.trace.json`` is someone's own worker name, not a
host and a pid). An Nsight Systems export records ``Hostname`` in ``TARGET_INFO_SYSTEM_ENV``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

import polars as pl

if TYPE_CHECKING:
    from tracekit.model.by_kind import ByKind

#: torch.profiler.tensorboard_trace_handler's file name: ``{hostname}_{pid}.{time_ns}.pt.trace.json``.
HANDLER_NAME: Final = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json(?:\.gz)?$")
#: The longest host name kept (a DNS name is at most 253 characters).
MAX_HOST: Final = 253
#: The event kinds that run in the traced process itself (GPU activity carries a device as pid).
_HOST_KINDS: Final = ("cpu_op", "annotation", "python", "runtime", "driver", "step")


def clean_host(value: object) -> str | None:
    """``value`` as a host name: a non-empty string of printable characters, else None."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    return text if 0 < len(text) <= MAX_HOST and text.isprintable() else None


def host_of(path: str | Path, recorded: object, events: ByKind) -> str | None:
    """The host of a Kineto trace: the ``host_name`` it records, else the one its file name
    gives when the name's pid is the trace's own process (``events``' host events)."""
    host = clean_host(recorded)
    if host is not None:
        return host
    match = HANDLER_NAME.match(Path(path).name)
    if match is None or events.height == 0:
        return None
    own = events.unordered([pl.col("pid")], kinds=_HOST_KINDS).unique().collect().get_column("pid").drop_nulls()
    return clean_host(match["host"]) if int(match["pid"]) in own.to_list() else None
