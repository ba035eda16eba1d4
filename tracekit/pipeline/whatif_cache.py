"""The re-timed gains kept between runs (:class:`WhatIfCache`, the
:class:`~tracekit.analyzers.gains_memo.Memo` of ``tracekit analyze``): a warm run with the same
plans and what-ifs reads each scenario's gains back instead of re-timing every rank again.

An entry is ``<root>/whatifs/<key>.msgpack``: ``MAGIC``, the CRC-32 of the rest, then the
gains. Its key is the analyzers' (a digest of the plans and the scenario: what the re-timing
reads) with what computed it: tracekit's version and a digest of the re-timing's modules' code,
so that a changed re-timing never answers from an entry of another. An entry that is absent,
unreadable, of another layout or whose checksum does not match is a miss, re-timed and written
again; a write that fails is forgotten: never an error, never other numbers.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import string
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tracekit import __version__
from tracekit.pipeline.map_cache import checksum
from tracekit.readers.cache import replace_file
from tracekit.readers.identity import read_regular
from tracekit.readers.load import event_cache

if TYPE_CHECKING:
    from tracekit.pipeline.mapped import Settings

__all__ = ["MAGIC", "RETIMING", "WhatIfCache", "whatif_cache"]

MAGIC: Final = b"TKWHATIF1\n"
#: The modules whose code computes the gains.
RETIMING: Final = (
    "tracekit.analyzers.retime",
    "tracekit.analyzers.retime_shape",
    "tracekit.analyzers.retime_removal",
    "tracekit.analyzers.retime_plan",
    "tracekit.analyzers.retime_ranks",
    "tracekit.analyzers.retime_parallel",
    "tracekit.analyzers._retime_core",  # the re-timing in C, where it was built (its binary)
)
#: An entry holds a few numbers a rank: anything larger is not one.
_LIMIT: Final = 16 << 20


@functools.cache
def code_key() -> str:
    """tracekit's version and a digest of the re-timing's source."""
    digest = hashlib.blake2b(__version__.encode(), digest_size=12)
    for name in RETIMING:
        try:
            module = importlib.import_module(name)
        except ImportError:  # the re-timing in C, not built: the Python paths give the gains
            continue
        digest.update(name.encode())
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


class WhatIfCache:
    """Gains under ``<root>/whatifs``."""

    def __init__(self, root: str | Path) -> None:
        self.folder = Path(root) / "whatifs"

    def _path(self, key: str) -> Path:
        if not key or set(key) - set(string.hexdigits):  # never a path of the key's making
            raise ValueError(f"not a key: {key!r}")
        stem = hashlib.blake2b(f"{code_key()}:{key}".encode(), digest_size=20).hexdigest()
        return self.folder / f"{stem}.msgpack"

    def get(self, key: str) -> bytes | None:
        try:
            data = read_regular(self._path(key), limit=_LIMIT, follow=False)
        except (OSError, ValueError):
            return None
        head = len(MAGIC) + len(checksum(b""))
        body = data[head:]
        if data[: len(MAGIC)] != MAGIC or data[len(MAGIC) : head] != checksum(body):
            return None
        return body

    def put(self, key: str, data: bytes) -> None:
        entry = MAGIC + checksum(data) + data
        try:
            path = self._path(key)
            self.folder.mkdir(parents=True, exist_ok=True)
            replace_file(path, lambda tmp: tmp.write_bytes(entry))
        except (OSError, ValueError):
            return


def whatif_cache(settings: Settings) -> WhatIfCache | None:
    """The gains' cache beside the event cache of ``settings`` (None: ``--no-cache``)."""
    events = event_cache(settings.cache_dir, use_cache=settings.use_cache)
    return None if events is None else WhatIfCache(events.root)
