"""Large multi-rank Kineto traces, made by repeating a real trace in time.

The events of the source trace (one of :data:`SHAPES`) are repeated back to back, each copy
shifted by the trace's span plus a gap, with correlation ids, ``External id``, flow ids and
the ``Python id`` of stack events (and their parents') offset so that they stay unique, and
``ProfilerStep#N`` renumbered so that steps stay distinct. A part of a copy (its first events
in time) tops the size up to the requested one. Every rank gets the same events, one gzipped
file per rank with its own ``distributedInfo``.

The files land in ``<data_dir>/<name>/rank<r>.json.gz``; a marker ``<name>.done.json`` beside
the folder (not inside, where trace readers would take it for a trace) records the
parameters, so a later run with the same parameters reuses the files.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import hashlib
import json
import re
import shutil
import sys
from dataclasses import asdict, dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, Final

import orjson

ROOT: Final = Path(__file__).resolve().parents[1]
_KINETO: Final = ROOT.parent / "shared" / "traces" / "kineto"
SOURCE: Final = _KINETO / "hta-trace-diff" / "control-rank3-a100.json.gz"
#: The trace shapes a benchmark can tile, by name: each a real rank trace of ``../shared/traces``.
#: ``a100``: HTA's A100 training rank (cpu ops, launches, kernels, NCCL); ``mi300``: an MI300
#: training rank with activation checkpointing (60% ``python_function`` stack events, ``fwdbwd``
#: flows, AMD's ``"bytes": "128"``); ``dlrm``: rank 0 of the 8-rank DLRM job (V100, all-to-all
#: and all-reduce, plain JSON, one step).
SHAPES: Final = {
    "a100": SOURCE,
    "mi300": _KINETO / "tracelens-mi300-resnet-actckpt" / "rank0.json.gz",
    "dlrm": _KINETO / "param-dlrm-8rank-v100" / "worker0_step_12.1694128201545.pt.trace.json",
}
DATA_DIR: Final = Path(__file__).resolve().parent / "data"
#: The gradient buckets of a step of the ``dense`` shape, each all-reduced (the A100 shape has
#: about 10 collectives a step).
DENSE_BUCKETS: Final = 10
#: The optimizer's kernels of a step of the ``dense`` shape, each launched when the last ended.
DENSE_OPTIMIZER_KERNELS: Final = 16
#: Idle time between two copies of the source, in the trace's microseconds.
GAP_US: Final = 1000
#: Bump when the generated content changes, so that old data is not reused.
GENERATOR_VERSION: Final = 1
_STEP: Final = re.compile(r"^ProfilerStep#(\d+)$")
#: The ids in an event's args that each copy offsets (a stack event's own and its parent's).
_ID_ARGS: Final = ("External id", "correlation", "Python id", "Python parent id")


@dataclass(frozen=True)
class Spec:
    """What to generate: ``ranks`` files of about ``mb_per_rank`` MB of JSON each."""

    ranks: int = 8
    mb_per_rank: float = 125.0
    source: str = str(SOURCE)
    world_size: int | None = None
    version: int = GENERATOR_VERSION
    #: add the [memory] events of profile_memory=True: an allocation as each operator starts and
    #: its free as it ends (on the GPU the op's device), with the running totals
    memory: bool = False

    @property
    def name(self) -> str:
        """The folder name for these parameters."""
        mem = "-mem" if self.memory else ""
        source = Path(self.source)
        stem = source.name.split(".")[0]
        if source != SOURCE:  # another shape: its folder names it (``rank0`` alone would not)
            stem = f"{source.parent.name}-{stem}"
        return f"{stem}-{self.ranks}x{self.mb_per_rank:g}mb{mem}"


#: Bytes each operator allocates in the generated [memory] events (cycling), and the caching
#: allocator's reserve above the running total.
MEMORY_SIZES: Final = (512, 4096, 1 << 20, 8 << 20, 64 << 10)
RESERVE: Final = 256 << 20


def _dense_doc() -> dict[str, Any]:
    """What :func:`dense_source` writes."""

    def event(cat: str, name: str, ts: int, dur: int, *, gpu: bool = False, **args: Any) -> dict[str, Any]:
        where = {"pid": 0, "tid": args.get("stream", 7)} if gpu else {"pid": 100, "tid": 1}
        return {"ph": "X", "cat": cat, "name": name, **where, "ts": ts, "dur": dur, "args": args}

    t = 1_000_000
    comm = {"Collective name": "allreduce", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20}
    comm |= {"dtype": "Float", "Process Group Name": "0", "Process Group Description": "default_pg"}
    events = [
        event("user_annotation", "ProfilerStep#1", t, 100 + DENSE_BUCKETS * 300 + 500 + 40 * DENSE_OPTIMIZER_KERNELS),
        event("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 5, 90),
    ]
    for b in range(DENSE_BUCKETS):
        at, mm, ar = t + 100 + b * 300, 2 * b + 1, 2 * b + 2
        events += [
            event("cpu_op", "aten::mm", at, 20, **{"External id": mm}),
            event("cuda_runtime", "cudaLaunchKernel", at + 5, 5, correlation=mm, **{"External id": mm}),
            event("kernel", "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n", at + 15, 250, gpu=True, correlation=mm),
            event("cpu_op", "record_param_comms", at + 30, 20, **{"External id": ar}, **comm),
            event("cuda_runtime", "cudaLaunchKernel", at + 35, 5, correlation=ar, **{"External id": ar}),
            event(
                "kernel",
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
                at + 270,
                200,
                gpu=True,
                correlation=ar,
                stream=20,
                **comm,
            ),
        ]
    # the optimizer: a sync that waits for the last all-reduce, host work the GPU waits for, then
    # small kernels each waiting for its launch
    end = t + 100 + DENSE_BUCKETS * 300
    sync = 2 * DENSE_BUCKETS + 1
    events += [
        event("cuda_runtime", "cudaStreamSynchronize", end, 175, correlation=sync),
        event("cpu_op", "Optimizer.zero_grad#SGD.zero_grad", end + 180, 300),
    ]
    for j in range(DENSE_OPTIMIZER_KERNELS):
        at, c = end + 490 + 40 * j, sync + 1 + j
        events += [
            event("cpu_op", "aten::add_", at, 15, **{"External id": c}),
            event("cuda_runtime", "cudaLaunchKernel", at + 5, 5, correlation=c, **{"External id": c}),
            event("kernel", "vectorized_elementwise_kernel", at + 12, 4, gpu=True, correlation=c),
        ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}], "traceEvents": events}


_DENSE_TEXT: Final = json.dumps(_dense_doc())
#: ``dense``: not a recorded trace but one step written here (:func:`dense_source`), a collective
#: instance per 1.8 kB of JSON (the A100 shape has one per 470 kB): ranks of 4 MB hold the steps
#: and instances of an A100 rank of a GB, to measure what grows with ranks x instances. Its
#: folder is named by its content, so that a step written otherwise is never read from the
#: files (or the tiled ranks) of the step before.
DENSE: Final = DATA_DIR / f"dense-{hashlib.sha256(_DENSE_TEXT.encode()).hexdigest()[:8]}" / "rank0.json"
#: Every source a benchmark can tile: the recorded shapes, and the dense one.
SOURCES: Final = {**SHAPES, "dense": DENSE}


def dense_source(path: Path | None = None) -> Path:
    """One training step on one GPU, in microseconds, with the A100 shape's structure and few
    events: a DataLoader fetch, then :data:`DENSE_BUCKETS` times a GEMM launched from an
    ``aten::mm`` and the NCCL all-reduce of its gradient bucket (its ``record_param_comms`` op,
    then its kernel on the collective stream, overlapping the next GEMM), each kernel linked to
    its launch by correlation id; then the optimizer: a stream sync, host work, and
    :data:`DENSE_OPTIMIZER_KERNELS` small kernels waiting for their launches. The wastes the A100
    shape's what-ifs re-time (compute, comms, launches, the sync) are there. 1 MB of it holds
    about 56 steps and 560 collective instances: a rank of 4 MB holds the steps and instances
    of an A100 rank of a GB (224 and 2,231 against 216 and 2,150). Written once (the folder is
    ignored by git)."""
    path = DENSE if path is None else path
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_DENSE_TEXT)
    return path


def with_memory(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with a [memory] allocation and free around every CPU operator (profile_memory=True)."""
    events = doc["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and "dur" in e]
    changes = []
    for i, op in enumerate(ops):
        size = MEMORY_SIZES[i % len(MEMORY_SIZES)]
        changes += [(op["ts"], size, op), (op["ts"] + op["dur"], -size, op)]
    changes.sort(key=lambda c: c[0])
    total, memory = 0, []
    for ts, size, op in changes:
        total += size
        memory.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": "[memory]",
                "pid": op.get("pid"),
                "tid": op.get("tid"),
                "ts": ts,
                "args": {
                    "Total Reserved": total + RESERVE,
                    "Total Allocated": total,
                    "Bytes": size,
                    "Device Id": 0,
                    "Device Type": 1,
                    "Addr": 0,
                },
            }
        )
    return {**doc, "traceEvents": events + memory}


