"""A trace file's bytes, gunzipped when they are gzip (one pass per member, ISA-L when installed)."""

from __future__ import annotations

import gzip
import importlib
import zlib
from typing import TYPE_CHECKING, Any, BinaryIO, Final

from tracekit.errors import TraceReadError
from tracekit.sizes import GZIP_MAGIC, data_bytes

if TYPE_CHECKING:
    from io import BufferedIOBase
    from pathlib import Path


def _inflate_module() -> Any:
    """ISA-L's zlib (``isal``, a dependency: inflates twice as fast), else zlib: one API."""
    try:
        return importlib.import_module("isal.isal_zlib")
    except ImportError:
        return zlib


_INFLATE: Final = _inflate_module()
_GZIP: Final = gzip if _INFLATE is zlib else importlib.import_module("isal.igzip")


def crc32(data: bytes | memoryview, value: int = 0) -> int:
    """The CRC-32 of ``data`` (gzip's), with ISA-L's SIMD code when installed: 45 MB in 4 ms
    (zlib's 12 ms, BLAKE2b's 57 ms). ``value``: the CRC-32 of what came before ``data``."""
    out: int = _INFLATE.crc32(data, value)
    return out


#: What inflating corrupt or truncated gzip data raises.
GZIP_ERRORS: Final[tuple[type[BaseException], ...]] = (EOFError, OSError, zlib.error, _INFLATE.error)


def read_bytes(path: Path) -> bytes:
    """The decompressed bytes of ``path``; errors name the file and the reason."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceReadError(f"cannot read file ({exc.strerror})", path=path) from None
    if not data:
        raise TraceReadError("empty file", path=path)
    if data[:2] == GZIP_MAGIC:
        try:
            data = gunzip(data)
        except GZIP_ERRORS as exc:
            raise TraceReadError(
                f"truncated or corrupt gzip ({exc}); was the profiler stopped mid-write?",
                path=path,
            ) from None
        if not data.strip():
            raise TraceReadError("empty file (after gunzip)", path=path)
    return data


def gunzip(data: bytes) -> bytes:
    """Decompress gzip ``data``, every member of it, checking each member's CRC.

    One pass per member, which checks the CRC as it inflates (``gzip.decompress`` computes
    it in a second pass over the output), with ISA-L when it is installed (``isal``: twice
    as fast as zlib). Raises one of :data:`GZIP_ERRORS` for corrupt or truncated input.
    """
    parts = []
    while data:
        inflate = inflater()
        parts.append(inflate.decompress(data))
        if not inflate.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        data = inflate.unused_data.lstrip(b"\x00")  # members may be followed by zero padding
    return parts[0] if len(parts) == 1 else b"".join(parts)


def gzip_reader(handle: BinaryIO) -> BufferedIOBase:
    """A file object of the gunzipped text of the gzip stream ``handle`` (every member, zero
    padding between them skipped, CRCs checked): ISA-L's reader when installed, whose
    ``readinto`` inflates straight into the caller's buffer."""
    reader: BufferedIOBase = _GZIP.GzipFile(fileobj=handle) if _GZIP is gzip else _GZIP.IGzipFile(fileobj=handle)
    return reader


def inflater() -> Any:
    """A decompressor of one gzip member (ISA-L's when installed), zlib's ``Decompress`` API."""
    return _INFLATE.decompressobj(wbits=31)


__all__ = ["GZIP_ERRORS", "GZIP_MAGIC", "data_bytes", "gunzip", "gzip_reader", "inflater", "read_bytes"]
