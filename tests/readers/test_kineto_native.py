"""The native decoder of Kineto chunks gives msgspec's frames (typed, else lenient), or declines."""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from tracekit.readers import kineto_native
from tracekit.readers.kineto_decode import EVENTS_DECODER, LOOSE_EVENTS_DECODER, OTHER_PHASES, raw_frames
from tracekit.readers.kineto_native import native_frames, native_prefix, owned
from tracekit.readers.kineto_normalize import CATEGORY_FACTS, NAME_FACTS, prepare
from tracekit.readers.kineto_stream import NotChunked, open_text, split_events

if TYPE_CHECKING:
    from pathlib import Path

Frames = tuple[pl.DataFrame, "pl.DataFrame | None"]


@pytest.fixture(autouse=True)
def native() -> None:
    """The extension, built by the install; CI (CI=true) fails without it, elsewhere it skips."""
    if kineto_native._native is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("tracekit.readers._kineto_columns was not built: the install needs a C compiler")
        pytest.skip("the native decoder was not built")


def reference(text: bytes) -> Frames | Exception:
    """What the msgspec path makes of ``text`` (typed, else lenient: ``kineto.decode_chunk``),
    or what it raises."""
    try:
        return raw_frames(EVENTS_DECODER.decode(text))
    except msgspec.ValidationError:
        pass
    except (msgspec.MsgspecError, UnicodeDecodeError) as exc:
        return exc
    try:
        return raw_frames(LOOSE_EVENTS_DECODER.decode(text))
    except (msgspec.MsgspecError, UnicodeDecodeError) as exc:
        return exc


def typed(text: bytes) -> bool:
    """Whether the typed decoder takes ``text``."""
    try:
        EVENTS_DECODER.decode(text)
    except (msgspec.MsgspecError, UnicodeDecodeError):
        return False
    return True


def same(text: bytes) -> bool:
    """The native frames of ``text`` are msgspec's; True when the native decoder took it."""
    got = kineto_native._decode(text)
    want = reference(text)
    if got is None:  # declined: allowed, msgspec then decides
        return False
    assert not isinstance(want, Exception), f"native decoded what msgspec rejects ({want}): {text[:300]!r}"
    # the names categorical, the category read through its facts only
    strings = [pl.col(c).cast(pl.String) for c in ("name", "coll_name", "pg_name")]
    assert_frame_equal(got[0].drop(*CATEGORY_FACTS, *NAME_FACTS).with_columns(strings), want[0].drop("cat"))
    assert_frame_equal(prepare(got[0]), prepare(want[0]))  # the facts of each category and name given, or worked out
    assert (got[1] is None) == (want[1] is None)
    if got[1] is not None and want[1] is not None:
        assert_frame_equal(got[1], want[1])
    return True


@pytest.mark.e2e  # every shared trace: the property test of any events stays in the fast lane
@pytest.mark.concurrent  # its outcome does not depend on timing (tests/conftest.py)
def test_every_chunk_of_every_shared_trace_decodes_as_with_msgspec(kineto_dir: Path) -> None:
    files = sorted(p for p in kineto_dir.rglob("*.json*") if p.is_file())
    assert len(files) > 20
    taken = 0
    for path in files:
        try:
            with open_text(path) as stream:
                # 1 MB chunks: every event of the 180 MB, in 156 chunks (test_kineto_chunks tries small ones)
                chunks = [p.text for p in split_events(stream, chunk_bytes=1024 * 1024) if p.kind == "events"]
        except NotChunked:
            continue
        for text in chunks:
            if same(text):
                taken += 1
            else:  # the native decoder declines only what the typed decoder rejects
                assert not typed(text), path
    assert taken > 140


_EVENT = {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 7, "ts": 1.5, "dur": 2, "args": {"stream": 7}}


def _chunk(*events: Any) -> bytes:
    return ("[" + ",".join(e if isinstance(e, str) else json.dumps(e) for e in events) + "]").encode()


