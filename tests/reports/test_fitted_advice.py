"""Advice that fits the run: from what its trace shows (graphs already replayed, attention or
none, PyTorch or not, Kineto or Nsight Systems, a kernel on one thread), never a generic list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from tests.conftest import SAMPLES, analysis_of
from tests.factories import ev, gid, make_run, write_nsys
from tests.reports.test_advice import advice, verdict
from tests.reports.test_tool_reports import ddp_capture
from tracekit.analyzers import analyze, run_analysis
from tracekit.readers import load_run
from tracekit.reports.advice import RunTraits
from tracekit.reports.sentences import recommendations, write_analysis
from tracekit.results.analysis import Evidence, Finding, KernelShare
from tracekit.results.traits import Attention
from tracekit.results.vocab import BoundKind, Confidence, NoteKind, Parallelism

if TYPE_CHECKING:
    from pathlib import Path

    from tracekit.reports.wording import WrittenVerdict
    from tracekit.results.analysis import Verdict

US = 1000
CAPTURE_GRAPHS = "capture the step with CUDA graphs"
#: What only torch.profiler's user does.
TORCH_PROFILER = ("torch.profiler", "with_stack", "record_function", "ProfilerActivity", "profile_memory")


def every_recommendation(written: WrittenVerdict) -> list[str]:
    return [r for w in (written.primary, *written.secondary) for r in w.recommendations]


def with_evidence(v: Verdict, **fields: Any) -> Verdict:
    return msgspec.structs.replace(v, evidence=msgspec.structs.replace(v.evidence, **fields))


# ---------------------------------------------------------------- graphs already replayed


def launch_bound_steps(launch_call: str) -> list[dict[str, Any]]:
    """4 steps: a replay of two 100 us kernels (one launch call for both), then 20 ops that each
    launch a 2 us kernel, leaving the GPU idle 8 us before each: launch-bound."""
    rows = []
    for s in range(4):
        t0, corr = s * 500 * US, 1000 * (s + 1)
        rows.append(ev("step", f"ProfilerStep#{s + 1}", t0, t0 + 420 * US))
        rows.append(ev("runtime", launch_call, t0 + 2 * US, t0 + 7 * US, correlation=corr))
        rows.append(ev("kernel", "graph_node_gemm", t0 + 10 * US, t0 + 110 * US, correlation=corr))
        rows.append(ev("kernel", "graph_node_gemm2", t0 + 110 * US, t0 + 210 * US, correlation=corr))
        for i in range(20):
            t, c = t0 + (210 + 10 * i) * US, corr + 1 + i
            rows.append(ev("cpu_op", "aten::add", t, t + 10 * US))
            rows.append(ev("runtime", "cudaLaunchKernel", t + 5 * US, t + 6 * US, correlation=c))
            rows.append(ev("kernel", "vectorized_elementwise_kernel", t + 8 * US, t + 10 * US, correlation=c))
    return rows


def test_a_run_that_replays_graphs_is_not_told_to_capture_the_step_in_graphs() -> None:
    eager = write_analysis(analyze(make_run(launch_bound_steps("cudaLaunchKernel"))))
    assert eager.primary.title.startswith("Launch-bound") and CAPTURE_GRAPHS in eager.primary.recommendations[0]
    replayed = analyze(make_run(launch_bound_steps("cudaGraphLaunch")))
    assert replayed.verdict.primary.bound is BoundKind.LAUNCH
    text = "\n".join(write_analysis(replayed).primary.recommendations)
    assert CAPTURE_GRAPHS not in text
    assert "CUDA graphs already replay 83% of the steps' kernel time" in text
    assert "eager work around the replays" in text and "fewer graphs" in text


def test_a_cuda_program_that_replays_graphs_is_told_to_capture_the_rest() -> None:
    v = with_evidence(verdict(BoundKind.LAUNCH), pytorch=False, graph_replay_pct=40.0)
    text = advice(v)
    assert "capture the repeated sequence" not in text
    assert "CUDA graphs already replay 40% of the kernel time" in text and "cudaStreamBeginCapture" in text
    assert "torch" not in text


# ---------------------------------------------------------------- attention


FUSED = "Use fused attention"


def test_an_mlp_gets_no_fused_attention_advice() -> None:
    """samples/captures/cuda-h200-healthy: an MLP on an H200, GPU-compute-bound; its only softmax is
    the loss's log_softmax, no attention kernel runs."""
    analysis = analysis_of([SAMPLES / "captures" / "cuda-h200-healthy"]).analysis
    assert analysis.verdict.primary.bound is BoundKind.GPU_COMPUTE and analysis.verdict.evidence.attention is None
    text = "\n".join(every_recommendation(write_analysis(analysis)))
    assert "attention" not in text and "FlashAttention" not in text
    assert "TF32" in text and "torch.compile" in text  # the rest of the compute advice stays


