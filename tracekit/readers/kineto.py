"""Read one Kineto (torch.profiler) Chrome trace, ``.json`` or ``.json.gz``, into columns.

A file is read in chunks of events (:mod:`tracekit.readers.kineto_stream`) where the native
decoder was built, else from :data:`CHUNKED_MIN_BYTES` up; each chunk decoded by the native decoder
(:mod:`tracekit.readers.kineto_native`), or by msgspec's typed decoder
(:mod:`tracekit.readers.kineto_decode`) where that declines or was not built, and kept only
as its prepared columns (:func:`~tracekit.readers.kineto_normalize.prepare`): memory holds a
few chunks of text and the columns analyses read, not the whole file. With ``jobs`` above
one, the chunks are decoded in ``jobs + 1`` threads (the native decoder releases the GIL)
while this one reads and inflates the next; without the native decoder, a file of at least
:data:`PARALLEL_MIN_BYTES` has them decoded in that many processes. Else the next chunk is
read in a thread while one is decoded.
A chunk that the typed decoder rejects (text where an int belongs: AMD's ``"bytes": "128"``)
is decoded leniently, alone, as the whole file would be. The last events, before the fields
that end the document, are decoded natively too (:func:`_tail_events`): the whole of a file
smaller than a chunk (a 4 MB rank in half the CPU msgspec and its structs take). Files laid
out otherwise or whose entries even the lenient decoder rejects, and small files without the
native decoder, are decoded whole. Both ways give the same frames
(:func:`~tracekit.readers.kineto_normalize.finish`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeGuard

import msgspec
import polars as pl

from tracekit.errors import TraceReadError
from tracekit.heap import trim_heap
from tracekit.model.input_warnings import InputWarning
from tracekit.model.run import ProcessGroup
from tracekit.pools import WorkerPool
from tracekit.readers import kineto_native
from tracekit.readers.compressed import GZIP_ERRORS, data_bytes, read_bytes
from tracekit.readers.handoff import Slots, read_slot
from tracekit.readers.hosts import host_of
from tracekit.readers.kinds import Pieces
from tracekit.readers.kineto_decode import (
    ANY_DECODER,
    DECODER,
    EVENTS_DECODER,
    HEAD_DECODER,
    LOOSE_DECODER,
    LOOSE_EVENTS_DECODER,
    LOOSE_TAIL_DECODER,
    TAIL_DECODER,
    LooseEvent,
    LooseTrace,
    raw_frames,
)
from tracekit.readers.kineto_native import native_frames, native_prefix
from tracekit.readers.kineto_normalize import finish, prepare
from tracekit.readers.kineto_stream import NotChunked, Piece, open_text, prefetched, split_events
from tracekit.readers.ranks import is_rank
from tracekit.readers.trace import RankTrace

if TYPE_CHECKING:
    import mmap
    from collections.abc import Callable

#: The clock of every Kineto trace, as :class:`RankTrace` reports it.
CLOCK: Final = "kineto: host clock, us -> ns"
#: Files of at least this many bytes of JSON are read in chunks where the native decoder is
#: not there (with it, every file is: its events decoded natively).
CHUNKED_MIN_BYTES: Final = 32 * 1024 * 1024
#: The bytes of JSON text in a chunk, at most: each costs 4 to 6 ms of fixed work (building its
#: frames, planning its preparation), 0.6 s of CPU over 2 GB in chunks of 16 MiB, 0.8 in 12,
#: 1.2 in 8. The chunks in flight at the end of a file's decoding, beside its pieces, are its
#: read's peak: a 2 GB A100 rank's 491 MB live in chunks of 16 MiB, 467 in 12 (DLRM's 569,
#: 541); in 8, 420 where 12 gave 451 the same minute (the read alone, in one process).
CHUNK_BYTES: Final = 8 * 1024 * 1024
#: ... and at least (files from 256 MiB up have chunks of the largest size).
MIN_CHUNK_BYTES: Final = 4 * 1024 * 1024
#: A file's chunks, about, between those sizes: what is in flight while a file is read (two
#: chunks' text and one's decoded columns) is a chunk's worth, so smaller chunks bound a
#: worker's peak; their fixed cost bounds how small. On 8 ranks of 125 MB (a worker each at
#: a time) the process tree's peak went from 675-685 MB in chunks of 16 MiB to 589-617 in 4,
#: for 0.07 s more CPU a file; on one rank of 2 GB, 4 MiB chunks took 25% longer to read.
CHUNKS_PER_FILE: Final = 32
#: Files of at least this many bytes of JSON have their chunks decoded in ``jobs`` processes
#: (starting them costs about a second) where msgspec decodes them; the native decoder
#: decodes the chunks of any file read in chunks in ``jobs`` threads.
PARALLEL_MIN_BYTES: Final = 256 * 1024 * 1024
#: What makes a file unfit for reading in chunks: it is then read whole, which says why.
_NOT_CHUNKED: Final[tuple[type[BaseException], ...]] = (
    NotChunked,
    msgspec.MsgspecError,
    OSError,
    *GZIP_ERRORS,
    pl.exceptions.PolarsError,
    BrokenProcessPool,
)


def read(path: Path, *, cache_root: Path | None = None, jobs: int = 1) -> list[RankTrace]:
    """The registry's reader (:mod:`tracekit.readers.formats`): one Kineto file is one rank."""
    del cache_root  # nothing to keep on the way
    return [read_kineto(path, jobs=jobs)]


