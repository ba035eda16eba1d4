"""What a user chooses about an analysis, declared once, from the command line to the map.

:class:`AnalysisChoices` holds the choices that change what an analysis measures: the window its
shares are of, the steps it measures, whether warm-up counts, which kernels are communication.
Every options object on the way down extends it: ``AnalyzeOptions`` (the public API and the
CLI's options, :mod:`tracekit.pipeline.analyze`), the shards' ``Settings``
(:mod:`tracekit.pipeline.mapped`) and the analysis's ``Options``
(:mod:`tracekit.analyzers.context`); each adds only what its layer knows (an executor, a cache,
the run's facts). The CLI's shared options are made from these fields
(:func:`tracekit.cli.options.analysis_options`): each field's ``metadata["cli"]`` is its
:class:`Flag`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Final

from tracekit.results.vocab import WindowKind


@dataclass(frozen=True)
class Flag:
    """How a choice is spelled on the command line."""

    name: str
    help: str
    metavar: str | None = None


def _cli(name: str, help: str, metavar: str | None = None) -> dict[str, Flag]:
    return {"cli": Flag(name, help, metavar)}


@dataclass(frozen=True)
class AnalysisChoices:
    """The user's choices about an analysis (see the module docstring)."""

    #: ``"steps"``: shares of the profiler steps' time; ``"gpu_span"``: of each rank's first to
    #: last GPU activity (HTA's definition)
    window: WindowKind = field(
        default=WindowKind.STEPS,
        metadata=_cli("--window", "Measure GPU time over profiler steps, or first-to-last GPU activity (as HTA)."),
    )
    #: the steps measured ("3-", "2-5", "0,2,4"), or None for the steady state found
    steps: str | None = field(
        default=None,
        metadata=_cli(
            "--steps",
            "Measure only these steps, e.g. 3- or 2-5 or 0,2,4 (trace step numbers; ordinals for inferred steps).",
            "SPEC",
        ),
    )
    #: keep warm-up steps in the figures and the verdict
    include_warmup: bool = field(
        default=False, metadata=_cli("--include-warmup", "Keep warm-up steps in the figures and the verdict.")
    )
    #: kernel names (regular expressions) that are communication, beside the built-in table
    comm_kernels: tuple[str, ...] = field(
        default=(),
        metadata=_cli(
            "--comm-kernel",
            "Kernel names (a regular expression) that are communication, beside the built-in table. Repeatable.",
            "REGEX",
        ),
    )

    def __post_init__(self) -> None:
        if not isinstance(self.window, WindowKind):
            try:
                window = WindowKind(self.window)
            except ValueError:
                known = ", ".join(repr(w.value) for w in WindowKind)
                raise ValueError(f"window must be one of {known}, not {self.window!r}") from None
            object.__setattr__(self, "window", window)
        if self.steps is not None and not isinstance(self.steps, str):
            raise TypeError(f"steps is a str as --steps takes it ('2-8', '3,5'), not a {type(self.steps).__name__}")
        if isinstance(self.comm_kernels, str):
            raise TypeError("comm_kernels is a sequence of regular expressions, not one str")
        object.__setattr__(self, "comm_kernels", tuple(self.comm_kernels))

    def chosen(self) -> dict[str, Any]:
        """The choices alone, as keyword arguments (to pass them to another options object)."""
        return {name: getattr(self, name) for name in CHOICES}


#: The names of the choices, in their order.
CHOICES: Final = tuple(f.name for f in fields(AnalysisChoices))
