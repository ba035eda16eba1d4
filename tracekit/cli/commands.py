"""Glue for each subcommand: call the library, write the outputs."""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracekit.analyzers import details_frame
from tracekit.atomic import OutputFiles
from tracekit.cli.paths import check_outputs
from tracekit.cli.progress import DelayedProgress
from tracekit.errors import InputError
from tracekit.pipeline import AnalyzeOptions, analyze_paths, compare_paths
from tracekit.readers import parse_rank_spec
from tracekit.reports import TerminalRenderer, renderer
from tracekit.reports.text import one_line
from tracekit.results.io import load_analysis

if TYPE_CHECKING:
    from collections.abc import Sequence

    import polars as pl

    from tracekit.analyzers.compare import Noise
    from tracekit.results.ab import Side
    from tracekit.results.analysis import Analysis


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
    executor: str = "local",
    scheduler: str | None = None,
) -> None:
    """``tracekit analyze``."""
    check_outputs({f"--{fmt}": path for fmt, path in outputs.items()} | {"--details": details}, paths)
    ranks = parse_rank_spec(rank_spec) if rank_spec else None
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 120
    with DelayedProgress() as progress:
        options = AnalyzeOptions(
            comm_kernels=comm_kernels,
            steps=steps,
            include_warmup=include_warmup,
            ranks=ranks,
            rank=rank,
            jobs=jobs,
            cache_dir=cache_dir,
            use_cache=use_cache,
            window=window,
            executor=executor,
            scheduler=scheduler,
            progress=progress.file_done,
            stage=progress.stage,
        )
        outcome = analyze_paths(paths, options)
        progress.stage("writing reports")
        analysis = outcome.analysis
        text = TerminalRenderer(top=top, width=max(width, 100), color=sys.stdout.isatty()).render(analysis)
    click.echo(text, nl=False)
    write_reports(analysis, outputs, details=None if details is None else (details, details_frame(outcome.details)))


def write_reports(
    analysis: Analysis,
    outputs: dict[str, Path | None],
    *,
    details: tuple[Path, pl.DataFrame] | None = None,
) -> None:
    """Render each requested format, then write them all atomically (none is replaced if one fails).

    ``details``: the Parquet file of per-instance tables, and the table.
    """
    texts = {path: renderer(fmt).render(analysis) for fmt, path in outputs.items() if path is not None}
    with OutputFiles() as files:
        for path, text in texts.items():
            files.add_text(path, text)
        if details is not None:
            files.add(details[0], details[1].write_parquet)
    for path in [*texts, *([details[0]] if details else [])]:
        click.echo(f"wrote {one_line(str(path))}")


def run_report(report: Path, *, outputs: dict[str, Path | None]) -> None:
    """``tracekit report``: render a saved JSON analysis again."""
    if not any(outputs.values()):
        raise InputError("nothing to write: give --html FILE and/or --md FILE")
    check_outputs({f"--{fmt}": path for fmt, path in outputs.items()}, [report])
    write_reports(load_analysis(report), outputs)


def run_capture(
    config_path: Path | None, extra_args: list[str], *, ab: tuple[str, str] | None = None, repeats: int | None = None
) -> int:
    """``tracekit capture``, and ``tracekit capture --ab A B [--repeats N]``; returns the exit code."""
    from tracekit.capture.config import load_config, parse_overrides
    from tracekit.capture.launcher import capture
    from tracekit.reports.capture_tables import render_capture_summary

    if ab is not None:
        return _run_ab(config_path, parse_overrides(extra_args), ab, repeats=repeats or 1)
    if repeats is not None:
        raise InputError("--repeats needs --ab A B")
    config = load_config(config_path, parse_overrides(extra_args))
    click.echo(one_line(f"capturing {config.nproc} rank(s) of {config.workload!r} into {config.out_dir} ..."), err=True)
    summary = capture(config)
    click.echo(render_capture_summary(summary), nl=False)
    written = ["rank*.pt.trace.json.gz", "phases.rank*.json", "summary.json"]
    for pattern in ("memory_timeline.rank*.raw.json.gz", "memory_snapshot.rank*.pickle"):
        written += [pattern] if any(Path(config.out_dir).glob(pattern)) else []
    click.echo(one_line(f"wrote {config.out_dir}: {', '.join(written)}"))
    return 0


def _run_ab(config_path: Path | None, common: dict[str, str], ab: tuple[str, str], *, repeats: int) -> int:
    """``tracekit capture --ab A B``: the interleaved captures, then the comparison of A with B."""
    from tracekit.capture.ab import capture_ab, plan_ab
    from tracekit.reports.capture_tables import render_ab

    plan = plan_ab(config_path, common, ab, repeats=repeats)

    def starting(side: Side, repeat: int, folder: Path) -> None:
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
    click.echo(render_ab(record), nl=False)
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
    options: AnalyzeOptions | None = None,
    noise: Noise | None = None,
    top: int = 15,
) -> int:
    """``tracekit compare``: print the comparison, write the outputs; the exit code of the gate
    (1 when a ``--fail-if`` condition fails, else 0)."""
    check_outputs({f"--{fmt}": path for fmt, path in outputs.items()}, [*a, *b])
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 120
    with DelayedProgress() as progress:
        options = options or AnalyzeOptions()
        options = dataclasses.replace(options, progress=progress.file_done, stage=progress.stage)
        comparison = compare_paths(a, b, options=options, noise=noise, fail_if=fail_if)
        text = TerminalRenderer(top=top, width=max(width, 100), color=sys.stdout.isatty()).render_comparison(comparison)
    click.echo(text, nl=False)
    texts = {path: renderer(fmt).render_comparison(comparison) for fmt, path in outputs.items() if path is not None}
    with OutputFiles() as files:
        for path, body in texts.items():
            files.add_text(path, body)
    for path in texts:
        click.echo(f"wrote {one_line(str(path))}")
    failed = [g for g in comparison.gate if g.failed]
    for g in failed:
        click.echo(one_line(f"tracekit: FAIL {g.spec}: {g.message}"), err=True)
    return 1 if failed else 0
