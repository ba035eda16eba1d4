"""A comparison of two runs rendered in every format: the key facts, in order, and escaped.

The comparisons are built by hand in :mod:`tests.reports.comparisons` (slower by 5 ms in forward,
within noise, a sync that disappeared, no steps), so every expected string is worked out there.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import msgspec
import pytest

from tests.reports.comparisons import CASES, MS, no_steps, slower, time, within_noise
from tests.reports.hostile import PAYLOADS, with_strings
from tests.reports.test_html_escaping import ALLOWED as HTML_ALLOWED
from tests.reports.test_html_escaping import _Page
from tests.reports.test_markdown_escaping import ALLOWED as MD_ALLOWED
from tests.reports.test_markdown_escaping import github, shown
from tests.reports.test_terminal_escaping import CONTROLS, SGR, assert_terminal_safe
from tracekit.reports import RENDERERS, TerminalRenderer, renderer
from tracekit.reports import compare_text as ct
from tracekit.reports.document import Format
from tracekit.reports.documents import as_document
from tracekit.reports.html import _plotly_js
from tracekit.reports.markdown import MAX_CHARS
from tracekit.reports.text import one_line, printable
from tracekit.results.compare import Comparison, Measure, RunDifference, WorkChange
from tracekit.results.vocab import (
    Change,
    GateOutcome,
    MeasureNote,
    NoiseMethod,
    PeakSource,
    SyncMeasure,
    Unit,
    WarningKind,
    WorkKind,
)

SLOWER_FACTS = (
    "Step time A 40.50 ms -> B 45.52 ms",
    "slower by 5.02 ms ± 0.31 (+12.4%), 95% CI +4.71..+5.33 ms",
    "Noise model: moving-block bootstrap over steps",
    "FAIL slower:2%: regressed: step time +5.02 ms (+12.40%), 95% CI +4.71 ms..+5.33 ms, beyond the limit 2%",
    "PASS syncs:+1: no regression: syncs per step 0 (+0.00%)",
    "steps found differ: A 320, B 120 measured (rank x step)",
    "capture configs differ in: workload_args.seq_len",
    "30.50 GiB",
    "forward +5.00 ms ± 0.05 (+12.35% of the step) slower",
    "B: 1.00 blocking sync calls and copies (points where the host waited for the GPU) per step, from aten::item in "
    "optimizer (A: 1.00, from aten::item in optimizer)",
    "ampere_sgemm_128x64_tn",
    "GPU-compute-bound: the GPU is busy computing",
    "+3.5 pp",
    "llama-1b",
)
#: What each case must say, in every format (terminal, Markdown as shown, HTML as shown).
FACTS = {
    "slower": SLOWER_FACTS,
    "within_noise": (
        "Step time A 40.50 ms -> B 40.53 ms",
        "within noise: +0.03 ms (+0.1%), 95% CI -0.08..+0.14 ms; this comparison could have detected ±0.21 ms",
    ),
    "sync_gone": (
        "faster by 4.00 ms ± 0.20 (-8.9%), 95% CI -4.20..-3.80 ms",
        "B: 0 blocking sync calls and copies (points where the host waited for the GPU) per step "
        "(A: 1.00, from aten::is_nonzero in forward)",
        "aten::is_nonzero",
        "disappeared",
        "The bound changed: A sync-bound -> B gpu-compute-bound",
        "Sync-bound: host syncs drain the GPU queue every step",
    ),
    "no_steps": (
        "No step time: a side has no steps; work is compared per second of trace",
        "not measured (measured on neither side)",
        "counts are per second",
        "per second (A: 2.00)",
        "A count/s",
        "+110.0 ms",
        "neither run has steps: step times cannot be compared",
        "Compute-bound: the host is busy computing (CPU-only run)",
    ),
}
#: Section titles in the order every format shows them.
ORDER = (
    "Step time A",
    "steps found differ",
    "Gate:",
    "Run-level measures",
    "Phases per step",
    "Step time per rank",
    "Syncs",
    "Work that",
)
ORDER_END = ("Verdicts", "What moved", "steps found from")


def terminal(c: Comparison, **options: object) -> str:
    return TerminalRenderer(width=200, **options).render(c)  # type: ignore[arg-type]


def markdown_shown(c: Comparison) -> str:
    return shown(github(renderer("md").render(c)))


def html_page(c: Comparison) -> tuple[str, _Page]:
    report = renderer("html").render(c)
    head, _, rest = report.partition(_plotly_js())
    assert rest, "plotly.js is inlined once"
    page = _Page()
    page.feed(head + rest)
    return report, page


def html_shown(c: Comparison) -> str:
    """The text of the page's main element (not its title, styles or navigation)."""
    main = _Page()
    main.feed(html_page(c)[0].partition("<main>")[2].partition("</main>")[0])
    return " ".join("".join(main.text).split())


