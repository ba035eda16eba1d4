"""The reports of ``tracekit dataloader`` and ``tracekit audit-params`` as documents: a
conclusion, tables, notes (their sentences written here, once), drawn by every renderer.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Final

from tracekit.reports.document import Document, Head, Line, Section, Table, Tone
from tracekit.reports.tables import ms
from tracekit.results.vocab import AuditNote, LoaderNoteKind

if TYPE_CHECKING:
    from collections.abc import Callable

    import msgspec

    from tracekit.results.loader_probe import ConfigChange, FetchModes, Headroom, LoaderNote, LoaderProbe, RankFetches
    from tracekit.results.param_audit import ModuleParams, ParamAudit

__all__ = ["audit_report", "loader_conclusion", "loader_report", "tool_document"]


def tool_document(
    source: msgspec.Struct, title: str, conclusion: str, tables: tuple[Table, ...], notes: list[str]
) -> Document:
    """A tool's report: its conclusion first, its tables, its notes."""
    kind = title.removeprefix("tracekit ")
    head = Head(heading=title, headline=Line(conclusion, Tone.STRONG))
    sections = [Section(kind, title, title, tables=tables)]
    if notes:
        sections.append(Section("notes", "", "Notes", lines=tuple(Line(f"note: {n}") for n in notes)))
    return Document(kind, head, tuple(sections), source=source)


# --- tracekit dataloader ------------------------------------------------------------------


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def loader_conclusion(probe: LoaderProbe) -> str:
    """One line: input-bound or not, by how much, or the ceiling alone without a capture."""
    h = probe.headroom
    ceiling = f"{_rate(probe.samples_per_s)} samples/s"
    if h is None:
        return (
            f"the loader alone delivers {ceiling}; capture this config (tracekit capture) to compare it with "
            "what training consumes"
        )
    consumes = f"({ceiling} against {_rate(h.training_samples_per_s)} samples/s)"
    if not h.input_bound:
        return f"not input-bound: the loader alone delivers {h.ratio:.1f}x what training consumes {consumes}"
    if h.ratio < 1.0:
        said = f"input-bound: the loader alone delivers only {h.ratio:.2f}x what training consumes {consumes}"
    else:
        said = (
            f"input-bound: the loader alone delivers {h.ratio:.2f}x what training consumes {consumes}, under the "
            f"{h.threshold:.1f}x it needs once it shares the CPU with training"
        )
    return f"{said}; {_workers_to_try(probe, h)}"


def _workers_to_try(probe: LoaderProbe, h: Headroom) -> str:
    """The ``num_workers`` that would reach the threshold if the loader's rate grows in proportion
    to its workers (it does while each has a core: a DataLoader's workers each make whole batches)."""
    given = probe.config.get("num_workers")
    workers = given if isinstance(given, int) and given > 0 else 0
    need = max(workers + 1, math.ceil(max(workers, 1) * h.threshold / max(h.ratio, 1e-9)))
    return (
        f"try --num_workers={need} (now {workers}: the rate grows about in proportion to the workers while each "
        f"has a core, and {need} on each of {probe.world_size} rank(s) need {need * probe.world_size} cores), then "
        "tracekit dataloader again"
    )


def _modes(modes: FetchModes | None) -> str:
    if modes is None:
        return "one mode"
    return (
        f"{100 * modes.fast_share:.0f}% fast ({ms(modes.fast_median_ns)} ms), "
        f"{100 * modes.slow_share:.0f}% slow ({ms(modes.slow_median_ns)} ms)"
    )


def _rank_row(r: RankFetches) -> tuple[str, ...]:
    return (
        str(r.rank),
        str(r.batches),
        ms(r.mean_ns),
        ms(r.median_ns),
        ms(r.p95_ns),
        _modes(r.modes),
        f"{r.batches_per_s:,.1f}",
    )


def _change(c: ConfigChange) -> str:
    return f"{c.key} {json.dumps(c.captured)} there, {json.dumps(c.probed)} here"


#: One sentence per kind of the probe's notes, from its figures.
LOADER_NOTES: Final[dict[LoaderNoteKind, Callable[[LoaderNote], str]]] = {
    LoaderNoteKind.NO_THROUGHPUT: lambda n: f"the capture in {n.capture} measured no throughput: no headroom",
    LoaderNoteKind.OTHER_CONFIG: lambda n: (
        f"the capture in {n.capture} ran another config ({'; '.join(map(_change, n.differences))}): "
        "the headroom compares this loader with that training"
    ),
    LoaderNoteKind.TEXT: lambda n: n.text or "",
}


def loader_note(note: LoaderNote) -> str:
    """One note of the DataLoader probe, in words."""
    return LOADER_NOTES[note.kind](note)