def test_fused_attention_kernels_are_said_to_run_already() -> None:
    kernels = [KernelShare(name="void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>", share_pct=50.9)]
    v = with_evidence(verdict(BoundKind.GPU_COMPUTE), attention=Attention.FUSED, attention_kernels=kernels)
    text = advice(v)
    assert FUSED not in text
    assert "Attention already runs in fused kernels: flash::flash_fwd_kernel (50.9% of the kernel time)." in text


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        (Attention.UNFUSED, "Attention is written out (aten::softmax between batched matmuls)"),
        (Attention.MATH, "scaled_dot_product_attention runs its math path"),
    ],
)
def test_unfused_attention_is_told_to_use_the_fused_kernels(kind: Attention, said: str) -> None:
    text = advice(with_evidence(verdict(BoundKind.GPU_COMPUTE), attention=kind))
    assert said in text and FUSED not in text


# ---------------------------------------------------------------- a kernel on one thread


def one_thread_export(path: Path, *, nvtx: list[dict[str, Any]] | None = None) -> Path:
    """A plain CUDA program: copy the input in, run ``serial_sum`` <<<1, 1>>> for 50 ms, copy the
    result out (cudaMemcpy, cudaLaunchKernel, cudaMemcpy); no NVTX range of PyTorch's."""
    pid = 4242

    def gpu(corr: int, start: int, end: int, **extra: Any) -> dict[str, Any]:
        return {"start": start, "end": end, "deviceId": 0, "streamId": 7, "correlationId": corr, "globalPid": gid(pid)}

    def call(corr: int, start: int, end: int, name: int) -> dict[str, Any]:
        return {
            "start": start,
            "end": end,
            "eventClass": 0,
            "globalTid": gid(pid, pid),
            "correlationId": corr,
            "nameId": name,
        }

    dims = {"gridX": 1, "gridY": 1, "gridZ": 1, "blockX": 1, "blockY": 1, "blockZ": 1}
    tables: dict[str, list[dict[str, Any]]] = {
        "CUPTI_ACTIVITY_KIND_MEMCPY": [
            gpu(1, 1_000_000, 2_000_000) | {"bytes": 64 << 20, "copyKind": 1},
            gpu(3, 52_100_000, 52_200_000) | {"bytes": 4, "copyKind": 2},
        ],
        "CUPTI_ACTIVITY_KIND_KERNEL": [gpu(2, 2_050_000, 52_050_000) | {"demangledName": 1, "shortName": 2} | dims],
        "CUPTI_ACTIVITY_KIND_RUNTIME": [
            call(1, 900_000, 2_010_000, 3),
            call(2, 2_020_000, 2_030_000, 4),
            call(3, 2_040_000, 52_210_000, 3),
        ],
        "TARGET_INFO_SESSION_START_TIME": [{"utcEpochNs": 1_700_000_000_000_000_000, "utcTime": "2023-11-14T22:13:20"}],
    }
    if nvtx:
        tables["NVTX_EVENTS"] = nvtx
    strings = {
        1: "serial_sum(float const*, float*, int)",
        2: "serial_sum",
        3: "cudaMemcpy_v3020",
        4: "cudaLaunchKernel_v7000",
    }
    return write_nsys(path, tables, strings=strings)


