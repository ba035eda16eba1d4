"""Analyses whose every string (names, paths, devices, versions, ...) is hostile, for the escaping tests.

A trace is written by whatever program was traced, or by anyone who sends one: any string in it
can hold Markdown, HTML, terminal escape sequences or rich markup. :func:`hostile` replaces every
string field of an analysis (not the enums, which the typed model validates) by one payload, so
every place a renderer shows a string is exercised, including places added later.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final

import msgspec

from tests.analyzers.test_cross_rank import three_ranks
from tests.conftest import SAMPLES
from tests.factories import ev, make_run
from tracekit.analyzers import analyze
from tracekit.results.analysis import Analysis, DroppedEvent, RunFacts, RunWarning, SkippedFile
from tracekit.results.capture import load_capture_summary
from tracekit.results.vocab import DropReason, RunWarningKind

#: name -> a string a hostile trace could hold.
PAYLOADS: Final = {
    "link": "[x](http://evil.example/a)",
    "image": "![](http://evil.example/i.png)",
    "script": "<script>alert(1)</script>",
    "closing script": "</script><script>alert(1)</script>",
    "img tag": '<img src=x onerror="alert(1)">',
    "autolink": "<http://evil.example>",
    "bare url": "see http://evil.example and www.evil.example",
    "email mention issue": "mail a@evil.example cc @someone fixes #12",
    "html": "<!-- x --> <b>bold</b> &amp; &lt;",
    "pipes": "a|b||c \\| d",
    "backticks": "``code`` and `x`",
    "emphasis": "*em* __strong__ ~~del~~ _u_",
    "newlines": "line1\nline2\r\n- item\n# heading",
    "leading list": "- 1. + item",
    "osc 8 hyperlink": "\x1b]8;;http://evil.example\x07click\x1b]8;;\x07",
    "csi": "\x1b[2J\x1b[31mred\x1b[0m",
    "c0 and c1": "nul\x00 bell\x07 bs\x08 del\x7f csi\x9b31m",
    "bidi": "\u202eevil\u202c \u2066iso\u2069 \u200f",
    "rich markup": "[bold red]markup[/bold red] [link=http://evil.example]x[/link] :smile:",
    "math": "$x$ and $$y$$",
}


def _replace(value: Any, info: msgspec.inspect.Type, payload: str) -> Any:
    """``value`` (of msgspec type ``info``) with every string replaced by ``payload``."""
    if value is None:
        return None
    if isinstance(info, msgspec.inspect.StrType):
        return payload
    if isinstance(info, msgspec.inspect.UnionType):
        kinds = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        return _replace(value, kinds[0], payload) if len(kinds) == 1 else value
    if isinstance(info, msgspec.inspect.ListType):
        return [_replace(v, info.item_type, payload) for v in value]
    if isinstance(info, msgspec.inspect.StructType):
        changes = {f.name: _replace(getattr(value, f.name), f.type, payload) for f in info.fields}
        return msgspec.structs.replace(value, **changes)
    return value


def hostile(analysis: Analysis, payload: str) -> Analysis:
    """``analysis`` with every string field (at any depth) set to ``payload``."""
    result: Analysis = _replace(analysis, msgspec.inspect.type_info(Analysis), payload)
    return result


def with_strings(value: Any, payload: str) -> Any:
    """Any typed result (an analysis, a comparison) with every string field set to ``payload``."""
    return _replace(value, msgspec.inspect.type_info(type(value)), payload)


#: Warnings whose every string a hostile file could set: its path, a value it holds, an event's name.
WARNINGS: Final = [
    RunWarning(
        kind=RunWarningKind.DROPPED_EVENTS,
        path="p",
        count=1,
        reasons={DropReason.FAR: 1},
        example=DroppedEvent(name="e", reason=DropReason.FAR, unit="us", start=1.0, duration=2.0),
    ),
    RunWarning(kind=RunWarningKind.BAD_DISTRIBUTED_INFO, path="p", key="rank", value="v"),
    RunWarning(kind=RunWarningKind.TEXT, text="w"),
]


@cache
def gpu_run() -> Analysis:
    """Three GPU ranks with collectives and kernels, and a skipped file and warnings."""
    rows = [{**r, "start_ns": r["start_ns"] * 1000, "end_ns": r["end_ns"] * 1000} for r in three_ranks()]
    rows += [ev("annotation", "forward", 1_000, 50_000, rank=r) for r in range(3)]
    analysis = analyze(make_run(rows, world_size=3))
    run: RunFacts = msgspec.structs.replace(
        analysis.run, skipped=[SkippedFile(path="x", reason="y")], warnings=WARNINGS, devices=["d"], backend="b"
    )
    summary = (SAMPLES / "captures" / "straggler" / "summary.json").read_bytes()
    return msgspec.structs.replace(analysis, run=run, capture=load_capture_summary(summary, source="summary.json"))
