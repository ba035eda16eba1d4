"""Malformed Kineto traces: truncations, encodings, wrong types, out-of-range values, ranks, no events.

Sources (see ``harness.SOURCES``): ``dlrm`` is worker 3 of a real 8-rank NCCL job (plain
JSON), mixed among workers 0-2; ``capture`` is rank 3 of tracekit's own 8-rank gloo capture
(gzip), mixed among ranks 0-2; ``tbplugin`` and ``a100`` are real traces cut to their first
3000 events, analyzed alone.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tests.robustness import builders as b
from tests.robustness.harness import Case

if TYPE_CHECKING:
    from collections.abc import Callable

#: One event's field set to each of these (a kernel of ``dlrm``, the ProfilerStep of ``capture``).
WRONG_VALUES: dict[str, Any] = {
    "true": True,
    "null": None,
    "string": "abc",
    "list": [1],
    "object": {"a": 1},
    "2^64": 2**64,
    "nan-string": "NaN",
    "negative": -1,
}
#: What an event with a wrong value in a field may lead to. A value that changes the time an
#: event covers (ts, dur) must not pass silently: the event is dropped with a warning naming
#: the file, or the file is skipped. Identities and args may be taken as they come.
FIELD_OUTCOMES: dict[str, tuple[str, ...]] = {
    "ts": ("warning", "skipped"),
    "dur": ("warning", "skipped"),
    "pid": ("ok", "warning"),
    "tid": ("ok", "warning"),
    "name": ("ok", "warning"),
    "args": ("ok", "warning"),
}
_DROPPED = ("warning", "skipped")
_TOLERATED = ("ok", "warning")


def _type_cases() -> list[Case]:
    cases = [
        Case(f"kernel-{field}-{label}", b.doc(b.set_field(b.longest, field, value)), FIELD_OUTCOMES[field])
        for field in FIELD_OUTCOMES
        for label, value in WRONG_VALUES.items()
    ]
    cases += [
        Case(
            f"step-{field}-{label}", b.doc(b.set_field(b.step, field, WRONG_VALUES[label])), _DROPPED, source="capture"
        )
        for field in ("ts", "dur")
        for label in ("null", "string", "true", "negative")
    ]
    return cases


def _truncation_cases() -> list[Case]:
    skipped = ("skipped",)
    return [
        Case("trunc-empty", b.content(b""), skipped),
        Case("trunc-empty-gz-name", b.content(b"", gz=False), skipped, source="capture"),
        Case("trunc-1-byte", b.stored(lambda d: d[:1]), skipped),
        Case("trunc-10pct", b.stored(b.cut(0.1)), skipped),
        Case("trunc-50pct", b.stored(b.cut(0.5)), skipped),
        Case("trunc-99pct", b.stored(b.cut(0.99)), skipped),
        Case("trunc-last-byte", b.stored(lambda d: d.rstrip()[:-1]), skipped),
        Case("trunc-inside-string", b.stored(lambda d: d[: d.index(b'"name": "', len(d) // 2) + 12]), skipped),
        Case("trunc-after-events-open", b.content(b'{"traceEvents": [', gz=False), skipped, source="capture"),
        Case("trunc-gz-1-byte", b.stored(lambda d: d[:1]), skipped, source="capture"),
        Case("trunc-gz-magic-only", b.stored(lambda d: d[:2]), skipped, source="capture"),
        Case("trunc-gz-header", b.stored(lambda d: d[:10]), skipped, source="capture"),
        Case("trunc-gz-10pct", b.stored(b.cut(0.1)), skipped, source="capture"),
        Case("trunc-gz-50pct", b.stored(b.cut(0.5)), skipped, source="capture"),
        Case("trunc-gz-no-isize", b.stored(lambda d: d[:-4]), skipped, source="capture"),
        Case("trunc-gz-no-trailer", b.stored(lambda d: d[:-8]), skipped, source="capture"),
        Case("gz-crc-flipped", b.stored(lambda d: d[:-8] + bytes([d[-8] ^ 0xFF]) + d[-7:]), skipped, source="capture"),
        Case(
            "gz-body-flipped", b.stored(lambda d: d[:100] + bytes([d[100] ^ 0xFF]) + d[101:]), skipped, source="capture"
        ),
        Case("gz-of-truncated-json", b.text(b.cut(0.5)), skipped, source="capture"),
        Case("gz-of-nothing", b.content(b.gz(b""), gz=False), skipped, source="capture"),
        Case("gz-of-gz", b.stored(b.gz), skipped, source="capture"),
        Case(
            "gz-trailing-garbage", b.stored(lambda d: d + b"garbage!"), ("ok", "warning", "skipped"), source="capture"
        ),
        Case(
            "gz-two-members",
            b.text(lambda d: b.gz(d[:1000]) + b.gz(d[1000:]), gz=False),
            ("ok",),
            source="capture",
            same_as_clean=True,
        ),
        Case("gz-zero-padded", b.stored(lambda d: d + bytes(4096)), ("ok",), source="capture", same_as_clean=True),
        Case("trunc-legacy-50pct", b.stored(b.cut(0.5)), skipped, source="tbplugin"),
        Case("trunc-a100-90pct", b.stored(b.cut(0.9)), skipped, source="a100"),
    ]


def _encoding_cases() -> list[Case]:
    either = ("ok", "skipped")
    latin1 = b.text(lambda d: d.replace(b"ncclKernel_SendRecv", b"ncclKernel_S\xe9ndRecv", 1))
    raw_nul = b.text(lambda d: d.replace(b"ncclKernel_SendRecv", b"ncclKernel_\x00SendRecv", 1))
    return [
        Case("utf8-bom", b.text(lambda d: b"\xef\xbb\xbf" + d), either, same_as_clean=True),
        Case("utf8-bom-gz", b.text(lambda d: b"\xef\xbb\xbf" + d), either, source="capture", same_as_clean=True),
        Case("utf16-le-bom", b.text(lambda d: d.decode().encode("utf-16")), either, same_as_clean=True),
        Case(
            "utf16-be-bom", b.text(lambda d: b"\xfe\xff" + d.decode().encode("utf-16-be")), either, same_as_clean=True
        ),
        Case("utf16-le-no-bom", b.text(lambda d: d.decode().encode("utf-16-le")), either, same_as_clean=True),
        Case("latin1-byte-in-name", latin1, ("warning", "ok", "skipped")),
        Case(
            "nul-escape-in-name", b.doc(b.rename_all(_TOP, "ncclKernel\u0000SendRecv")), _TOLERATED, check=_no_raw_nul
        ),
        Case("nul-byte-in-string", raw_nul, ("warning", "skipped")),
        Case("nul-padding-after-json", b.text(lambda d: d + bytes(4096)), ("ok", "warning", "skipped")),
        Case("all-nul-bytes", b.content(bytes(4096)), ("skipped",)),
        Case("binary-noise", b.content(bytes((i * 7919) % 251 for i in range(8192))), ("skipped",)),
        Case(
            "pretty-crlf",
            b.doc(lambda d: json.dumps(d, indent=2).replace("\n", "\r\n").encode()),
            ("ok",),
            same_as_clean=True,
        ),
        Case("dur-nan-literal", b.doc_text(_sentinel("dur"), b"NaN"), _DROPPED),
        Case("ts-infinity-literal", b.doc_text(_sentinel("ts"), b"Infinity"), _DROPPED),
        Case("dur-1e400", b.doc_text(_sentinel("dur"), b"1e400"), _DROPPED),
        Case(
            "args-nested-100k-deep",
            b.doc_text(_sentinel_arg("queued"), b"[" * 100_000 + b"]" * 100_000),
            ("ok", "warning", "skipped"),
        ),
    ]


#: The name of worker 3's top kernel (NCCL send/recv), which several cases rename.
_TOP = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"


def _sentinel(field: str) -> Any:
    return b.set_field(b.longest, field, b.SENTINEL)


def _sentinel_arg(key: str) -> Any:
    return b.set_arg(b.longest, key, b.SENTINEL)


def _no_raw_nul(out: Any, problems: Any) -> None:
    problems.check("\x00" not in out.stdout, "a raw NUL byte in the terminal output")
    problems.check(out.md is None or "\x00" not in out.md, "a raw NUL byte in the Markdown")


def _reverse(document: Any) -> None:
    document["traceEvents"].reverse()


def _range_cases() -> list[Case]:
    def far_future(document: Any) -> None:
        b.longest(document)["ts"] += 10**12  # 11.6 days after the rest

    def no_dur_everywhere(document: Any) -> None:
        for event in b.events(document):
            event.pop("dur", None)

    def every_kernel_dur_negative(document: Any) -> None:
        for event in b.events(document):
            if isinstance(event, dict) and event.get("cat") == "kernel":
                event["dur"] = -5

    def every_dur_times(factor: float) -> Callable[[Any], None]:
        def scaled(document: Any) -> None:
            for event in b.events(document):
                if isinstance(event, dict) and isinstance(event.get("dur"), (int, float)):
                    event["dur"] *= factor

        return scaled

    def with_list_event(document: Any) -> None:
        document["traceEvents"].insert(5, [1, 2])

    def with_null_event(document: Any) -> None:
        document["traceEvents"].insert(5, None)

    def unknown_phase(document: Any) -> None:
        document["traceEvents"].insert(5, {"ph": "Z", "name": "x", "ts": 1, "pid": 1, "tid": 1})

    return [
        Case("ts-minus-5", b.doc(b.set_field(b.longest, "ts", -5)), _DROPPED),
        Case("ts-far-future", b.doc(far_future), _DROPPED),
        Case("ts-1e300", b.doc(b.set_field(b.longest, "ts", 1e300)), _DROPPED),
        Case("dur-minus-5", b.doc(b.set_field(b.longest, "dur", -5)), _DROPPED),
        Case("dur-missing", b.doc(b.set_field(b.longest, "dur", b.DELETE)), _DROPPED),
        Case("dur-missing-everywhere", b.doc(no_dur_everywhere), ("warning", "skipped")),
        # most of its device's work gone: not read (alone an error, among good ranks skipped)
        Case("every-kernel-dur-minus-5", b.doc(every_kernel_dur_negative), ("skipped",)),
        # no device records activities under 100 ns: durations missing, or in ms read as us
        Case("every-dur-zero", b.doc(every_dur_times(0)), ("skipped",)),
        Case("every-dur-in-ms", b.doc(every_dur_times(0.001)), ("skipped",)),
        Case("ts-missing", b.doc(b.set_field(b.longest, "ts", b.DELETE)), _DROPPED),
        Case("step-lasts-1e15-us", b.doc(b.set_field(b.step, "dur", 10**15)), _DROPPED),
        Case("step-starts-at-0", b.doc(b.set_field(b.step, "ts", 0)), _DROPPED),
        Case("capture-step-lasts-1e15-us", b.doc(b.set_field(b.step, "dur", 10**15)), _DROPPED, source="capture"),
        Case("kernel-no-name", b.doc(b.set_field(b.longest, "name", b.DELETE)), _TOLERATED),
        Case("kernel-empty-name", b.doc(b.set_field(b.longest, "name", "")), _TOLERATED),
        Case("kernel-no-cat", b.doc(b.set_field(b.longest, "cat", b.DELETE)), _TOLERATED),
        Case("kernel-correlation-object", b.doc(b.set_arg(b.longest, "correlation", {})), _TOLERATED),
        Case("kernel-args-empty-list", b.doc(b.set_field(b.longest, "args", [])), _TOLERATED),
        Case("kernel-device-2^40", b.doc(b.set_arg(b.longest, "device", 2**40)), (*_TOLERATED, "skipped")),
        Case("kernel-stream-string", b.doc(b.set_arg(b.longest, "stream", "stream x")), _TOLERATED),
        Case(
            "op-external-id-object", b.doc(b.set_arg(lambda d: b.longest(d, "cpu_op"), "External id", {})), _TOLERATED
        ),
        Case("event-is-a-list", b.doc(with_list_event), _TOLERATED),
        Case("event-is-null", b.doc(with_null_event), _TOLERATED),
        Case("unknown-phase", b.doc(unknown_phase), ("ok",), same_as_clean=True),
        Case("events-reversed", b.doc(_reverse), ("ok",), same_as_clean=True),
        Case("legacy-step-dur-negative", b.doc(b.set_field(b.step, "dur", -5)), _DROPPED, source="tbplugin"),
        Case("a100-kernel-ts-null", b.doc(b.set_field(b.longest, "ts", None)), _DROPPED, source="a100"),
    ]


def _rank_cases() -> list[Case]:
    bad = ("warning", "skipped")
    return [
        Case("rank-minus-1", b.doc(b.set_info("rank", -1)), bad),
        Case("rank-8-of-world-8", b.doc(b.set_info("rank", 8)), bad),
        Case("rank-7.9", b.doc(b.set_info("rank", 7.9)), bad),
        Case("rank-0.5", b.doc(b.set_info("rank", 0.5)), bad),
        Case("rank-1e12", b.doc(b.set_info("rank", 10**12)), bad),
        Case("rank-2^64", b.doc(b.set_info("rank", 2**64)), bad),
        Case("rank-true", b.doc(b.set_info("rank", True)), bad),
        Case("rank-string-3", b.doc(b.set_info("rank", "3")), _TOLERATED),
        Case("rank-string-word", b.doc(b.set_info("rank", "three")), _TOLERATED),
        Case("rank-null", b.doc(b.set_info("rank", None)), _TOLERATED),
        Case("rank-list", b.doc(b.set_info("rank", [3])), _TOLERATED),
        Case("world-size-0", b.doc(b.set_info("world_size", 0)), bad),
        Case("world-size-negative", b.doc(b.set_info("world_size", -8)), bad),
        Case("world-size-string", b.doc(b.set_info("world_size", "8")), _TOLERATED),
        Case("world-size-2^64", b.doc(b.set_info("world_size", 2**64)), bad),
        Case("distributed-info-string", b.doc(lambda d: d.update(distributedInfo="gloo")), _TOLERATED),
        Case(
            "pg-config-garbage",
            b.doc(b.set_info("pg_config", [{"pg_name": 0, "ranks": "abc"}, 5, {"ranks": [2**64]}])),
            _TOLERATED,
        ),
        Case(
            "pg-config-huge-rank",
            b.doc(b.set_info("pg_config", [{"pg_name": "0", "ranks": [0, 1, 2, 2**64]}])),
            _TOLERATED,
        ),
        Case(
            "device-properties-garbage",
            b.doc(lambda d: d.update(deviceProperties=[1, "x", {"name": 5}, None])),
            _TOLERATED,
        ),
        Case("capture-rank-minus-1", b.doc(b.set_info("rank", -1)), bad, source="capture"),
    ]


def _empty_cases() -> list[Case]:
    nothing = ("skipped", "warning")
    info = {"backend": "nccl", "rank": 3, "world_size": 8}
    return [
        Case("no-events", b.content({"traceEvents": []}), nothing),
        Case("no-events-with-rank", b.content({"traceEvents": [], "distributedInfo": info}), nothing),
        Case("no-events-list", b.content([]), nothing),
        Case(
            "only-metadata-events",
            b.doc(lambda d: {**d, "traceEvents": [e for e in d["traceEvents"] if e.get("ph") == "M"]}),
            nothing,
        ),
        Case(
            "only-instants",
            b.doc(lambda d: {**d, "traceEvents": [{**e, "ph": "i"} for e in d["traceEvents"][:50]]}),
            nothing,
        ),
        Case("empty-object", b.content({}), ("skipped",)),
        Case("json-null", b.content(b"null"), ("skipped",)),
        Case("json-number", b.content(b"42"), ("skipped",)),
        Case("json-string", b.content(b'"traceEvents"'), ("skipped",)),
        Case("events-null", b.content({"traceEvents": None}), ("skipped",)),
        Case("events-object", b.content({"traceEvents": {}}), ("skipped",)),
        Case("events-numbers", b.content({"traceEvents": [1, 2, 3]}), nothing),
        Case("events-nulls", b.content({"traceEvents": [None, None]}), nothing),
        Case("no-events-gz", b.content({"traceEvents": []}), nothing, source="capture"),
    ]


def _shift_step_numbers(document: Any) -> None:
    """Every ProfilerStep#N named #N+1: the rank called ``prof.step()`` once more than the others."""
    for event in b.events(document):
        name = str(event.get("name", ""))
        if name.startswith("ProfilerStep#"):
            event["name"] = f"ProfilerStep#{int(name.split('#')[1]) + 1}"


