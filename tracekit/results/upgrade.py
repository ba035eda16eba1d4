"""Files of older minor versions read into the current layout: where an older file holds a
sentence that tracekit wrote, the kind and figures it said.

Each function takes the decoded JSON of one record (a ``dict``) of an older minor version (its
caller checks the version, and gives the result the current one), returns it in the current
layout, and leaves what it does not recognize as it is, for the typed conversion to accept or
refuse. A sentence it does not recognize (one a later tracekit would not write) is kept where the
current layout has a place for outside text, else left out.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from tracekit.results.vocab import (
    AuditNote,
    CapacitySource,
    CaptureNoteKind,
    CeilingBy,
    LoaderNoteKind,
    MatrixNoteKind,
    MeasureNote,
    ProbeStop,
    SlowestBy,
    Unit,
    WorstBy,
)

__all__ = ["audit_1_0", "capture_1_4", "loader_1_0", "matrix_1_0", "sweep_1_0"]

#: A comparison's measure notes as comparison 2.0 (and sweep 1.0) wrote them.
_MEASURE_NOTES: Final = {
    "measured on one side only": MeasureNote.ONE_SIDE,
    "measured on neither side": MeasureNote.NEITHER_SIDE,
    "measured once per run: no interval": MeasureNote.ONCE_PER_RUN,
    "over each rank's whole trace (no steps): no interval": MeasureNote.WHOLE_TRACE,
}
_CAPACITY: Final = {"device memory": CapacitySource.DEVICE, "memory budget": CapacitySource.BUDGET}
_NO_OOM: Final = re.compile(r"no OOM up to batch size \d+")
_FAILED: Final = re.compile(r"batch size (?P<batch>\d+): (?P<failure>.*)", re.DOTALL)
_UNFINISHED: Final = re.compile(r"the sweep did not finish: (?P<ran>\d+) of (?P<cells>\d+) cells ran\b.*")
_MATRIX_NOTES: Final = {
    "no memory capacity known (CPU run without --mem-budget-gb): the headroom is not checked": (
        MatrixNoteKind.NO_CAPACITY
    ),
    "CPU run: peak memory is the worst rank's peak RSS of its whole process (torch included)": MatrixNoteKind.CPU_RSS,
}


def _stopped(text: str) -> dict[str, Any]:
    """A probe's ``stopped`` sentence of sweep 1.0 as its fields."""
    if text == "no batch size fit":
        return {"stopped": ProbeStop.NONE_FIT.value}
    if _NO_OOM.fullmatch(text):
        return {"stopped": ProbeStop.NO_OOM.value}
    m = _FAILED.fullmatch(text)
    if m:
        return {"stopped": ProbeStop.FAILED.value, "failed_batch": int(m["batch"]), "failure": m["failure"]}
    return {"stopped": ProbeStop.FAILED.value, "failure": text}


def _probes(raw: dict[str, Any]) -> None:
    for probe in raw.get("probes") or ():
        if isinstance(probe, dict) and isinstance(probe.get("stopped"), str):
            probe.update(_stopped(probe["stopped"]))


def sweep_1_0(raw: dict[str, Any]) -> dict[str, Any]:
    """``sweep.json`` of schema 1.0: each probe's ``stopped`` sentence as a :class:`ProbeStop` and figures."""
    _probes(raw)
    return raw


def _probe_note(row: dict[str, Any]) -> None:
    """A matrix row's ``probe_note`` of 1.0 (the OOM error, or why the probe stopped) as its fields."""
    note = row.pop("probe_note", None)
    if not isinstance(note, str):
        return
    fields = _stopped(note)
    if "failed_batch" not in fields and fields["stopped"] == ProbeStop.FAILED.value:
        row["probe_error"] = note  # not a sentence of ours: the OOM error
        return
    row["probe_stopped"] = fields["stopped"]
    if "failure" in fields:
        row["probe_error"] = fields["failure"]


def _matrix_note(text: str) -> dict[str, Any] | None:
    if text in _MATRIX_NOTES:
        return {"kind": _MATRIX_NOTES[text].value}
    m = _UNFINISHED.fullmatch(text)
    return {"kind": MatrixNoteKind.UNFINISHED.value, "ran": int(m["ran"]), "cells": int(m["cells"])} if m else None