def in_order(text: str, markers: tuple[str, ...]) -> None:
    at = [text.find(m) for m in markers]
    assert all(i >= 0 for i in at), dict(zip(markers, at, strict=True))
    assert at == sorted(at), dict(zip(markers, at, strict=True))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("fmt", ["terminal", "md", "html"])
def test_every_format_says_the_key_facts(case: str, fmt: str) -> None:
    c = CASES[case]()
    text = {"terminal": terminal, "md": markdown_shown, "html": html_shown}[fmt](c)
    for fact in FACTS[case]:
        assert fact in text, (fmt, fact)
    if case == "slower":
        in_order(text, ORDER + ORDER_END)
    if case == "no_steps":
        assert "% of the step)" not in text and "count/step" not in text and "per step (" not in text


def test_terminal_shows_warnings_in_yellow_near_the_top() -> None:
    text = terminal(no_steps(), color=True)
    assert "\x1b[33m  warning: neither run has steps" in text
    assert text.index("warning:") < text.index("Run-level measures")
    assert_terminal_safe(text)


def test_the_gate_shows_pass_and_fail() -> None:
    text = terminal(slower(), color=True)
    assert re.search(r"\x1b\[31m\s*FAIL slower:2%", text) and re.search(r"\x1b\[32m\s*PASS syncs", text)
    assert "Gate" not in terminal(within_noise())


def test_the_short_answer_says_what_moved_and_where_the_rest_is() -> None:
    c = slower()
    text = TerminalRenderer(width=200, full=False, more="MORE").render(c)
    lines = text.splitlines()
    assert lines[0] == "tracekit comparison" and lines[-1] == "MORE"
    in_order(
        text,
        (
            "Step time A 40.50 ms -> B 45.52 ms",
            "slower by 5.02 ms ± 0.31 (+12.4%)",
            "steps found differ: A 320, B 120",  # how the runs differ, before the numbers
            "capture configs differ in: workload_args.seq_len",
            "Gate: 1 of 2 conditions failed",
            "FAIL slower:2%",
            "PASS syncs:+1",
            "Measures that moved beyond noise",
            "exposed communication per step +0.05 ms",
            "Phases that moved beyond noise",
            "forward +5.00 ms ± 0.05 (+12.35% of the step) slower",
            "from aten::item in optimizer",  # a side has syncs: which ops issued them
            "A: GPU-compute-bound: the GPU is busy computing [62.0% of the time]",
            "B: GPU-compute-bound: the GPU is busy computing [65.5% of the time]",
            "Same bound on both runs",
            "What to change (B): ",
        ),
    )
    # three measures of the five that moved; no phase within noise; the rest is the whole report's
    assert sum(line.startswith("  ") and " ± " in line for line in lines) <= 4
    assert "syncs per step +33" not in text and "backward" not in text and "optimizer +0.01" not in text
    for whole in ("Noise model", "Run-level measures", "ampere_sgemm_128x64_tn", "The runs", "┏"):
        assert whole not in text, whole
    full = TerminalRenderer(width=200, full=True).render(c)
    assert "Run-level measures" in full and len(lines) * 3 < len(full.splitlines())