def _paired_within_a_step(out: Any, problems: Any) -> None:
    """The shifted rank's calls are paired with the same iteration's: no clock offset of a step,
    no step left out, no instance whose arrivals spread over half a step."""
    if out.doc is None:
        return
    collectives = out.doc["collectives"]
    corrected = [k["rank"] for k in collectives["clocks"] if k["corrected"]]
    problems.check(not corrected, f"the shifted numbering read as a clock offset of ranks {corrected}")
    problems.check(not collectives["misaligned"], f"steps left out: {collectives['misaligned'][:2]}")
    shortest = min((s["duration_ns"] for s in out.doc["steps"]["per_step"]), default=0)
    widest = max((i["spread_ns"] or 0 for i in collectives["instances"]), default=0)
    problems.check(widest < shortest / 2, f"arrivals {widest} ns apart in steps of {shortest} ns: paired a step apart")


def _alignment_cases() -> list[Case]:
    # tracekit's own gloo capture, rank 3 among ranks 0-2 of one host: before, its steps were
    # paired one apart and read as its clock 185 ms behind (corrected)
    return [
        Case("step-numbers-shifted", b.doc(_shift_step_numbers), ("ok",), source="capture", check=_paired_within_a_step)
    ]


def _steps(document: Any) -> list[dict[str, Any]]:
    """The ProfilerStep ranges (the capture's ``step#N`` markers are NVTX ranges, not in a Kineto trace)."""
    return [e for e in b.events(document) if str(e.get("name", "")).startswith("ProfilerStep#")]