def _load(source: Path) -> dict[str, Any]:
    data = source.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc: dict[str, Any] = orjson.loads(data)
    return doc


def _max_id(events: list[dict[str, Any]]) -> int:
    best = 0
    for e in events:
        args = e.get("args") or {}
        for value in (*(args.get(key) for key in _ID_ARGS), e.get("id")):
            if isinstance(value, int) and value > best:
                best = value
    return best


def _copy(
    events: list[dict[str, Any]], k: int, *, shift: int, id_offset: int, step_offset: int
) -> list[dict[str, Any]]:
    """The ``k``-th copy of ``events``: shifted in time, ids and steps offset."""
    out = []
    for e in events:
        c = dict(e)
        c["ts"] = e["ts"] + k * shift
        if isinstance(e.get("id"), int):
            c["id"] = e["id"] + k * id_offset
        args = e.get("args")
        if args and any(key in args for key in _ID_ARGS):
            a = dict(args)
            for key in _ID_ARGS:
                if isinstance(a.get(key), int):
                    a[key] += k * id_offset
            c["args"] = a
        if (m := _STEP.match(str(e.get("name", "")))) is not None:
            c["name"] = f"ProfilerStep#{int(m[1]) + k * step_offset}"
        out.append(c)
    return out


def build_events(doc: dict[str, Any], target_bytes: int) -> tuple[bytes, int]:
    """The events of about ``target_bytes`` of JSON (without brackets), and their count."""
    events = [e for e in doc["traceEvents"] if "ts" in e]
    meta = [e for e in events if e.get("ph") == "M" or e.get("cat") == "Trace"]
    body = sorted((e for e in events if not (e.get("ph") == "M" or e.get("cat") == "Trace")), key=lambda e: e["ts"])
    start = min(int(e["ts"]) for e in body)
    end = max(int(e["ts"]) + int(e.get("dur", 0)) for e in body)
    shift = end - start + GAP_US
    id_offset = _max_id(body) + 1
    steps = [int(m[1]) for e in body if (m := _STEP.match(str(e.get("name", ""))))]
    step_offset = (max(steps) - min(steps) + 1) if steps else 0
    sizes = list(accumulate(len(orjson.dumps(e)) + 1 for e in body))  # with the comma
    whole, rest = divmod(target_bytes, sizes[-1])
    chunks: list[bytes] = []
    count = 0
    for k in range(whole + 1):
        batch = body if k < whole else body[: bisect.bisect_left(sizes, rest)]  # the first part in time
        if batch:
            chunks.append(
                orjson.dumps(_copy(batch, k, shift=shift, id_offset=id_offset, step_offset=step_offset))[1:-1]
            )
            count += len(batch)
    span = (whole + 1) * shift
    head = [dict(e, dur=span) if e.get("cat") == "Trace" else e for e in meta]
    if head:
        chunks.insert(0, orjson.dumps(head)[1:-1])
        count += len(head)
    return b",".join(chunks), count


