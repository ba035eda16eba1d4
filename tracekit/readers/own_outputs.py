"""Files tracekit wrote itself, told by their first bytes: never read as a trace of the run.

Two kinds of tracekit's outputs carry a trace's suffix (``*.json``, ``*.json.gz``), so that a
folder analyzed again after ``tracekit analyze DIR --json DIR/a.json --annotated-trace
DIR/a.json.gz`` holds them beside its traces:

- the annotated trace (:mod:`tracekit.pipeline.annotated_trace`): a Chrome trace whose document
  begins ``{"displayTimeUnit":"ms","tracekitFindings":{"category":"tracekit","layout":...``
  (its writer puts :data:`FINDINGS_FIELD` first for this; every annotated trace tracekit wrote
  does);
- tracekit's JSON records (an analysis, a comparison, a sweep, a doctor run, a DataLoader probe,
  a parameter audit, ...), whose first field is ``"schema": "tracekit.<kind>"``.

Both are told from the first :data:`HEAD_BYTES` of the file, gunzipped where it is gzip: a
folder's discovery reads a few KiB of each file, never a whole trace.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tracekit.readers.identity import open_regular
from tracekit.sizes import GZIP_MAGIC
from tracekit.sniff import HEAD_BYTES, schema_in

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.model.run import SkippedFile

#: The top-level field of an annotated trace: what its findings tracks hold and what was capped.
FINDINGS_FIELD: Final = "tracekitFindings"
#: The ``layout`` of the annotated trace of one rank: its events and fields as they were.
ONE_RANK_LAYOUT: Final = "one rank, its own pids"
#: The ``layout`` of the annotated trace of several ranks: one process per rank.
RANKS_LAYOUT: Final = "one process per rank, pid = rank"
#: What every record tracekit writes declares first: ``"schema": "tracekit.<kind>"``.
RECORD_PREFIX: Final = "tracekit."

#: How the reason a file of tracekit's is skipped begins (:attr:`OwnOutput.reason`).
_REASON: Final = "tracekit's own output"

#: The start of an annotated trace: an object whose first fields (``displayTimeUnit``) are
#: scalars, then :data:`FINDINGS_FIELD`.
_ANNOTATED: Final = re.compile(
    rb'\s*\{(?:\s*"[^"\\]*"\s*:\s*(?:"[^"\\]*"|[-+.\w]+)\s*,)*\s*"' + FINDINGS_FIELD.encode() + rb'"\s*:\s*\{'
)
_LAYOUT: Final = re.compile(rb'"layout"\s*:\s*"([^"\\]*)"')


@dataclass(frozen=True)
class OwnOutput:
    """A file tracekit wrote: what it is, and whether it can stand for a rank's trace."""

    #: What it is, for a message: "an annotated trace of several ranks", "a tracekit.analysis record".
    what: str
    #: The annotated trace of one rank: its events as they were, read as that rank where the
    #: file is named itself (it analyzes to the same numbers as the original).
    one_rank: bool = False

    @property
    def reason(self) -> str:
        """Why it is not read among a folder's traces."""
        hint = "; name the file itself to analyze it" if self.one_rank else ""
        return f"{_REASON} ({self.what}), not a trace of the run{hint}"


def own_output(path: Path) -> OwnOutput | None:
    """What ``path`` is when tracekit wrote it (an annotated trace, a JSON record), else None
    (also when it cannot be read: its reader says why)."""
    head = read_head(path)
    if head is None:
        return None
    if _ANNOTATED.match(head):
        layout = _LAYOUT.search(head)
        if layout is not None and layout.group(1).decode("utf-8", "replace") == ONE_RANK_LAYOUT:
            return OwnOutput("the annotated trace of one rank", one_rank=True)
        return OwnOutput("an annotated trace of several ranks, one process per rank")
    schema = schema_in(head)
    if schema is not None and schema.startswith(RECORD_PREFIX):
        return OwnOutput(f"a {schema} record")
    return None


def is_own_output(skipped: SkippedFile) -> bool:
    """Whether a file was skipped as one of tracekit's own outputs."""
    return skipped.reason.startswith(_REASON)


def read_head(path: Path) -> bytes | None:
    """The first :data:`HEAD_BYTES` of ``path``, gunzipped where it is gzip; None when it
    cannot be read (not a regular file, corrupt gzip)."""
    try:
        with open_regular(path) as handle:
            raw = handle.read(HEAD_BYTES)
    except OSError:
        return None
    if raw[:2] != GZIP_MAGIC:
        return raw
    try:  # JSON inflates several times over: a head's worth of gzip holds a head's worth of text
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, HEAD_BYTES)
    except zlib.error:
        return None
