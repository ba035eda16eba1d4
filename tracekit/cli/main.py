"""The ``tracekit`` command: argument parsing and the one error handler; no logic."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracekit import __version__
from tracekit.errors import TracekitError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
def cli() -> None:
    """Why is this distributed PyTorch training run slow?"""


class _AnalyzeCommand(click.Command):
    """``analyze``, whose help lists the input formats of the registry (imported only for --help)."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help_text(ctx, formatter)
        from tracekit.readers.formats import help_rows

        with formatter.section("Input formats"):
            formatter.write_dl(help_rows())


@cli.command(cls=_AnalyzeCommand)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write every number as versioned JSON to this file.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write one self-contained HTML report (opens offline) to this file.",
)
@click.option(
    "--md",
    "md_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a Markdown report (for a GitHub issue comment) to this file.",
)
@click.option(
    "--details",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the per-instance tables (collectives per rank, every GPU idle interval) as Parquet.",
)
@click.option(
    "--comm-kernel",
    "comm_kernels",
    multiple=True,
    metavar="REGEX",
    help="Kernel names (a regular expression) that are communication, beside the built-in table. Repeatable.",
)
@click.option(
    "--steps",
    "steps",
    metavar="SPEC",
    help="Measure only these steps, e.g. 3- or 2-5 or 0,2,4 (trace step numbers; ordinals for inferred steps).",
)
@click.option("--include-warmup", is_flag=True, help="Keep warm-up steps in the figures and the verdict.")
@click.option("--ranks", "rank_spec", help="Analyze only these ranks, e.g. 0-3,7.")
@click.option("--rank", type=int, help="The rank of a single trace file that does not record one.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1), help="Kernels to list.")
@click.option("--jobs", type=click.IntRange(min=1), help="Parsing processes [default: number of cores].")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Cache of decoded traces [default: $TRACEKIT_CACHE_DIR, else ~/.cache/tracekit].",
)
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache of decoded traces.")
@click.option(
    "--window",
    type=click.Choice(["steps", "gpu_span"]),
    default="steps",
    show_default=True,
    help="Measure GPU time over profiler steps, or first-to-last GPU activity (as HTA).",
)
def analyze(
    paths: tuple[Path, ...],
    json_path: Path | None,
    html_path: Path | None,
    md_path: Path | None,
    details: Path | None,
    comm_kernels: tuple[str, ...],
    steps: str | None,
    include_warmup: bool,
    rank_spec: str | None,
    rank: int | None,
    top: int,
    jobs: int | None,
    cache_dir: Path | None,
    no_cache: bool,
    window: str,
) -> None:
    """Analyze the traces of a run: one file per rank, or one file holding every rank.

    PATHS are trace files (formats below) or folders searched for them.
    """
    from tracekit.cli.commands import run_analyze

    run_analyze(
        paths,
        outputs={"json": json_path, "html": html_path, "md": md_path},
        details=details,
        comm_kernels=comm_kernels,
        steps=steps,
        include_warmup=include_warmup,
        rank_spec=rank_spec,
        rank=rank,
        top=top,
        jobs=jobs,
        cache_dir=cache_dir,
        use_cache=not no_cache,
        window=window,
    )


@cli.command()
@click.argument("report", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the HTML report.")
@click.option("--md", "md_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the Markdown report.")
def report(report: Path, html_path: Path | None, md_path: Path | None) -> None:
    """Render a saved JSON report (from analyze --json) again, without the traces."""
    from tracekit.cli.commands import run_report

    run_report(report, outputs={"html": html_path, "md": md_path})


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option(
    "--config_path",
    "--config-path",
    "config_path",
    type=click.Path(path_type=Path),
    help="JSON config file; any field can be set as --field=value or --section.field=value.",
)
@click.pass_context
def capture(ctx: click.Context, config_path: Path | None) -> None:
    """Run the training step on N ranks under torch.profiler and write traces + summary.json.

    OUT_DIR is replaced only when the run succeeds; a failed run is kept in
    OUT_DIR.tracekit-failed. --timeout SECONDS (default 1800) stops a run that hangs and
    names the ranks that did not finish.
    """
    from tracekit.cli.commands import run_capture

    run_capture(config_path, list(ctx.args))


def main() -> None:
    """Entry point: run the CLI; input errors become one line on stderr and exit code 2."""
    try:
        cli(standalone_mode=False)
    except TracekitError as exc:
        click.echo(f"tracekit: error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("tracekit: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
