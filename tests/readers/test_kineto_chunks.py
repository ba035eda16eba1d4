"""A Kineto file read in chunks gives the frames of the file read whole, or is read whole."""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING, Any

import msgspec
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.generate import _load, build_events, with_memory
from tests.factories import kineto_event, simple_step, write_kineto
from tracekit.errors import TraceReadError
from tracekit.readers import kineto, kineto_native, kineto_normalize, nsys_meta
from tracekit.readers.kineto import _read_whole, read_chunked, read_kineto
from tracekit.readers.kineto_decode import DECODER
from tracekit.readers.kineto_stream import open_text, split_events
from tracekit.readers.nsys import read_nsys

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.readers.trace import RankTrace


def assert_same(a: RankTrace, b: RankTrace) -> None:
    """Two reads of one file: the same frames (rows, order, dtypes) and the same facts."""
    assert a.events.schema == b.events.schema and a.events.equals(b.events)
    assert a.counters.schema == b.counters.schema and a.counters.equals(b.counters)
    facts = ("rank", "world_size", "backend", "devices", "schema_version", "process_groups", "device_memory")
    assert [getattr(a, f) for f in facts] == [getattr(b, f) for f in facts]
    assert a.warnings == b.warnings


def typed(path: Path) -> bool:
    """Whether the typed decoder takes the whole file (else the lenient path reads it)."""
    data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    try:
        DECODER.decode(data)
    except msgspec.ValidationError:
        return False
    return True


@pytest.mark.e2e  # every shared trace: the generated layouts below stay in the fast lane
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_every_shared_trace_reads_the_same_in_small_chunks(kineto_dir: Path) -> None:
    files = sorted(p for p in kineto_dir.rglob("*.json*") if p.is_file())
    assert len(files) > 20
    for path in files:  # 256 KB chunks: about 700 chunk boundaries in the 180 MB of JSON
        chunked = read_chunked(path, chunk_bytes=256 * 1024)
        if chunked is None:  # only a file that needs the lenient decoder goes back to a whole read
            assert not typed(path), path
            continue
        assert_same(_read_whole(path), chunked)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> Path:
    """A 3 MB trace as benchmarks/generate.py writes them (one line), with [memory] instants."""
    doc = with_memory(_load(shared_traces / "kineto" / "hta-trace-diff" / "control-rank3-a100.json.gz"))
    body, _ = build_events(doc, 3_000_000)
    head = {"schemaVersion": 1, "deviceProperties": doc["deviceProperties"], "distributedInfo": {"rank": 3}}
    path = tmp_path_factory.mktemp("gen") / "rank3.json.gz"
    path.write_bytes(gzip.compress(json.dumps(head).encode()[:-1] + b', "traceEvents": [' + body + b"]}"))
    return path