def matrix_1_0(raw: dict[str, Any]) -> dict[str, Any]:
    """A sweep matrix of schema 1.0: its sentences as kinds and figures."""
    _probes(raw)
    for row in raw.get("rows") or ():
        if isinstance(row, dict):
            _probe_note(row)
    source = raw.get("capacity_source")
    if isinstance(source, str) and source in _CAPACITY:
        raw["capacity_source"] = _CAPACITY[source].value
    notes = raw.get("notes")
    if isinstance(notes, list):
        typed = [_matrix_note(n) if isinstance(n, str) else n for n in notes]
        raw["notes"] = [n for n in typed if n is not None]
    best = raw.get("best")
    margin = best.get("margin") if isinstance(best, dict) else None
    if isinstance(margin, dict):
        margin.pop("label", None)
        if isinstance(margin.get("note"), str) and margin["note"] in _MEASURE_NOTES:
            margin["note"] = _MEASURE_NOTES[margin["note"]].value
        if margin.get("unit") == Unit.PER_S.value:  # the sweep's margin was always samples/s
            margin["unit"] = Unit.SAMPLES_PER_S.value
    return raw


_PRE_COLLECTIVE: Final = re.compile(r"host time before the step's first collective(?: \((?P<phases>.*)\))?")
_WORST_BY: Final = {
    "peak device memory allocated in the measured steps": WorstBy.DEVICE_ALLOCATED,
    "peak RSS (whole process)": WorstBy.RSS,
}
_ON_CPU: Final = r", applied by tracekit on CPU \(accelerate applies FSDP on accelerators only\)"
#: The notes of capture summaries 1.0 to 1.4: a pattern, its kind, and how its groups become figures.
_CAPTURE_NOTES: Final = (
    (
        re.compile(
            r"memory_timeline turned on (?P<items>.+) \(export_memory_timeline needs them\): "
            r"the traced steps carry their host overhead"
        ),
        CaptureNoteKind.MEMORY_TIMELINE_OPTIONS,
    ),
    (
        re.compile(
            r"memory on CPU: device memory allocated/reserved, their peaks and the allocator snapshot are CUDA-only "
            r"and not recorded; phase memory deltas are of the process's resident host memory \(RSS\), "
            r"peak RSS is of the whole process"
        ),
        CaptureNoteKind.CPU_MEMORY,
    ),
    (
        re.compile(r"memory_snapshot: the allocator snapshot is CUDA-only; none was written on CPU"),
        CaptureNoteKind.CPU_SNAPSHOT,
    ),
    (re.compile(r"rank (?P<rank>\d+): no memory snapshot \((?P<error>.*)\)", re.DOTALL), CaptureNoteKind.NO_SNAPSHOT),
    (re.compile(r"rank (?P<rank>\d+): no memory timeline \((?P<error>.*)\)", re.DOTALL), CaptureNoteKind.NO_TIMELINE),
    (
        re.compile(r"FSDP2 \(fully_shard, reshard_after_forward=(?P<value>\w+)\)" + _ON_CPU),
        CaptureNoteKind.FSDP2_ON_CPU,
    ),
    (re.compile(r"FSDP (?P<value>\w+) \(FullyShardedDataParallel\)" + _ON_CPU), CaptureNoteKind.FSDP_ON_CPU),
    (
        re.compile(
            r"DeepSpeed runs the optimizer inside backward hooks: only total step time compares across backends"
        ),
        CaptureNoteKind.DEEPSPEED_OPTIMIZER,
    ),
)


def _capture_note(text: str) -> dict[str, Any]:
    """One note of a capture summary 1.0 to 1.4 as its kind and figures."""
    for pattern, kind in _CAPTURE_NOTES:
        m = pattern.fullmatch(text)
        if m is None:
            continue
        found = m.groupdict()
        note: dict[str, Any] = {"kind": kind.value}
        if "items" in found:
            note["items"] = found["items"].split(", ")
        if "rank" in found:
            note["rank"] = int(found["rank"])
        note.update({k: v for k, v in found.items() if k in ("value", "error")})
        return note
    return {"kind": CaptureNoteKind.TEXT.value, "text": text}


