"""Kineto events -> raw columns, in one pass over the JSON text (``_kineto_columns.c``)."""

import mmap

_Pair = tuple[bytes, bytes | None]

def decode(
    text: bytes | bytearray | memoryview | mmap.mmap, /
) -> (
    tuple[
        int,
        bytes,
        list[str | None],
        tuple[bytes, bytes, bytes, bytes],
        tuple[_Pair, _Pair],
        tuple[_Pair, ...],
        tuple[int, _Pair, tuple[_Pair, ...]],
    ]
    | None
): ...
