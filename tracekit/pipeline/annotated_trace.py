"""The annotated trace: the input trace with tracekit's findings added as tracks of their own
(``tracekit analyze --annotated-trace FILE``), to open in Perfetto or chrome://tracing.

The original events are copied from each rank's file, not re-built from the decoded columns:

- one rank: every event is copied byte for byte, and so is every other field of the document
  (``distributedInfo``, ``deviceProperties``, ...), so tracekit reads the file back as the
  same rank with the same numbers;
- several ranks: each rank is one process, ``pid`` = rank (a Kineto file's pids are its OS
  process and its GPUs' device ids, which collide between ranks): each event is copied with its
  ``pid`` rewritten and nothing else changed, and the ranks' own process names are replaced by
  ``rank N``.

Findings (:mod:`tracekit.pipeline.finding_tracks`) are complete events (``"ph": "X"``, ``ts``
and ``dur`` in microseconds on the trace's own clock) of category
:data:`~tracekit.readers.kineto_normalize.FINDINGS_CATEGORY`, which tracekit's reader skips, in
the rank's process on thread ids above every thread id of the rank; slices of a track that
overlap go to further lanes (threads), so that each thread's slices are ordered and disjoint.
Every process and thread used is named by metadata events. Files are read one at a time: memory
holds one rank's file and its findings. The document begins with the field
:data:`~tracekit.readers.own_outputs.FINDINGS_FIELD`, by which a folder's discovery tells the
annotated trace from the traces beside it and leaves it out.
"""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from tracekit.analyzers.shared import STEPS
from tracekit.atomic import write_atomically
from tracekit.errors import InputError
from tracekit.pipeline.finding_tracks import SLICE, Track, finding_tracks
from tracekit.readers.compressed import read_bytes
from tracekit.readers.discover import discover_files
from tracekit.readers.formats import format_of
from tracekit.readers.kineto import CLOCK
from tracekit.readers.kineto_normalize import FINDINGS_CATEGORY
from tracekit.readers.own_outputs import FINDINGS_FIELD, ONE_RANK_LAYOUT, RANKS_LAYOUT

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from tracekit.analyzers.analysis import Outcome
    from tracekit.analyzers.mapreduce import Reduced

#: The process metadata of a rank's file that an annotated trace of several ranks replaces.
PROCESS_METADATA: Final = frozenset({"process_name", "process_labels", "process_sort_index"})
#: Where the findings' threads sort among a process's threads (Kineto sorts threads by tid).
FINDINGS_SORT_INDEX: Final = -1000
_ENCODER: Final = msgspec.json.Encoder()
#: The name of the input format whose files an annotated trace copies.
KINETO: Final = "kineto"


class _Ids(msgspec.Struct, gc=False):
    """What the writer needs to know of an original event: its phase, name, process and thread."""

    ph: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None


class _IdDocument(msgspec.Struct):
    traceEvents: list[_Ids] = msgspec.field(default_factory=list)


def write_annotated_trace(outcome: Outcome, path: str | Path) -> None:
    """Write the traces ``outcome`` analyzed, with its findings as tracks, to ``path`` (Chrome
    Trace Event JSON; gzip-compressed where ``path`` ends in ``.gz``), atomically.

    Raises :class:`~tracekit.errors.InputError` for inputs other than Kineto traces, and
    ValueError for an outcome that left its GPU idle intervals where the ranks were analyzed.
    """
    if not outcome.details_kept:
        raise ValueError("an annotated trace draws every GPU idle interval: analyze with AnalyzeOptions(details=True)")
    red = outcome.frames
    sources = rank_sources(red)
    tracks = finding_tracks(red)
    main_pids = _main_pids(red)
    packed = str(path).lower().endswith(".gz")
    write_atomically(path, lambda temp: _write(temp, sources, tracks, main_pids, packed=packed))


def check_annotatable(paths: Sequence[str | Path]) -> None:
    """Refuse, before any analysis, inputs an annotated trace cannot be written from (an
    :class:`~tracekit.errors.InputError` naming the first file that is not a Kineto trace)."""
    files, _ = discover_files(paths)
    for path in files:
        fmt = format_of(path)
        if fmt.name != KINETO:
            raise InputError(_refusal(fmt.name), path=path)


