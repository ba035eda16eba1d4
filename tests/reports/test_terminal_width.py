"""Terminal reports printed to a pipe: as wide as ``COLUMNS`` says (else 120 columns), and no
word split across lines, whatever the width (issue 32)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracekit.analyzers import analyze
from tracekit.readers import load_run
from tracekit.reports import TerminalRenderer
from tracekit.reports.console import LONGEST_WORD, printed, rich_table
from tracekit.reports.document import Table

ROOT = Path(__file__).parents[2]
STRAGGLER = ROOT / "samples" / "captures" / "straggler"
GPU = ROOT / "samples" / "captures" / "cuda-h200-small"
#: The characters rich draws tables with.
BOX = "│┃║|"


def known_words(folder: Path) -> set[str]:
    """The words a report of ``folder`` shows that must stay whole: its phases (with and without
    tracekit's prefix) and the words of its kernels' names, up to a reasonable length."""
    a = analyze(load_run([folder]))
    names = [r.name for r in a.annotations.summary] + [k.name for k in a.kernels.top]
    words = {w for n in names for w in (n, *n.split()) if 4 <= len(w) <= LONGEST_WORD}
    return words | {w.removeprefix("tracekit.phase/") for w in words if len(w.removeprefix("tracekit.phase/")) >= 4}


def _cells(line: str) -> list[tuple[int, str]]:
    """The cells of a drawn line, each with the column where it starts (the whole line when it has no box)."""
    cuts = [i for i, ch in enumerate(line) if ch in BOX]
    if not cuts:
        return [(0, line)]
    return [(a + 1, line[a + 1 : b]) for a, b in itertools.pairwise(cuts)]


def split_words(text: str, words: set[str]) -> list[str]:
    """Every known word drawn across two lines: the last token of a cell and the first token of the
    cell below it (the same column) together make a piece of a known word that neither is alone."""
    found = []
    lines = text.splitlines()
    for upper, lower in itertools.pairwise(lines):
        below = dict(_cells(lower))
        for start, cell in _cells(upper):
            if start not in below or not cell.split() or not below[start].split():
                continue
            a, b = cell.split()[-1], below[start].split()[0]
            joined = a + b
            if len(joined) >= 4 and any(joined in w and w not in (a, b) for w in words):
                found.append(f"{a!r} / {b!r}")
    return found


def run_analyze(folder: Path, columns: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run(
        [sys.executable, "-m", "tracekit", "analyze", str(folder), "--full"],
        cwd=ROOT,
        env=env,
        capture_output=True,  # a pipe: not a terminal
        text=True,
        check=True,
        timeout=300,
    )
    return done.stdout


@pytest.mark.parametrize(("columns", "width"), [(None, 120), ("80", 80), ("200", 200)])
def test_piped_analyze_fits_columns_and_splits_no_word(columns: str | None, width: int) -> None:
    text = run_analyze(STRAGGLER, columns)
    widths = [len(line) for line in text.splitlines()]
    assert max(widths) <= width
    assert max(widths) >= width - 10  # the width is used, not a narrower default
    words = known_words(STRAGGLER)
    assert {"backward", "dataload_wait", "optim_step"} <= words
    assert split_words(text, words) == []
    assert "dataload_wait" in text  # the phases are shown whole, without tracekit's prefix


@pytest.mark.parametrize("width", [60, 80, 120])
def test_gpu_report_keeps_kernel_words_whole(width: int) -> None:
    a = analyze(load_run([GPU]))
    text = TerminalRenderer(width=width).render(a)
    assert max(len(line) for line in text.splitlines()) <= width
    words = known_words(GPU)
    assert any("::" in w for w in words)  # kernel names are among them
    assert split_words(text, words) == []


def test_a_table_too_wide_is_cut_into_column_groups_that_repeat_the_key() -> None:
    names = [f"tracekit.phase/phase_number_{i}" for i in range(8)]
    table = Table("t", "Phases per rank", ("rank", *names), (("0", *["12.34"] * 8), ("1", *["5.67"] * 8)))
    text = printed([rich_table(table, width=80)], width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Phases per rank (continued)" in text
    assert all(name in text for name in names)  # every header whole, on one line
    assert text.count("┃ rank ┃") >= 2  # each group keeps the rank column


def test_a_word_longer_than_half_the_width_ends_in_an_ellipsis_not_on_the_next_line() -> None:
    long = "x" * 100
    table = Table("t", "Kernels", ("kernel", "ms"), ((long, "1.00"), ("short one", "2.00")))
    text = printed([rich_table(table, width=70)], width=70)
    assert max(len(line) for line in text.splitlines()) <= 70
    assert "…" in text
    assert not any(line.strip("│ ").startswith("x") for line in text.splitlines() if "…" not in line)


def row_lines(text: str) -> list[int]:
    """The lines each drawn table row takes: a body line whose first cell is blank continues the
    row above it (a row whose first cell wraps counts as two rows: this only undercounts)."""
    counts: list[int] = []
    body = False
    for line in text.splitlines():
        if line.startswith("┡"):
            body = True
        elif line.startswith("└"):
            body = False
        elif body and line.startswith("│"):
            first = line[1 : line.index("│", 1)]
            if first.strip() or not counts:
                counts.append(1)
            else:
                counts[-1] += 1
    return counts


@pytest.mark.parametrize("folder", [STRAGGLER, GPU], ids=["straggler", "cuda-h200-small"])
def test_no_table_row_wraps_into_more_than_two_lines_at_100_columns(folder: Path) -> None:
    # issue 46, item 3: the gain table's "what it assumes" cells took six lines a row; a long cell is
    # now cut at two lines with a note's mark, and the note under the table holds it whole
    text = TerminalRenderer(width=100).render(analyze(load_run([folder])))
    counts = row_lines(text)
    assert len(counts) > 30  # the tables were found
    assert max(counts) <= 2, [line for line in text.splitlines() if line.startswith("│")][:40]
    if folder == STRAGGLER:
        assert "… [1]" in text and "\n[1] " in text  # the cut cell's whole text is under its table
        whole = " ".join(text.split())
        notes = [line for line in text.splitlines() if line.startswith("[1] ")]
        assert notes and " ".join(notes[0].split()[1:4]) in whole