def test_a_cuda_program_whose_kernel_runs_on_one_thread_is_told_so_first(tmp_path: Path) -> None:
    analysis = run_analysis(load_run([one_thread_export(tmp_path / "saxpy.sqlite")])).analysis
    e = analysis.verdict.evidence
    assert not e.pytorch
    assert [(k.name, round(k.share_pct or 0)) for k in e.one_thread_kernels] == [
        ("serial_sum(float const*, float*, int)", 100)
    ]
    written = write_analysis(analysis)
    first = written.primary.recommendations[0]
    assert first.startswith("serial_sum (100.0% of the kernel time) runs on one GPU thread")
    assert "grid of 1x1x1 blocks of 1x1x1 threads" in first and "<<<" in first
    for text in every_recommendation(written):  # no PyTorch advice anywhere
        for word in ("torch", "PyTorch", "DataLoader", "autocast", "attention", "record_function"):
            assert word not in text, (word, text)


def test_one_thread_advice_comes_first_in_a_pytorch_run_too_but_not_without_a_verdict() -> None:
    kernels = [KernelShare(name="spin_kernel(long)", share_pct=73.5)]
    v = with_evidence(verdict(BoundKind.GPU_COMPUTE), one_thread_kernels=kernels)
    assert recommendations(v.primary, v)[0].startswith("spin_kernel (73.5% of the kernel time) runs on one GPU")
    undetermined = msgspec.structs.replace(
        v,
        primary=Finding(bound=BoundKind.UNDETERMINED, confidence=Confidence.LOW),
        secondary=[Finding(note=NoteKind.TOO_LITTLE_WORK, confidence=Confidence.HIGH, value=4.0)],
    )
    assert not any("one GPU thread" in r for r in recommendations(undetermined.primary, undetermined))


# ---------------------------------------------------------------- Kineto or Nsight Systems


NSYS = RunTraits(nsys=True)


@pytest.mark.parametrize("bound", [BoundKind.IDLE, BoundKind.HOST, BoundKind.STRAGGLER])
@pytest.mark.parametrize("pytorch", [True, False])
def test_an_nsys_run_is_told_nsys_s_settings_not_torch_profiler_s(bound: BoundKind, pytorch: bool) -> None:
    v = with_evidence(verdict(bound), pytorch=pytorch)
    text = advice(v, NSYS)
    for word in TORCH_PROFILER:
        assert word not in text, word
    if not pytorch:
        assert "torch" not in text


@pytest.mark.parametrize("note", [NoteKind.GPU_EVENTS_MISSING, NoteKind.ONE_STEP, NoteKind.TOO_LITTLE_WORK])
@pytest.mark.parametrize("pytorch", [True, False])
def test_the_notes_of_an_nsys_run_name_nsys_profile(note: NoteKind, pytorch: bool) -> None:
    v = with_evidence(verdict(BoundKind.GPU_COMPUTE), pytorch=pytorch)
    finding = Finding(note=note, confidence=Confidence.HIGH, value=1.0)
    kineto, nsys = advice(v, RunTraits(), finding), advice(v, NSYS, finding)
    assert "torch.profiler" in kineto or not pytorch
    assert "nsys profile" in nsys and "torch.profiler" not in nsys and "ProfilerActivity" not in nsys
    if not pytorch:
        assert "torch" not in nsys