def test_the_short_answer_lists_the_phases_that_moved_largest_first() -> None:
    c = slower()
    c = msgspec.structs.replace(
        c,
        phases=[
            time("phase:forward", 12.0, 13.0, 0.05, Change.SLOWER, step_pct=2.47),
            time("phase:backward", 24.0, 21.0, 0.08, Change.FASTER, step_pct=-7.41),
            time("phase:optimizer", 4.5, 4.51, 0.02, Change.WITHIN_NOISE, step_pct=0.02),
            time("phase:zero_grad", 1.0, 1.5, 0.02, Change.SLOWER, step_pct=1.23),
            time("phase:h2d", 1.0, 3.0, 0.02, Change.SLOWER, step_pct=4.94),
        ],
    )
    text = TerminalRenderer(width=200, full=False).render(c)
    in_order(text, ("backward -3.00 ms", "h2d +2.00 ms", "forward +1.00 ms"))
    assert "zero_grad" not in text and "optimizer +0.01" not in text  # the fourth largest, and noise


def test_a_result_with_neither_verdict_nor_brief_prints_whole_in_short() -> None:
    c = within_noise()
    doc = as_document(c, Format.TERMINAL)
    bare = dataclasses.replace(doc, brief=())
    assert TerminalRenderer(width=200, full=False).render(bare) == TerminalRenderer(width=200).render(bare)


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_names_from_traces_are_text_in_the_short_answer(name: str) -> None:
    payload = PAYLOADS[name]
    text = TerminalRenderer(width=200, full=False, color=True).render(with_strings(slower(), payload))
    assert_terminal_safe(text)
    assert f"capture configs differ in: {printable(payload)}" in SGR.sub("", text)


def test_top_limits_the_work_table() -> None:
    c = slower()
    assert "aten::scaled_dot_product_attention" in terminal(c)
    text = terminal(c, top=1)
    assert "flash_fwd_kernel" in text and "ampere_sgemm" not in text and "1 of 3 shown" in text
    assert "ampere_sgemm" not in renderer("md").__class__(top=1).render(c)  # type: ignore[call-arg]


def test_json_round_trips() -> None:
    for make in CASES.values():
        c = make()
        text = renderer("json").render(c)
        assert msgspec.json.decode(text, type=Comparison) == c
        assert list(json.loads(text))[:3] == ["schema", "schema_version", "tracekit_version"]


def test_every_registered_renderer_renders_a_comparison() -> None:
    for name in RENDERERS:
        assert renderer(name).render(within_noise())


def test_markdown_is_plain_github_markdown_under_the_limit() -> None:
    c = slower()
    many = [
        WorkChange(kind=WorkKind.KERNEL, name=f"kernel_{i}_" + "x" * 400, a_count=1.0, a_ns=1e5, delta_ns=-1e5)
        for i in range(500)
    ]
    ranks = [msgspec.structs.replace(c.per_rank[0], key=f"rank:{r}", rank=r) for r in range(512)]
    big = msgspec.structs.replace(
        c, work=many, per_rank=ranks, warnings=[RunDifference(kind=WarningKind.CONFIG, keys=["w" * 300])] * 50
    )
    md = renderer("md").render(big)
    assert len(md) < MAX_CHARS
    assert "16 of 512 ranks shown" in md and "15 of 500 shown" in md
    parsed = github(md)
    assert {tag for tag, _ in parsed.tags} <= MD_ALLOWED | {"blockquote"}


