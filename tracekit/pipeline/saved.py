"""Any record tracekit writes, read back to be drawn again (``tracekit report``): an analysis, a
comparison, a sweep (its ``sweep.json`` with its folder, or the matrix of ``sweep --json``), a
doctor's record, a capture summary, an A/B capture, a DataLoader probe, a parameter audit. The
record's ``schema`` says which; a file without one is read as an analysis (whose errors say
what a file that is not one lacks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from tracekit.errors import InputError
from tracekit.results import ab, capture, doctor, loader_probe, param_audit, sweep
from tracekit.results.analysis import SCHEMA
from tracekit.results.compare import COMPARISON_SCHEMA, Comparison
from tracekit.results.io import load_analysis
from tracekit.results.records import load_record

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tracekit.results.ab import ABCapture
    from tracekit.results.analysis import Analysis
    from tracekit.results.capture import CaptureSummary
    from tracekit.results.doctor import Doctor
    from tracekit.results.loader_probe import LoaderProbe
    from tracekit.results.param_audit import ParamAudit
    from tracekit.results.sweep import SweepMatrix

    #: What a saved record is read as: a result a report is drawn from.
    Saved = Analysis | Comparison | SweepMatrix | CaptureSummary | ABCapture | LoaderProbe | ParamAudit | Doctor

__all__ = ["load_saved", "saved_kinds"]


class _Header(msgspec.Struct):
    schema: Any = None


def _comparison(data: bytes, source: str) -> Any:
    return load_record(data, Comparison, what="tracekit comparison", source=source)


def _sweep(data: bytes, source: str, path: Path) -> Any:
    from tracekit.pipeline.runs import sweep_matrix  # noqa: PLC0415  (analyzers: polars; a sweep only)

    sweep.load_sweep(data, source=source)  # a damaged record says so before its folder is read
    return sweep_matrix(path.parent)


def _loaders() -> dict[str, Callable[[bytes, str, Path], Any]]:
    """Each schema, and how its record is read."""
    return {
        SCHEMA: lambda data, source, path: load_analysis(path),
        COMPARISON_SCHEMA: lambda data, source, path: _comparison(data, source),
        sweep.SWEEP_SCHEMA: _sweep,
        sweep.MATRIX_SCHEMA: lambda data, source, path: sweep.load_matrix(data, source=source),
        doctor.DOCTOR_SCHEMA: lambda data, source, path: doctor.load_doctor(data, source=source),
        capture.CAPTURE_SCHEMA: lambda data, source, path: capture.load_capture_summary(data, source=source),
        ab.AB_SCHEMA: lambda data, source, path: ab.load_ab(data, source=source),
        loader_probe.LOADER_PROBE_SCHEMA: lambda data, source, path: loader_probe.load_loader_probe(
            data, source=source
        ),
        param_audit.PARAM_AUDIT_SCHEMA: lambda data, source, path: param_audit.load_param_audit(data, source=source),
    }


def saved_kinds() -> list[str]:
    """The schemas of the records :func:`load_saved` reads."""
    return sorted(_loaders())


def load_saved(path: Path) -> Saved:
    """The record at ``path``, as the result its report is drawn from; a record of no schema
    tracekit writes is an :class:`~tracekit.errors.InputError` naming the file."""
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read it ({exc.strerror or exc})", path=source) from None
    try:
        schema = msgspec.json.decode(data, type=_Header).schema
    except (msgspec.DecodeError, UnicodeDecodeError):  # not a JSON object: the analysis reader says why
        schema = None
    loaders = _loaders()
    if isinstance(schema, str) and schema in loaders:
        result: Saved = loaders[schema](data, source, path)
        return result
    if isinstance(schema, str) and schema.startswith("tracekit."):
        known = ", ".join(sorted(loaders))
        raise InputError(f"a {schema} record, which tracekit report does not draw (it draws {known})", path=source)
    return load_analysis(path)