def _refusal(name: str) -> str:
    return (
        f"--annotated-trace is written from Kineto (torch.profiler) traces only, not from this {name} "
        "input (open it in Nsight Systems instead)"
    )


def rank_sources(red: Reduced) -> list[tuple[int, Path]]:
    """Each analyzed rank and its Kineto file, by rank; an input of another format is an error."""
    sources = []
    for info in sorted(red.run_meta.ranks, key=lambda i: i.rank):
        if info.clock.startswith("memory timeline"):
            continue
        if info.clock != CLOCK:
            raise InputError(_refusal(info.clock.split(":")[0]), path=info.source)
        sources.append((info.rank, Path(info.source)))
    if not sources:
        raise InputError("--annotated-trace needs trace events; these inputs hold memory timelines only")
    return sources


def _main_pids(red: Reduced) -> dict[int, int]:
    """The process of each rank's steps (where its findings go in a one-rank trace)."""
    found = red.result(STEPS).how_found
    if found.height == 0 or "pid" not in found.columns:
        return {}
    rows = found.select("rank", "pid").drop_nulls().iter_rows()
    return {int(rank): int(pid) for rank, pid in rows}


def _write(
    temp: Path, sources: Sequence[tuple[int, Path]], tracks: list[Track], main_pids: dict[int, int], *, packed: bool
) -> None:
    """Write the annotated trace to ``temp`` (gzip-compressed when ``packed``)."""
    single = len(sources) == 1
    with gzip.open(temp, "wb", compresslevel=6) if packed else temp.open("wb") as out:
        # the findings field first: discovery tells tracekit's annotated traces by their start (own_outputs)
        out.write(b'{"displayTimeUnit":"ms",')
        out.write(_ENCODER.encode(FINDINGS_FIELD) + b":" + _ENCODER.encode(_summary(tracks, single=single)))
        separator = b',"traceEvents":['
        for rank, source in sources:
            fields, events, ids = _read(source)
            if single:  # the document's other fields, as they were
                head = b"".join(b"," + _ENCODER.encode(k) + b":" + bytes(v) for k, v in fields.items())
                out.write(head)
            out.write(separator)
            separator = b","
            written = _originals(out.write, events, rank=None if single else rank)
            del events
            pid = rank if not single else main_pids.get(rank, _busiest_pid(ids, rank))
            for n, event in enumerate(_added(ids, tracks, rank=rank, pid=pid, single=single)):
                out.write(b"," if written or n else b"")
                out.write(_ENCODER.encode(event))
            del ids
        if separator != b",":
            out.write(separator)
        out.write(b"]}")


def _read(source: Path) -> tuple[dict[str, msgspec.Raw], list[msgspec.Raw], list[_Ids]]:
    """A Kineto file's fields besides its events (raw), its events (raw) and what identifies them."""
    data = read_bytes(source)
    try:
        document = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
        raw = document.pop("traceEvents", msgspec.Raw(b"[]"))
        events = msgspec.json.decode(raw, type=list[msgspec.Raw])
        ids = msgspec.json.decode(b'{"traceEvents":' + bytes(raw) + b"}", type=_IdDocument).traceEvents
    except msgspec.DecodeError as exc:
        raise InputError(f"cannot copy its events into the annotated trace: {exc}", path=source) from None
    for key in ("displayTimeUnit", FINDINGS_FIELD):
        document.pop(key, None)
    return document, events, ids


def _originals(write: Callable[[bytes], object], events: list[msgspec.Raw], *, rank: int | None) -> bool:
    """Copy a rank's events: as they are (``rank`` None), or in process ``rank`` without their
    own process metadata. Whether any was written."""
    written = False
    for raw in events:
        if rank is None:
            text = bytes(raw)
        else:
            event = msgspec.json.decode(raw)
            if not isinstance(event, dict):
                text = bytes(raw)
            elif event.get("ph") == "M" and event.get("name") in PROCESS_METADATA:
                continue
            else:
                event["pid"] = rank
                text = _ENCODER.encode(event)
        write(b"," + text if written else text)
        written = True
    return written


def _busiest_pid(ids: list[_Ids], rank: int) -> int:
    """The process with the most events among the integer pids (``rank`` where there is none)."""
    counts = Counter(e.pid for e in ids if isinstance(e.pid, int) and not isinstance(e.pid, bool))
    return counts.most_common(1)[0][0] if counts else rank


