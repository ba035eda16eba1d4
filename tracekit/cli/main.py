"""The ``tracekit`` command: argument parsing and the one error handler; no logic.

Each command imports what runs it inside its function, for the import cost (measured with
``python -X importtime``, this 2-core machine): this module takes 74 ms, so ``tracekit --help``
and a mistyped option answer at once; :mod:`tracekit.cli.commands` would add 250 ms, the
analysis (polars and every analyzer) 540 ms, capture 180 ms. Every other import is at the top.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, NoReturn, TypeVar

import click

from tracekit import __version__
from tracekit.cli.options import ConfigCommand, FiniteRange, analysis_options, output_options
from tracekit.cli.signals import Terminated, termination_raises
from tracekit.errors import TracekitError, is_disk_error, os_reason

#: Exit codes: bad input or arguments (TracekitError.exit_code, click's usage errors), a bug in
#: tracekit (an error it did not expect), and an interrupt.
EXIT_INPUT: Final = 2
EXIT_INTERNAL: Final = 3
EXIT_ABORTED: Final = 130
#: Where a user reports a bug.
REPORT_TO: Final = "tracekit's issue tracker"
#: Set to 1 (or give --debug) to see the traceback of an internal error.
DEBUG_ENV: Final = "TRACEKIT_DEBUG"
#: The longest error message shown (a message from a library can run to pages).
MAX_MESSAGE: Final = 4000

_debug = False
F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
@click.option("--debug", is_flag=True, help=f"Show the traceback of an error (also {DEBUG_ENV}=1).")
def cli(debug: bool) -> None:
    """Why is this distributed PyTorch training run slow?"""
    global _debug  # noqa: PLW0603  (set once per run, read by the error handler in main)
    _debug = _debug or debug


def _config_path(text: str) -> Callable[[F], F]:
    """The ``--config_path`` option of the commands that run a capture, with its help ``text``."""
    return click.option("--config_path", "--config-path", "config_path", type=click.Path(path_type=Path), help=text)


class _AnalyzeCommand(click.Command):
    """``analyze``, whose help lists the input formats of the registry (imported only for --help)."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        from tracekit.readers.formats import help_rows

        with formatter.section("Input formats"):
            formatter.write_dl(help_rows())


@cli.command(cls=_AnalyzeCommand)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@output_options(
    json="Also write every number as versioned JSON to this file.",
    html="Also write one self-contained HTML report (opens offline) to this file.",
    md="Also write a Markdown report (for a GitHub issue comment) to this file.",
)
@click.option(
    "--details",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the per-instance tables (collectives per rank, every GPU idle interval) as Parquet.",
)
@click.option(
    "--annotated-trace",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the trace(s) with the findings as tracks, for Perfetto or chrome://tracing (.json or .json.gz).",
)
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1), help="Kernels to list.")
@click.option("--full", is_flag=True, help="Print every table of the report, not the short answer.")
@analysis_options
def analyze(
    paths: tuple[Path, ...],
    outputs: dict[str, Path | None],
    details: Path | None,
    annotated_trace: Path | None,
    top: int,
    full: bool,
    analysis: dict[str, Any],
) -> None:
    """Analyze the traces of a run: one file per rank, or one file holding every rank.

    PATHS are trace files (formats below) or folders searched for them.
    """
    from tracekit.cli.warm import likely_warm, record

    pool = None
    # its processes start while this one imports the rest; on a warm run, none is needed
    if analysis["executor"] == "local" and not likely_warm(paths, analysis):
        from tracekit.executors.local import started

        pool = started(paths, jobs=analysis["jobs"], preload="tracekit.pipeline.shards")
    from tracekit.cli.commands import run_analyze

    try:
        given = analysis if pool is None else analysis | {"executor": pool}
        run_analyze(
            paths, outputs=outputs, details=details, top=top, analysis=given, annotated=annotated_trace, full=full
        )
    finally:
        if pool is not None:
            pool.close()
    record(paths, analysis)


