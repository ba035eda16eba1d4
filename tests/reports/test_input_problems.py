"""Skipped files and warnings reach every report format."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.factories import kineto_event, simple_step, write_kineto
from tracekit.analyzers import analyze
from tracekit.readers import load_run
from tracekit.reports import renderer
from tracekit.results.io import decode_analysis

if TYPE_CHECKING:
    from pathlib import Path

EPOCH_US = 1_694_128_201_545_000.0


def test_every_format_names_the_skipped_file_and_the_dropped_events(tmp_path: Path) -> None:
    for rank in (0, 1):
        events = simple_step(rank, offset=EPOCH_US)
        if rank == 1:
            events.append(kineto_event("kernel", "sm90_gemm", -5, 10, stream=7, device=0))
        write_kineto(tmp_path / f"rank{rank}.json", events, rank=rank, world_size=4)
    (tmp_path / "rank2.json").write_text('{"traceEvents": [', encoding="utf-8")
    analysis = analyze(load_run([tmp_path], use_cache=False))
    for fmt in ("terminal", "md", "html", "json"):
        text = renderer(fmt).render(analysis) if fmt != "terminal" else _terminal(analysis)
        assert "rank2.json" in text, fmt
        assert "truncated JSON" in text, fmt
        if fmt == "json":  # the warnings as kinds and figures
            assert '"kind": "dropped_events"' in text and '"kind": "missing_ranks"' in text
            continue
        assert "dropped 1 event(s)" in text, fmt
        assert "have no trace here (ranks 2-3)" in text, fmt
    assert (
        decode_analysis(renderer("json").render(analysis).encode(), source="x")
        .run.skipped[0]
        .path.endswith("rank2.json")
    )


def _terminal(analysis: object) -> str:
    from tracekit.reports import TerminalRenderer

    return TerminalRenderer(top=5, width=400, color=False).render(analysis)  # type: ignore[arg-type]
