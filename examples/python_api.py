"""tracekit's Python API, end to end: read a run, analyze it, render it, save and load the JSON,
analyze shard by shard (local processes, then a local Dask cluster), compare two runs and gate.

    python examples/python_api.py [TRACES BASELINE [WORK_DIR]]

TRACES is the run analyzed, BASELINE the run it is compared with (each a folder of rank traces,
or trace files; by default the samples samples/captures/straggler and samples/captures/healthy);
the saved analysis goes to WORK_DIR (default: a temporary folder). A folder that cannot be read
is one line, as the ``tracekit`` command says it (every error tracekit raises on input is a
``tracekit.errors.TracekitError``). The Dask
part needs ``pip install 'torch-tracekit[dask]'`` and, as everything that starts worker processes
does, runs under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tracekit.analyzers import Noise, analyze, compare, evaluate_gate, run_analysis
from tracekit.errors import TracekitError
from tracekit.pipeline import AnalyzeOptions, analyze_paths, compare_paths
from tracekit.readers import load_run
from tracekit.reports import renderer
from tracekit.results.io import load_analysis


def main(traces: Path, baseline: Path, work: Path) -> None:
    """Every step of the API on the run in ``traces`` against the one in ``baseline``."""
    run = load_run([traces])  # a Run: one polars frame of events, one of counters (memory) + rank metadata
    # load_run(..., jobs=4, cache_dir="cache/", use_cache=False, progress=callback,
    #          comm_kernels=["^my_a2a_kernel"])  # kernels that are communication, beyond the taxonomy
    analysis = analyze(run, steps=None, include_warmup=False)  # the typed result (msgspec Structs)
    print(analysis.verdict.primary.bound, analysis.verdict.primary.share_pct)
    print(renderer("terminal").render(analysis))  # or "md", "html", "json"
    outcome = run_analysis(run)  # the same, plus every intermediate polars frame
    print(outcome.frames.collectives.per_rank)

    outcome = analyze_paths([traces], AnalyzeOptions(jobs=2))  # shard by shard: the run never in memory
    # a local Dask cluster of 2 workers; AnalyzeOptions(executor="dask", scheduler="tcp://head:8786")
    # uses a running one. executor= also takes an Executor made beforehand (tracekit.executors:
    # LocalExecutor, DaskExecutor)
    on_dask = analyze_paths([traces], AnalyzeOptions(executor="dask", jobs=2))
    assert on_dask.analysis.verdict == outcome.analysis.verdict

    saved = work / "report.json"
    saved.write_text(renderer("json").render(outcome.analysis), encoding="utf-8")  # as analyze --json writes it
    same = load_analysis(saved)  # a saved --json, back into the same typed object

    c = compare([same], [analysis], noise=Noise(level=0.95, threshold_pct=1.0))  # B against A: typed
    print(c.step.change, c.step.delta, c.step.ci)  # Change, ns, Interval(low, high, level)
    c = evaluate_gate(c, ["syncs:+0"])  # c.gate: which conditions B breaks (a time needs 3 runs a side)
    print([(g.spec, g.failed) for g in c.gate])
    c = compare_paths([baseline], [saved], fail_if=["memory:5%"])  # from paths: a saved analysis, a capture ...
    print(renderer("md").render(c))


if __name__ == "__main__":
    if len(sys.argv) not in (1, 3, 4):
        sys.exit(__doc__)
    samples = Path(__file__).resolve().parents[1] / "samples" / "captures"
    given = [Path(a) for a in sys.argv[1:3]]
    traces, baseline = given if given else [samples / "straggler", samples / "healthy"]
    with tempfile.TemporaryDirectory() as temporary:
        try:
            main(traces, baseline, Path(sys.argv[3] if len(sys.argv) == 4 else temporary))
        except TracekitError as error:  # bad input: one line, no traceback
            sys.exit(f"python_api.py: {error}")
