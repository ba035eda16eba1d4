"""An analysis as a :class:`~tracekit.reports.document.Document`: its sections, in report order.

:data:`PAGES` is the one list every format draws an analysis from: each page's key, title, short
name (the HTML navigation), tables and charts. A section registered with a ``title``
(``Analysis.sections``, see :mod:`tracekit.analyzers.registry`) needs no page here: it is shown
from its result's fields (:func:`fields_section`), after the pages of the built-in sections.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from tracekit.reports import figures
from tracekit.reports import finding_times as ft
from tracekit.reports import memory_tables as mt
from tracekit.reports import tables as tb
from tracekit.reports.capture_tables import capture_tables
from tracekit.reports.document import Document, Format, Head, Line, Section, Table, Tone, View, only
from tracekit.reports.gains_table import gains_table
from tracekit.reports.input_words import analyzed_folder, run_warning, shown_path
from tracekit.reports.sentences import write_analysis
from tracekit.results.vocab import Unit

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.reports.document import Chart
    from tracekit.results.analysis import Analysis, SectionData
    from tracekit.results.sections import FieldMeta

#: Above this many ranks, per-rank tables keep the worst ranks (the JSON has them all), per format.
RANK_ROWS: Final = {Format.TERMINAL: 16, Format.MARKDOWN: 16, Format.JSON: None, Format.HTML: 64}
#: Rows of the kernels table, per format, when the view does not say.
TOP_KERNELS: Final = {Format.TERMINAL: 10}


def view_for(fmt: Format, analysis: Analysis, *, top: int | None = None) -> View:
    """The view of ``analysis`` in ``fmt``: HTML shows every rank of a run of up to 64."""
    limit = RANK_ROWS[fmt]
    if fmt is Format.HTML and len(analysis.run.ranks) <= 64:
        limit = None
    return View(fmt, limit=limit, top=top if top is not None else TOP_KERNELS.get(fmt))


def _only(table: Table | None, *formats: Format) -> tuple[Table, ...]:
    if table is None:
        return ()
    return (table if not formats else only(table, *formats),)


@dataclass(frozen=True)
class Page:
    """One section of the report: how it is titled and what it shows."""

    key: str
    #: the fields of Analysis it shows (a test checks that every field is shown somewhere)
    shows: tuple[str, ...]
    title: Callable[[Analysis], str]
    nav: Callable[[Analysis], str]
    tables: Callable[[Analysis, View], tuple[Table, ...]]
    charts: Callable[[Analysis], tuple[Chart | None, ...]] = lambda _: ()
    #: what to say when the page has no chart (None: nothing)
    no_chart: str | None = None
    #: what to say when the page has no table (None: nothing)
    no_table: Callable[[Analysis], str | None] = lambda _: None
    #: a page of GPU activity only: left out of a CPU-only run's report, where it would be empty
    gpu: bool = False


def _fixed(text: str) -> Callable[[Analysis], str]:
    return lambda _: text


def _facts(a: Analysis, v: View) -> tuple[Table, ...]:
    return (*_only(tb.input_problems(a), Format.MARKDOWN, Format.HTML), tb.run_facts(a))


def _steps(a: Analysis, v: View) -> tuple[Table, ...]:
    warmup = (tb.warmup(a, v.limit),) if a.steps.warmup else ()
    return (tb.step_times(a, v.limit), *warmup, *((ft.left_out(a, v.limit),) if a.steps.left_out else ()))


def _gpu(a: Analysis, v: View) -> tuple[Table, ...]:
    gpu = (tb.gpu_breakdown(a, v.limit),) if a.run.has_gpu else ()  # a CPU-only run: its host instead
    return (*gpu, *_only(tb.host_breakdown(a, v.limit)))


def _data(a: Analysis, v: View) -> tuple[Table, ...]:
    syncs = tb.syncs(a, v.limit)
    # a CPU-only run has no device to synchronize with: its empty syncs table is left out
    return (tb.dataloader(a, v.limit), *((syncs,) if a.run.has_gpu or syncs.rows else ()))


def _stragglers(a: Analysis, v: View) -> tuple[Table, ...]:
    return (tb.stragglers(a, v.limit), *_only(tb.collectives(a), Format.HTML))


def _memory(a: Analysis, v: View) -> tuple[Table, ...]:
    return (*_only(mt.memory_findings(a)), mt.memory(a, v.limit), *_only(mt.memory_categories(a, v.limit)))


def _capture(a: Analysis, v: View) -> tuple[Table, ...]:
    if a.capture is None:
        return ()
    where = {
        "capture_phases": (Format.HTML,),
        "capture_ranks": (Format.MARKDOWN, Format.HTML),
        "capture_facts": (Format.MARKDOWN, Format.HTML),
    }
    tables = capture_tables(a.capture, limit=v.limit, beside_trace=True)
    return tuple(t for c in tables for t in _only(c, *where.get(c.key, ())))


def _no_capture(a: Analysis) -> str | None:
    if a.capture is not None:
        return None
    return "No summary.json beside these traces (they were not made by tracekit capture)."


def _gpu_title(a: Analysis) -> str:
    return "GPU time breakdown and comm/compute overlap" if a.run.has_gpu else "Host time breakdown (CPU-only run)"


#: The built-in sections, in report order (after the verdict).
PAGES: Final[tuple[Page, ...]] = (
    Page(
        "gains",
        (),
        _fixed("What removing each waste is worth"),
        _fixed("Gains"),
        lambda a, v: _only(gains_table(a)),
        no_table=lambda a: None if a.verdict.gains else "No waste to remove was measured.",
    ),
    Page("facts", ("run",), _fixed("Run"), _fixed("Run"), _facts),
    Page("steps", ("steps",), _fixed("Step time per rank"), _fixed("Steps"), _steps, lambda a: (figures.step_time(a),)),
    Page(
        "ledger",
        ("ledger",),
        _fixed("Where the time went: the ledger"),
        _fixed("Ledger"),
        lambda a, v: _only(tb.ledger(a, v.limit)),
        lambda a: (figures.ledger(a),),
    ),
    Page(
        "phases",
        ("annotations",),
        _fixed("Phase breakdown"),
        _fixed("Phases"),
        lambda a, v: (tb.phases(a), tb.phases_per_rank(a, v.limit)),
        lambda a: (figures.phases(a),),
    ),
    Page(
        "gpu",
        ("gpu_breakdown", "host_breakdown", "overlap"),
        _gpu_title,
        lambda a: "GPU time" if a.run.has_gpu else "Host time",
        _gpu,
        lambda a: (figures.gpu_breakdown(a), figures.overlap(a)),
    ),
    Page(
        "stragglers",
        ("stragglers", "collectives"),
        _fixed("Stragglers"),
        _fixed("Stragglers"),
        _stragglers,
        lambda a: (figures.lateness(a),),
        no_chart="No lateness to chart: no collectives matched across ranks and steps.",
    ),
    Page(
        "dataloader",
        ("dataloader", "host_syncs"),
        _fixed("DataLoader gaps and host syncs"),
        _fixed("Data & syncs"),
        _data,
        lambda a: (figures.data_and_syncs(a),),
    ),
    Page(
        "idle",
        ("idle_causes",),
        _fixed("GPU idle by cause"),
        _fixed("Idle"),
        lambda a, v: (tb.idle_causes(a, v.limit), ft.idle_longest(a, v.limit)),
        lambda a: (figures.idle_causes(a),),
        gpu=True,
    ),
    Page(
        "kernels",
        ("kernels",),
        _fixed("Top kernels"),
        _fixed("Kernels"),
        lambda a, v: (tb.kernels(a) if v.top is None else tb.kernels(a, top=v.top),),
        lambda a: (figures.kernels(a),),
        gpu=True,
    ),
    Page(
        "memory",
        ("memory",),
        _fixed("Memory"),
        _fixed("Memory"),
        _memory,
        lambda a: (figures.memory_timeline(a), figures.memory_categories(a)),
    ),
)
#: After the registered sections without a page: the capture's summary, then the files.
CLOSING: Final[tuple[Page, ...]] = (
    Page("capture", ("capture",), _fixed("Capture summary"), _fixed("Capture"), _capture, no_table=_no_capture),
    Page(
        "files",
        ("run",),
        _fixed("Trace files"),
        _fixed("Files"),
        lambda a, v: _only(tb.trace_files(a, v.limit), Format.TERMINAL, Format.HTML),
    ),
)


def _section(page: Page, a: Analysis, view: View) -> Section:
    charts = tuple(c for c in page.charts(a) if c is not None)
    tables = page.tables(a, view)
    note = (page.no_table(a) if not tables else None) or ""
    if not charts and page.no_chart is not None:
        note = note or page.no_chart
    return Section(page.key, page.title(a), page.nav(a), tables=tables, charts=charts, note=note)


# --- a registered section shown from its fields --------------------------------------------


def _unit(name: str, meta: FieldMeta | None) -> Unit | None:
    """A field's unit: as its result declares it, else from its name's suffix (``_ns``, ``_pct``)."""
    if meta is not None and meta.unit is not None:
        return meta.unit
    return Unit.NS if name.endswith("_ns") else Unit.PCT if name.endswith("_pct") else None


def _cell(value: Any, unit: Unit | None, *, micro: bool = False) -> str:  # noqa: PLR0911  (one case per kind)
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and unit is Unit.NS:
        return f"{value / 1e3:,.1f}" if micro else tb.ms(value)
    if isinstance(value, (int, float)) and unit is Unit.PCT:
        return tb.pct(value)
    if isinstance(value, (int, float)) and unit is Unit.BYTES:
        return f"{value / 2**20:,.1f}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return tb.short(value, 120)


#: How a column's unit is written after its name.
_UNIT_WORDS: Final = {Unit.PCT: "%", Unit.BYTES: "MiB"}


def _header(name: str, meta: FieldMeta | None, unit: Unit | None, *, micro: bool = False) -> str:
    words = (
        meta.title
        if meta is not None and meta.title
        else name.removesuffix("_ns").removesuffix("_pct").replace("_", " ")
    )
    if unit is Unit.NS:
        return f"{words} ({'µs' if micro else 'ms'})"
    return f"{words} ({_UNIT_WORDS[unit]})" if unit in _UNIT_WORDS else words


def _micro(unit: Unit | None, values: Sequence[Any]) -> bool:
    """Whether a duration column reads better in µs: every value under a millisecond."""
    numbers = [v for v in values if isinstance(v, (int, float))]
    return unit is Unit.NS and bool(numbers) and max(numbers) < 1e6


def _rows_table(
    key: str, title: str, records: Sequence[dict[str, Any]], view: View, *, fields: dict[str, FieldMeta], prefix: str
) -> Table:
    columns = list(dict.fromkeys(k for r in records for k in r))
    kept = records if view.limit is None else records[: view.limit]
    caption = "" if len(kept) == len(records) else f"{len(kept)} of {len(records)} rows shown; all are in the JSON."
    numeric = tuple(all(isinstance(r.get(c), (int, float)) or r.get(c) is None for r in kept) for c in columns)
    metas = {c: fields.get(prefix + c) for c in columns}
    units = {c: _unit(c, metas[c]) for c in columns}
    micro = {c: _micro(units[c], [r.get(c) for r in records]) for c in columns}
    body = tuple(tuple(_cell(r.get(c), units[c], micro=micro[c]) for c in columns) for r in kept)
    headers = tuple(_header(c, metas[c], units[c], micro=micro[c]) for c in columns)
    return Table(key, title, headers, body, caption, numeric, "Nothing to show.")


#: A registered section's own tables (its key -> a function of its data and the view), drawn in
#: place of the ones :func:`fields_section` makes from its fields: the one seam for a section
#: that wants a table of its own (a sort, a derived column, fewer rows), in every format. A
#: plugin adds its function here; the built-in sections with a field of ``Analysis`` have
#: :data:`PAGES` instead.
SECTION_TABLES: Final[dict[str, Callable[[SectionData, View], tuple[Table, ...]]]] = {}


def fields_section(key: str, section: SectionData, view: View) -> Section:
    """A registered section from its result's fields: a table of its scalar fields, and one table
    per list of records, each field headed by the title its result declares and written in its
    unit (durations in ms or µs, shares in %, bytes in MiB; a field that declares neither, by its
    name and its suffix). A section with tables of its own (:data:`SECTION_TABLES`) shows those."""
    if (own := SECTION_TABLES.get(key)) is not None:
        return Section(key, section.title, section.title, tables=own(section, view))
    data, fields = section.data, section.fields
    scalars = [(k, v) for k, v in data.items() if not isinstance(v, (list, dict))]
    tables: list[Table] = []
    if scalars:
        body = []
        for k, v in scalars:
            unit = _unit(k, fields.get(k))
            micro = _micro(unit, [v])
            body.append((_header(k, fields.get(k), unit, micro=micro), _cell(v, unit, micro=micro)))
        tables.append(Table(f"{key}_facts", section.title, ("measure", "value"), tuple(body), numeric=(False, True)))
    for name, value in data.items():
        if isinstance(value, list) and all(isinstance(r, dict) for r in value):
            title = f"{section.title}: {name.replace('_', ' ')}"
            tables.append(_rows_table(f"{key}_{name}", title, value, view, fields=fields, prefix=f"{name}."))
    return Section(key, section.title, section.title, tables=tuple(tables))


# --- the document ---------------------------------------------------------------------------


def _rank_list(ranks: list[int]) -> str:
    if not ranks:
        return "none"
    parts, start, prev = [], ranks[0], ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(parts)


def _head(a: Analysis) -> Head:
    run = a.run
    verdict = write_analysis(a)
    facts = (
        f"{len(run.ranks)} rank(s), world size {run.world_size or '?'}, "
        f"backend {run.backend or '?'}, {', '.join(run.devices) or 'no device recorded'}"
        f" · tracekit {a.tracekit_version}"
    )
    return Head(
        heading="tracekit report",
        title=verdict.primary.title,
        verdict=verdict,
        facts=facts,
        costs=tb.costs(a),
        tone=Tone.GOOD if verdict.primary.good else Tone.BAD,
    )


def analysis_document(a: Analysis, view: View) -> Document:
    """The report of ``a`` as a document, sections in :data:`PAGES` order (a CPU-only run without
    the pages of GPU activity), then the registered sections without a page, then the capture
    summary and the files."""
    sections = [_section(p, a, view) for p in PAGES if a.run.has_gpu or not p.gpu]
    sections += [fields_section(key, s, view) for key, s in a.sections.items()]
    sections += [_section(p, a, view) for p in CLOSING]
    ranks = [r.rank for r in a.run.ranks]
    run_line = (
        f"ranks: {len(ranks)} ({_rank_list(ranks)})   world size: {a.run.world_size or 'not recorded'}"
        f"   backend: {a.run.backend or 'not recorded'}"
    )
    notes: tuple[Line, ...] = (Line(run_line, lead="tracekit analysis"),)
    folder = analyzed_folder(a)
    notes += tuple(Line(f"skipped {shown_path(s.path, folder)}: {s.reason}", Tone.WARN) for s in a.run.skipped)
    notes += tuple(Line(f"warning: {run_warning(w)}", Tone.WARN) for w in a.run.warnings)
    footer = (
        f"tracekit {a.tracekit_version} · analysis schema {a.schema_version} · "
        "every number, for every rank and step, is in the JSON report"
    )
    return Document("analysis", _head(a), tuple(sections), source=a, footer=footer, notes=notes)
