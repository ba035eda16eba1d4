"""A Kineto document as a stream of pieces: its head, chunks of whole events, its tail.

The profiler writes ``{ ...metadata..., "traceEvents": [`` then the events, each an object
(indented over several lines by Kineto, one after another on one line by ``json.dumps``),
then ``], ...metadata... }``. :func:`split_events` reads the text in blocks (gunzipped as it
goes) and cuts it at separators between two events (``}`` ``,`` ``{`` with any whitespace
between them) once a chunk holds ``chunk_bytes``, so that no more than a chunk or two of the
text is in memory at once, whatever the size of the file.

A separator found this way may lie inside a string or a nested value rather than between
two events; the text of a chunk then is no JSON array of objects, and decoding it fails. The
reader then reads the file whole (:mod:`tracekit.readers.kineto`), as it does for any
document laid out otherwise (:class:`NotChunked`): a bare list of events, a byte-order mark
of UTF-16 or UTF-32, no ``traceEvents`` near the start, an empty list. Every piece is cut at
a separator, so the pieces hold all the text of the events and nothing else.
"""

from __future__ import annotations

import queue
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Final, Literal

from tracekit.readers.compressed import GZIP_MAGIC, inflater

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path

#: How much of the file is read (and inflated) at a time.
BLOCK_BYTES: Final = 4 * 1024 * 1024
#: How far into the text the ``traceEvents`` list must begin (its metadata can be long: the
#: process groups of thousands of ranks).
HEAD_LIMIT: Final = 64 * 1024 * 1024
_EVENTS_KEY: Final = re.compile(rb'"traceEvents"\s*:\s*\[\s*')
#: Between two events: the end of one, a comma, the start of the next.
SEPARATOR: Final = re.compile(rb"\}\s*,\s*\{")
#: How far back from the end of the text searched so far a separator may begin.
_SEPARATOR_SPAN: Final = 256
_UTF8_BOM: Final = b"\xef\xbb\xbf"


class NotChunked(Exception):
    """The document is not laid out as :func:`split_events` reads it: read it whole."""


@dataclass(frozen=True)
class Piece:
    """A piece of the document.

    ``head``: from its start to the ``[`` of ``traceEvents`` (and the whitespace after it);
    ``events``: whole events and the separators between them, from a ``{`` to a ``}``, in
    brackets (a JSON array: the one copy of its text);
    ``tail``: the last events, from a ``{``, and the rest of the document.
    """

    kind: Literal["head", "events", "tail"]
    text: bytes


def text_blocks(path: Path, *, block: int = BLOCK_BYTES) -> Iterator[bytes]:
    """The bytes of ``path`` in blocks, gunzipped (every member) when it is gzip.

    Raises :class:`OSError` or one of :data:`~tracekit.readers.compressed.GZIP_ERRORS` when
    the file cannot be read or is truncated or corrupt gzip.
    """
    with path.open("rb") as handle:
        magic = handle.read(2)
        handle.seek(0)
        if magic == GZIP_MAGIC:
            yield from _gunzip_blocks(handle, block)
            return
        while data := handle.read(block):
            yield data


def _gunzip_blocks(handle: BinaryIO, block: int) -> Iterator[bytes]:
    """Inflate a gzip stream of one or more members, as :func:`~tracekit.readers.compressed.gunzip` does."""
    inflate = inflater()
    fed = False  # whether the member being inflated has had any input
    first = True
    while data := handle.read(block):
        while data:
            if not first and not fed:
                data = data.lstrip(b"\x00")  # members may be followed by zero padding
                if not data:
                    break
            fed = True
            out = inflate.decompress(data)
            if out:
                yield out
            if not inflate.eof:
                break
            data = inflate.unused_data
            inflate, fed, first = inflater(), False, False
    if fed and not inflate.eof:
        raise EOFError("compressed file ended before the end-of-stream marker was reached")


def split_events(blocks: Iterable[bytes], *, chunk_bytes: int) -> Iterator[Piece]:
    """The head, chunks of about ``chunk_bytes`` of events, and the tail of a Kineto document.

    Raises :class:`NotChunked` when the document does not start as Kineto writes it.
    """
    source = iter(blocks)
    text, pos = _head(source)
    yield Piece("head", text[:pos])
    searched = pos  # no separator after ``pos + chunk_bytes`` before this offset
    while True:
        if len(text) - pos > chunk_bytes:
            found = SEPARATOR.search(text, max(pos + chunk_bytes, searched - _SEPARATOR_SPAN))
            if found is not None:
                yield Piece("events", b"".join((b"[", memoryview(text)[pos : found.start() + 1], b"]")))
                pos = searched = found.end() - 1
                continue
            searched = len(text)
        more = _read_at_least(source, chunk_bytes // 2)
        if not more:
            break
        text, searched, pos = text[pos:] + more, searched - pos, 0
    yield Piece("tail", text[pos:])


def _read_at_least(source: Iterator[bytes], size: int) -> bytes:
    """Blocks of ``source`` joined, at least ``size`` bytes of them unless it ends first."""
    parts: list[bytes] = []
    got = 0
    for block in source:
        parts.append(block)
        got += len(block)
        if got >= size:
            break
    return b"".join(parts)


def _head(source: Iterator[bytes]) -> tuple[bytes, int]:
    """The text read so far, and where the first event starts in it."""
    text = b""
    while True:
        found = _EVENTS_KEY.search(text)
        if found is not None and found.end() < len(text):
            break
        if len(text) > HEAD_LIMIT:
            raise NotChunked("no traceEvents list near the start")
        more = _read_at_least(source, BLOCK_BYTES)
        if not more:
            raise NotChunked("no traceEvents list with events")
        text = (text + more) if text else _utf8(more)
    if text.lstrip()[:1] != b"{" or text[found.end() : found.end() + 1] != b"{":
        raise NotChunked("not an object with a list of events")
    return text, found.end()


def _utf8(first: bytes) -> bytes:
    """The first block without a UTF-8 byte-order mark; other encodings are read whole."""
    if first.startswith(_UTF8_BOM):
        return first[len(_UTF8_BOM) :]
    if first[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in first[:4]:
        raise NotChunked("UTF-16 or UTF-32 text")
    return first


def prefetched(items: Iterator[Piece], *, depth: int = 1) -> Iterator[Piece]:
    """``items``, produced in a thread up to ``depth`` ahead of their consumer.

    Reading and inflating the next chunk (which releases the GIL) then overlaps with decoding
    this one. An exception of the producer is raised to the consumer; a consumer that stops
    early stops the producer.
    """
    pipe: queue.Queue[tuple[Piece | None, BaseException | None]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        pipe.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            pipe.put((None, None))
        except BaseException as exc:  # handed to the consumer, which raises it
            pipe.put((None, exc))

    thread = threading.Thread(target=produce, name="tracekit-read", daemon=True)
    thread.start()
    try:
        while True:
            item, error = pipe.get()
            if error is not None:
                raise error
            if item is None:
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():
            try:
                pipe.get_nowait()
            except queue.Empty:
                thread.join(0.05)