def _zero_length_steps(document: Any) -> None:
    for event in _steps(document):
        event["dur"] = 0


def _steps_marked_twice(document: Any) -> None:
    for event in _steps(document):
        document["traceEvents"].append({**event, "ts": event["ts"] + 1, "dur": event["dur"] / 2})


def _steps_run_over(document: Any) -> None:
    for event in _steps(document):
        event["dur"] *= 1.5


def _durations_in_ns(document: Any) -> None:
    for event in b.events(document):
        if isinstance(event, dict) and isinstance(event.get("dur"), (int, float)):
            event["dur"] *= 1000


def _a_minute_earlier(document: Any) -> None:
    for event in b.events(document):
        if isinstance(event, dict) and isinstance(event.get("ts"), (int, float)):
            event["ts"] -= 60e6


def _cut_short(document: Any) -> None:
    starts = sorted(e["ts"] for e in _steps(document))
    cut = starts[len(starts) // 2]
    document["traceEvents"] = [e for e in b.events(document) if not isinstance(e, dict) or e.get("ts", 0) < cut]


def _collectives_twice(document: Any) -> None:
    comm = [e for e in b.events(document) if isinstance(e, dict) and "all_reduce" in str(e.get("name", "")).lower()]
    document["traceEvents"] += [{**e, "ts": e["ts"] + 0.5} for e in comm]


def _plausibility_cases() -> list[Case]:
    """Valid-looking traces whose times or shape cannot be one rank of this run's (issue 47): each
    left out, repaired or named, never analyzed silently. ``capture``: rank 3 of a gloo capture."""
    return [
        Case("steps-zero-length", b.doc(_zero_length_steps), ("warning",), source="capture"),
        Case("steps-marked-twice", b.doc(_steps_marked_twice), ("warning",), source="capture"),
        Case("steps-run-over-the-next", b.doc(_steps_run_over), ("warning",), source="capture"),
        Case("durations-in-ns", b.doc(_durations_in_ns), ("skipped",), source="capture"),
        Case("rank-of-a-run-a-minute-earlier", b.doc(_a_minute_earlier), ("skipped",), source="capture", only="mixed"),
        Case("rank-cut-short", b.doc(_cut_short), ("warning",), source="capture", only="mixed"),
        Case("rank-with-collectives-twice", b.doc(_collectives_twice), ("warning",), source="capture", only="mixed"),
    ]


GROUPS: dict[str, list[Case]] = {
    "Kineto: truncations": _truncation_cases(),
    "Kineto: encodings and JSON syntax": _encoding_cases(),
    "Kineto: wrong types in one event": _type_cases(),
    "Kineto: out-of-range values and odd events": _range_cases(),
    "Kineto: distributedInfo ranks and world sizes": _rank_cases(),
    "Kineto: no events": _empty_cases(),
    "Kineto: step numbers shifted on one rank": _alignment_cases(),
    "Kineto: implausible steps and ranks of another run": _plausibility_cases(),
}