# each: the text, and whether the native decoder must take it (else it may decline)
CASES: list[tuple[bytes, bool]] = [
    (b"[]", True),
    (b" [ ] ", True),
    (_chunk(_EVENT), True),
    (_chunk(_EVENT, {"ph": "f", "id": 1, "pid": "x", "ts": "y"}, {"ph": "M", "name": 5, "args": {"name": 1}}), True),
    (_chunk({"ph": "i", "name": "[memory]", "ts": 3, "args": {"Bytes": -5, "Addr": 2**62, "Device Id": 0}}), True),
    (_chunk({"ph": "I", "name": "[memory]", "ts": None, "args": {"Device Type": 1}}), True),
    (_chunk({"ph": "X", "name": "[memory]", "args": {"Bytes": "not an instant's"}}), True),
    # text for an integer argument: typed msgspec rejects the chunk, read leniently (digits, else none)
    (_chunk({"ph": "i", "name": "[memory]", "args": {"Bytes": "x", "Addr": " 12 ", "Device Id": "gpu-1"}}), True),
    (_chunk(_EVENT, {"ph": "X", "cat": "gpu_memcpy", "args": {"bytes": "128", "correlation": "9", "Seq": ""}}), True),
    (_chunk({"ph": "X", "args": {"bytes": "99999999999999999999", "stream": "-9223372036854775808"}}), True),
    (_chunk({"ph": "X", "args": {"bytes": "١٢"}}), False),  # Unicode digits: polars decides
    (_chunk({"ph": "X", "args": {"bytes": "12", "device": 1.5}}), False),  # a float: msgspec decides
    (_chunk({"ph": "X", "pid": "Spans", "tid": "stream 7 "}, {"ph": "X", "pid": "-12", "tid": "a-3"}), True),
    (_chunk({"ph": "X", "pid": "99999999999999999999", "tid": "007"}), True),
    (_chunk({"ph": "X", "tid": "-9223372036854775808", "pid": 9223372036854775807}), True),
    (_chunk({"ph": "X", "pid": 1.0}), False),
    (_chunk({"ph": "X", "pid": True}), False),
    (_chunk({"ph": "X", "pid": 18446744073709551615}), False),
    (_chunk({"ph": "X", "ts": 1e400}), False),
    (_chunk({"ph": "X", "ts": -0.0, "dur": 0}), True),
    (b'[{"ph":"X","ts":-0,"dur":1E2}]', True),
    (b'[{"ph":"X","ts":1661203463021924.123,"dur":0.019230769230769232}]', True),
    (b'[{"ph":"X","ts":12345678901234567890123,"dur":1e-400}]', True),
    (b'[{"ph":"X","ts":4.9e-324,"dur":2.2250738585072011e-308}]', True),
    (b'[{"ph":"X","ts":0.1,"dur":123456.789e-3}]', True),
    (_chunk({"ph": "X", "name": 'quote " slash \\ tab \t nl \n é ☃ \u0000 \U0001f600'}), True),
    (_chunk({"name": "before the phase", "ph": "X"}), True),
    (_chunk({"args": {"stream": 1}, "ph": "X"}), False),
    (_chunk({"ph": "X", "args": None}), False),
    (_chunk({"ph": "Z"}), False),
    (_chunk({"cat": "no phase"}), False),
    (_chunk({}), False),
    (b'[{"ph":"X","name":"a","name":"b"}]', False),  # msgspec keeps the last: declined
    (b'[{"ph":"X","args":{"Seq":1,"Seq":2}}]', False),
    (b'[{"ph":"X","ph":"X"}]', False),
    (b'[{"ph":"f","ph":"X"}]', False),
    (b'[{"ph":"X","n\\u0061me":"escaped key"}]', False),
    (b'[{"ph":"X","name":"\\ud83d\\ude00 \\uDBFF\\uDFFF","x":"\\ud800\\udc00"}]', True),
    (b'[{"ph":"X","name":"\\ud800"}]', False),
    (b'[{"ph":"X","name":"\\udc00\\ud800"}]', False),
    (b'[{"ph":"X","name":"\\ud800\\u0041"}]', False),
    (b'[{"ph":"X","name":"\\ud800\\n"}]', False),
    (b'[{"ph":"X","foo":"\\ud800"}]', False),
    (b'[{"ph":"X","foo":"\xff"}]', True),  # msgspec does not look into the text it skips
    (b'[{"ph":"X","name":"\xff"}]', False),
    (b'[{"ph":"X","name":"a\x01"}]', False),
    (b'[{"ph":"X","foo":"\x7f"}]', True),
    (b'[{"ph":"X","foo":"\\q"}]', False),
    (b'[{"ph":"X","foo":"\\uZZZZ"}]', False),
    (b'[{"ph":"X","foo":1,}]', False),
    (b'[{"ph":"X"},]', False),
    (b'[{"ph":"X"}] x', False),
    (b'[{"ph":"X","foo":-}]', False),
    (b'[{"ph":"X","foo":01}]', False),
    (b'[{"ph":"X","foo":1.}]', False),
    (b'[{"ph":"X","foo":.5}]', False),
    (b'[{"ph":"X","foo":NaN}]', False),
    (b'[{"ph":"X","foo":[1,2,]}]', False),
    (b'[{"ph":"X","foo":[1,{"a":tru}]}]', False),
    (b'[{"ph":"X","foo":{"a":[true,false,null,-1.5e+3,"s",{}]}}]', True),
    (b'[{"ph":"X","foo":' + b"[" * 200 + b"]" * 200 + b"}]", False),  # deep: msgspec decides
    (b'[{"ph":"X","dur":5', False),
    (b'[{"ph":"X","name":"unterminated', False),
    (b"", False),
    (b"{}", False),
    (b"[1]", False),
    (b'\t[\n{ "ph" : "X" , "cat" : null }\r\n]\n', True),
    # a launch's dimensions: three integers each, their product the threads (else none)
    (_chunk({"ph": "X", "cat": "kernel", "args": {"grid": [1, 1, 1], "block": [1, 1, 1]}}), True),
    (_chunk({"ph": "X", "args": {"block": [128, 1, 1], "grid": [2, 3, 4]}}, {"ph": "X", "args": {"grid": None}}), True),
    (_chunk({"ph": "i", "args": {"grid": [2, 1, 1], "block": None}}, {"ph": "X", "args": {"block": [1, 1, 1]}}), True),
    (_chunk({"ph": "X", "args": {"grid": [-1, 1, 1], "block": [-1, 1, 1]}}), True),
    (_chunk({"ph": "X", "args": {"grid": [0, 2**62, 1], "block": [2**62, 1, 1]}}), True),
    (_chunk({"ph": "X", "args": {"grid": [65536, 32767, 1], "block": [1, 1, 1]}}), True),  # 2**31 - 65536
    (_chunk({"ph": "X", "args": {"grid": [65536, 32768, 1], "block": [1, 1, 1]}}), True),  # 2**31: none
    (_chunk({"ph": "X", "args": {"grid": [2**62, 2**62, 2**62], "block": [2**62, 2**62, 2**62]}}), True),
    (b'[{"ph":"X","args":{"grid":[ 1 , 2 ,3 ] ,"block":[4,5,6]}}]', True),
    (_chunk({"ph": "X", "args": {"grid": [1, 1, 1], "block": [256, 1, 1], "bytes": "128"}}), True),  # lenient
    (_chunk({"ph": "X", "args": {"grid": [1, 1], "block": [1, 1, 1]}}), False),
    (_chunk({"ph": "X", "args": {"grid": [1, 1, 1, 1], "block": [1, 1, 1]}}), False),
    (_chunk({"ph": "X", "args": {"grid": [], "block": [1, 1, 1]}}), False),
    (_chunk({"ph": "X", "args": {"grid": [1, None, 1], "block": [1, 1, 1]}}), False),
    (_chunk({"ph": "X", "args": {"grid": [1.0, 1, 1], "block": [1, 1, 1]}}), False),
    (_chunk({"ph": "X", "args": {"grid": [True, 1, 1], "block": [1, 1, 1]}}), False),
    (_chunk({"ph": "X", "args": {"grid": ["1", 1, 1], "block": [1, 1, 1]}}), False),
    (_chunk({"ph": "X", "args": {"grid": "1,1,1", "block": [1, 1, 1]}}), False),
    (_chunk({"ph": "X", "args": {"grid": [2**64 - 1, 1, 1], "block": [1, 1, 1]}}), False),
    (b'[{"ph":"X","args":{"grid":[1,1,1],"grid":[2,1,1]}}]', False),
    (b'[{"ph":"X","args":{"grid":[1,1,1,]}}]', False),
]


