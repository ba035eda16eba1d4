"""Files of older minor versions read into the current layout: where an older file holds a
sentence that tracekit wrote, the kind and figures it said.

Each function takes the decoded JSON of one record (a ``dict``) of an older minor version (its
caller checks the version, and gives the result the current one), returns it in the current
layout, and leaves what it does not recognize as it is, for the typed conversion to accept or
refuse. A sentence it does not recognize (one a later tracekit would not write) is kept where the
current layout has a place for outside text, else left out.
"""

from __future__ import annotations

import re
from typing import Any, Final

from tracekit.results.vocab import CapacitySource, MatrixNoteKind, MeasureNote, ProbeStop, Unit

__all__ = ["matrix_1_0", "sweep_1_0"]

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
