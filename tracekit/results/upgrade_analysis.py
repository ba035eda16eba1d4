"""Analyses of schema 2.0 to 2.4 read into the current layout: the run's warnings and how each
rank was found, which those files held as words, as the kinds and figures they said (see
:mod:`tracekit.results.upgrade`). Words no pattern here matches are kept with the kind ``text``."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Any, Final

from tracekit.results.vocab import DropReason, RankSource, RunWarningKind

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["analysis_2_4", "gains_2_8", "older_analysis"]


_DROP_REASONS: Final = {
    "no numeric time": DropReason.NO_TIME,
    "no duration": DropReason.NO_EXTENT,
    "a negative duration": DropReason.NEGATIVE,
    "a time far outside the rest of the rank": DropReason.FAR,
}
_EXAMPLE: Final = re.compile(
    r"(?P<label>an unnamed event|'.*'|\".*\") (?:(?P<no_time>with no usable start time)|"
    r"at (?P<start>\S+) (?P<unit>\S+) (?:without a duration|lasting (?P<duration>\S+) \S+))",
    re.DOTALL,
)
_RANGE: Final = re.compile(r"(?P<a>\d+)(?:-(?P<b>\d+))?")


def _example(text: str) -> dict[str, Any] | None:
    """An example of a dropped event, as analyses before 2.5 said it."""
    m = _EXAMPLE.fullmatch(text)
    if m is None:
        return None
    name = None if m["label"] == "an unnamed event" else ast.literal_eval(m["label"])
    unit = m["unit"] or "us"
    if m["no_time"]:
        return {"name": name, "reason": DropReason.NO_TIME.value, "unit": unit}
    if m["duration"] is None:
        return {"name": name, "reason": DropReason.NO_EXTENT.value, "unit": unit, "start": float(m["start"])}
    duration = float(m["duration"])
    reason = DropReason.NEGATIVE if duration < 0 else DropReason.FAR  # the sentence did not say which
    return {"name": name, "reason": reason.value, "unit": unit, "start": float(m["start"]), "duration": duration}


def _dropped(m: re.Match[str]) -> dict[str, Any] | None:
    reasons = {}
    for part in m["reasons"].split(", "):
        n, _, said = part.partition(" with ")
        if not n.isdigit() or said not in _DROP_REASONS:
            return None
        reasons[_DROP_REASONS[said].value] = int(n)
    example = _example(m["example"])
    return None if example is None else {"count": int(m["count"]), "reasons": reasons, "example": example}


def _missing(m: re.Match[str]) -> dict[str, Any] | None:
    ranges = [_RANGE.fullmatch(r) for r in m["ranges"].split(", ")]
    if not all(ranges):
        return None
    pairs = [[int(r["a"]), int(r["b"] or r["a"])] for r in ranges if r is not None]
    return {"count": int(m["count"]), "world_size": int(m["world_size"]), "ranges": pairs, "more": int(m["more"] or 0)}


def _figures(*names: str) -> Callable[[re.Match[str]], dict[str, Any]]:
    """The named groups of a match as figures (numbers where they are digits)."""

    def figures(m: re.Match[str]) -> dict[str, Any]:
        return {n: int(m[n]) if m[n].isdigit() else (None if m[n] == "None" else m[n]) for n in names}

    return figures


_PATH: Final = r"(?P<path>.*): "
#: The warnings of analyses 2.0 to 2.4: a pattern, its kind, and its figures from the match (None: not that).
_RUN_WARNINGS: Final[tuple[tuple[re.Pattern[str], RunWarningKind, Callable[[re.Match[str]], Any]], ...]] = (
    (
        re.compile(_PATH + r"distributedInfo\.(?P<key>\w+) is (?P<value>.*), which is not a [\w ]+; it was ignored"),
        RunWarningKind.BAD_DISTRIBUTED_INFO,
        lambda m: {"key": m["key"], "value": m["value"]},
    ),
    (
        re.compile(
            _PATH + r"(?P<count>\d+) entries of traceEvents are not events \(not JSON objects\); they were left out"
        ),
        RunWarningKind.NOT_EVENTS,
        _figures("count"),
    ),
    (
        re.compile(
            _PATH + r"(?P<count>\d+) event\(s\) have args that are not a JSON object; they were read without their args"
        ),
        RunWarningKind.BAD_ARGS,
        _figures("count"),
    ),
    (
        re.compile(
            _PATH + r"dropped (?P<count>\d+) event\(s\) whose times cannot be right \((?P<reasons>[^()]*)\), "
            r"e\.g\. (?P<example>.*); the analysis does not use them"
        ),
        RunWarningKind.DROPPED_EVENTS,
        _dropped,
    ),
    (
        re.compile(
            _PATH + r"the session start time \(utcEpochNs\) is (?P<value>.*), not a time: it was ignored, "
            r"so this file's clock is not aligned with other files"
        ),
        RunWarningKind.BAD_SESSION_START,
        lambda m: {"value": m["value"]},
    ),
    (
        re.compile(_PATH + r"the recorded (?P<key>\w+)=(?P<value>.*) is not a rank number; it was ignored"),
        RunWarningKind.BAD_RANK_ENV,
        lambda m: {"key": m["key"], "value": m["value"]},
    ),
    (
        re.compile(_PATH + r"rank (?P<rank>\d+) is outside the world of (?P<world_size>\d+) ranks its file records"),
        RunWarningKind.RANK_OUTSIDE_WORLD,
        _figures("rank", "world_size"),
    ),
    (
        re.compile(
            r"(?P<count>\d+) of the (?P<world_size>\d+) ranks of this world have no trace here "
            r"\(ranks? (?P<ranges>[\d, -]+?)(?: and (?P<more>\d+) more ranges)?\): "
            r"cross-rank figures cover only the ranks present"
        ),
        RunWarningKind.MISSING_RANKS,
        _missing,
    ),
    (
        re.compile(
            r"rank (?P<rank>\d+): distributed run \(world size (?P<world_size>\d+|None), (?P<count>\d+) host-side "
            r"collective ops\) but no GPU kernel was recognized as communication; communication time will read as "
            r"zero \(name its kernels with --comm-kernel REGEX\)"
        ),
        RunWarningKind.NO_COMM_KERNELS,
        _figures("rank", "world_size", "count"),
    ),
    (
        re.compile(r"memory timelines only: no trace events, so no time breakdown or verdict; memory is reported"),
        RunWarningKind.MEMORY_ONLY,
        lambda _: {},
    ),
    (
        re.compile(
            r"no GPU activity in these traces: a CPU-only run; GPU breakdown, overlap and kernel tables are empty, "
            r"host-side steps and phases are reported"
        ),
        RunWarningKind.CPU_ONLY,
        lambda _: {},
    ),
)


#: The defaults of a warning's figures that are not None (the current layout omits defaults).
_DEFAULTS: Final[dict[str, Any]] = {"more": 0, "reasons": {}, "ranges": []}


def _given(figures: dict[str, Any]) -> dict[str, Any]:
    """The figures that are not their field's default."""
    return {k: v for k, v in figures.items() if v is not None and v != _DEFAULTS.get(k, None)}


