"""What a path on one side of a comparison is: a saved analysis, a capture, repeated captures, traces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tracekit.errors import InputError
from tracekit.pipeline import ab_folders, analyze_paths, compare_paths, load_side, run_folders
from tracekit.results.compare import dump_comparison
from tracekit.results.io import dump_analysis
from tracekit.results.vocab import WarningKind

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "captures"


def test_a_capture_folder_is_one_run_with_its_summary() -> None:
    [analysis] = load_side(SAMPLES / "healthy")
    assert analysis.capture is not None
    assert analysis.run.world_size == analysis.capture.world_size


def test_a_folder_of_captures_is_one_run_per_capture(tmp_path: Path) -> None:
    for name in ("run1", "run2"):
        shutil.copytree(SAMPLES / "healthy", tmp_path / "a" / name)
    assert run_folders(tmp_path / "a") == [tmp_path / "a" / "run1", tmp_path / "a" / "run2"]
    runs = load_side(tmp_path / "a")
    assert len(runs) == 2
    assert runs[0].steps.per_step == runs[1].steps.per_step


def test_a_saved_analysis_loads_without_the_traces(tmp_path: Path) -> None:
    analysis = analyze_paths([SAMPLES / "healthy"]).analysis
    saved = tmp_path / "report.json"
    saved.write_text(dump_analysis(analysis))
    [loaded] = load_side(saved)
    assert loaded == analysis


def test_a_saved_comparison_is_not_an_analysis(tmp_path: Path) -> None:
    c = compare_paths([SAMPLES / "healthy"], [SAMPLES / "healthy"])
    saved = tmp_path / "cmp.json"
    saved.write_text(dump_comparison(c))
    with pytest.raises(InputError, match=r"a tracekit\.comparison file, not an analysis"):
        load_side(saved)


def test_a_missing_side_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or folder"):
        load_side(tmp_path / "nope")


def test_ab_folders_of_an_ab_capture(tmp_path: Path) -> None:
    assert ab_folders(tmp_path) is None
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert ab_folders(tmp_path) == (tmp_path / "a", tmp_path / "b")


def test_a_bad_gate_fails_before_any_trace_is_read(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--fail-if"):
        compare_paths([tmp_path / "missing"], [tmp_path / "missing"], fail_if=["bogus:1%"])


def test_comparing_two_samples_names_the_straggler_change() -> None:
    c = compare_paths([SAMPLES / "healthy"], [SAMPLES / "straggler"])
    assert c.a.workload is not None
    b = c.verdicts.b  # straggler-bound, or mixed with communication (8 gloo ranks on 2 cores)
    assert b.bound is not None and "straggler-bound" in [b.bound.value, *(k.value for k in b.components)]
    [config] = [w for w in c.warnings if w.kind is WarningKind.CONFIG]
    assert config.keys == ["workload_args.straggler_delay_ms", "workload_args.straggler_rank"]


def _repeats(folder: Path, *names: str) -> Path:
    for name in names:
        shutil.copytree(SAMPLES / "healthy", folder / name)
    return folder


def test_an_empty_run_among_repeats_is_refused_naming_it(tmp_path: Path) -> None:
    side = _repeats(tmp_path / "a", "run1", "run3")
    (side / "run2").mkdir()
    with pytest.raises(InputError, match="an empty run beside the repeats run1, run3") as caught:
        run_folders(side)
    assert caught.value.path == str(side / "run2")


def test_a_run_without_its_summary_among_repeats_is_refused(tmp_path: Path) -> None:
    side = _repeats(tmp_path / "a", "run1", "run2")
    (side / "run2" / "summary.json").rename(side / "run2" / "old.json")
    with pytest.raises(InputError, match=r"a run with no summary\.json beside the repeats run1") as caught:
        run_folders(side)
    assert caught.value.path == str(side / "run2")


def test_a_failed_capture_beside_repeats_is_not_a_run(tmp_path: Path) -> None:
    side = _repeats(tmp_path / "a", "run1", "run3")
    (side / "run2.tracekit-failed").mkdir()
    assert run_folders(side) == [side / "run1", side / "run3"]


def test_repeats_of_different_configs_are_refused_naming_the_runs_and_fields(tmp_path: Path) -> None:
    side = _repeats(tmp_path / "a", "run1", "run2", "run3")
    summary = side / "run3" / "summary.json"
    data = json.loads(summary.read_bytes())
    data["config"].update(batch_size=8, out_dir="elsewhere")  # out_dir: each repeat's own
    summary.write_text(json.dumps(data))
    with pytest.raises(InputError) as caught:
        run_folders(side)
    assert (
        str(caught.value)
        == f"{side}: runs run1 and run3 are captures of different configs: batch_size (16 vs 8): not repeats"
    )
    assert caught.value.path == str(side)