def test_html_is_one_offline_file_with_its_charts() -> None:
    report, page = html_page(slower())
    assert report.count(_plotly_js()) == 1
    own = report.replace(_plotly_js(), "")
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|https?:", own)  # nothing fetched
    charts = json.loads(page.scripts[1])
    assert set(charts) == {"steps", "rank_steps", "phases", "work"}
    boxes = charts["steps"]["data"]
    assert [b["type"] for b in boxes] == ["box", "box"] and [b["name"] for b in boxes] == ["A", "B"]
    assert boxes[1]["y"][0] == pytest.approx(slower().distributions[-3].values_ns[0] / MS)
    dots = charts["phases"]["data"][0]
    assert dots["y"] == ["step (total)", "forward", "backward", "optimizer"]
    assert dots["x"][1] == pytest.approx(5.0) and dots["error_x"]["array"][1] == pytest.approx(0.05)
    assert {f"chart-{k}" for k in charts} <= {a.get("id") for _, a in page.tags}
    assert "phases" not in json.loads(html_page(no_steps())[1].scripts[1])


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_names_from_traces_are_text_in_every_format(name: str) -> None:
    payload = PAYLOADS[name]
    c = with_strings(slower(), payload)
    text = terminal(c, color=True)
    assert_terminal_safe(text)
    assert f"warning: capture configs differ in: {printable(payload)}" in SGR.sub("", text)

    md = renderer("md").render(c)
    parsed = github(md)
    for tag, attrs in parsed.tags:
        assert tag in MD_ALLOWED, (tag, attrs)
        assert all(key == "align" for key, _ in attrs), (tag, attrs)
    assert parsed.comments == []
    assert one_line(payload) in shown(parsed)
    assert not CONTROLS.search(md)

    report, page = html_page(c)
    for tag, attrs in page.tags:
        assert tag in HTML_ALLOWED, (tag, attrs)
        assert not any(key.startswith("on") for key in attrs), (tag, attrs)
    assert printable(payload) in "".join(page.text)
    assert not CONTROLS.search("".join(page.text))
    body = report.partition(_plotly_js())[2]
    assert body.count("</script") == 3 and body.lower().count("<script") == 2  # no breakout from the charts' JSON
    assert not any("<" in s for s in re.findall(r'"((?:[^"\\]|\\.)*)"', page.scripts[1]))


@pytest.mark.parametrize(
    ("unit", "values", "shown_as"),
    [
        (Unit.NS, (40.5e6, 45.52e6), ("40.50 ms", "45.52 ms", "+5.02 ms")),
        (Unit.NS, (50e3, 120e3), ("50.00 µs", "120.0 µs", "+70.00 µs")),
        (Unit.NS, (12e9, 13e9), ("12.00 s", "13.00 s", "+1.00 s")),
        (Unit.BYTES, (512 * 2**20, 768 * 2**20), ("512.0 MiB", "768.0 MiB", "+256.0 MiB")),
        (Unit.BYTES, (30.5 * 2**30, 31 * 2**30), ("30.50 GiB", "31.00 GiB", "+0.50 GiB")),
        (Unit.PCT, (62.0, 65.5), ("62.00%", "65.50%", "+3.50 pp")),
        (Unit.PER_S, (24.69, 21.97), ("24.69/s", "21.97/s", "-2.72/s")),
        (Unit.SAMPLES_PER_S, (197.5, 175.8), ("197.5/s", "175.8/s", "-21.70/s")),
        (Unit.COUNT, (1.0, 0.0), ("1.00/step", "0/step", "-1.00/step")),
    ],
)
def test_numbers_are_shown_in_their_unit(unit: Unit, values: tuple[float, float], shown_as: tuple[str, ...]) -> None:
    a, b = values
    m = Measure(key="k", unit=unit, a=a, b=b, delta=b - a)
    s = ct.of(m)
    assert (s.show(m.a), s.show(m.b), s.show(m.delta, sign=True, delta=True)) == shown_as


@pytest.mark.e2e
def test_compare_html_opens_offline_in_chromium(tmp_path: Path) -> None:
    from tests.reports.test_browser import open_offline

    report = tmp_path / "compare.html"
    report.write_text(renderer("html").render(slower()), encoding="utf-8")
    opened = open_offline(report, sort_table="work")
    assert opened.errors == [] and opened.remote == []
    assert opened.charts == 4 and opened.drawn >= opened.charts


