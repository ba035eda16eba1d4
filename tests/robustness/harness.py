"""The robustness harness: a malformed input as a small declarative case, run through the CLI, judged.

A :class:`Case` names a source trace, a function that writes the bad file (or folder,
symlink, FIFO, damaged cache...) and the outcomes it may have:

* ``skipped``: the file is unreadable. Alone: exit 2 and one line on stderr naming it.
  Mixed into good ranks: exit 0, the file named in ``run.skipped`` of the JSON, in the
  terminal output and in the Markdown, and the good ranks' numbers unchanged.
* ``error``: exit 2 and one line naming the file, alone and mixed.
* ``warning``: the file is analyzed (its rank is in ``run.ranks``) and a warning naming it,
  with a count (a figure of the warning), is in ``run.warnings``, the terminal output and the Markdown.
* ``ok``: analyzed; nothing about it needs saying.
* ``ignored`` (mixed runs only): not a trace file (a folder named ``x.json``), left out of the
  run without a word, the good ranks analyzed.

Whatever the outcome: no ``Traceback`` anywhere, no hang, exit 0 or 2, never a file that
silently vanishes, and the good ranks' per-rank numbers identical to a clean run of them alone.
Every check that fails is collected (:class:`Problems`), so one run lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tests.robustness.sources import FAMILIES

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.robustness.runner import Output
    from tests.robustness.sources import Source

#: What a run can do with a bad input (see the module docstring).
OUTCOMES = ("ok", "warning", "skipped", "error", "ignored")
Mode = Literal["alone", "mixed"]

#: The sections of the JSON whose rows belong to one rank and depend on that rank's events alone.
PER_RANK_SECTIONS = (
    ("steps", "per_step"),
    ("steps", "per_rank"),
    ("steps", "found"),
    ("gpu_breakdown", "per_rank"),
    ("gpu_breakdown", "per_step"),
    ("host_breakdown", "per_rank"),
    ("host_breakdown", "per_step"),
    ("overlap", "per_rank"),
    ("overlap", "per_step"),
    ("dataloader", "per_rank"),
    ("dataloader", "per_step"),
    ("host_syncs", "per_rank"),
    ("host_syncs", "per_step"),
    ("idle_causes", "per_rank"),
    ("annotations", "per_rank"),
    ("memory", "per_device"),
)


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One malformed input and what tracekit may do with it.

    ``build(folder, source)`` writes the bad input into ``folder`` and returns the path to
    analyze. ``expect`` lists the acceptable outcomes (the preferred one first).
    """

    name: str
    build: Callable[[Path, Source], Path]
    expect: tuple[str, ...]
    source: str = "dlrm"
    #: the acceptable outcomes when mixed among good ranks, when they differ from ``expect``
    mixed_expect: tuple[str, ...] | None = None
    #: the family whose good ranks the bad file is mixed among (default: the source's, if it is one); "" for none
    family: str | None = None
    #: run in a subprocess with a timeout (special files that could hang or eat memory)
    process: bool = False
    #: mixed: pass the bad path as its own argument beside the folder, instead of inside it
    as_arg: bool = False
    #: the text that names the file in messages (default: the built path's file name)
    marker: str | None = None
    #: the file holds the same events as its source: its rank's numbers must equal a clean run's
    same_as_clean: bool = False
    #: also write (and check) the HTML report
    html: bool = False
    #: extra checks of the outputs (hostile names): called with the output and the problems
    check: Callable[[Output, Problems], None] | None = None
    #: analyze ``<(cat FILE)``: bash process substitution, a /dev/fd/N path
    procsub: bool = False
    #: a damaged cache: ``damage(cache_dir)`` runs after a first run has filled it
    damage: Callable[[Path], None] | None = None
    #: why the case cannot run here (checked at run time), e.g. root reads every file
    skip_reason: Callable[[], str | None] | None = None
    #: run in this mode only (when the other duplicates another case)
    only: Mode | None = None

    def __post_init__(self) -> None:
        unknown = (set(self.expect) | set(self.mixed_expect or ())) - set(OUTCOMES)
        assert not unknown, f"{self.name}: unknown outcomes {unknown}"

    @property
    def mixed_family(self) -> str | None:
        if self.family is not None:
            return self.family or None
        return self.source if self.source in FAMILIES else None

    def modes(self) -> tuple[Mode, ...]:
        modes: tuple[Mode, ...] = ("alone", "mixed") if self.mixed_family else ("alone",)
        return tuple(m for m in modes if self.only in (None, m))

    def expected(self, mode: Mode) -> set[str]:
        """The acceptable outcomes in ``mode``; alone, a skipped file is an error (nothing else to analyze)."""
        outcomes = self.mixed_expect if mode == "mixed" and self.mixed_expect is not None else self.expect
        return {"error" if mode == "alone" and o == "skipped" else o for o in outcomes}


