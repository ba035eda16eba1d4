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
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from tracekit.readers.compressed import GZIP_MAGIC, gzip_reader

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator
    from io import BufferedIOBase
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
    brackets (a JSON array);
    ``tail``: the last events, from a ``{``, and the rest of the document.

    ``parts``: buffers whose concatenation is the text; one ``bytes`` (the one copy of the
    text), or, for events read with ``views`` (:func:`split_events`), ``[``, a view into the
    reader's buffer, valid until the next piece is asked for, and ``]``.
    """

    kind: Literal["head", "events", "tail"]
    parts: tuple[bytes | memoryview, ...]

    @property
    def text(self) -> bytes:
        """The text in one piece (a copy where the piece is in parts)."""
        only = self.parts[0]
        return only if len(self.parts) == 1 and isinstance(only, bytes) else b"".join(self.parts)

    @property
    def size(self) -> int:
        """The bytes of text."""
        return sum(len(p) for p in self.parts)  # a view of bytes: len is its bytes


@contextmanager
def open_text(path: Path) -> Iterator[BufferedIOBase]:
    """``path`` open for reading its text: gunzipped as it is read (every member, CRC checked;
    ISA-L's reader when installed) when it is gzip.

    Opening or reading raises :class:`OSError` or one of
    :data:`~tracekit.readers.compressed.GZIP_ERRORS` when the file cannot be read or is
    truncated or corrupt gzip.
    """
    with path.open("rb") as handle:
        magic = handle.read(2)
        handle.seek(0)
        if magic != GZIP_MAGIC:
            yield handle
            return
        with gzip_reader(handle) as text:
            yield text


class _Window:
    """The text read so far and not yet cut off, in one reused buffer that the file is read
    (and inflated) straight into: each byte of the text is copied once more, into its chunk."""

    def __init__(self, stream: BufferedIOBase, block: int) -> None:
        self.stream = stream
        self.block = block
        self.store = bytearray(2 * block)
        self.start = 0  # the window is store[start:end]
        self.end = 0

    @property
    def size(self) -> int:
        return self.end - self.start

    def fill(self, at_least: int) -> bool:
        """Read at least ``at_least`` more bytes unless the text ends first; whether any came."""
        got = 0
        while got < at_least:
            if self.end + self.block > len(self.store):
                self._make_room()
            with memoryview(self.store) as view:
                n = self.stream.readinto(view[self.end : self.end + self.block])
            if not n:
                break
            self.end += n
            got += n
        return got > 0

    def _make_room(self) -> None:
        """Move the window to the start of the store, and grow the store if it still lacks a block."""
        size = self.size
        if self.start:
            self.store[:size] = self.store[self.start : self.end]
            self.start, self.end = 0, size
        if size + self.block > len(self.store):
            self.store.extend(bytes(size + self.block - len(self.store)))

    def search(self, pattern: re.Pattern[bytes], offset: int) -> tuple[int, int] | None:
        """Where ``pattern`` first occurs at or after ``offset`` of the window (window offsets)."""
        found = pattern.search(self.store, self.start + offset, self.end)
        return None if found is None else (found.start() - self.start, found.end() - self.start)

    def take(self, size: int, *, brackets: bool = False) -> bytes:
        """The first ``size`` bytes of the window (in ``[`` ``]`` with ``brackets``), cut off it:
        one copy, to bytes (which go to another process with no further copy)."""
        with memoryview(self.store) as view:
            text = view[self.start : self.start + size]
            out = b"".join((b"[", text, b"]")) if brackets else bytes(text)
            text.release()
        self.start += size
        return out

    def view(self, size: int) -> memoryview:
        """A view of the first ``size`` bytes of the window, cut off it: no copy. The caller
        releases it before the window is read into again (which may move or grow the store)."""
        out = memoryview(self.store)[self.start : self.start + size]
        self.start += size
        return out

    def drop(self, size: int) -> None:
        self.start += size

    def startswith(self, prefix: bytes) -> bool:
        return self.store.startswith(prefix, self.start, self.end)

    def peek(self, offset: int, size: int) -> bytes:
        return bytes(self.store[self.start + offset : min(self.start + offset + size, self.end)])


def split_events(
    stream: BufferedIOBase, *, chunk_bytes: int, block: int = BLOCK_BYTES, views: bool = False
) -> Iterator[Piece]:
    """The head, chunks of about ``chunk_bytes`` of events, and the tail of a Kineto document,
    read from ``stream`` (:func:`open_text`) ``block`` bytes at a time.

    ``views``: the events of a piece are a view into the buffer the text is read into, valid
    until the next piece is asked for (for a consumer that writes them out at once: no copy,
    and no fresh pages for one, per chunk); else a copy of their own.

    Raises :class:`NotChunked` when the document does not start as Kineto writes it.
    """
    window = _Window(stream, block)
    yield Piece("head", (window.take(_head(window)),))
    searched = 0  # no separator after ``chunk_bytes`` before this offset
    while True:
        if window.size > chunk_bytes:
            found = window.search(SEPARATOR, max(chunk_bytes, searched - _SEPARATOR_SPAN))
            if found is not None:
                start, end = found
                if views:
                    with window.view(start + 1) as text:
                        yield Piece("events", (b"[", text, b"]"))
                else:
                    yield Piece("events", (window.take(start + 1, brackets=True),))
                window.drop(end - 1 - (start + 1))  # up to the ``{`` of the next event
                searched = 0
                continue
            searched = window.size
        if not window.fill(chunk_bytes // 2):
            break
    yield Piece("tail", (window.take(window.size),))


def _head(window: _Window) -> int:
    """Read until the first event; where it starts in the window."""
    window.fill(window.block)
    _utf8(window)
    while True:
        found = window.search(_EVENTS_KEY, 0)
        if found is not None and found[1] < window.size:
            break
        if window.size > HEAD_LIMIT:
            raise NotChunked("no traceEvents list near the start")
        if not window.fill(window.block):
            raise NotChunked("no traceEvents list with events")
    first = window.search(_NOT_SPACE, 0)
    if first is None or window.peek(first[0], 1) != b"{" or window.peek(found[1], 1) != b"{":
        raise NotChunked("not an object with a list of events")
    return found[1]


#: The first character that is not JSON whitespace.
_NOT_SPACE: Final = re.compile(rb"[^ \t\r\n]")


def _utf8(window: _Window) -> None:
    """Skip a UTF-8 byte-order mark; other encodings are read whole."""
    if window.startswith(_UTF8_BOM):
        window.drop(len(_UTF8_BOM))
    elif window.peek(0, 2) in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in window.peek(0, 4):
        raise NotChunked("UTF-16 or UTF-32 text")


def prefetched(items: Iterator[Piece], *, depth: int = 1) -> Generator[Piece, None, None]:
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