#: Each way two runs can differ, and its sentence (the words the analyzer wrote before schema 2.0).
DIFFERENCES = [
    (RunDifference(kind=WarningKind.WORLD_SIZE, a=2, b=4), "world size differs: A 2, B 4"),
    (
        RunDifference(kind=WarningKind.RANKS, a_items=list(range(10)), b_items=[]),
        "ranks present differ: A 0,1,2,3,4,5,6,7..., B none; per-rank rows only for common ranks",
    ),
    (
        RunDifference(kind=WarningKind.DEVICES, a_items=["A100", "H100"], b_items=[]),
        "devices differ: A A100, H100; B none recorded: kernel times reflect the hardware as well as the change",
    ),
    (RunDifference(kind=WarningKind.BACKEND, a="gloo", b="nccl"), "backend differs: A gloo, B nccl"),
    (
        RunDifference(kind=WarningKind.MEASURED_ON, a="gpu", b="host"),
        "A is measured on the gpu, B on the host: shares are not comparable",
    ),
    (
        RunDifference(kind=WarningKind.NO_STEPS, a=0, b=24),
        "A has no steps: step times cannot be compared; work is compared per second of trace",
    ),
    (
        RunDifference(kind=WarningKind.NO_STEPS, a=24, b=0),
        "B has no steps: step times cannot be compared; work is compared per second of trace",
    ),
    (
        RunDifference(kind=WarningKind.NO_STEPS, a=0, b=0),
        "neither run has steps: step times cannot be compared; work is compared per second of trace",
    ),
    (
        RunDifference(kind=WarningKind.STEP_COUNT, a=24, b=3),
        "steps found differ: A 24, B 3 measured (rank x step)",
    ),
    (
        RunDifference(kind=WarningKind.STEP_SOURCE, a="ProfilerStep#N", b=None),
        "steps were found differently: A by ProfilerStep#N, B by None",
    ),
    (
        RunDifference(kind=WarningKind.STEP_SELECTION),
        "the steps measured were selected differently (--steps / --include-warmup)",
    ),
    (RunDifference(kind=WarningKind.WINDOW, a="steps", b="gpu_span"), "windows differ: A steps, B gpu_span"),
    (RunDifference(kind=WarningKind.WORKLOAD, a="mlp", b="llama"), "workload differs: A mlp, B llama"),
    (
        RunDifference(kind=WarningKind.BATCH_SIZE, a=16, b=256),
        "batch size per rank differs: A 16, B 256: per-step figures measure different work",
    ),
    (
        RunDifference(kind=WarningKind.CONFIG, keys=[f"k{i}" for i in range(10)]),
        "capture configs differ in: k0, k1, k2, k3, k4, k5, k6, k7 and 2 more",
    ),
]


@pytest.mark.parametrize(("difference", "sentence"), DIFFERENCES)
def test_each_way_the_runs_differ_is_one_sentence(difference: RunDifference, sentence: str) -> None:
    assert ct.warning(difference) == sentence


def test_every_kind_of_finding_has_its_words() -> None:
    assert set(ct.DIFFERENCES) == set(WarningKind) == {d.kind for d, _ in DIFFERENCES}
    assert set(ct.METHODS) == set(NoiseMethod)
    assert set(ct.SYNC_MEASURES) == set(SyncMeasure)
    assert {
        ct.gate_message(msgspec.structs.replace(slower().gate[0], outcome=o)).split(":")[0] for o in GateOutcome
    } == {
        "regressed",
        "within the limit",
        "within noise",
        "no regression",
    }


