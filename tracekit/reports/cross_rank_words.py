"""What the reports say about matching collectives across ranks: steps that do not align, and
the ranks' clock offsets with how far lateness can be measured."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.reports.wording import ms

if TYPE_CHECKING:
    from tracekit.results.analysis import CollectivesSection
    from tracekit.results.rows import ClockOffset, MisalignedStep

#: The steps listed by name in one note at most (the JSON lists them all).
_SHOWN: Final = 5


def _step(m: MisalignedStep) -> str:
    where = "outside every step" if m.step is None else f"step {m.step}"
    held = ", ".join(f"rank {r}: {n}" for r, n in zip(m.ranks, m.counts, strict=True))
    return f"{where} ({m.op} in group {m.pg or '-'}: {held})"


def _steps(numbers: list[int]) -> str:
    """``[1, 2, 3, 6]`` as ``steps 1-3, 6``."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    listed = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
    return f"step{'s' if len(numbers) > 1 else ''} {listed}"


def _off(rows: list[MisalignedStep]) -> list[str]:
    """The steps of ranks whose windows are off the others' (one entry per rank, group and operation)."""
    by: dict[tuple[str, str, str, int], list[int]] = {}
    for m in rows:
        if m.offset_ns is not None and m.step is not None:
            key = (", ".join(map(str, m.ranks)), m.pg, m.op, m.offset_ns)
            by.setdefault(key, []).append(m.step)
    return [
        f"{_steps(steps)} of rank {ranks} ({op} in group {pg or '-'}: its step windows are {offset / 1e6:+.2f} ms "
        "off the others', not a whole number of steps)"
        for (ranks, pg, op, offset), steps in by.items()
    ]


def alignment_note(c: CollectivesSection) -> str:
    """Steps whose collectives the ranks hold in different counts, or whose windows are off, or ''."""
    if not c.misaligned:
        return ""
    listed = [*(_step(m) for m in c.misaligned if m.offset_ns is None), *_off(c.misaligned)]
    shown = "; ".join(listed[:_SHOWN])
    more = f"; and {len(listed) - _SHOWN} more (in the JSON)" if len(listed) > _SHOWN else ""
    return f"Ranks' windows do not align: cross-rank figures skipped for {shown}{more}."


def _host(k: ClockOffset) -> str:
    return f" (host {k.host})" if k.host else ""


def hosts_note(c: CollectivesSection) -> str:
    """The hosts the ranks' traces record, where they are more than one (each host one clock), or ''."""
    hosts: dict[str, list[int]] = {}
    for k in c.clocks:
        if k.host:
            hosts.setdefault(k.host, []).append(k.rank)
    if len(hosts) < 2:
        return ""
    listed = "; ".join(f"{h}: ranks {', '.join(map(str, ranks))}" for h, ranks in sorted(hosts.items())[:_SHOWN])
    more = f"; and {len(hosts) - _SHOWN} more hosts" if len(hosts) > _SHOWN else ""
    return f"Ranks on {len(hosts)} hosts, one clock each ({listed}{more})."


def clock_note(c: CollectivesSection) -> str:
    """The hosts, the clock offsets corrected, and the lateness below which nothing is named, or ''."""
    parts = [hosts_note(c)] if hosts_note(c) else []
    corrected = [k for k in c.clocks if k.corrected]
    if corrected:
        offsets = ", ".join(
            f"rank {k.rank}{_host(k)} {k.offset_ns / 1e6:+.2f} ms ± {ms(k.uncertainty_ns)}" for k in corrected
        )
        parts.append(f"Clock offsets estimated from the collectives' ends and corrected: {offsets}.")
    tolerance = max((i.tolerance_ns or 0 for i in c.instances if i.matched), default=0)
    if tolerance > 0:
        parts.append(
            f"Ranks' clocks may differ by up to {ms(tolerance)} (from where their collectives end): "
            "lateness below that is not measurable and is not named."
        )
    return " ".join(parts)


def cross_rank_notes(c: CollectivesSection) -> str:
    """Both notes, each a sentence or two (a leading space when any)."""
    text = " ".join(n for n in (alignment_note(c), clock_note(c)) if n)
    return f" {text}" if text else ""