def read_kineto(path: str | Path, *, chunk_bytes: int | None = None, jobs: int = 1) -> RankTrace:
    """Decode one Kineto trace file into the event schema (without ``rank``).

    ``chunk_bytes``: read in chunks of this many bytes of JSON whatever the file's size
    (default: :func:`chunk_size` for every file where the native decoder is there, else for files
    of :data:`CHUNKED_MIN_BYTES` or more); ``jobs``:
    threads that decode the chunks natively, else processes for a file of
    :data:`PARALLEL_MIN_BYTES` or more.
    """
    path = Path(path)
    size = data_bytes(path)
    if chunk_bytes is None and (size >= CHUNKED_MIN_BYTES or kineto_native.ENABLED):
        chunk_bytes = chunk_size(size)
    if chunk_bytes is not None:
        # threads cost nothing to start; processes about a second
        parallel = kineto_native.ENABLED or size >= PARALLEL_MIN_BYTES
        workers = min(jobs, -(-size // chunk_bytes)) if parallel else 1
        trace = read_chunked(path, chunk_bytes=chunk_bytes, jobs=workers, size=size)
        if trace is not None:
            return trace
    return _read_whole(path)


#: The heap is trimmed (:func:`~tracekit.heap.trim_heap`) after every so many chunks kept: what
#: the chunks' text and the decoder's arrays left free is given back while the pieces grow
#: among it (trimmed once, at the end, a 2 GB rank's analysis began 20 MB higher).
TRIM_CHUNKS: Final = 8


def chunk_size(size: int) -> int:
    """The bytes of JSON in each chunk of a file of ``size`` bytes: about a
    :data:`CHUNKS_PER_FILE`-th of it, from :data:`MIN_CHUNK_BYTES` to :data:`CHUNK_BYTES`."""
    return max(MIN_CHUNK_BYTES, min(CHUNK_BYTES, size // CHUNKS_PER_FILE))


#: What decoding a chunk of events gives: its prepared columns and its ``[memory]`` instants.
Chunk = tuple[pl.DataFrame, "pl.DataFrame | None"]


def decode_chunk(text: bytes | mmap.mmap) -> Chunk:
    """The prepared columns of the events in ``text`` (a JSON array), and their ``[memory]``
    instants; raises :class:`msgspec.MsgspecError` where the chunk is no list of events the
    typed decoder accepts."""
    frames = native_frames(text)
    if frames is None:
        try:
            frames = raw_frames(EVENTS_DECODER.decode(text))
        except msgspec.ValidationError:  # text where an int belongs, say: this chunk alone is read leniently
            frames = raw_frames(LOOSE_EVENTS_DECODER.decode(text))
    raw, memory = frames
    return prepare(raw), memory


def decode_slot(path: str, size: int, out: str) -> pl.DataFrame | None:
    """:func:`decode_chunk` of the text in a slot file (:mod:`tracekit.readers.handoff`), mapped:
    its prepared columns are written to the file ``out`` (read back by :func:`_slot_chunk`,
    with no copy through a pipe), its ``[memory]`` instants returned."""
    prepared, memory = read_slot(path, size, decode_chunk)
    prepared.write_ipc(out, compression="uncompressed")
    return memory


def _slot_chunk(future: Future[pl.DataFrame | None], out: Path, slots: Slots, slot: Path) -> Chunk:
    """What :func:`decode_slot` made of a chunk, its file removed and its slot given back."""
    memory = future.result()
    slots.release(slot)
    prepared = pl.read_ipc(out)
    out.unlink()
    return prepared, memory


def read_chunked(path: Path, *, chunk_bytes: int, jobs: int = 1, size: int | None = None) -> RankTrace | None:
    """``path`` read in chunks of ``chunk_bytes`` of JSON, decoded in ``jobs + 1`` threads (the
    native decoder, which releases the GIL), else ``jobs`` processes (msgspec, which holds
    it), or in this thread when ``jobs`` is 1; None when it must be read whole. ``size``: its
    bytes of JSON (:func:`~tracekit.sizes.data_bytes`), when already known.

    A file of one chunk (all tail) is read with no thread reading ahead (its text would come
    from that thread's arena of the C heap, which 1,024 small ranks left 160 MB larger) and the
    heap is not trimmed after it (its few MB stay for the next file: given back and faulted in
    again, they cost a 3 MB rank a third of its read in the system's time)."""
    # each chunk split by kind as it comes: the file's events are never held as one frame
    kinds, memory = Pieces(), []
    fields: list[Any] = []

    def keep(chunk: Chunk) -> None:
        kinds.add(chunk[0])
        if chunk[1] is not None:
            memory.append(chunk[1])
        if next(kept) % TRIM_CHUNKS == 0:
            trim_heap()

    kept = itertools.count(1)

    processes = jobs > 1 and not kineto_native.ENABLED
    several = (data_bytes(path) if size is None else size) > chunk_bytes
    try:
        with contextlib.ExitStack() as stack:
            # the events go straight from the read buffer to a slot (views) when processes decode them
            pieces = split_events(stack.enter_context(open_text(path)), chunk_bytes=chunk_bytes, views=processes)
            if jobs == 1 and several:  # read the next chunk in a thread; stopped before the file is closed
                pieces = stack.enter_context(contextlib.closing(prefetched(pieces)))
            submit, in_flight = _decoders(stack, jobs=jobs, chunk_bytes=chunk_bytes, processes=processes)
            pending: deque[Callable[[], Chunk]] = deque()
            for piece in pieces:
                if piece.kind == "head":
                    fields.append(HEAD_DECODER.decode(piece.text + b"]}"))
                elif piece.kind == "tail":
                    last, rest = _tail_events(piece.text)
                    tail = _decode_tail(b'{"traceEvents":[' + rest)
                    fields.insert(0, tail)  # the fields after the events come last in the document
                    if last is None:
                        raw, mem = raw_frames(tail.traceEvents)
                        last = (prepare(raw), mem)
                    tail_chunk = last
                else:
                    pending.append(submit(piece))
                while len(pending) > in_flight:  # a chunk in each worker, the next being read: no more text held
                    keep(pending.popleft()())
            while pending:
                keep(pending.popleft()())
            keep(tail_chunk)
    except _NOT_CHUNKED:
        return None
    finally:
        if several:  # what the chunks' text and the decoder's arrays left free in the C heap
            trim_heap()
    info, props, version, host = (_first(fields, name) for name in _FIELDS)
    return _rank_trace(path, kinds, memory, info=info, props=props, version=version, host=host, notes=())


def _decoders(
    stack: contextlib.ExitStack, *, jobs: int, chunk_bytes: int, processes: bool
) -> tuple[Callable[[Piece], Callable[[], Chunk]], int]:
    """How the chunks of events are decoded: a function that takes one and gives what to call
    for its columns, and how many may be on their way at once (the workers are shut down with
    ``stack``)."""
    if jobs == 1:
        return lambda piece: functools.partial(_done, decode_chunk(piece.text)), 0
    if not processes:  # this thread reads and inflates (releasing the GIL) while they decode
        # one thread more than cores: the cores stay busy while a thread holds the GIL
        # (2 GB on 2 cores: 2.9 s to read, against 3.2 s with two threads)
        threads = stack.enter_context(ThreadPoolExecutor(jobs + 1, thread_name_prefix="tracekit-decode"))
        stack.callback(threads.shutdown, wait=True, cancel_futures=True)
        return lambda piece: threads.submit(decode_chunk, piece.text).result, jobs + 1
    # the chunks go to the processes through files in memory
    slots = stack.enter_context(Slots(jobs + 1, chunk_bytes=chunk_bytes))
    pool = stack.enter_context(WorkerPool(jobs))
    stack.callback(pool.close)
    names = itertools.count()

    def submit(piece: Piece) -> Callable[[], Chunk]:
        slot = slots.put(*piece.parts)  # before the next piece: its view is valid until then
        out = slot.with_name(f"{next(names)}.ipc")  # a name of its own: never read twice
        future = pool.submit(decode_slot, str(slot), piece.size, str(out))
        return functools.partial(_slot_chunk, future, out, slots, slot)

    return submit, jobs


def _tail_events(text: bytes) -> tuple[Chunk | None, bytes]:
    """The last events of a document (``text``: its tail, from the ``{`` of an event), decoded
    natively, and the text after them (from the ``]`` that ends their list); else None and the
    whole tail (msgspec then decodes it all, events and fields, as it does where the native
    decoder declines or was not built). A small file is all tail: its events are decoded
    natively this way too."""
    found = native_prefix(b"[" + text)
    if found is None:
        return None, text
    (raw, memory), read = found
    return (prepare(raw), memory), text[read - 2 :]  # read: the bytes up to ``]``, ``[`` counted


def _decode_tail(text: bytes) -> Any:
    """The last events and the fields after them: typed, else leniently (as :func:`decode_chunk`)."""
    try:
        return TAIL_DECODER.decode(text)
    except msgspec.ValidationError:
        return LOOSE_TAIL_DECODER.decode(text)


def _done(chunk: Chunk) -> Chunk:
    return chunk


#: The fields of a document besides its events, that a rank trace records.
_FIELDS: Final = ("distributedInfo", "deviceProperties", "schemaVersion", "host_name")


def _first(fields: list[Any], name: str) -> Any:
    """The field ``name`` of the first of ``fields`` that has it (not null)."""
    return next((getattr(f, name) for f in fields if getattr(f, name) is not None), None)


def _read_whole(path: Path) -> RankTrace:
    """``path`` decoded in one piece (leniently when the typed decoder rejects it)."""
    data = utf8(read_bytes(path), path)
    notes: tuple[InputWarning, ...] = ()
    try:
        trace: Any = DECODER.decode(data)
    except msgspec.ValidationError:
        trace, notes = _decode_loose(data, path)
    except msgspec.DecodeError as exc:
        raise TraceReadError(_json_problem(exc), path=path) from None
    del data
    if isinstance(trace, list):
        raw_events, info, props, version, host = trace, None, None, None, None
    else:
        raw_events, info, props = trace.traceEvents, trace.distributedInfo, trace.deviceProperties
        version, host = trace.schemaVersion, trace.host_name
    del trace
    raw, memory = raw_frames(raw_events)
    del raw_events
    mem = [memory] if memory is not None else []
    kinds = Pieces()
    kinds.add(prepare(raw))
    del raw
    return _rank_trace(path, kinds, mem, info=info, props=props, version=version, host=host, notes=notes)


def _rank_trace(
    path: Path,
    kinds: Pieces,
    memory: list[pl.DataFrame],
    *,
    info: Any,
    props: Any,
    version: Any,
    host: Any,
    notes: tuple[InputWarning, ...],
) -> RankTrace:
    """The rank trace of ``path`` from its prepared chunks (split by kind) and the fields of its document."""
    info = info if isinstance(info, dict) else {}
    props = props if isinstance(props, list) else []
    events, counters, dropped, unread = finish(kinds, memory)
    rank, rank_problem = _distributed_int(info, "rank", lowest=0)
    world_size, world_problem = _distributed_int(info, "world_size", lowest=1)
    problems = tuple(p for p in (rank_problem, world_problem) if p is not None)
    return RankTrace(
        path=str(path),
        held=events,
        counters=counters,
        rank=rank,
        world_size=world_size,
        backend=str(info["backend"]) if info.get("backend") else None,
        devices=tuple(dict.fromkeys(str(p["name"]) for p in props if isinstance(p, dict) and p.get("name"))),
        schema_version=None if version is None else str(version),
        clock=CLOCK,
        process_groups=process_groups(info.get("pg_config")),
        warnings=problems + notes + dropped.warnings() + unread,
        device_memory=device_memory(props),
        host=host_of(path, host, events),
    )


#: Byte-order marks -> the encoding they announce, whose decoder reads the mark (UTF-32 first:
#: its little-endian mark starts like UTF-16's).
_BOMS: Final = (
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xfe\xff", "utf-16"),
    (b"\xff\xfe", "utf-16"),
)


def utf8(data: bytes, path: Path) -> bytes:
    """JSON text as UTF-8: a byte-order mark is dropped, UTF-16 and UTF-32 text re-encoded.

    JSON is UTF-8 (RFC 8259), but editors on Windows save it with a BOM or as UTF-16; such a
    file is still the trace it was. Without a BOM, UTF-16 shows as a NUL byte beside the
    first character.
    """
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), None)
    if encoding is None and len(data) >= 2 and b"\x00" in data[:2]:
        encoding = "utf-16-le" if data[1] == 0 else "utf-16-be"
    if encoding is None:
        return data
    if encoding == "utf-8-sig":
        return data[3:]
    try:
        return data.decode(encoding).encode()
    except UnicodeError:
        raise TraceReadError(f"not valid {encoding.upper()} text (the file starts like one)", path=path) from None


def device_memory(props: list[Any]) -> tuple[tuple[int, int], ...]:
    """(id, ``totalGlobalMem``) of each entry of ``deviceProperties`` that has both as integers
    (a device's capacity, positive); others are left out."""
    out: dict[int, int] = {}
    for p in props:
        if not isinstance(p, dict):
            continue
        device, total = p.get("id"), p.get("totalGlobalMem")
        if _is_count(device) and _is_count(total) and total > 0:
            out.setdefault(device, total)
    return tuple(out.items())


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def process_groups(config: Any) -> tuple[ProcessGroup, ...]:
    """The groups of ``distributedInfo.pg_config`` (a list of ``{pg_name, ranks, pg_desc}``).

    Entries without a name or with ranks that are not integers are left out.
    """
    if not isinstance(config, list):
        return ()
    groups = []
    for entry in config:
        if not isinstance(entry, dict) or entry.get("pg_name") is None or not isinstance(entry.get("ranks"), list):
            continue
        ranks = entry["ranks"]
        if not all(is_rank(r) for r in ranks):
            continue
        desc = entry.get("pg_desc")
        groups.append(
            ProcessGroup(
                name=str(entry["pg_name"]),
                ranks=tuple(ranks),
                description=str(desc) if desc is not None else "",
            )
        )
    return tuple(groups)


def _decode_loose(data: bytes, path: Path) -> tuple[Any, tuple[InputWarning, ...]]:
    """The trace decoded leniently (any JSON type in any field), and what had to be left out.

    When even that fails (an entry of ``traceEvents`` that is not an object, ``args`` that
    are not one), every entry is salvaged on its own: such entries are left out and counted,
    such ``args`` are read as none, and the rest of the file is still the trace it was.
    """
    try:
        return LOOSE_DECODER.decode(data), ()
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise TraceReadError(_json_problem(exc), path=path) from None
    try:
        trace = ANY_DECODER.decode(data)
    except msgspec.ValidationError as exc:
        if "out of range" in str(exc):  # a number no decoder holds (thousands of digits): say where
            where = str(exc).rpartition(" - at ")[2].strip("`") or "the document"
            raise TraceReadError(f"a number at {where} is out of any range a trace's values have", path=path) from None
        raise TraceReadError(
            "not a Kineto trace: a JSON document without a traceEvents list of events", path=path
        ) from None
    except msgspec.DecodeError as exc:  # the lenient decoder stopped at a type before a syntax error
        raise TraceReadError(_json_problem(exc), path=path) from None
    items = trace if isinstance(trace, list) else trace.traceEvents
    events, not_events, bad_args = _salvage(items)
    notes = []
    if not_events:
        notes.append(InputWarning(kind="not_events", count=not_events))
    if bad_args:
        notes.append(InputWarning(kind="bad_args", count=bad_args))
    if isinstance(trace, list):
        return events, tuple(notes)
    loose = LooseTrace(
        traceEvents=events,
        distributedInfo=trace.distributedInfo,
        deviceProperties=trace.deviceProperties,
        schemaVersion=trace.schemaVersion,
        host_name=trace.host_name,
    )
    return loose, tuple(notes)


def _salvage(items: list[Any]) -> tuple[list[LooseEvent], int, int]:
    """Each entry that is an object as a loose event; the count of the others, and of bad ``args``."""
    events: list[LooseEvent] = []
    not_events = bad_args = 0
    for item in items:
        if not isinstance(item, dict):
            not_events += 1
            continue
        args = item.get("args")
        entry = item
        if args is not None and not isinstance(args, dict):
            bad_args += 1
            entry = {**item, "args": None}
        try:
            events.append(msgspec.convert(entry, LooseEvent))
        except msgspec.ValidationError:
            not_events += 1
    return events, not_events, bad_args


def _json_problem(exc: msgspec.DecodeError) -> str:
    text = str(exc)
    if "truncated" in text:
        return "truncated JSON; was the profiler stopped mid-write?"
    return f"not valid JSON ({text})"


def _distributed_int(info: dict[str, Any], key: str, *, lowest: int) -> tuple[int | None, InputWarning | None]:
    """``distributedInfo[key]`` when it is a whole number from ``lowest`` to :data:`MAX_RANK`, and
    else None with the warning that it was not used (None when the key is absent)."""
    value = info.get(key)
    if value is None:
        return None, None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if is_rank(value) and value >= lowest:
        return value, None
    return None, InputWarning(kind="bad_distributed_info", key=key, value=repr(value)[:40])