def _run_warning(text: str) -> dict[str, Any]:
    """One warning of an analysis 2.0 to 2.4 as its kind and figures."""
    for pattern, kind, figures in _RUN_WARNINGS:
        m = pattern.fullmatch(text)
        said = figures(m) if m is not None else None
        if said is not None:
            path = {"path": m["path"]} if m is not None and "path" in pattern.groupindex else {}
            return _given({"kind": kind.value, **path, **said})
    return {"kind": RunWarningKind.TEXT.value, "text": text}


_RANK_SOURCES: Final = {
    "distributedInfo": RankSource.DISTRIBUTED_INFO,
    "file name": RankSource.FILE_NAME,
    "--rank": RankSource.OVERRIDE,
    "assumed 0 (a single file without a rank; set it with --rank)": RankSource.ASSUMED_ZERO,
    "none recorded": RankSource.NONE,
}
_PROCESS_ORDER: Final = re.compile(r"process order by GPU \(one file, (?P<processes>\d+) processes; pid (?P<pid>\d+)\)")
_RANK_KEY: Final = re.compile(r"(?P<key>\S+) (?P<kind>env|argument)")


def _rank_found(text: str) -> dict[str, Any]:
    """How an analysis 2.0 to 2.4 said a rank was found, as a kind and figures."""
    if text in _RANK_SOURCES:
        return {"kind": _RANK_SOURCES[text].value}
    if m := _PROCESS_ORDER.fullmatch(text):
        return {"kind": RankSource.PROCESS_ORDER.value, "processes": int(m["processes"]), "pid": int(m["pid"])}
    if m := _RANK_KEY.fullmatch(text):
        return {"kind": m["kind"], "key": m["key"]}
    return {"kind": RankSource.TEXT.value, "text": text}


def analysis_2_4(raw: dict[str, Any]) -> dict[str, Any]:
    """An analysis of schema 2.0 to 2.4: the run's warnings and how its ranks were found as kinds and figures."""
    run = raw.get("run")
    if not isinstance(run, dict):
        return raw
    warnings = run.get("warnings")
    if isinstance(warnings, list):
        run["warnings"] = [_run_warning(w) if isinstance(w, str) else w for w in warnings]
    ranks = run.get("ranks")
    for rank in ranks if isinstance(ranks, list) else ():
        if isinstance(rank, dict) and isinstance(rank.get("rank_source"), str):
            rank["rank_source"] = _rank_found(rank["rank_source"])
    return raw


def gains_2_8(raw: Any) -> Any:
    """``raw`` with every gain of schema 2.5 to 2.8 (an object with ``step_ns`` and ``up_to_pct``)
    in the names of 2.9: ``up_to_pct`` is ``share_pct``, ``expected_pct`` is ``gain_pct``
    (:mod:`tracekit.results.worth`). Walks any record that holds analyses' gains (an
    analysis, a doctor record)."""
    if isinstance(raw, list):
        return [gains_2_8(v) for v in raw]
    if not isinstance(raw, dict):
        return raw
    out = {k: gains_2_8(v) for k, v in raw.items()}
    if "step_ns" in out and "up_to_pct" in out and "share_pct" not in out:
        out["share_pct"] = out.pop("up_to_pct")
        if "expected_pct" in out:
            out["gain_pct"] = out.pop("expected_pct")
    return out


def older_analysis(raw: dict[str, Any]) -> dict[str, Any]:
    """An analysis of schema 2.0 to 2.8 in the layout of this one."""
    upgraded: dict[str, Any] = gains_2_8(analysis_2_4(raw))
    return upgraded
