"""Glue for each subcommand: call the library, write the outputs.

A command imports the parts only it runs inside its function, for their import cost (measured
with ``python -X importtime`` on this 2-core machine): capture's launcher 180 ms, the HTML and
Markdown renderers 200-230 ms, the analysis 540 ms; so ``tracekit capture`` imports no analyzer
and ``tracekit report x.json`` no capture. What every command uses is imported at the top.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from tracekit.cli.emit import emit, stdout_taken
from tracekit.cli.paths import Written, check_outputs
from tracekit.cli.progress import DelayedProgress
from tracekit.errors import InputError
from tracekit.pipeline.analyze import AnalyzeOptions, analyze_paths
from tracekit.pipeline.runs import analysis_only, compare_paths
from tracekit.reports import TerminalRenderer, renderer
from tracekit.reports.compare_text import gate_line
from tracekit.reports.text import one_line
from tracekit.results.records import dump_record

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import polars as pl

    from tracekit.analyzers.compare import Noise
    from tracekit.capture.sweep_plan import Cell
    from tracekit.reports.document import Document
    from tracekit.reports.documents import Renderable
    from tracekit.results.analysis import Analysis
    from tracekit.results.compare import Comparison
    from tracekit.results.vocab import SideKey


#: The width of a report printed to a pipe or file when ``COLUMNS`` does not say; and the
#: narrowest a report is drawn.
PIPE_COLUMNS: Final = 120
MIN_COLUMNS: Final = 40


def terminal_width() -> int:
    """The columns a report is drawn in: ``COLUMNS`` when set, else the terminal's width, else
    (a pipe, a file) :data:`PIPE_COLUMNS`; never under :data:`MIN_COLUMNS`."""
    return max(MIN_COLUMNS, shutil.get_terminal_size((PIPE_COLUMNS, 24)).columns)


def analyze_options(given: Mapping[str, Any]) -> AnalyzeOptions:
    """The :class:`AnalyzeOptions` of the shared options as given
    (:func:`~tracekit.cli.options.analysis_options`), ``--ranks`` parsed."""
    spec = given.get("ranks")
    if not spec:
        return AnalyzeOptions(**{**given, "ranks": None})
    from tracekit.readers import parse_rank_spec  # (readers import polars)

    return AnalyzeOptions(**{**given, "ranks": parse_rank_spec(spec)})


def run_analyze(
    paths: tuple[Path, ...],
    *,
    outputs: dict[str, Path | None],
    details: Path | None,
    top: int,
    analysis: Mapping[str, Any],
    annotated: Path | None = None,
    full: bool = False,
) -> None:
    """``tracekit analyze``; ``analysis``: its options as given (its ``executor``: a name, or a
    started executor, closed by its owner); ``annotated``: where to write the annotated trace;
    ``full``: every table in the terminal, not the short answer."""
    given = {f"--{fmt}": path for fmt, path in outputs.items()} | {"--details": details}
    from tracekit.analyzers.analysis import details_frame  # (polars, every analysis)
    from tracekit.pipeline.annotated_trace import check_annotatable, write_annotated_trace

    check_outputs(given | {"--annotated-trace": annotated}, paths)
    if annotated is not None:
        check_annotatable(paths)
    options = analyze_options(analysis)
    with DelayedProgress() as progress:
        # every GPU idle interval comes here only for the tables that list them
        wanted = details is not None or annotated is not None
        chosen = dataclasses.replace(options, progress=progress.file_done, stage=progress.stage, details=wanted)
        outcome = analyze_paths(paths, chosen)
        progress.stage("writing reports")
        result = outcome.analysis
        text = TerminalRenderer(
            top=top, width=terminal_width(), color=sys.stdout.isatty(), full=full, more=_more()
        ).render(result)
    frame = None if details is None else (details, details_frame(outcome.details))
    write_reports(result, outputs, details=frame, report=text)
    if annotated is not None:
        write_annotated_trace(outcome, annotated)
        click.echo(f"wrote {one_line(str(annotated))}", err=stdout_taken(outputs))


def write_reports(
    analysis: Analysis,
    outputs: dict[str, Path | None],
    *,
    details: tuple[Path, pl.DataFrame] | None = None,
    report: str = "",
) -> None:
    """Print ``report`` (the terminal's), render each requested format, then write them all
    atomically (none is replaced if one fails); ``-`` is stdout (:func:`~tracekit.cli.emit.emit`).

    ``details``: the Parquet file of per-instance tables, and the table.
    """
    texts = {path: renderer(fmt).render(analysis) for fmt, path in outputs.items() if path is not None}
    emit(report, texts, files=[] if details is None else [(details[0], details[1].write_parquet)])


def _more(*, traces: bool = True) -> str:
    """The short answer's last line: where the whole report is."""
    options = "--full prints every table here; --md FILE and --html FILE write the whole report"
    if traces:
        options += "; --annotated-trace FILE marks the findings on the trace (Perfetto)"
    return f"the whole report: {options}"


def run_report(report: Path, *, outputs: dict[str, Path | None], full: bool = False) -> None:
    """``tracekit report``: draw a saved record again (any of :func:`~tracekit.pipeline.saved.load_saved`'s),
    in the terminal (an analysis or a comparison as the short answer unless ``full``), and to
    ``--md`` / ``--html`` where given."""
    from tracekit.pipeline.saved import load_saved

    check_outputs({f"--{fmt}": path for fmt, path in outputs.items()}, [report])
    saved = load_saved(report)
    terminal = TerminalRenderer(
        width=terminal_width(), color=sys.stdout.isatty(), full=full, more=_more(traces=False)
    ).render(saved)
    texts = {path: renderer(fmt).render(saved) for fmt, path in outputs.items() if path is not None}
    emit(terminal if not stdout_taken(outputs) else "", texts)


def run_capture(
    config_path: Path | None, extra_args: list[str], *, ab: tuple[str, str] | None = None, repeats: int | None = None
) -> int:
    """``tracekit capture``, and ``tracekit capture --ab A B [--repeats N]``; returns the exit code."""
    from tracekit.capture.config import load_config, parse_overrides
    from tracekit.capture.extras import require_capture
    from tracekit.capture.files import is_own_output

    require_capture("tracekit capture")
    from tracekit.capture.launcher import capture
    from tracekit.reports.terminal import TerminalRenderer

    if ab is not None:
        return _run_ab(config_path, parse_overrides(extra_args), ab, repeats=repeats or 1)
    if repeats is not None:
        raise InputError("--repeats needs --ab A B")
    config = load_config(config_path, parse_overrides(extra_args))
    check_outputs(
        {}, {"--config_path": [config_path]}, written=[Written("--out_dir", Path(config.out_dir), is_own_output)]
    )
    click.echo(one_line(f"capturing {config.nproc} rank(s) of {config.workload!r} into {config.out_dir} ..."), err=True)
    with DelayedProgress() as shown:  # on a terminal: how far the slowest rank is, step by step
        shown.stage("starting the ranks")
        summary = capture(config, progress=shown.steps)
    click.echo(TerminalRenderer(width=terminal_width()).render(summary), nl=False)
    written = [*(["rank*.pt.trace.json.gz"] if config.trace else []), "phases.rank*.json", "summary.json"]
    for pattern in ("memory_timeline.rank*.raw.json.gz", "memory_snapshot.rank*.pickle"):
        written += [pattern] if any(Path(config.out_dir).glob(pattern)) else []
    click.echo(one_line(f"wrote {config.out_dir}: {', '.join(written)}"))
    if config.trace:  # what to run next: the verdict of these traces
        click.echo(one_line(f"next: tracekit analyze {shlex.quote(str(config.out_dir))}"))
    return 0


def _run_ab(config_path: Path | None, common: dict[str, str], ab: tuple[str, str], *, repeats: int) -> int:
    """``tracekit capture --ab A B``: the interleaved captures, then the comparison of A with B."""
    from tracekit.capture.ab import AB_FOLDER, capture_ab, plan_ab
    from tracekit.reports.terminal import TerminalRenderer

    plan = plan_ab(config_path, common, ab, repeats=repeats)
    check_outputs(
        {}, {"--config_path": [config_path]}, written=[Written("--out_dir", Path(plan.out_dir), AB_FOLDER.own)]
    )

    def starting(side: SideKey, repeat: int, folder: Path) -> None:
        config, text = plan.configs[side], plan.texts[side] or "config as is"
        click.echo(
            one_line(
                f"capturing {side.upper()} ({text}), {repeat} of {plan.repeats}: "
                f"{config.nproc} rank(s) of {config.workload!r} into {folder} ..."
            ),
            err=True,
        )

    record = capture_ab(plan, starting=starting)
    out = Path(plan.out_dir)
    click.echo(TerminalRenderer(width=terminal_width()).render(record), nl=False)
    click.echo(one_line(f"wrote {out}: a/, b/, ab.json"))
    code = run_compare(a=[out / "a"], b=[out / "b"], outputs={"json": None, "html": None, "md": None}, fail_if=())
    command = shlex.join(["tracekit", "compare", str(out / "a"), str(out / "b"), "--html", str(out / "compare.html")])
    click.echo(one_line(f"for the full comparison: {command}"))
    return code


def run_compare(
    a: Sequence[Path],
    b: Sequence[Path],
    *,
    outputs: dict[str, Path | None],
    fail_if: Sequence[str] = (),
    analysis: Mapping[str, Any] | None = None,
    noise: Noise | None = None,
    top: int = 15,
    full: bool = False,
) -> int:
    """``tracekit compare``: print the comparison (its short answer unless ``full``), write the
    outputs; the exit code of the gate (1 when a ``--fail-if`` condition fails, else 0).
    ``analysis``: the options of analyzing each side, as given (default: analyze's defaults)."""
    check_outputs({f"--{fmt}": path for fmt, path in outputs.items()}, [*a, *b])
    options = analyze_options(analysis or {})
    with DelayedProgress() as progress:
        options = dataclasses.replace(options, progress=progress.file_done, stage=progress.stage)
        comparison = compare_paths(a, b, options=options, noise=noise, fail_if=fail_if)
        text = TerminalRenderer(
            top=top, width=terminal_width(), color=sys.stdout.isatty(), full=full, more=_more(traces=False)
        ).render(comparison)
    emit(text, {path: renderer(fmt).render(comparison) for fmt, path in outputs.items() if path is not None})
    failed = [g for g in comparison.gate if g.failed]
    for g in failed:
        click.echo(one_line(f"tracekit: {gate_line(g)}"), err=True)
    return 1 if failed else 0


def run_sweep_command(
    config_path: Path | None,
    extra_args: list[str],
    *,
    grid: Sequence[str],
    options: dict[str, Any],
    headroom: str,
    report_dir: Path | None,
    outputs: dict[str, Path | None],
    analysis: Mapping[str, Any] | None = None,
) -> int:
    """``tracekit sweep``: run the grid (or, with ``--report``, read a finished sweep), print
    the matrix, write the outputs; the exit code: 1 when a cell failed or hung (the others are
    reported all the same), else 0. ``analysis``: the options of analyzing the cells' traces, as given."""
    from tracekit.capture.config import parse_overrides
    from tracekit.capture.sweep import SWEEP_FOLDER, plan_sweep, run_sweep
    from tracekit.pipeline import sweep_matrix

    room = parse_headroom(headroom)
    flags = {f"--{fmt}": path for fmt, path in outputs.items()}
    check_outputs(flags, {"--config_path": [config_path], "--report": [report_dir]})
    reading = analyze_options(analysis or {})
    if report_dir is not None:
        if grid or extra_args:
            raise InputError("--report renders a finished sweep: give no --grid or config options with it")
        folder = report_dir
    else:
        from tracekit.capture.extras import require_capture

        require_capture("tracekit sweep")
        plan = plan_sweep(config_path, parse_overrides(extra_args), grid, **options)
        folder = Path(plan.out_dir)
        check_outputs(flags, {"--config_path": [config_path]}, written=[Written("--out_dir", folder, SWEEP_FOLDER.own)])

        def starting(cell: Cell, repeat: int, where: Path) -> None:
            what = "probe" if repeat == 0 else f"repeat {repeat} of {plan.repeats}"
            click.echo(one_line(f"capturing {cell.name} ({what}) into {where} ..."), err=True)

        run_sweep(plan, starting=starting)
    with DelayedProgress() as progress:
        matrix = sweep_matrix(folder, headroom_pct=room, options=dataclasses.replace(reading, stage=progress.stage))
    show_and_write(matrix, outputs)
    failed = [row for row in matrix.rows if row.status in ("failed", "timeout")]
    if failed:
        first = f"{failed[0].cell}: {failed[0].reason}" if failed[0].reason else failed[0].cell
        click.echo(
            one_line(f"tracekit: {len(failed)} of {len(matrix.rows)} sweep cell(s) failed or hung (first: {first})"),
            err=True,
        )
    return 1 if failed else 0


def show_and_write(result: Renderable, outputs: dict[str, Path | None], *, also: Sequence[Path] = ()) -> None:
    """Print ``result``'s report, write it in each format asked for (atomically, together) and
    say what was written (``also``: files written before, named with them)."""
    text = TerminalRenderer(width=terminal_width(), color=sys.stdout.isatty()).render(result)
    emit(text, {path: renderer(fmt).render(result) for fmt, path in outputs.items() if path is not None}, also=also)


def parse_headroom(text: str) -> float:
    """``10%`` or ``10`` -> 10.0 (percent of memory left free); 0 to under 100."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise InputError(f"--headroom {text!r}: write a percentage such as 10%") from None
    if not 0 <= value < 100:
        raise InputError(f"--headroom {text!r}: give a percentage from 0 to under 100")
    return value


def _write_tool(report: Document, record: bytes, outputs: dict[str, Path | None]) -> None:
    """Print a tool's report; write its JSON record and Markdown where asked (atomically, together)."""
    from tracekit.reports.markdown import MarkdownRenderer
    from tracekit.reports.terminal import TerminalRenderer

    texts = {"json": record.decode("utf-8"), "md": MarkdownRenderer().render(report)}
    written = {path: texts[fmt] for fmt, path in outputs.items() if path is not None}
    emit(TerminalRenderer(width=terminal_width()).render(report), written)


def run_dataloader(
    config_path: Path | None,
    extra_args: list[str],
    *,
    batches: int,
    capture: Path | None,
    outputs: dict[str, Path | None],
) -> None:
    """``tracekit dataloader``."""
    from tracekit.capture.config import load_config, parse_overrides
    from tracekit.capture.extras import require_capture
    from tracekit.capture.loader_probe import PROBE, PROBE_FILE, probe_dataloader, probe_folder
    from tracekit.reports.tool_reports import loader_report

    require_capture("tracekit dataloader")
    config = load_config(config_path, parse_overrides(extra_args))
    folder = probe_folder(config)
    compared: dict[str, list[Path | None]]
    compared = {"--capture": [capture]} if capture is not None else {"--out_dir": [Path(config.out_dir)]}
    check_outputs(
        {f"--{fmt}": path for fmt, path in outputs.items()},
        {"--config_path": [config_path], **compared},
        written=[Written("the probe folder", folder, PROBE.own)],
    )
    click.echo(one_line(f"timing the DataLoader of {config.workload!r} alone on {config.nproc} rank(s) ..."), err=True)
    probe = probe_dataloader(config, batches=batches, capture=capture)
    _write_tool(loader_report(probe), dump_record(probe), outputs)
    click.echo(one_line(f"wrote {folder / PROBE_FILE}"), err=stdout_taken(outputs))


def run_audit_params(
    config_path: Path | None, extra_args: list[str], *, include_zero_grad: bool, outputs: dict[str, Path | None]
) -> None:
    """``tracekit audit-params``."""
    from tracekit.capture.audit import audit_params
    from tracekit.capture.config import load_config, parse_overrides
    from tracekit.capture.deadline import deadline
    from tracekit.capture.extras import require_capture
    from tracekit.reports.tool_reports import audit_report

    require_capture("tracekit audit-params")
    check_outputs({f"--{fmt}": path for fmt, path in outputs.items()}, {"--config_path": [config_path]})
    config = load_config(config_path, parse_overrides(extra_args))
    with deadline("audit-params", config.timeout):  # the workload's own code runs in this process
        audit = audit_params(config, include_zero_grad=include_zero_grad)
    _write_tool(audit_report(audit), dump_record(audit), outputs)


def run_doctor_command(
    config_path: Path | None,
    extra_args: list[str],
    *,
    out_dir: Path | None,
    options: Mapping[str, Any],
    outputs: dict[str, Path | None],
    analysis: Mapping[str, Any] | None = None,
) -> None:
    """``tracekit doctor``: run (or resume) the diagnosis, print its report, write the outputs."""
    from tracekit.capture.config import parse_overrides
    from tracekit.capture.doctor import DOCTOR_FILE, DOCTOR_FOLDER, plan_doctor, run_doctor
    from tracekit.capture.doctor_plan import parse_budget
    from tracekit.capture.extras import require_capture

    require_capture("tracekit doctor")
    flags = {f"--{fmt}": path for fmt, path in outputs.items()}
    check_outputs(flags, {"--config_path": [config_path]})
    budget = parse_budget(options.get("budget"))
    plan = plan_doctor(
        config_path,
        parse_overrides(extra_args),
        out_dir,
        budget_s=budget,
        repeats=int(options.get("repeats", 2)),
        max_trials=int(options.get("max_trials", 3)),
        batches=int(options.get("batches", 100)),
        resume=bool(options.get("resume", False)),
    )
    check_outputs(flags, {"--config_path": [config_path]}, written=[Written("--out", plan.out_dir, DOCTOR_FOLDER.own)])
    reading = analyze_options(analysis or {})
    record = run_doctor(plan, _Judge(reading), say=lambda line: click.echo(one_line(line), err=True))
    show_and_write(record, outputs, also=[plan.out_dir / DOCTOR_FILE])


class _Judge:
    """The doctor's analysis and comparison of its captures: the pipeline's, with analyze's options."""

    def __init__(self, options: AnalyzeOptions) -> None:
        self.options = options

    def analyze(self, folder: Path) -> Analysis:
        return analyze_paths([folder], analysis_only(self.options)).analysis

    def compare(self, a: Path, b: Path) -> Comparison:
        return compare_paths([a], [b], options=self.options)