#: Each measure's name, from its key, unit and peak source (the words the analyzer wrote before schema 2.1).
LABELS = [
    (("step", Unit.NS, None), "step time"),
    (("syncs", Unit.COUNT, None), "syncs per step"),
    (("throughput", Unit.SAMPLES_PER_S, None), "throughput (samples/s, slowest rank per step)"),
    (("throughput", Unit.PER_S, None), "throughput (steps/s, slowest rank per step)"),
    (("compute_pct", Unit.PCT, None), "compute share"),
    (("comm_pct", Unit.PCT, None), "communication share"),
    (("memory_pct", Unit.PCT, None), "memory-op share"),
    (("idle_pct", Unit.PCT, None), "idle share"),
    (("exposed_comm", Unit.NS, None), "exposed communication per step"),
    (("overlap_pct", Unit.PCT, None), "comm/compute overlap"),
    (("peak_memory", Unit.BYTES, PeakSource.COUNTERS), "peak memory allocated (worst rank, profiler counters)"),
    (("peak_memory", Unit.BYTES, PeakSource.CAPTURE_ALLOCATED), "peak memory allocated (worst rank, capture)"),
    (("peak_memory", Unit.BYTES, PeakSource.CAPTURE_RSS), "peak memory RSS (worst rank, capture)"),
    (("peak_memory", Unit.BYTES, None), "peak memory"),
    (("peak_reserved", Unit.BYTES, None), "peak memory reserved (worst rank)"),
    (("peak_gap", Unit.BYTES, None), "reserved but unallocated at the peak (worst rank)"),
    (("rank:3", Unit.NS, None), "rank 3"),
    (("phase:tracekit.phase/forward", Unit.NS, None), "forward"),
    (("phase:## forward ##", Unit.NS, None), "## forward ##"),
]


@pytest.mark.parametrize(("fields", "label"), LABELS)
def test_each_measure_is_named_from_its_key(fields: tuple[str, Unit, PeakSource | None], label: str) -> None:
    key, unit, peak_of = fields
    assert ct.measure_label(Measure(key=key, unit=unit, peak_of=peak_of)) == label


def test_every_peak_source_has_its_name() -> None:
    assert set(ct.PEAK_NAMES) == {*PeakSource, None} == {f[2] for f, _ in LABELS if f[0] == "peak_memory"}


#: Each remark beside a measure (the words the analyzer wrote before schema 2.1).
NOTES = {
    MeasureNote.ONE_SIDE: "measured on one side only",
    MeasureNote.NEITHER_SIDE: "measured on neither side",
    MeasureNote.ONCE_PER_RUN: "measured once per run: no interval",
    MeasureNote.WHOLE_TRACE: "over each rank's whole trace (no steps): no interval",
}


@pytest.mark.parametrize("note", list(MeasureNote))
def test_each_measure_note_is_words(note: MeasureNote) -> None:
    m = Measure(key="peak_gap", unit=Unit.BYTES, a=1.0, b=2.0, delta=1.0, change=Change.HIGHER, note=note)
    assert ct.measure_note(m) == NOTES[note]
    assert ct.change(m).endswith(f" ({NOTES[note]})")
    assert ct.measure_line(m).endswith(f" higher ({NOTES[note]})")


def test_a_gate_condition_is_named_as_its_measure() -> None:
    g = msgspec.structs.replace(slower().gate[0], key="peak_memory", unit=Unit.BYTES, peak_of=PeakSource.CAPTURE_RSS)
    assert "peak memory RSS (worst rank, capture) " in ct.gate_message(g)


def test_a_comparison_round_trips_through_json() -> None:
    c = slower()
    assert msgspec.json.decode(msgspec.json.encode(c), type=Comparison) == c
    assert c.schema_version == "2.3"  # 2.2: the outlier runs; 2.3: the measure cpu


def test_the_work_table_leads_with_the_name_and_says_counts_once_when_none_changed() -> None:
    # issue 46, item 8: at 120 columns the table split, its second half without the name, and its
    # change column read "same" in every row
    from tracekit.reports import compare_tables as ctb

    c = slower()
    changed = ctb.work(c)
    assert changed.columns[:2] == ("name", "kind") and changed.columns[-1] == "change"
    assert any(row[-1] != "same" for row in changed.rows)
    same = [msgspec.structs.replace(w, b_count=w.a_count, change=Change.SAME) for w in c.work]
    table = ctb.work(msgspec.structs.replace(c, work=same))
    assert table.columns == ("name", "kind", "count/step", "A time/step", "B time/step", "delta time")
    assert "Every count per step is the same on both runs" in table.caption
    assert all(len(row) == len(table.columns) for row in table.rows)
    text = TerminalRenderer(width=120).render(msgspec.structs.replace(c, work=same))
    assert "Work that changed (continued)" not in text