@cli.command()
@click.argument("report", type=click.Path(dir_okay=False, path_type=Path))
@output_options(html="Write the HTML report.", md="Write the Markdown report.")
@click.option("--full", is_flag=True, help="Print every table of an analysis or a comparison, not the short answer.")
def report(report: Path, outputs: dict[str, Path | None], full: bool) -> None:
    """Draw a saved record again, without the traces: an analysis (analyze --json), a comparison,
    a sweep, doctor.json, a capture's summary.json, ab.json, a probe or an audit; in the terminal,
    and to --md / --html."""
    from tracekit.cli.commands import run_report

    run_report(report, outputs=outputs, full=full)


@cli.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@output_options(json="Write it as JSON.", html="Write offline HTML.", md="Write Markdown (for a PR).")
@click.option(
    "--fail-if",
    "fail_if",
    multiple=True,
    metavar="METRIC:LIMIT",
    help="Exit 1 when B regresses beyond LIMIT: slower:1%, phase:forward:0.5ms, throughput:2%, memory:+512MiB, "
    "syncs:+0. Times fail only when the change is beyond noise. Repeatable.",
)
@click.option(
    "--noise-threshold",
    default=1.0,
    show_default=True,
    type=FiniteRange(min=0, max=1000),
    metavar="PCT",
    help="A change smaller than this share of A (percent) is within noise even when its interval excludes zero.",
)
@click.option(
    "--level",
    default=0.95,
    show_default=True,
    type=FiniteRange(min=0.5, max=0.999),
    help="Confidence level of the intervals.",
)
@click.option("--top", default=15, show_default=True, type=click.IntRange(min=1), help="Work changes to list.")
@click.option("--full", is_flag=True, help="Print every table of the comparison, not the short answer.")
@analysis_options
@click.pass_context
def compare(
    ctx: click.Context,
    runs: tuple[Path, ...],
    outputs: dict[str, Path | None],
    fail_if: tuple[str, ...],
    noise_threshold: float,
    level: float,
    top: int,
    full: bool,
    analysis: dict[str, Any],
) -> None:
    """Compare run B against the baseline run A: what changed, by how much, beyond noise or not.

    RUNS is A B (each a saved analysis from analyze --json, a capture folder, a folder of
    repeated captures, or trace files / folders), or one A/B capture folder (capture --ab)
    holding a/ and b/. Exit status: 0, or 1 when a --fail-if condition fails, 2 on bad input.
    """
    from tracekit.analyzers.compare import Noise
    from tracekit.cli.commands import run_compare
    from tracekit.pipeline import pair

    a, b = pair(runs)
    noise = Noise(level=level, threshold_pct=noise_threshold)
    ctx.exit(
        run_compare([a], [b], outputs=outputs, fail_if=fail_if, analysis=analysis, noise=noise, top=top, full=full)
    )