def generate(spec: Spec, data_dir: Path = DATA_DIR, *, log: bool = False) -> Path:
    """The folder of ``spec``'s traces, generated unless already there with the same parameters."""
    folder = data_dir / spec.name
    marker = data_dir / f"{spec.name}.done.json"
    if marker.is_file() and folder.is_dir():
        try:
            if json.loads(marker.read_text())["spec"] == asdict(spec):
                return folder
        except (ValueError, KeyError):
            pass
    marker.unlink(missing_ok=True)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    if Path(spec.source) == DENSE:
        dense_source()
    doc = _load(Path(spec.source))
    if spec.memory:
        doc = with_memory(doc)
    body, count = build_events(doc, int(spec.mb_per_rank * 1e6))
    info = doc.get("distributedInfo") or {}
    world = spec.world_size or spec.ranks
    sizes = []
    for rank in range(spec.ranks):
        head = {
            "schemaVersion": doc.get("schemaVersion", 1),
            "deviceProperties": doc.get("deviceProperties", []),
            "distributedInfo": {"backend": info.get("backend", "nccl"), "rank": rank, "world_size": world},
        }
        # HTA finds the rank with the pattern '"rank":\s+(\d+)': keep json's ": " separator
        data = json.dumps(head).encode()[:-1] + b', "traceEvents": [' + body + b"]}"
        (folder / f"rank{rank}.json.gz").write_bytes(gzip.compress(data, compresslevel=1, mtime=0))
        sizes.append(len(data))
        if log:
            print(f"  wrote {folder / f'rank{rank}.json.gz'} ({len(data) / 1e6:.0f} MB of JSON)", file=sys.stderr)
    marker.write_text(json.dumps({"spec": asdict(spec), "events_per_rank": count, "json_bytes": sizes}, indent=1))
    return folder


def describe(spec: Spec, data_dir: Path = DATA_DIR) -> dict[str, Any]:
    """What the marker of a generated folder records (events per rank, JSON bytes)."""
    doc: dict[str, Any] = json.loads((data_dir / f"{spec.name}.done.json").read_text())
    return doc


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.generate --ranks 8 --mb-per-rank 125``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--mb-per-rank", type=float, default=125.0)
    parser.add_argument("--shape", choices=sorted(SOURCES), default="a100", help="the trace repeated [a100]")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    spec = Spec(ranks=args.ranks, mb_per_rank=args.mb_per_rank, source=str(SOURCES[args.shape]))
    print(generate(spec, args.data_dir, log=True))


if __name__ == "__main__":
    main()