def capture_1_4(raw: dict[str, Any]) -> dict[str, Any]:
    """A capture summary of schema 1.0 to 1.4: its notes and how its ranks were chosen as kinds."""
    notes = raw.get("notes")
    if isinstance(notes, list):
        raw["notes"] = [_capture_note(n) if isinstance(n, str) else n for n in notes]
    throughput = raw.get("throughput")
    by = throughput.get("slowest_rank_by") if isinstance(throughput, dict) else None
    if isinstance(throughput, dict) and isinstance(by, str):
        m = _PRE_COLLECTIVE.fullmatch(by)
        throughput["slowest_rank_by"] = SlowestBy.PRE_COLLECTIVE.value
        if m is not None and m["phases"]:
            throughput["pre_collective_phases"] = m["phases"].split(", ")
    memory = raw.get("memory")
    worst = memory.get("worst_rank_by") if isinstance(memory, dict) else None
    if isinstance(memory, dict) and isinstance(worst, str):
        memory["worst_rank_by"] = _WORST_BY[worst].value if worst in _WORST_BY else None
    return raw


_NO_THROUGHPUT: Final = re.compile(r"the capture in (?P<capture>.*) measured no throughput: no headroom", re.DOTALL)
_OTHER_CONFIG: Final = re.compile(
    r"the capture in (?P<capture>.*) ran another config \((?P<differences>.*)\): "
    r"the headroom compares this loader with that training",
    re.DOTALL,
)
_DIFFERENCE: Final = re.compile(r"(?P<key>\w+) (?P<captured>.*) there, (?P<probed>.*) here", re.DOTALL)


def _differences(text: str) -> list[dict[str, Any]] | None:
    """``num_workers 0 there, 2 here; pin_memory true there, false here`` as figures (None: not that)."""
    out = []
    for part in text.split("; "):
        m = _DIFFERENCE.fullmatch(part)
        if m is None:
            return None
        try:
            out.append({"key": m["key"], "captured": json.loads(m["captured"]), "probed": json.loads(m["probed"])})
        except ValueError:
            return None
    return out


def _loader_note(text: str) -> dict[str, Any]:
    """One note of a DataLoader probe 1.0 as its kind and figures."""
    if m := _NO_THROUGHPUT.fullmatch(text):
        return {"kind": LoaderNoteKind.NO_THROUGHPUT.value, "capture": m["capture"]}
    m = _OTHER_CONFIG.fullmatch(text)
    differences = _differences(m["differences"]) if m else None
    if m is not None and differences is not None:
        return {"kind": LoaderNoteKind.OTHER_CONFIG.value, "capture": m["capture"], "differences": differences}
    return {"kind": LoaderNoteKind.TEXT.value, "text": text}


def loader_1_0(raw: dict[str, Any]) -> dict[str, Any]:
    """A DataLoader probe (``dataloader.json``) of schema 1.0: its ceiling's basis and notes as kinds."""
    if isinstance(raw.get("samples_per_s_by"), str):  # 1.0 wrote one sentence here, always the same
        raw["samples_per_s_by"] = CeilingBy.SLOWEST_RANK.value
    notes = raw.get("notes")
    if isinstance(notes, list):
        raw["notes"] = [_loader_note(n) if isinstance(n, str) else n for n in notes]
    return raw


_ONE_BATCH: Final = (
    "one batch decides: a parameter used only on some inputs (a mixture-of-experts expert, a branch taken "
    "on some batches) shows as unused here and may be used on others"
)


def audit_1_0(raw: dict[str, Any]) -> dict[str, Any]:
    """A parameter audit of schema 1.0: its notes as kinds (1.0 wrote one; another is left out)."""
    notes = raw.get("notes")
    if isinstance(notes, list):
        raw["notes"] = [AuditNote.ONE_BATCH.value for n in notes if n == _ONE_BATCH]
    return raw