def test_an_nsys_export_of_a_pytorch_run_gets_nsys_words(shared_traces: Path) -> None:
    """nsys-ai's H100 export (emit_nvtx's aten ranges: PyTorch): one window, a host-bound finding."""
    analysis = analysis_of([shared_traces / "nsys" / "nsysai-mfu-2gpu-before.sqlite"]).analysis
    assert RunTraits.of(analysis).nsys and analysis.verdict.evidence.pytorch
    texts = every_recommendation(write_analysis(analysis))
    assert not [t for t in texts if any(word in t for word in TORCH_PROFILER)]
    assert any("--capture-range=cudaProfilerApi" in t for t in texts)  # the one-step note
    assert any("nsys profile --sample=cpu --python-sampling=true" in t for t in texts)  # host-bound
    assert any("Attention already runs in fused kernels: flash::flash_fwd_kernel (50.9%" in t for t in texts)


def test_a_cuda_program_read_from_nsys_gets_no_torch_in_any_note(tmp_path: Path) -> None:
    analysis = run_analysis(load_run([one_thread_export(tmp_path / "p.sqlite")])).analysis
    notes = [f.note for f in analysis.verdict.secondary]
    assert NoteKind.ONE_STEP in notes
    one_step = [w for w in write_analysis(analysis).secondary if w.title.startswith("One window")]
    assert "nvtxRangePushA" in one_step[0].recommendations[0] and "torch" not in one_step[0].recommendations[0]


def test_the_empty_memory_table_says_how_this_profiler_records_memory(tmp_path: Path) -> None:
    from tracekit.reports.memory_tables import memory

    nsys = run_analysis(load_run([one_thread_export(tmp_path / "p.sqlite")])).analysis
    assert "nsys profile --cuda-memory-usage=true" in (memory(nsys, None).empty or "")


# ---------------------------------------------------------------- DDP or FSDP


def test_an_fsdp_capture_on_cpu_is_not_told_about_ddp_s_find_unused_parameters() -> None:
    """On CPU tracekit applies FSDP itself and accelerate reports MULTI_CPU: the capture's config
    (or the run's ops) say FSDP, where find_unused_parameters did nothing."""
    v = verdict(BoundKind.COMMS)
    fsdp = ddp_capture(find_unused=True)
    fsdp = msgspec.structs.replace(fsdp, config={**(fsdp.config or {}), "accelerate_config": "fsdp2"})
    assert not any("DDP runs with" in r for r in recommendations(v.primary, v, fsdp))
    traits = RunTraits(parallelism=Parallelism.FSDP)
    ddp_config = ddp_capture(find_unused=True)  # the ops of the run say FSDP
    assert not any("DDP runs with" in r for r in recommendations(v.primary, v, ddp_config, traits))
    ddp = RunTraits(parallelism=Parallelism.DDP)
    assert recommendations(v.primary, v, ddp_config, ddp)[0].startswith("DDP runs with find_unused_parameters=True")


def test_a_cuda_program_s_low_overlap_is_not_told_about_ddp_or_fsdp() -> None:
    v = with_evidence(verdict(BoundKind.GPU_COMPUTE), pytorch=False)
    note = Finding(note=NoteKind.LOW_OVERLAP, confidence=Confidence.MEDIUM, value=20.0, values=[20.0])
    text = advice(v, RunTraits(), note)
    assert "DDP" not in text and "FSDP" not in text and "MPI_Isend" in text


def test_evidence_defaults_read_as_no_trait() -> None:
    """A file of an older schema (no traits): the advice of before, graphs and attention unknown."""
    e = Evidence(steps_per_rank=3)
    assert (e.graph_replay_pct, e.attention, e.attention_kernels, e.one_thread_kernels) == (None, None, [], [])


