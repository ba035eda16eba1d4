"""The README is a quick start and the docs hold the rest: the README's two commands, its example,
every relative link of README.md, docs/ and benchmarks/README.md, and the measured figures the
pages quote against their result files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RESULTS = ROOT / "benchmarks" / "results"

RUN_SAMPLE = re.compile(r"python3 -m pip install \. && tracekit analyze (samples/\S+)")
RUN_TESTS = "python3 -m pip install torch==2.13.0 -e '.[capture,dev]' && python3 -m pytest"

_FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The text outside fenced blocks and code spans: where Markdown links live."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def _blocks(text: str) -> list[str]:
    return [m.group(0).split("\n", 1)[1].rsplit("```", 1)[0].strip() for m in _FENCE.finditer(text)]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (links and code marks dropped), lower case, every
    character but letters, digits, spaces, ``-`` and ``_`` removed, spaces turned to ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in ``path``, a repeated one numbered as GitHub numbers it (-1, -2)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    text = _FENCE.sub("", path.read_text())
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_slug_follows_github() -> None:
    assert slug("On a GPU: `benchmarks/gpu_check.sh`") == "on-a-gpu-benchmarksgpu_checksh"
    assert slug("What a fix is worth: a predicted gain for every finding") == (
        "what-a-fix-is-worth-a-predicted-gain-for-every-finding"
    )
    assert slug("Verdicts on real traces (`tests/truth/`)") == "verdicts-on-real-traces-teststruth"
    assert slug("8 ranks x 125 MB: tracekit against HTA and the floor") == (
        "8-ranks-x-125-mb-tracekit-against-hta-and-the-floor"
    )


def test_readme_is_a_quick_start() -> None:
    """Under 250 lines; its first two code blocks, before any section, are the two commands."""
    text = README.read_text()
    assert len(text.splitlines()) < 250
    head = text.split("\n## ", 1)[0]
    first, second = _blocks(head)[:2]
    run = RUN_SAMPLE.fullmatch(first)
    assert run, f"the README's first command is not install + analyze a sample: {first!r}"
    assert (ROOT / run.group(1)).is_dir(), f"{run.group(1)} is not in the repository"
    assert second == RUN_TESTS


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run installs as the README says and runs the README's test command."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    install, test = RUN_TESTS.split(" && ")
    assert any(line.startswith(install.replace("python3 -m pip install", "python3 -m pip install -q")) for line in ci)
    assert test in [line.split(" || ")[0].strip() for line in ci]  # "|| status=1": the rest still runs


def test_no_install_of_the_unrelated_pypi_tracekit() -> None:
    """`tracekit` on PyPI is another package: every install names torch-tracekit or a local path."""
    for page in PAGES:
        for line in page.read_text().splitlines():
            assert not re.search(r"pip install [^|&;]*(?<![\w/-])'?tracekit(\[|'|\s|$)", line), f"{page}: {line}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    """Every relative link names an existing file, and its #anchor a heading of that file."""
    broken = []
    for target in _LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_result_files_named_exist_and_none_is_orphaned() -> None:
    """Every result file the pages name exists, and every result file is named in benchmarks/README.md."""
    pattern = r"benchmarks/results/([\w.-]+\.json)|`((?:8x|scale_|compare_|many_ranks|memory_|gains_)[\w.-]*\.json)`"
    named = {a or b for page in PAGES for a, b in re.findall(pattern, page.read_text())}
    on_disk = {p.name for p in RESULTS.glob("*.json")}
    assert named <= on_disk, f"named but missing: {sorted(named - on_disk)}"
    bench = set(re.findall(r"benchmarks/results/([\w.-]+\.json)", (ROOT / "benchmarks" / "README.md").read_text()))
    assert on_disk <= bench, f"result files benchmarks/README.md does not name: {sorted(on_disk - bench)}"


