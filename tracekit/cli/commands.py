"""Glue for each subcommand: call the library, write the outputs."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TYPE_CHECKING

import click
import msgspec

from tracekit.analyzers import run_analysis, write_details
from tracekit.cli.progress import DelayedProgress
from tracekit.errors import InputError
from tracekit.readers import capture_summary, load_run, parse_rank_spec
from tracekit.reports import TerminalRenderer, renderer
from tracekit.results.io import load_analysis

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.results.analysis import Analysis


def write_text(path: Path, text: str) -> None:
    """Write an output file atomically; a failure is an input error naming the file."""
    temp = path.with_name(f".{path.name}.tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        temp.replace(path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise InputError(f"cannot write ({exc.strerror})", path=path) from None


def run_analyze(
    paths: tuple[Path, ...],
    *,
    outputs: dict[str, Path | None],
    details: Path | None,
    comm_kernels: tuple[str, ...] = (),
    steps: str | None = None,
    include_warmup: bool = False,
    rank_spec: str | None,
    rank: int | None,
    top: int,
    jobs: int | None,
    cache_dir: Path | None,
    use_cache: bool,
    window: str,
) -> None:
    """``tracekit analyze``."""
    started = time.perf_counter()
    ranks = parse_rank_spec(rank_spec) if rank_spec else None
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 120
    with DelayedProgress() as progress:
        run = load_run(
            paths,
            ranks=ranks,
            rank=rank,
            jobs=jobs,
            progress=progress.file_done,
            cache_dir=cache_dir,
            use_cache=use_cache,
            comm_kernels=comm_kernels,
        )
        progress.stage(f"analyzing {len(run.ranks)} rank(s)")
        outcome = run_analysis(run, window=window, steps=steps, include_warmup=include_warmup)
        del run
        progress.stage("writing reports")
        analysis = msgspec.structs.replace(
            outcome.analysis,
            capture=capture_summary(paths),
            analysis_seconds=round(time.perf_counter() - started, 4),
        )
        text = TerminalRenderer(top=top, width=max(width, 100), color=sys.stdout.isatty()).render(analysis)
    click.echo(text, nl=False)
    write_reports(analysis, outputs)
    if details is not None:
        write_details(outcome.details, details)
        click.echo(f"wrote {details}")


def write_reports(analysis: Analysis, outputs: dict[str, Path | None]) -> None:
    """Write each requested format of the analysis."""
    for fmt, path in outputs.items():
        if path is not None:
            write_text(path, renderer(fmt).render(analysis))
            click.echo(f"wrote {path}")


def run_report(report: Path, *, outputs: dict[str, Path | None]) -> None:
    """``tracekit report``: render a saved JSON analysis again."""
    if not any(outputs.values()):
        raise InputError("nothing to write: give --html FILE and/or --md FILE")
    write_reports(load_analysis(report), outputs)


def run_capture(config_path: Path | None, extra_args: list[str]) -> None:
    """``tracekit capture``."""
    from tracekit.capture.config import load_config, parse_overrides
    from tracekit.capture.launcher import capture
    from tracekit.reports.capture_tables import render_capture_summary

    config = load_config(config_path, parse_overrides(extra_args))
    click.echo(f"capturing {config.nproc} rank(s) of {config.workload!r} into {config.out_dir} ...", err=True)
    summary = capture(config)
    click.echo(render_capture_summary(summary), nl=False)
    click.echo(f"wrote {config.out_dir}: rank*.pt.trace.json.gz, phases.rank*.json, summary.json")