@pytest.mark.parametrize(
    ("kind", "own", "foreign"),
    [
        (None, "shard the optimizer state (ZeRO-1/2, FSDP)", "already"),
        (Parallelism.DDP, "shard the optimizer state (ZeRO-1/2, FSDP)", "already"),
        (Parallelism.FSDP, "FSDP shards it already", "ZeRO"),
        (Parallelism.ZERO, "ZeRO shards it already", "FSDP"),
    ],
)
def test_what_fills_memory_is_advised_as_the_run_shards(kind: Parallelism | None, own: str, foreign: str) -> None:
    """An FSDP or ZeRO run is not told to shard the optimizer state its sharding already shards."""
    from tracekit.reports.memory_words import write_memory
    from tracekit.results.analysis import MemoryFinding
    from tracekit.results.vocab import MemoryNote

    filled = MemoryFinding(note=MemoryNote.FILLED_BY, rank=0, value=61.0, bytes=2**33, category="optimizer_state")
    [text] = write_memory(filled, kind).recommendations
    assert own in text and foreign not in text


# ---------------------------------------------------------------- the allocator's settings


def _with_capture(side: str) -> Any:
    """The memory calibration's side, analysed as ``tracekit analyze`` does: its summary.json beside it."""
    from tracekit.pipeline import AnalyzeOptions, analyze_paths

    folder = SAMPLES / "captures" / f"cuda-h200-cal-memory-{side}"
    return analyze_paths([folder], AnalyzeOptions(use_cache=False, details=False)).analysis


def _memory_advice(a: Any) -> list[str]:
    written = write_analysis(a)
    return [r for w in written.memory if "fragmentation" in w.title for r in w.recommendations]


def test_a_run_with_expandable_segments_on_is_not_told_to_turn_them_on() -> None:
    """The H200 memory calibration: A (the default allocator) is told to grow its segments; B ran
    with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (its config's env, capture 1.7) and keeps
    a 22% gap: it is told what is left, not to set what it set."""
    before, after = (_with_capture(side) for side in "ab")
    assert not RunTraits.of(before).expandable_segments and RunTraits.of(after).expandable_segments
    [told] = _memory_advice(before)
    assert "expandable_segments:True" in told
    [left] = _memory_advice(after)
    assert "already on" in left and "set PYTORCH_CUDA_ALLOC_CONF" not in left


@pytest.mark.parametrize(
    ("recorded", "on"),
    [
        ({"PYTORCH_ALLOC_CONF": "expandable_segments:True"}, True),  # torch 2.9's name
        ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128, expandable_segments:true"}, True),
        ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"}, False),
        ({}, False),  # recorded as unset (capture 1.8): the config's env is not read instead
    ],
)
def test_the_allocator_settings_a_capture_recorded_decide(recorded: dict[str, str], on: bool) -> None:
    after = _with_capture("b")
    assert after.capture is not None and after.capture.environment is not None
    environment = {**after.capture.environment, "alloc_conf": recorded}
    capture = msgspec.structs.replace(after.capture, environment=environment)
    assert RunTraits.of(msgspec.structs.replace(after, capture=capture)).expandable_segments is on


# ---------------------------------------------------------------- the fetch around the DataLoader


@pytest.mark.parametrize(
    ("fetch", "own", "around"),
    [
        (9.64e6, 2.51e6, True),  # most of the fetch phase outside __next__
        (9.64e6, 5.0e6, False),  # most of it the DataLoader's own wait
        (9.64e6, 0.0, False),  # no DataLoader range recorded: a loader of the user's own
        (9.64e6, None, False),  # an analysis before 2.12
        (None, None, False),
    ],
)
def test_a_fetch_mostly_around_the_loader_is_advised_before_more_workers(
    fetch: float | None, own: float | None, around: bool
) -> None:
    from tracekit.reports.advice import for_bound
    from tracekit.results.analysis import Evidence
    from tracekit.results.vocab import DataMeasure

    e = Evidence(steps_per_rank=6, data_measure=DataMeasure.GPU_IDLE, fetch_per_step_ns=fetch, loader_per_step_ns=own)
    assert (e.fetch_around() is not None) is around
    first = for_bound(BoundKind.DATA, RunTraits(), e)[0]
    if around:
        assert first.startswith("Look at what the loop does around the DataLoader: 7.13 ms of the 9.64 ms")
        assert "(2.51 ms)" in first
    else:
        assert first.startswith("Raise DataLoader num_workers")