@cli.command(cls=ConfigCommand, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@_config_path("JSON config file; any field can be set as --field=value or --section.field=value.")
@click.option(
    "--ab",
    nargs=2,
    metavar="A B",
    help="Capture two variants, A and B (overrides such as 'workload_args.sync_check=true'; '' is the config "
    "as is), interleaved, into OUT_DIR/a and OUT_DIR/b, then compare them.",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    help="With --ab: captures of each side, run A B A B ... into OUT_DIR/a/run1.. [default: 1].",
)
@click.pass_context
def capture(ctx: click.Context, config_path: Path | None, ab: tuple[str, str] | None, repeats: int | None) -> None:
    """Run the training step on N ranks under torch.profiler and write traces + summary.json.

    OUT_DIR is replaced only when the run succeeds; a failed run is kept in
    OUT_DIR.tracekit-failed. --timeout SECONDS (default 1800) stops a run that hangs and
    names the ranks that did not finish. --memory-timeline writes each rank's categorized
    memory timeline beside its trace; --memory-snapshot the CUDA allocator's snapshot.
    """
    from tracekit.cli.commands import run_capture

    code = run_capture(config_path, list(ctx.args), ab=ab, repeats=repeats)
    if code:
        ctx.exit(code)


@cli.command(cls=ConfigCommand, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@_config_path(
    "JSON config file every cell shares; any field can be set as --field=value (--out_dir: the sweep folder)."
)
@click.option(
    "--grid", "grid", multiple=True, metavar="KEY=V1,V2", help="A grid axis, e.g. batch_size=8,16. Repeatable."
)
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(min=1), help="Captures of each cell.")
@click.option("--probe-oom", is_flag=True, help="Walk each other-cell's batch_size up to the first OOM.")
@click.option("--probe-step", type=click.IntRange(min=1), help="Walk up by this step [default: double, then bisect].")
@click.option("--no-trace", is_flag=True, help="No profiler trace: step times and memory only (faster).")
@click.option("--cell-timeout", type=FiniteRange(min=0, min_open=True), metavar="SECONDS", help="Per capture.")
@click.option(
    "--mem-budget-gb",
    type=FiniteRange(min=0, min_open=True),
    help="A cell whose peak (reserved on GPU, RSS per rank on CPU) is over this is out of memory.",
)
@click.option("--headroom", default="10%", show_default=True, metavar="PCT", help="Memory the best cell leaves free.")
@click.option("--resume", is_flag=True, help="Continue the sweep in --out_dir: run only the captures it lacks.")
@click.option(
    "--report",
    "report_dir",
    type=click.Path(path_type=Path),
    help="Render the matrix of this sweep folder again, without running anything.",
)
@output_options(json="Write the matrix as JSON.", md="Write Markdown (for a PR).", html="Write offline HTML.")
@analysis_options
@click.pass_context
def sweep(
    ctx: click.Context,
    config_path: Path | None,
    grid: tuple[str, ...],
    repeats: int,
    probe_oom: bool,
    probe_step: int | None,
    no_trace: bool,
    cell_timeout: float | None,
    mem_budget_gb: float | None,
    headroom: str,
    resume: bool,
    report_dir: Path | None,
    outputs: dict[str, Path | None],
    analysis: dict[str, Any],
) -> None:
    """Capture every cell of a grid of config values (backend x batch size ...) and show the matrix.

    Each cell is a capture into OUT_DIR/cells/<cell>; sweep.json records each as it finishes
    (ok, oom, failed, timeout), so --resume continues an interrupted sweep.
    """
    from tracekit.cli.commands import run_sweep_command

    code = run_sweep_command(
        config_path,
        list(ctx.args),
        grid=grid,
        options={
            "repeats": repeats,
            "trace": not no_trace,
            "probe_oom": probe_oom,
            "probe_step": probe_step,
            "mem_budget_gb": mem_budget_gb,
            "cell_timeout": cell_timeout,
            "resume": resume,
        },
        headroom=headroom,
        report_dir=report_dir,
        outputs=outputs,
        analysis=analysis,
    )
    if code:
        ctx.exit(code)


_CONFIG_HELP = "JSON config file (as capture's); any field can be set as --field=value or --section.field=value."
_BATCHES_HELP = "Batches timed per rank, after the config's warm-up steps' worth."
_CAPTURE_HELP = "A capture of this config (its summary.json) to compare with [default: OUT_DIR when it holds one]."


@cli.command(cls=ConfigCommand, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@_config_path(_CONFIG_HELP)
@click.option("--batches", type=click.IntRange(min=1), default=100, show_default=True, help=_BATCHES_HELP)
@click.option("--capture", "capture_dir", type=click.Path(file_okay=False, path_type=Path), help=_CAPTURE_HELP)
@output_options(json="Also write it as JSON.", md="Also write Markdown.")
@click.pass_context
def dataloader(
    ctx: click.Context,
    config_path: Path | None,
    batches: int,
    capture_dir: Path | None,
    outputs: dict[str, Path | None],
) -> None:
    """Measure the DataLoader alone: the training config's dataset, sharding, workers, prefetch and
    pinning on its ranks, with no model. Per rank: fetch times (and their two modes), batches/s;
    the cluster's samples/s ceiling, and against a capture of the config, whether training is
    input-bound. Files go to OUT_DIR.dataloader/.
    """
    from tracekit.cli.commands import run_dataloader

    run_dataloader(config_path, list(ctx.args), batches=batches, capture=capture_dir, outputs=outputs)


@cli.command(
    "audit-params", cls=ConfigCommand, context_settings={"ignore_unknown_options": True, "allow_extra_args": True}
)
@_config_path(_CONFIG_HELP)
@click.option("--include-zero-grad", is_flag=True, help="Also list parameters whose gradient is all zeros.")
@output_options(json="Also write it as JSON.", md="Also write Markdown.")
@click.pass_context
def audit_params(
    ctx: click.Context, config_path: Path | None, include_zero_grad: bool, outputs: dict[str, Path | None]
) -> None:
    """Which parameters get no gradient: one forward + backward of the workload on one real batch, on one
    process. Lists UNUSED (no gradient), FROZEN and, with --include-zero-grad, all-zero gradients, by
    module, and says whether DDP's find_unused_parameters can be turned off.
    """
    from tracekit.cli.commands import run_audit_params

    run_audit_params(config_path, list(ctx.args), include_zero_grad=include_zero_grad, outputs=outputs)


@cli.command(cls=ConfigCommand, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@_config_path(_CONFIG_HELP)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The doctor's folder: doctor.json, the baseline capture, its DataLoader probe, the trials "
    "(--out_dir names it too)  [default: tracekit-doctor]",
)
@click.option(
    "--budget",
    metavar="DURATION",
    help="Time for the whole run, e.g. 20m or 1h30m; trials that do not fit are skipped.",
)
@click.option(
    "--repeats", default=2, show_default=True, type=click.IntRange(min=1), help="Captures of each side of a trial."
)
@click.option(
    "--trials", "max_trials", default=3, show_default=True, type=click.IntRange(min=0), help="Knobs tried at most."
)
@click.option("--batches", type=click.IntRange(min=1), default=100, show_default=True, help=_BATCHES_HELP)
@click.option("--resume", is_flag=True, help="Continue the run in --out: run only the stages it lacks.")
@output_options(
    json="Also write the record as JSON here.", md="Write Markdown (for an issue).", html="Write offline HTML."
)
@analysis_options
@click.pass_context
def doctor(
    ctx: click.Context,
    config_path: Path | None,
    out_dir: Path | None,
    budget: str | None,
    repeats: int,
    max_trials: int,
    batches: int,
    resume: bool,
    outputs: dict[str, Path | None],
    analysis: dict[str, Any],
) -> None:
    """Run the whole diagnosis of a config and measure the top fixes: a baseline capture and its
    verdict with each finding's predicted gain; the DataLoader's ceiling against training's
    samples/s; the parameter audit (when find_unused_parameters is on, or DDP refused); for the top
    findings a config knob addresses (num_workers, pin_memory, DDP buckets, a fused optimizer, bf16,
    the allocator), an A/B capture of the knob, its measured gain against the predicted one; and
    the findings that need a code change, with their gain and where. OUT/doctor.json records each
    stage as it ends, so --resume continues an interrupted run.
    """
    from tracekit.cli.commands import run_doctor_command

    run_doctor_command(
        config_path,
        list(ctx.args),
        out_dir=out_dir,
        options={"budget": budget, "repeats": repeats, "max_trials": max_trials, "batches": batches, "resume": resume},
        outputs=outputs,
        analysis=analysis,
    )


def main() -> None:
    """Entry point: run the CLI; every error becomes one line on stderr and an exit code, never a traceback.

    Bad input is exit code 2 (the file and the reason); an error tracekit did not expect is a
    bug in tracekit, exit code 3 (its type and where it happened; ``--debug`` or
    ``TRACEKIT_DEBUG=1`` adds the traceback); an interrupt is 130.
    """
    global _debug  # noqa: PLW0603  (one run per process; reset for callers that run main twice)
    _debug = os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    warnings.showwarning = _show_warning
    _closed_streams_to_null()
    try:
        with termination_raises():
            code = cli(standalone_mode=False, prog_name="tracekit")
        if isinstance(code, int) and code:  # ctx.exit(code) of a command (compare's gate) returns here
            sys.exit(code)
    except TracekitError as exc:
        _fail(exc.message, exc.exit_code, exc)
    except (click.exceptions.Abort, Terminated) as exc:
        _aborted(exc)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        _fail(_usage(exc), exc.exit_code, exc)
    except MemoryError as exc:
        _fail(
            "out of memory: analyze fewer ranks at once (--ranks), or on a machine with more memory", EXIT_INTERNAL, exc
        )
    except OSError as exc:
        if exc.filename is not None:
            _fail(f"{exc.filename}: {os_reason(exc)}", EXIT_INPUT, exc)
        if is_disk_error(exc):  # a full or read-only disk is the machine's state, not a bug
            _fail(f"cannot write ({os_reason(exc)})", EXIT_INPUT, exc)
        _internal(exc)
    except Exception as exc:  # anything else is a bug: one line, not a traceback
        _internal(exc)
    except BaseException as exc:
        if not _is_panic(exc):  # KeyboardInterrupt, SystemExit, GeneratorExit: as Python does
            raise
        _internal(exc)


def _closed_streams_to_null() -> None:
    """A standard stream that is closed (``tracekit analyze RUN >&-``: Python's ``sys.stdout`` is
    None) writes to the null device: the files asked for are still written, and nothing fails
    for want of a terminal."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115  (for the process's life)


def _aborted(exc: BaseException) -> NoReturn:
    """Ctrl-C (exit 130), or SIGTERM / SIGHUP (exit 128 + the signal): one line."""
    cause = exc if isinstance(exc, Terminated) else exc.__cause__
    if isinstance(cause, Terminated):
        _echo(f"terminated by {signal.Signals(cause.signum).name}")
        sys.exit(128 + cause.signum)
    _echo("aborted")
    sys.exit(EXIT_ABORTED)


def _echo(line: str) -> None:
    """One line on stderr: control characters from names made visible, white space collapsed, cut."""
    from tracekit.reports.text import one_line

    text = one_line(line)
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 1] + "…"
    click.echo(f"tracekit: {text}", err=True)


_library_warning = warnings.showwarning


def _show_warning(message: Warning | str, category: type[Warning], *where: Any, **more: Any) -> None:
    """A warning of tracekit's own (a damaged cache entry) as one line on stderr; others as Python shows them."""
    if category.__module__.startswith("tracekit."):
        _echo(f"warning: {message}")
    else:
        _library_warning(message, category, *where, **more)


def _fail(message: str, code: int, exc: BaseException) -> NoReturn:
    if _debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    _echo(f"error: {message}")
    sys.exit(code)


def _usage(exc: click.ClickException) -> str:
    """A usage error in one line, with where to read how the command is used."""
    message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    return f"{message} (see: {ctx.command_path if ctx is not None else 'tracekit'} --help)"


def _is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a panic in polars' Rust code (a BaseException, not an Exception)."""
    polars = sys.modules.get("polars")
    panic = getattr(getattr(polars, "exceptions", None), "PanicException", None)
    return isinstance(panic, type) and isinstance(exc, panic)


def _where(exc: BaseException) -> str:
    """The innermost line of tracekit's own code in the traceback (``tracekit/reports/tables.py:120``)."""
    package = Path(__file__).resolve().parents[1]
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(package):
            return f"{path.relative_to(package.parent).as_posix()}:{frame.lineno} ({frame.name})"
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "unknown place"


def _internal(exc: BaseException) -> NoReturn:
    """An error tracekit did not expect: a bug. One line; the traceback with --debug."""
    if _debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    detail = " ".join(str(exc).split())[:120]
    _echo(
        f"internal error (a bug in tracekit, not in your input): {type(exc).__name__}"
        f"{': ' + detail if detail else ''} at {_where(exc)}; please report it on {REPORT_TO} with the "
        f"command line and tracekit --version{'' if _debug else f'; --debug or {DEBUG_ENV}=1 shows the traceback'}"
    )
    sys.exit(EXIT_INTERNAL)
