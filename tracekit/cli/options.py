"""Options that several commands share, declared once (as memray's shared argument groups).

:func:`analysis_options` holds how traces are read and analyzed (``tracekit analyze``'s options;
``compare`` and ``sweep`` analyze traces too), :func:`output_options` the report files a command
writes. A command receives each group as one keyword argument (``analysis``, ``outputs``), not
as a parameter per option.
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar, get_type_hints

import click

from tracekit.executors import EXECUTORS
from tracekit.results.choices import AnalysisChoices, Flag

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

T = TypeVar("T")

#: Where a group's values wait in the command's context (``ctx.meta``) for the command.
_META: Final = "tracekit.options."


class FiniteRange(click.FloatRange):
    """click's ``FloatRange`` that also refuses NaN and infinities (``nan`` compares as inside
    every range: ``--noise-threshold nan`` would turn a gate off)."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


def _option(group: str) -> Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """``click.option`` for an option of ``group``: its value (given or its default) is kept for
    the command (:func:`_group`), not passed as a parameter of its own."""

    def keep(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        ctx.meta.setdefault(_META + group, {})[param.name] = value
        return value

    return functools.partial(click.option, expose_value=False, callback=keep)


def _group(
    group: str, options: Sequence[Callable[[Callable[..., Any]], Callable[..., Any]]]
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A decorator adding ``options`` (made with :func:`_option` of ``group``) whose values reach
    the command as one keyword argument, ``group``: option name -> value."""

    def decorate(command: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> T:
            given = click.get_current_context().meta.get(_META + group, {})
            return command(*args, **{group: dict(given)}, **kwargs)

        for option in reversed(options):
            run = option(run)
        return run

    return decorate


def _choice_options(option: Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]) -> list[Any]:
    """The options of :class:`~tracekit.results.choices.AnalysisChoices`, made from its fields:
    each one's flag, help and metavar (``metadata["cli"]``), its kind from its type (a flag for a
    bool, a choice for an enum, repeatable for a tuple)."""
    hints = get_type_hints(AnalysisChoices)
    out = []
    for f in fields(AnalysisChoices):
        flag: Flag = f.metadata["cli"]
        kind: dict[str, Any] = {"help": flag.help}
        if flag.metavar:
            kind["metavar"] = flag.metavar
        if hints[f.name] is bool:
            kind |= {"is_flag": True, "default": f.default}
        elif isinstance(f.default, enum.Enum):
            choices = [str(c.value) for c in type(f.default)]
            kind |= {"type": click.Choice(choices), "default": f.default.value, "show_default": True}
        elif isinstance(f.default, tuple):
            kind |= {"multiple": True}
        out.append(option(flag.name, f.name, **kind))
    return out


def analysis_options(command: Callable[..., T]) -> Callable[..., T]:
    """How traces are read and analyzed: ``tracekit analyze``'s options, shared by every command
    that analyzes traces. The command receives them as ``analysis``: the keyword arguments of
    :class:`~tracekit.pipeline.AnalyzeOptions`, but ``ranks`` as the spec given (``0-3,7``)."""
    option = _option("analysis")
    options = [
        *_choice_options(option),
        option("--ranks", help="Analyze only these ranks, e.g. 0-3,7."),
        option("--rank", type=int, help="The rank of a single trace file that does not record one."),
        option(
            "--jobs",
            type=click.IntRange(min=1),
            help="Cores that read and analyze the ranks: processes, or threads decoding one big file (with "
            "--executor dask: the workers of a local cluster); also the processes that re-time the "
            "what-ifs side by side [default: number of cores].",
        ),
        option(
            "--cache-dir",
            type=click.Path(file_okay=False, path_type=Path),
            help="Cache of decoded traces and of their per-rank analyses "
            "[default: $TRACEKIT_CACHE_DIR, else ~/.cache/tracekit].",
        ),
        option(
            "--no-cache",
            "use_cache",
            is_flag=True,
            flag_value=False,
            default=True,
            help="Neither read nor write the cache (decoded traces, per-rank analyses).",
        ),
        option(
            "--executor",
            type=click.Choice(list(EXECUTORS)),
            default="local",
            show_default=True,
            help="Where each rank is read and analyzed: processes on this machine (--jobs), or a Dask cluster "
            "(pip install 'torch-tracekit[dask]'; the files must be at the same paths on its workers).",
        ),
        option(
            "--scheduler",
            metavar="ADDR",
            help="With --executor dask: a running Dask scheduler, e.g. tcp://host:8786 [default: a local cluster "
            "of --jobs workers].",
        ),
    ]
    return _group("analysis", options)(command)


def output_options(**helps: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """The report files a command writes: ``--json FILE``, ``--html FILE``, ``--md FILE``, one for
    each format named, in the order named, with its help. The command receives them as
    ``outputs``: format -> path, or None where the option was not given."""
    option = _option("files")
    path = click.Path(dir_okay=False, path_type=Path)
    grouped = _group("files", [option(f"--{fmt}", fmt, type=path, help=text) for fmt, text in helps.items()])

    def decorate(command: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(command)
        def run(*args: Any, files: dict[str, Path | None], **kwargs: Any) -> T:
            return command(*args, outputs={fmt: files.get(fmt) for fmt in helps}, **kwargs)

        return grouped(run)

    return decorate


class ConfigCommand(click.Command):
    """A command that takes the capture config: its help lists every config field, with its
    default and meaning, read from the config's structs (imported only for --help)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from tracekit.capture.config_help import help_rows

        with formatter.section("Config fields (--field=value on the command line, or keys of --config_path)"):
            formatter.write_dl(help_rows())
        super().format_epilog(ctx, formatter)