class Problems:
    """The checks of one run that failed (collected, so that a run reports every one)."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def check(self, ok: object, text: str) -> None:
        if not ok:
            self.items.append(text)

    def __bool__(self) -> bool:
        return bool(self.items)


# --------------------------------------------------------------------------- judging


def per_rank(doc: Any, ranks: set[int]) -> dict[str, Any]:
    """The per-rank sections of a JSON report, rows of ``ranks`` only; sources as file names."""
    out: dict[str, Any] = {f"{section}.{part}": _rows(doc, section, part, ranks) for section, part in PER_RANK_SECTIONS}
    out["run.ranks"] = [
        {**r, "source": Path(str(r.get("source"))).name} for r in doc["run"]["ranks"] if r.get("rank") in ranks
    ]
    return out


def diff_per_rank(got: Any, want: Any, ranks: set[int]) -> list[str]:
    """Which per-rank sections differ between two reports, for ``ranks``."""
    a, b = per_rank(got, ranks), per_rank(want, ranks)
    return [f"{key} differs from the clean run" for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _names(text: str, marker: str) -> bool:
    """Whether ``text`` names ``marker`` (rich may wrap a line anywhere)."""
    return marker in text or _flat(marker) in _flat(text) or marker in "".join(text.split())


def _rank_of(doc: Any, marker: str) -> list[int]:
    return [r["rank"] for r in doc["run"]["ranks"] if marker in str(r.get("source"))]


def observe(out: Output, marker: str) -> str:  # noqa: PLR0911  (one return per outcome)
    """The outcome a run had: ok, warning, skipped, error; or what went wrong instead."""
    if out.code is None:
        return "hang"
    if "Traceback" in out.stdout or "Traceback" in out.stderr:
        return "traceback"
    if out.code == 2:
        return "error"
    if out.code != 0:
        return f"exit {out.code}"
    if out.doc is None:
        return "no JSON written"
    skipped = out.doc["run"]["skipped"]
    if any(marker in str(s.get("path")) for s in skipped):
        return "skipped"
    if not _rank_of(out.doc, marker):
        return "skipped under another name" if skipped else "ignored"
    if any(marker in str(w.get("path")) for w in out.doc["run"]["warnings"]):
        return "warning"
    return "ok"


def judge(
    case: Case,
    mode: Mode,
    out: Output,
    marker: str,
    *,
    baseline: Any = None,
    clean: Any = None,
    source_rank: int | None = None,
    good: set[int] | None = None,
) -> Problems:
    """Every check of ``out`` against what ``case`` expects in ``mode``.

    ``baseline`` is the clean report of the good ranks alone (mixed runs), ``clean`` the clean
    report with the unmutated source (rank ``source_rank`` in it), ``good`` the good ranks.
    """
    problems = Problems()
    seen = observe(out, marker)
    expect = case.expected(mode)
    head = (out.stderr.strip().splitlines() or [""])[-1][:300]
    problems.check(seen != "hang", "hang: no exit within the time limit")
    if seen == "traceback":
        problems.check(False, f"traceback: {_traceback_head(out)}")
    if seen not in expect and seen not in ("hang", "traceback"):
        what = f"outcome {seen!r} (exit {out.code}; stderr: {head!r}), expected {' or '.join(sorted(expect))}"
        if seen == "ok" and clean is not None and source_rank is not None:
            changes = silent_changes(out.doc, clean, marker, source_rank)
            what += f"; silently: {'; '.join(changes) or 'no per-rank number changed'}"
        problems.check(False, what)
    if out.code == 2:
        lines = out.stderr.strip().splitlines()
        problems.check(len(lines) == 1, f"stderr is {len(lines)} lines, not one: {out.stderr[:300]!r}")
        problems.check(lines and _names(lines[-1], marker), f"the error does not name {marker!r}: {head!r}")
    if out.code == 0 and out.doc is not None:
        _check_report(out, seen, marker, problems)
        if mode == "mixed" and baseline is not None and good is not None:
            present = {r["rank"] for r in out.doc["run"]["ranks"]}
            problems.check(good <= present, f"good ranks missing: {sorted(good - present)}")
            for item in diff_per_rank(out.doc, baseline, good):
                problems.check(False, f"good ranks changed: {item}")
        if case.same_as_clean and clean is not None and source_rank is not None and seen in ("ok", "warning"):
            changes = silent_changes(out.doc, clean, marker, source_rank)
            problems.check(not changes, f"the file's own numbers changed: {'; '.join(changes)}")
    if case.check is not None:
        case.check(out, problems)
    return problems


def silent_changes(got: Any, want: Any, marker: str, rank: int, *, limit: int = 4) -> list[str]:
    """What a file that passed without a word changed against its clean source: its rank, verdict, numbers."""
    mine = _rank_of(got, marker)
    out = [f"rank {rank} -> {mine[0]}"] if mine and mine[0] != rank else []
    verdicts = [
        f"{d['verdict']['primary'].get('bound') or d['verdict']['primary'].get('note')} "
        f"{d['verdict']['primary'].get('share_pct')}%"
        for d in (want, got)
    ]
    if verdicts[0] != verdicts[1]:
        out.append(f"verdict {verdicts[0]} -> {verdicts[1]}")
    for section, part in PER_RANK_SECTIONS:
        old = _rows(want, section, part, {rank})
        new = _rows(got, section, part, set(mine))
        if len(old) != len(new):
            out.append(f"{section}.{part}: {len(old)} rows -> {len(new)}")
            continue
        for a, b in zip(old, new, strict=True):
            changed = [k for k, v in a.items() if k != "rank" and isinstance(v, (int, float)) and b.get(k) != v]
            if changed:
                out.append(f"{section}.{part}.{changed[0]}: {a[changed[0]]} -> {b.get(changed[0])}")
                break
    return out[:limit]


def _rows(doc: Any, section: str, part: str, ranks: set[int]) -> list[dict[str, Any]]:
    value = doc.get(section)
    rows = value.get(part) if isinstance(value, dict) else None
    return [r for r in rows or [] if isinstance(r, dict) and r.get("rank") in ranks]


def _check_report(out: Output, seen: str, marker: str, problems: Problems) -> None:
    """A skip or warning about the file is in the JSON, the terminal output and the Markdown."""
    doc = out.doc
    if seen == "skipped":
        reasons = [s.get("reason") for s in doc["run"]["skipped"] if marker in str(s.get("path"))]
        problems.check(all(r and str(r).strip() for r in reasons), "a skipped file without a reason")
        problems.check(_names(out.stdout, marker), f"the terminal output does not name the skipped {marker!r}")
        problems.check(
            out.md is not None and _names(out.md, marker), f"the Markdown does not name the skipped {marker!r}"
        )
    if seen == "warning":
        warnings = [w for w in doc["run"]["warnings"] if marker in str(w.get("path"))]
        # what was wrong, not only that something was: a count (events left out) or the bad value
        # (a rank that is not a number), as figures of the warning
        figures = [{k: v for k, v in w.items() if k not in ("kind", "path")} for w in warnings]
        problems.check(any(figures), "the warning gives no figure (a count, or the value it ignored)")
        problems.check(_names(out.stdout, marker), f"the terminal output does not show the warning about {marker!r}")
        problems.check(
            out.md is not None and _names(out.md, marker), f"the Markdown does not show the warning about {marker!r}"
        )


def _traceback_head(out: Output) -> str:
    text = out.stderr if "Traceback" in out.stderr else out.stdout
    lines = text[text.index("Traceback") :].strip().splitlines()
    last = lines[-1] if lines else ""
    where = [ln.strip() for ln in lines if ln.strip().startswith("File ")][-1:] or [""]
    return f"{last[:200]} ({where[0][:160]})"
