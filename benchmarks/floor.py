"""The parse floor: gunzip plus a typed msgspec decode of every file, in one process.

The structs mirror the fields tracekit's Kineto reader decodes (copied on purpose, so that
the floor stays put when the reader changes); nothing else is done with the events.
Gunzip is the standard library's zlib, or with ``--isal`` ISA-L's (which tracekit uses when
it is installed). Prints ``{"seconds": ..., "events": ..., "files": ...}`` as JSON.
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import msgspec


class Args(msgspec.Struct, gc=False):
    """The event arguments tracekit reads (an int may be written as text: AMD's ``"bytes": "128"``)."""

    external_id: int | str | None = msgspec.field(default=None, name="External id")
    external_id_2021: int | str | None = msgspec.field(default=None, name="external id")
    correlation: int | str | None = None
    device: int | str | None = None
    stream: int | str | None = None
    bytes: int | str | None = None
    coll_name: str | None = msgspec.field(default=None, name="Collective name")
    msg_nelems: int | str | None = msgspec.field(default=None, name="In msg nelems")
    pg_name: str | None = msgspec.field(default=None, name="Process Group Name")
    group_size: int | str | None = msgspec.field(default=None, name="Group size")
    seq: int | str | None = msgspec.field(default=None, name="Seq")


class Event(msgspec.Struct, gc=False):
    """The event fields tracekit reads."""

    ph: str = ""
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: Args | None = None


class Trace(msgspec.Struct):
    """A Kineto document."""

    traceEvents: list[Event]
    distributedInfo: dict[str, object] | None = None


def main(paths: list[str]) -> None:
    """Decode every file of ``paths`` (files or folders of ``*.json.gz`` / ``*.json``)."""
    inflate: Any = zlib
    if "--isal" in paths:
        from isal import isal_zlib as inflate  # noqa: PLC0415 (only when asked for)
    paths = [p for p in paths if p != "--isal"]
    files = sorted(
        f for p in map(Path, paths) for f in (sorted(p.glob("*.json*")) if p.is_dir() else [p]) if f.is_file()
    )
    decoder = msgspec.json.Decoder(Trace)
    began = time.perf_counter()
    events = 0
    for path in files:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = inflate.decompress(data, wbits=31)  # one member, CRC checked while inflating
        trace = decoder.decode(data)
        del data
        events += len(trace.traceEvents)
        del trace
    print(json.dumps({"seconds": time.perf_counter() - began, "events": events, "files": len(files)}))


if __name__ == "__main__":
    main(sys.argv[1:])