def _loader_facts(probe: LoaderProbe) -> Table:
    c = probe.config
    prefetch = c.get("prefetch_factor")
    setup = (
        f"{probe.world_size} rank(s) x batch {probe.batch_size}; num_workers {c.get('num_workers')}, "
        f"prefetch_factor {'default' if prefetch is None else prefetch}, pin_memory {c.get('pin_memory')}, "
        f"persistent_workers {c.get('persistent_workers')}"
    )
    slowest = next(r for r in probe.per_rank if r.rank == probe.slowest_rank)
    rows = [
        ("loader", setup),
        (
            "ceiling",
            f"{_rate(probe.samples_per_s)} samples/s: global batch {probe.batch_size * probe.world_size} x "
            f"{slowest.batches_per_s:,.1f} batches/s of rank {probe.slowest_rank}, the slowest",
        ),
    ]
    h = probe.headroom
    if h is not None:
        rows.append(("training", f"{_rate(h.training_samples_per_s)} samples/s (summary.json in {h.capture})"))
        verdict = "input-bound" if h.input_bound else "not input-bound"
        rows.append(("headroom", f"{h.ratio:.2f}x: {verdict} (input-bound below {h.threshold:.1f}x)"))
    return Table("loader_facts", "DataLoader ceiling", ("measure", "value"), tuple(rows), "", (False, False))


def loader_report(probe: LoaderProbe) -> Document:
    """The report of ``tracekit dataloader``."""
    ranks = Table(
        "loader_ranks",
        "DataLoader alone: time blocked in next() per batch, per rank",
        ("rank", "batches", "mean (ms)", "median (ms)", "p95 (ms)", "modes", "batches/s"),
        tuple(_rank_row(r) for r in probe.per_rank),
        f"After {probe.warmup_batches} warm-up batch(es) per rank. Modes (median of each) are shown when a split of "
        "the log fetch times explains at least 80% of their variance: fast, a worker had the batch (nearly) made, a "
        "prefetch hit; slow, the loop waited for a worker to make it. Alone, the loop asks faster than workers "
        "make batches, so a fast fetch is a worker finishing just after another.",
        (True, True, True, True, True, False, True),
    )
    return tool_document(
        probe,
        "tracekit dataloader",
        loader_conclusion(probe),
        (_loader_facts(probe), ranks),
        [loader_note(n) for n in probe.notes],
    )


# --- tracekit audit-params ----------------------------------------------------------------


#: The parameter audit's notes, by kind.
AUDIT_NOTES: Final = {
    AuditNote.ONE_BATCH: (
        "one batch decides: a parameter used only on some inputs (a mixture-of-experts expert, a branch taken "
        "on some batches) shows as unused here and may be used on others"
    ),
}


def _module(name: str) -> str:
    return name or "(the model itself)"


def audit_conclusion(audit: ParamAudit) -> str:
    """One line: whether DDP's find_unused_parameters can be turned off."""
    if not audit.unused:
        return "no unused parameters: find_unused_parameters=False is safe and saves a graph walk every step"
    modules = ", ".join(_module(m.module) for m in audit.unused)
    return (
        f"{audit.unused_count} parameter(s) ({audit.unused_numel:,} elements) in {modules} get no gradient: keep "
        "find_unused_parameters=True or remove/freeze them"
    )


def _audit_rows(kind: str, groups: list[ModuleParams]) -> list[tuple[str, ...]]:
    return [(kind, _module(g.module), ", ".join(g.parameters), str(g.count), f"{g.numel:,}") for g in groups]


def audit_report(audit: ParamAudit) -> Document:
    """The report of ``tracekit audit-params``."""
    rows = _audit_rows("unused", audit.unused) + _audit_rows("frozen", audit.frozen)
    rows += _audit_rows("zero gradient", audit.zero_grad or [])
    zero = "" if audit.zero_grad is not None else " All-zero gradients were not checked (--include-zero-grad)."
    groups = Table(
        "param_audit",
        "Parameters without a gradient, by module",
        ("class", "module", "parameters", "count", "elements"),
        tuple(rows),
        "Unused: requires a gradient and got none (grad is None); frozen: requires_grad=False (DDP skips it); "
        f"zero gradient: a gradient of all zeros.{zero}",
        (False, False, False, True, True),
        empty="every parameter got a gradient",
    )
    batch = f", one batch of {audit.batch_size}" if audit.batch_size else ""
    totals = Table(
        "param_totals",
        "Model",
        ("measure", "value"),
        (
            (
                "parameters",
                f"{audit.parameters} ({audit.numel:,} elements), forward + backward on {audit.device}{batch}",
            ),
        ),
        "",
        (False, False),
    )
    notes = [AUDIT_NOTES[n] for n in audit.notes]
    return tool_document(audit, "tracekit audit-params", audit_conclusion(audit), (totals, groups), notes)