@pytest.mark.parametrize("chunk_bytes", [16_384, 300_000])  # 3 MB: 180 and 10 chunks
@pytest.mark.parametrize("events_rows", [None, 997])  # each kind's events made in slices of 997
def test_generated_one_line_trace_reads_the_same(
    generated: Path, chunk_bytes: int, events_rows: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if events_rows is not None:
        monkeypatch.setattr(kineto_normalize, "EVENTS_ROWS", events_rows)
    chunked = read_chunked(generated, chunk_bytes=chunk_bytes)
    assert chunked is not None and chunked.counters.height > 0
    assert_same(_read_whole(generated), chunked)


@pytest.mark.parametrize("native", [True, False], ids=["threads-native", "processes-msgspec"])
def test_chunks_decoded_in_two_workers_read_the_same(
    generated: Path, native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads decode the chunks natively; without the native decoder, two processes."""
    if native and not kineto_native.ENABLED:
        pytest.skip("the native decoder was not built")
    monkeypatch.setattr(kineto_native, "ENABLED", native)
    pools: list[str] = []
    for pool in (kineto, "ThreadPoolExecutor"), (kineto, "WorkerPool"):
        real = getattr(*pool)

        def spy(*args: Any, _real: Any = real, _name: str = pool[1], **kwargs: Any) -> Any:
            pools.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(*pool, spy)
    chunked = read_chunked(generated, chunk_bytes=500_000, jobs=2)
    assert chunked is not None
    assert pools == ["ThreadPoolExecutor" if native else "WorkerPool"]  # a process pool (tracekit.pools)
    assert_same(_read_whole(generated), chunked)


def test_read_kineto_reads_in_chunks_natively_else_large_files_only(
    generated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the native decoder every file is read in chunks (a small one all tail, decoded
    natively); without it, files of ``CHUNKED_MIN_BYTES`` and more only."""
    calls: list[int] = []
    real = kineto.read_chunked

    def spy(path: Path, *, chunk_bytes: int, jobs: int = 1, size: int | None = None) -> RankTrace | None:
        calls.append(chunk_bytes)
        return real(path, chunk_bytes=chunk_bytes, jobs=jobs, size=size)

    monkeypatch.setattr(kineto, "read_chunked", spy)
    monkeypatch.setattr(kineto_native, "ENABLED", False)
    whole = read_kineto(generated)
    assert not calls  # 3 MB: below CHUNKED_MIN_BYTES
    monkeypatch.setattr(kineto, "CHUNKED_MIN_BYTES", 1_000_000)
    assert_same(whole, read_kineto(generated))
    assert calls == [kineto.MIN_CHUNK_BYTES]  # 3 MB: chunks of the smallest size
    if kineto_native._native is None:
        return
    monkeypatch.setattr(kineto_native, "ENABLED", True)
    monkeypatch.setattr(kineto, "CHUNKED_MIN_BYTES", 2**40)
    assert_same(whole, read_kineto(generated))
    assert calls == [kineto.MIN_CHUNK_BYTES] * 2


def test_the_last_events_are_decoded_natively_up_to_their_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tail's events are decoded natively up to the ``]`` that ends their list, though
    ``}]`` comes before it inside strings and nested values and after it in the fields; the
    fields after the list are read as before."""
    if not kineto_native.ENABLED:
        pytest.skip("the native decoder was not built")
    events = simple_step()
    events[0]["args"] = {"Input Dims": [[1, 2], []], "note": "a}]b", "nested": [{"x": [1]}]}
    events[1]["name"] = "k}]"
    doc = {"traceEvents": events, "traceName": "x}]", "distributedInfo": {"rank": 1, "world_size": 4}}
    doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100"}]
    path = tmp_path / "rank1.json"
    path.write_text(json.dumps(doc))
    by_msgspec: list[int] = []
    real = kineto.raw_frames

    def spy(events: Any) -> Any:
        by_msgspec.append(len(events))
        return real(events)

    monkeypatch.setattr(kineto, "raw_frames", spy)
    chunked = read_chunked(path, chunk_bytes=kineto.MIN_CHUNK_BYTES)
    assert chunked is not None and by_msgspec == []  # all tail, none of it decoded by msgspec
    assert chunked.rank == 1 and chunked.world_size == 4 and chunked.events.height > 0
    assert_same(_read_whole(path), chunked)


def test_a_chunk_is_a_part_of_its_file_within_bounds() -> None:
    mib = 1024 * 1024
    assert kineto.chunk_size(40 * mib) == kineto.MIN_CHUNK_BYTES
    assert kineto.chunk_size(125 * 10**6) == kineto.MIN_CHUNK_BYTES  # 3.7 MiB a 32nd: the floor
    assert kineto.chunk_size(192 * mib) == 6 * mib
    assert kineto.chunk_size(256 * mib) == kineto.CHUNK_BYTES == 8 * mib
    assert kineto.chunk_size(2 * 10**9) == kineto.CHUNK_BYTES


@pytest.mark.parametrize("views", [False, True])
def test_the_pieces_hold_the_whole_document(generated: Path, views: bool) -> None:
    text = gzip.decompress(generated.read_bytes())
    with open_text(generated) as stream:
        # a view is valid until the next piece: its text is copied out before that
        pieces = [(p.kind, p.text, p.size) for p in split_events(stream, chunk_bytes=20_000, block=50_000, views=views)]
    assert [kind for kind, _, _ in pieces[:2]] == ["head", "events"] and pieces[-1][0] == "tail"
    assert all(size == len(piece) for _, piece, size in pieces)
    assert all(piece.startswith(b"[{") and piece.endswith(b"}]") for _, piece, _ in pieces[1:-1])
    events = [piece[1:-1] for _, piece, _ in pieces[1:-1]]
    assert b",".join([*events, pieces[-1][1]]) == text[len(pieces[0][1]) :]  # generate.py writes "},{"


def test_a_view_of_events_is_released_when_the_next_piece_is_read(generated: Path) -> None:
    with open_text(generated) as stream:
        pieces = split_events(stream, chunk_bytes=20_000, block=50_000, views=True)
        assert next(pieces).kind == "head"
        first = next(pieces)
        assert first.kind == "events"
        opening, view, closing = first.parts
        assert (opening, closing) == (b"[", b"]") and isinstance(view, memoryview) and bytes(view[:1]) == b"{"
        assert next(pieces).kind == "events"
        with pytest.raises(ValueError, match="released"):
            bytes(view)  # the buffer behind it has moved on: a stale view cannot be read
        pieces.close()


def test_metadata_after_the_events_is_read(tmp_path: Path) -> None:
    doc = {"traceEvents": simple_step(), "distributedInfo": {"rank": 5, "world_size": 8}, "deviceProperties": []}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc, indent=2))
    chunked = read_chunked(path, chunk_bytes=100)
    assert chunked is not None and (chunked.rank, chunked.world_size) == (5, 8)
    assert_same(_read_whole(path), chunked)


def test_other_layouts_are_read_whole(tmp_path: Path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(simple_step()))
    utf16 = tmp_path / "utf16.json"
    utf16.write_bytes(json.dumps({"traceEvents": simple_step()}).encode("utf-16"))
    empty = write_kineto(tmp_path / "empty.json", [])
    # an entry that is no object: even the lenient decoder rejects its chunk, and the whole
    # read salvages the others (and says how many it left out)
    not_object = write_kineto(tmp_path / "list.json", [*simple_step(), [1, 2]])
    for path in (bare, utf16, empty, not_object):
        assert read_chunked(path, chunk_bytes=100) is None, path
        assert_same(_read_whole(path), read_kineto(path, chunk_bytes=100))


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("where", ["middle", "tail"])
def test_a_chunk_that_needs_the_lenient_decoder_is_read_leniently_alone(tmp_path: Path, jobs: int, where: str) -> None:
    """An event far into the file with text where an int belongs (AMD's ``"bytes": "128"``), and
    one of a phase outside the format: their chunk fails the typed decode (and the native decoder
    declines it), so it alone is decoded leniently, in the chunk's worker, and the file is still
    read in chunks (a whole read held 7 GB for 2 GB of an MI300 trace), with the frames of the
    file read whole."""
    events = simple_step() * 40
    at = len(events) - 5 if where == "middle" else len(events)
    odd = {**kineto_event("cpu_op", "a", 1e6, 1), "ph": "?"}
    events[at:at] = [{**kineto_event("cuda_runtime", "hipMemcpyAsync", 2e6, 3), "args": {"bytes": "128"}}, odd]
    path = write_kineto(tmp_path / "amd.json", events)
    chunked = read_chunked(path, chunk_bytes=2000, jobs=jobs)
    assert chunked is not None
    assert chunked.events.filter(pl.col("name") == "hipMemcpyAsync")["bytes"].to_list() == [128]
    assert_same(_read_whole(path), chunked)


def test_a_truncated_file_fails_as_when_read_whole(tmp_path: Path) -> None:
    path = write_kineto(tmp_path / "cut.json.gz", simple_step() * 50)
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(TraceReadError) as whole:
        _read_whole(path)
    with pytest.raises(TraceReadError) as chunked:
        read_kineto(path, chunk_bytes=200)
    assert str(chunked.value) == str(whole.value)


# names that hold what separates events, and events laid out as Kineto and json.dumps write them
_names = st.text(alphabet=st.sampled_from(list('ab{}[],: "\\\n\u00e9')), max_size=12)


@st.composite
def _events(draw: Any) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 40))
    out = []
    for i in range(count):
        event = kineto_event(draw(st.sampled_from(["cpu_op", "kernel", "cuda_runtime"])), draw(_names), 1e6 + i, 2)
        if draw(st.booleans()):
            event["args"] = {**event.get("args", {}), "nested": [{"x": draw(_names)}, {"y": 1}]}
        out.append(event)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_events(), indent=st.sampled_from([None, 2]), chunk=st.integers(1, 400), gz=st.booleans())
def test_any_layout_reads_as_when_whole(
    tmp_path: Path, events: list[dict[str, Any]], indent: int | None, chunk: int, gz: bool
) -> None:
    path = tmp_path / ("t.json.gz" if gz else "t.json")
    data = json.dumps({"distributedInfo": {"rank": 1}, "traceEvents": events}, indent=indent).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    assert_same(_read_whole(path), read_kineto(path, chunk_bytes=chunk))


def test_nsys_tables_read_in_pages_read_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.readers.test_nsys import STRINGS, one_rank_tables, write_nsys

    path = write_nsys(tmp_path / "job.sqlite", one_rank_tables(), strings=STRINGS)
    [whole] = read_nsys(path)
    monkeypatch.setattr(nsys_meta, "PAGE_ROWS", 2)
    [paged] = read_nsys(path)
    assert whole.events.height > 4
    assert_same(whole, paged)