@pytest.mark.parametrize(("text", "taken"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_a_chunk_decodes_as_with_msgspec_or_is_declined(text: bytes, taken: bool) -> None:
    assert same(text) or not taken


_KEYS = st.sampled_from(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", "s", "bp"])
_ARG_KEYS = st.sampled_from(
    [
        *("External id", "external id", "correlation", "device", "stream", "bytes", "Collective name"),
        *("In msg nelems", "Process Group Name", "Group size", "Seq", "Device Type", "Device Id", "Addr"),
        *("Bytes", "Total Allocated", "Total Reserved", "Input Dims", "cbid", "grid", "block"),
    ]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["[memory]", "Spans", "stream 7", "12", "cpu_op", "X", "i"]),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
_PHASES = st.sampled_from(["X", "X", "i", "I", *OTHER_PHASES[:5], "Z"])


@st.composite
def _event(draw: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": draw(_PHASES)}
    for key in draw(st.lists(_KEYS, max_size=7, unique=True)):
        if key == "args":
            event[key] = draw(st.one_of(st.dictionaries(_ARG_KEYS, _VALUES, max_size=5), st.none()))
        elif key != "ph":
            event[key] = draw(_VALUES)
    if draw(st.booleans()):  # typed values, so that most events are kept
        event |= {"name": draw(st.sampled_from(["[memory]", "k", "é"])), "ts": draw(st.floats(0, 1e16))}
    return event


@settings(max_examples=150, deadline=None)
@given(events=st.lists(_event(), max_size=6), ascii_only=st.booleans(), spaced=st.booleans())
def test_any_events_decode_as_with_msgspec_or_are_declined(
    events: list[dict[str, Any]], ascii_only: bool, spaced: bool
) -> None:
    text = json.dumps(events, ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":"))
    same(text.encode())


_INT64 = st.integers(-(2**63), 2**63 - 1)
_TEXT = st.one_of(st.none(), st.text(max_size=10), st.sampled_from(["[memory]", "cpu_op", "kernel"]))
_ID = st.one_of(st.none(), _INT64, st.text(alphabet="ab -0123456789", max_size=8))
_TIME = st.one_of(st.none(), _INT64, st.floats(allow_nan=False, allow_infinity=False))
_INT_ARGS = ["External id", "external id", "correlation", "device", "stream", "bytes", "In msg nelems", "Group size"]
_MEMORY_ARGS = ["Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved"]


@st.composite
def _typed_event(draw: Any) -> dict[str, Any]:
    """An event the typed decoder takes: the fields tracekit reads, each of its own type."""
    event: dict[str, Any] = {"ph": draw(st.sampled_from(["X", "i", "I", "f", "M"]))}
    event |= {k: draw(_TEXT) for k in ("cat", "name") if draw(st.booleans())}
    event |= {k: draw(_ID) for k in ("pid", "tid") if draw(st.booleans())}
    event |= {k: draw(_TIME) for k in ("ts", "dur") if draw(st.booleans())}
    ints = _INT_ARGS + (_MEMORY_ARGS if event["ph"] in "iI" else [])
    args = {k: draw(st.one_of(st.none(), _INT64)) for k in draw(st.lists(st.sampled_from(ints), unique=True))}
    args |= {k: draw(_TEXT) for k in ("Collective name", "Process Group Name") if draw(st.booleans())}
    if draw(st.booleans()):
        args["Input Dims"] = draw(_VALUES)
    for key in ("grid", "block"):  # a kernel's launch: three integers
        if draw(st.booleans()):
            args[key] = draw(
                st.one_of(st.none(), st.lists(st.sampled_from([0, 1, 2, 128, 65536, 2**40]), min_size=3, max_size=3))
            )
    if args or draw(st.booleans()):
        event["args"] = args
    return event


@settings(max_examples=150, deadline=None)
@given(events=st.lists(_typed_event(), max_size=8), ascii_only=st.booleans())
def test_events_of_the_right_types_are_taken(events: list[dict[str, Any]], ascii_only: bool) -> None:
    """The native decoder declines no event that msgspec takes, written as Python writes JSON
    (the test above cannot fail by declining everything)."""
    assert same(json.dumps(events, ensure_ascii=ascii_only).encode())


@settings(max_examples=150, deadline=None)
@given(events=st.lists(_typed_event(), max_size=6), after=st.binary(max_size=40), spaced=st.booleans())
def test_a_prefix_is_the_array_it_starts_with_and_where_that_ends(
    events: list[dict[str, Any]], after: bytes, spaced: bool
) -> None:
    """``native_prefix``: the frames of the array that starts the text, whatever follows it
    (the fields that end a document), and its length up to its ``]``."""
    text = json.dumps(events, separators=(", ", ": ") if spaced else (",", ":")).encode()
    got = native_prefix(text + after)
    want = kineto_native._decode(text)
    assert want is not None and got is not None
    (frames, memory), read = got
    assert read == len(text)
    assert_frame_equal(frames, want[0])
    assert (memory is None) == (want[1] is None)


def test_a_prefix_cut_before_its_end_is_declined() -> None:
    """The list cut anywhere before its ``]`` and followed by a document's last fields holds no
    whole array: declined (a ``}]`` inside a string or a nested list, or in the fields, is not
    the list's end)."""
    odd = {"ph": "X", "name": "a}]b", "pid": 1, "ts": 1.0, "args": {"Input Dims": [[1, 2], []], "x": [{"y": 1}]}}
    text = _chunk(_EVENT, odd)
    fields = b', "traceName": "}]", "x": [{"y": [1]}]}'
    whole = native_prefix(text + fields)
    assert whole is not None and whole[1] == len(text) and whole[0][0].height == 2
    for cut in range(len(text)):
        assert native_prefix(text[:cut] + fields) is None


def test_typical_events_are_taken() -> None:
    """The property test above cannot fail by declining everything: typical events are taken."""
    memory = {"ph": "i", "name": "[memory]", "ts": 2.5, "args": {"Bytes": 512, "Total Allocated": 1024}}
    assert same(_chunk(_EVENT, memory, {"ph": "s", "id": 3}))


def test_every_cut_of_a_chunk_is_declined() -> None:
    """A chunk cut anywhere (a truncated file) is malformed: declined, never misread."""
    memory = {"ph": "i", "name": "[memory]", "ts": 2.5, "args": {"Bytes": 512, "Addr": 7}}
    odd = {"ph": "X", "name": 'é\\u2603"', "pid": "stream 7", "ts": 1.25e3, "args": {"Input Dims": [[1, 2], []]}}
    text = json.dumps([_EVENT, memory, {"ph": "f", "id": 1}, odd], ensure_ascii=False).encode()
    for cut in range(len(text)):
        assert not same(text[:cut])


def test_the_columns_are_polars_own() -> None:
    """A column keeps no reference into the decoder's buffers (their heap would stay resident)."""
    memory = bytearray(np.arange(4, dtype=np.int64).tobytes())
    column = owned(pl.Series("x", np.frombuffer(memory, dtype=np.int64)))
    memory[0] = 9
    assert column.to_list() == [0, 1, 2, 3]


def test_decoding_in_threads_gives_the_same_frames() -> None:
    """The decoder releases the GIL while it reads: threads decoding at once agree."""
    text = _chunk(*([_EVENT] * 2000))
    want = kineto_native._decode(text)
    assert want is not None
    results: list[Frames | None] = []

    def work() -> None:
        results.extend(kineto_native._decode(text) for _ in range(5))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 20
    for got in results:
        assert got is not None
        assert_frame_equal(got[0], want[0])


def test_turned_off_it_declines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_native, "ENABLED", False)
    assert native_frames(_chunk(_EVENT)) is None
    assert native_prefix(_chunk(_EVENT)) is None
    assert kineto_native._decode(_chunk(_EVENT)) is not None
