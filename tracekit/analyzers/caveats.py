"""What limits how far a verdict can be trusted, from what the run is: findings, and how much
they lower the verdict's confidence.

=====================  ==========================================================  ==================
caveat                 when                                                        confidence
=====================  ==========================================================  ==================
no communication       a distributed run (world size > 1, or unknown with host     one level lower
                       collectives recorded) on a GPU, on a backend whose          (high -> medium
                       collectives run on the GPU (not gloo, MPI), where no        -> low)
                       kernel was recognized as communication: its collectives
                       read as compute or idle, so every share of the verdict
                       may be off by the communication it could not see
ranks over cores       the capture ran more ranks than the CPU cores its machine   one level lower
                       gave it (``environment.cpu_count`` of the capture summary,  (since analysis
                       since its 1.4): ranks, their DataLoader workers and gloo's  2.9: the shares
                       threads share cores, which slows host work, data and        are of this
                       host collectives in a way the target machine may not        machine's contention)
device events dropped  a file's reader dropped 15% or more of its device           one level lower
                       activities for times that cannot be right (half or more:
                       the file is not read)
device clock ahead     5% or more of a rank's launched device activities start     one level lower
                       before their launch call began: its device's clock is       (two from half
                       ahead of its host's                                         of them)
device clock behind    at 5% or more of a rank's device synchronize calls, an      one level lower
                       activity launched before the call ends after it returned:   (two from half
                       its device's clock is behind its host's (said also where    of them)
                       there is no verdict)
=====================  ==========================================================  ==================

All are pure functions of facts: :func:`communication_caveat` reads the first off a reduce and
:func:`with_capture` the second off an analysis with its capture summary attached; the last three
are read off a reduce in :mod:`tracekit.analyzers.verdict_section` (their thresholds are the
verdict's shares, and :mod:`tracekit.analyzers.verdict` imports this module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import msgspec

from tracekit.analyzers import run_kind
from tracekit.analyzers.parts import FactParts
from tracekit.analyzers.stats import totals
from tracekit.model.taxonomy import HOST_BACKENDS
from tracekit.results.analysis import Finding
from tracekit.results.vocab import Confidence, NoteKind

if TYPE_CHECKING:
    from tracekit.analyzers.mapreduce import Reduced
    from tracekit.results.analysis import Analysis
    from tracekit.results.capture import CaptureSummary

#: Confidence levels, surest first: lowering one level moves one step right.
LEVELS: Final = (Confidence.HIGH, Confidence.MEDIUM, Confidence.LOW)


@dataclass(frozen=True)
class Caveat:
    """A finding that limits the verdict, and by how many levels it lowers its confidence."""

    finding: Finding
    lowers: int = 1


def lower(confidence: Confidence, levels: int = 1) -> Confidence:
    """``confidence`` lowered by ``levels`` (never below low)."""
    return LEVELS[min(LEVELS.index(confidence) + levels, len(LEVELS) - 1)]


def lowered(primary: Finding, caveat: Caveat | None) -> Finding:
    """The primary finding with its confidence lowered by ``caveat`` (unchanged without one)."""
    if caveat is None or caveat.lowers == 0:
        return primary
    return msgspec.structs.replace(primary, confidence=lower(primary.confidence, caveat.lowers))


def is_host_backend(backend: str | None) -> bool:
    """Whether every backend named (``gloo``, ``gloo,nccl``...) runs its collectives on the host."""
    names = [b.strip() for b in (backend or "").split(",") if b.strip()]
    return bool(names) and all(b in HOST_BACKENDS for b in names)


def no_communication(
    *, world_size: int | None, backend: str | None, has_gpu: bool, comm_kernels: int, host_comm: int
) -> Caveat | None:
    """A distributed GPU run in which no kernel was recognized as communication, or None.

    ``comm_kernels``: kernels classified as collectives over every rank; ``host_comm``: host
    events classified so (``c10d::``, ``nccl:``, ``record_param_comms``...). Not on a host
    backend (gloo, MPI: the GPU only copies to and from the CPU's collectives), not with one
    rank in the world (NCCL copies locally), not without a GPU (nothing to miss on a device).
    """
    if not has_gpu or comm_kernels > 0 or is_host_backend(backend) or world_size == 1:
        return None
    if not ((world_size or 0) > 1 or (world_size is None and host_comm > 0)):
        return None
    note = Finding(
        note=NoteKind.NO_COMMUNICATION,
        confidence=Confidence.HIGH,
        value=None if world_size is None else float(world_size),
        values=[float(host_comm)],
    )
    return Caveat(note)


def communication_caveat(red: Reduced) -> Caveat | None:
    """:func:`no_communication` of a reduce (its facts' counts of communication events)."""
    counts = totals(red.gather(FactParts).span, ("comm_kernels", "comm_host"))
    meta = red.run_meta
    return no_communication(
        world_size=meta.world_size,
        backend=meta.backend,
        has_gpu=red.has_gpu,
        comm_kernels=counts["comm_kernels"],
        host_comm=counts["comm_host"],
    )


def ranks_over_cores(capture: CaptureSummary | None) -> Finding | None:
    """A note when the capture ran more ranks on its machine than it had CPU cores, or None.

    The ranks are the config's ``nproc`` (tracekit capture starts them all on one machine), else
    the environment's world size; the cores are the environment's ``cpu_count`` (not recorded
    before summary 1.4: then nothing can be said).
    """
    if capture is None:
        return None
    config, environment = capture.config or {}, capture.environment or {}
    ranks = config.get("nproc", environment.get("world_size"))
    cores = environment.get("cpu_count")
    if not isinstance(ranks, int) or not isinstance(cores, int) or cores < 1 or ranks <= cores:
        return None
    return Finding(
        note=NoteKind.RANKS_OVER_CORES, confidence=Confidence.HIGH, value=float(ranks), values=[float(cores)]
    )


def with_capture(analysis: Analysis) -> Analysis:
    """``analysis`` completed by its capture summary: how the run is data-parallel and its world
    size, where its traces did not tell (a rank alone records no process group), and a note when
    its ranks outnumbered the cores they ran on."""
    capture = analysis.capture
    run = analysis.run
    if run.parallelism is None and (kind := run_kind.from_capture(capture)) is not None:
        run = msgspec.structs.replace(run, parallelism=kind)
    if run.world_size is None and capture is not None and capture.world_size > 0:
        run = msgspec.structs.replace(run, world_size=capture.world_size)
    verdict = analysis.verdict
    note = ranks_over_cores(capture)
    if note is not None and note not in verdict.secondary:
        # what bounds this machine's contended ranks may not bound the run on its own cores
        verdict = msgspec.structs.replace(
            verdict, primary=lowered(verdict.primary, Caveat(note)), secondary=[*verdict.secondary, note]
        )
    return msgspec.structs.replace(analysis, run=run, verdict=verdict)