def _added(ids: list[_Ids], tracks: list[Track], *, rank: int, pid: int, single: bool) -> Iterator[dict[str, Any]]:
    """The events added for ``rank``: process and thread names the trace lacks, then each
    track's lanes, named, with their slices in time order."""

    def where(e: _Ids) -> Any:
        return e.pid if single else rank

    names = {(where(e), e.tid) for e in ids if e.ph == "M" and e.name == "thread_name"}
    named_pids = {where(e) for e in ids if e.ph == "M" and e.name == "process_name"} if single else set()
    used = {(where(e), e.tid) for e in ids if e.ph in ("X", "B", "E", "i", "I") and e.tid not in (None, "")}
    if not single:
        yield _meta("process_name", pid, None, name=f"rank {rank}")
        yield _meta("process_sort_index", pid, None, sort_index=rank)
    for p in sorted({p for p, _ in used} - named_pids, key=str):
        if single:
            yield _meta("process_name", p, None, name=f"rank {rank}" if p == pid else f"process {p}")
    for p, t in sorted(used - names, key=str):
        yield _meta("thread_name", p, t, name=f"thread {t}")
    tids = [t for p, t in used | names if p == pid and isinstance(t, int) and not isinstance(t, bool)]
    next_tid = max([0, *tids]) + 1
    order = 0
    for track in tracks:
        rows = track.slices.filter(rank=rank)
        if rows.height == 0:
            continue
        total = track.totals.filter(rank=rank)["total"].item()
        lanes = _lanes(rows["start_ns"].to_list(), rows["end_ns"].to_list())
        count = max(lanes) + 1
        title = f"tracekit: {track.title}"
        if total > rows.height:
            title += f" (longest {rows.height} of {total})"
        for lane in range(count):
            name = title if count == 1 else f"{title} [{lane + 1}/{count}]"
            yield _meta("thread_name", pid, next_tid + lane, name=name)
            yield _meta("thread_sort_index", pid, next_tid + lane, sort_index=FINDINGS_SORT_INDEX + order)
            order += 1
        for row, lane in zip(rows.iter_rows(named=True), lanes, strict=True):
            yield _slice(row, pid=pid, tid=next_tid + lane, track=track.key)
        next_tid += count


def _lanes(starts: list[int], ends: list[int]) -> list[int]:
    """The lane of each slice (sorted by start): the first whose last slice ended by its start."""
    last_end: list[int] = []
    out = []
    for start, end in zip(starts, ends, strict=True):
        lane = next((i for i, e in enumerate(last_end) if e <= start), len(last_end))
        if lane == len(last_end):
            last_end.append(end)
        else:
            last_end[lane] = end
        out.append(lane)
    return out


def _slice(row: dict[str, Any], *, pid: int, tid: int, track: str) -> dict[str, Any]:
    """A complete event of one finding; its numbers (ns, counts) and words in ``args``."""
    start, end = int(row["start_ns"]), int(row["end_ns"])
    args = {k: v for k, v in row.items() if k not in SLICE and v is not None}
    args = {"track": track, "rank": row["rank"], "start_ns": start, "end_ns": end, **args}
    return {
        "ph": "X",
        "cat": FINDINGS_CATEGORY,
        "name": row["name"],
        "pid": pid,
        "tid": tid,
        "ts": start / 1000,
        "dur": max(end - start, 0) / 1000,
        "args": args,
    }


def _meta(kind: str, pid: Any, tid: Any, **args: Any) -> dict[str, Any]:
    """A metadata event (``tid`` None: of the process)."""
    return {"ph": "M", "name": kind, "pid": pid, "tid": 0 if tid is None else tid, "args": args}


def _summary(tracks: list[Track], *, single: bool) -> dict[str, Any]:
    """What the annotated trace's findings are, and which tracks kept only their longest slices."""
    capped = [
        {"track": t.key, "rank": rank, "kept": kept, "total": total}
        for t in tracks
        for rank, total, kept in t.totals.join(
            t.slices.group_by("rank").len(name="kept"), on="rank", how="left"
        ).iter_rows()
        if total > kept
    ]
    return {
        "category": FINDINGS_CATEGORY,
        "layout": ONE_RANK_LAYOUT if single else RANKS_LAYOUT,
        "tracks": {t.key: t.title for t in tracks},
        "capped": capped,
    }
