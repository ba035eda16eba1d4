"""The real traces the cases mutate, and the jobs whose good ranks a bad file is mixed among."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.conftest import SAMPLES, SHARED_TRACES

try:  # a dev dependency, 4x faster on the 1 MB traces every case decodes and encodes
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]


def loads(data: bytes) -> Any:
    """Parse JSON (orjson when installed)."""
    return orjson.loads(data) if orjson is not None else json.loads(data)


def dumps(value: Any) -> bytes:
    """JSON text of ``value``; integers beyond 64 bits and NaN go through the standard library."""
    if orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:  # an integer orjson cannot write (2**64)
            pass
    return json.dumps(value).encode()


if TYPE_CHECKING:
    from pathlib import Path


@dataclass(frozen=True)
class Source:
    """A real trace that cases mutate: its path, and the name a mutation is written under."""

    key: str
    path: Path
    #: the file name of the mutated copy (the rank is in it, as a fallback)
    name: str
    #: the rank the file holds
    rank: int
    #: keep only the events of this ProfilerStep (0: the first) and the metadata, without flows:
    #: a real trace cut down to a few thousand events
    cut: int | None = None

    @property
    def real(self) -> bool:
        """Whether it lives in ../shared/traces (absent from a fresh clone)."""
        return SHARED_TRACES in self.path.parents

    @property
    def gz(self) -> bool:
        return self.name.endswith(".gz")

    def available(self) -> bool:
        return self.path.exists()

    def raw(self) -> bytes:
        """The file's bytes as stored (gzip or not, cut when the source is cut)."""
        if self.cut is None:
            return _read_cached(self.path)
        return _cut_cached(self.path, self.cut, gz=self.gz)

    def data(self) -> bytes:
        """The decompressed bytes of the (cut) trace."""
        if self.cut is None:
            raw = _read_cached(self.path)
            return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        return _cut_cached(self.path, self.cut)

    def doc(self) -> Any:
        """A fresh copy of the parsed JSON document (cases mutate it)."""
        if self.cut is None:
            return loads(_decoded_cached(self.path))
        return loads(_cut_cached(self.path, self.cut))

    def write(self, folder: Path, content: bytes | Any, *, name: str | None = None, gz: bool | None = None) -> Path:
        """Write a document (JSON-encoded) or bytes as this source's file in ``folder``.

        Gzipped when the source's name is (``gz`` overrides).
        """
        data = content if isinstance(content, bytes) else dumps(content)
        if gz if gz is not None else self.gz:
            data = gzip.compress(data, 1)
        path = folder / (name or self.name)
        path.write_bytes(data)
        return path


def _one_step(events: list[Any], index: int) -> list[Any]:
    """The metadata events, and the durations and instants that start within the ``index``-th ProfilerStep."""
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if str(e.get("name", "")).startswith("ProfilerStep#") and "dur" in e
    )
    start, end = steps[index]
    return [
        e
        for e in events
        if e.get("ph") == "M"
        or (e.get("ph") in ("X", "i") and isinstance(e.get("ts"), (int, float)) and start <= e["ts"] <= end)
    ]


_BYTES: dict[Path, bytes] = {}
_DECODED: dict[Path, bytes] = {}
_CUT: dict[tuple[Path, int, bool], bytes] = {}


def _read_cached(path: Path) -> bytes:
    if path not in _BYTES:
        _BYTES[path] = path.read_bytes()
    return _BYTES[path]


def _decoded_cached(path: Path) -> bytes:
    if path not in _DECODED:
        raw = _read_cached(path)
        _DECODED[path] = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return _DECODED[path]


def _cut_cached(path: Path, index: int, *, gz: bool = False) -> bytes:
    """The JSON text of the document cut to its ``index``-th step (gzipped: ``gz``), made once a
    session: a cut source is a trace of 100k events, parsed and cut in about a second, and
    most of the corpus's cases start from it."""
    if (path, index, gz) not in _CUT:
        if gz:
            _CUT[path, index, gz] = gzip.compress(_cut_cached(path, index), 6)
        else:
            doc = loads(_decoded_cached(path))
            doc["traceEvents"] = _one_step(doc["traceEvents"], index)
            _CUT[path, index, gz] = dumps(doc)
    return _CUT[path, index, gz]


_DLRM = SHARED_TRACES / "kineto" / "param-dlrm-8rank-v100"
_HEALTHY = SAMPLES / "captures" / "healthy"


def _dlrm(rank: int) -> Path:
    found = sorted(_DLRM.glob(f"worker{rank}_*.pt.trace.json"))
    return found[0] if found else _DLRM / f"worker{rank}.pt.trace.json"


SOURCES: dict[str, Source] = {
    s.key: s
    for s in (
        # 8 gloo CPU ranks captured by tracekit (samples/, always present); rank 3 is mutated
        Source("capture", _HEALTHY / "rank3.pt.trace.json.gz", "rank3.pt.trace.json.gz", 3),
        # 8 NCCL V100 ranks of one DLRM job (real, plain JSON, 3.5k events each); worker 3 is mutated
        Source("dlrm", _dlrm(3), "worker3.pt.trace.json", 3),
        # the legacy 2021 schema, cut to its second step (9k events)
        Source(
            "tbplugin",
            SHARED_TRACES / "kineto" / "tbplugin-resnet50-workers0" / "worker0.pt.trace.json.gz",
            "worker0.pt.trace.json.gz",
            0,
            cut=1,
        ),
        # a real A100 trace (105k events) cut to its second step (12k events)
        Source(
            "a100",
            SHARED_TRACES / "kineto" / "hta-trace-diff" / "control-rank3-a100.json.gz",
            "rank3.json.gz",
            3,
            cut=1,
        ),
        # the smallest real Nsight Systems export (2 kernels)
        Source("nsys", SHARED_TRACES / "nsys" / "nsysai-mock-rtx3080.sqlite", "rank3.sqlite", 3),
    )
}


@dataclass(frozen=True)
class Family:
    """Good ranks of one job: a bad file written as ``source``'s rank is mixed in among them."""

    key: str
    good: tuple[Path, ...]
    source: str

    @property
    def good_ranks(self) -> tuple[int, ...]:
        return tuple(range(len(self.good)))


FAMILIES: dict[str, Family] = {
    "capture": Family("capture", tuple(_HEALTHY / f"rank{r}.pt.trace.json.gz" for r in range(3)), "capture"),
    "dlrm": Family("dlrm", tuple(_dlrm(r) for r in range(3)), "dlrm"),
}