def _result(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((RESULTS / name).read_text())


def test_benchmark_tables_match_their_results() -> None:
    """The current 8 x 125 MB and one-big-file tables quote their result files."""
    text = (ROOT / "benchmarks" / "README.md").read_text()
    r = _result("8x125mb_native.json")["results"]
    floor, isal = r["floor"], r["floor_isal"]
    assert (
        f"| {floor['wall_s']:.2f} / {isal['wall_s']:.2f} | {floor['peak_rss_mb']:.0f} / {isal['peak_rss_mb']:.0f} |"
        in text
    )
    cold = r["tracekit_cold"]
    assert f"| **{cold['wall_s']:.2f}** | {cold['peak_rss_mb']:.0f} | {cold['cpu_s']:.1f} |" in text
    for key in ("tracekit_warm", "tracekit_nocache"):
        assert f"| {r[key]['wall_s']:.2f} | {r[key]['peak_rss_mb']:.0f} | {r[key]['cpu_s']:.1f} |" in text
    assert f"| HTA 0.5.0 | {r['hta']['wall_s']:.1f} | {r['hta']['peak_rss_mb']:.0f} |" in text
    targets = _result("8x125mb_native.json")["targets"]
    assert f"**{targets['speedup_vs_hta']['value']:.1f}x**" in text
    assert f"**{targets['cold_over_floor']['value']:.2f}**" in text
    big = _result("scale_file_native.json")["results"]
    for size, row in big.items():
        tk, fl = row["tracekit"], row["floor"]
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| {size} GB |"))
        assert f"{fl['wall_s']:.1f} s, {fl['peak_rss_mb']:.0f} MB" in line
        assert f"{tk['wall_s']:.1f} s, {tk['peak_rss_mb']:.0f} MB" in line
        assert f"| {row['tracekit_read']['wall_s']:.1f} s |" in line
        ratios = f"| {tk['wall_s'] / fl['wall_s']:.2f} | {row['tracekit_read']['wall_s'] / fl['wall_s']:.2f} |"
        assert ratios in line.replace("**", ""), line


def test_the_targets_table_quotes_its_run() -> None:
    """Issue 48's table of targets quotes its one run, value and verdict, row by row."""
    text = (ROOT / "benchmarks" / "README.md").read_text()
    section = text.split("## Issue 48's targets, every one in one run")[1].split("\n## ")[0]
    table = section.split("\n| target |")[1].split("\n\n")[0]  # the run's table (earlier runs' follow)
    rows = [ln for ln in table.splitlines() if ln.startswith("| ")]
    doc = _result("targets_stop109.json")
    assert doc["commit"].rstrip("+") in section and not doc["quick"]
    shown = {"warm_speedup_vs_hta": "{:.2f}", "cold_speedup_vs_hta": "{:.1f}", "cold_over_floor": "{:.2f}"}
    assert len(rows) == len(doc["targets"])
    for row, target in zip(rows, doc["targets"], strict=True):
        value = shown.get(target["name"], "{:.3f}" if target["value"] < 1 else "{:.0f}").format(target["value"])
        cells = row.split(" | ")  # target, bound, before, measured, met
        assert value in cells[-2], (row, value)
        assert ("**no**" in cells[-1]) == (target["met"] is False), row


def test_readme_example_is_real_output() -> None:
    """Every line of the README's example output is a line that `tracekit analyze` prints today."""
    text = README.read_text()
    run = RUN_SAMPLE.fullmatch(_blocks(text)[0])
    assert run
    example = next(b for b in _blocks(text) if b.startswith("tracekit verdict"))
    out = subprocess.run(
        [sys.executable, "-m", "tracekit", "analyze", run.group(1), "--no-cache"],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "120"},  # as piped with no COLUMNS, whatever this shell's width
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    printed = {line.rstrip() for line in out.splitlines()}
    missing = [line for line in example.splitlines() if line != "..." and line.rstrip() not in printed]
    assert not missing, f"the README's example differs from today's output: {missing[:3]}"


def test_verdict_table_of_the_samples() -> None:
    """docs/verdict.md's rows for the sample captures say what tracekit says of them."""
    from tests.conftest import analysis_of

    text = (ROOT / "docs" / "verdict.md").read_text()
    for case, folder in (
        ("capture-healthy", "healthy"),
        ("capture-data-bound", "data_bound"),
        ("capture-straggler", "straggler"),
    ):
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| `{case}` |") and ln.count("|") == 5)
        primary = analysis_of([ROOT / "samples" / "captures" / folder]).analysis.verdict.primary
        kind = (primary.bound or primary.note).value  # type: ignore[union-attr]
        if primary.components:
            kind += " (" + ", ".join(c.value for c in primary.components) + ")"
        assert row.endswith(f"| {kind}, {primary.share_pct:.1f}% |"), row


def test_the_story_table_is_today_s(shared_traces: Path) -> None:
    """docs/verdict.md's table of the rule on every shared trace and sample (share, gain, what was
    passed over, what to do first, the first two together) is what tracekit says today."""
    from tests.conftest import analysis_of
    from tests.truth.corpus import CASES
    from tests.truth.story import HEADER, paths, row

    text = (ROOT / "docs" / "verdict.md").read_text()
    lines = text.splitlines()
    start = lines.index(HEADER[0])
    table = lines[start : start + 2 + len(CASES)]
    assert tuple(table[:2]) == HEADER
    expected = [row(case, analysis_of(paths(case)).analysis.verdict) for case in CASES]
    assert table[2:] == expected


def test_the_readme_example_is_what_analyze_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's example is the short answer of its sample, as a pipe prints it (120 columns)."""
    from tests.robustness.runner import run_cli

    monkeypatch.delenv("COLUMNS", raising=False)
    text = README.read_text()
    section = text.split("## What it says", 1)[1]
    command = re.search(r"`(tracekit analyze samples/\S+)`", section)
    assert command is not None
    shown = _blocks(section)[0]
    out = run_cli(command.group(1).split()[1:], timeout=120, color=False)
    assert out.code == 0, out.stderr
    printed = "\n".join(line.rstrip() for line in out.stdout.splitlines()).strip()
    assert shown == printed


def test_the_noise_figures_of_compare_md_are_the_benchmark_s() -> None:
    """docs/compare.md's figures of the noise model are read from compare_noise.json."""
    text = " ".join((ROOT / "docs" / "compare.md").read_text().split())
    doc = _result("compare_noise.json")
    pairs = doc["aa"]["pairs"]
    spread = max(abs(p["delta_pct"]) for p in pairs)
    assert f"differs from that of 3 more by up to {spread:.1f}%" in text
    within = sum(p["change"] == "within noise" for p in pairs)
    phased = doc["aa"]["pairs_with_a_phase_called_changed"]
    assert f"**{within} of {len(pairs)} A/A comparisons are within noise** ({phased} of them" in text
    delay = doc["forward_delay_5ms"]
    low, high = delay["forward_ci_ms"]
    forward = f"forward {delay['forward_delta_ms']:+.2f} ms, 95% CI {low:+.2f}..{high:+.2f}, {delay['forward_change']}"
    assert forward in text
    step = delay["step"]
    said = f"the step itself, {step['delta_ms']:+.1f} ms, is {step['change']} there"
    assert f"{said}: it could have detected {step['detectable_ms']:.1f} ms" in text


def test_the_gate_figures_of_compare_md_are_the_benchmark_s() -> None:
    """docs/compare.md's rates of the example gate are those of compare_gate.json (issue 46: "the
    false-failure and detection rates of the example gate are in docs/compare.md from one
    benchmarks.compare_gate run"), for the gate the workflow has now."""
    from benchmarks.compare_gate import gate_conditions

    text = " ".join((ROOT / "docs" / "compare.md").read_text().split())
    doc, wall = _result("compare_gate.json"), _result("compare_gate_wall_only.json")
    assert doc["gate"] == gate_conditions()  # measured on the example's gate as it is
    aa, slower = doc["aa_rate"], doc["slower_rate"]
    assert aa["of"] == slower["of"] == 20 and len(doc["aa"]) == len(doc["slower"]) == 20
    assert f"**{aa['failed']} of 20 A/A pairs** and **{slower['failed']} of 20 +20% pairs**" in text
    assert f"their step time changed by {slower['mean_change_pct']:+.1f}% on average" in text
    assert ("both targets met" in text) == (aa["met"] and slower["met"])
    assert f"forward_work_ms={doc['work_ms']}" in text
    assert wall["aa_rate"]["of"] == 20 and wall["gate"] != doc["gate"]
    ratio = max(max(r["a_run_ms"]) / min(r["a_run_ms"]) for r in wall["aa"])
    assert f"up to {ratio:.1f}x apart" in text


def test_the_new_section_of_python_api_md_prints_what_the_page_says() -> None:
    """Issue 49: the page's section added through the seam runs, and prints what the page quotes."""
    page = (ROOT / "docs" / "python-api.md").read_text()
    block = next(b for b in _blocks(page) if "registry.ANALYSES = " in b)
    done = subprocess.run([sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True, check=True)
    printed = done.stdout.strip()
    assert printed.startswith("WaitsByOp(ops=[OpWait(op='all_reduce'")
    assert f"It prints `{printed}`" in " ".join(page.split())
