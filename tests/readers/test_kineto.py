"""The Kineto reader on synthetic files: formats, ranks, precision, bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from tests.factories import kineto_event, simple_step, write_kineto
from tracekit.errors import InputError, TraceReadError
from tracekit.model.run import RankFound
from tracekit.model.schema import SCHEMA
from tracekit.readers import load_run, parse_rank_spec, rank_from_name, read_kineto


def test_reads_json_and_gzip_alike(tmp_path: Path) -> None:
    a = read_kineto(write_kineto(tmp_path / "a.json", simple_step()))
    b = read_kineto(write_kineto(tmp_path / "b.json.gz", simple_step()))
    assert a.events.equals(b.events)
    assert a.rank == 0 and a.world_size == 2 and a.backend == "nccl" and a.devices == ("NVIDIA H100",)
    kinds = dict(a.events.group_by("kind").len().iter_rows())
    assert kinds == {"step": 1, "annotation": 2, "runtime": 2, "kernel": 2}
    nccl = a.events.filter(pl.col("category") == "collective")
    assert nccl["stream"].to_list() == [20] and nccl["device"].to_list() == [0]


def test_timestamps_become_exact_integer_ns(tmp_path: Path) -> None:
    # today's Kineto writes monotonic-clock us with 3 decimals (~4.4e12): exact to the ns;
    # integer epoch us (~1.7e15) stay exact although *1000 passes float64's 2**53
    events = [
        kineto_event("kernel", "k", 4459158588101.665, 4.928, stream=7, device=0),
        kineto_event("kernel", "k", 4459158588102.001, 1.001, stream=7, device=0),
    ]
    rows = read_kineto(write_kineto(tmp_path / "t.json", events)).events.rows(named=True)
    assert [r["start_ns"] for r in rows] == [4459158588101665, 4459158588102001]
    assert [r["end_ns"] - r["start_ns"] for r in rows] == [4928, 1001]
    epoch = [kineto_event("cpu_op", "a", 1694128201435418, 52), kineto_event("cpu_op", "b", 1694128201435419, 1)]
    rows = read_kineto(write_kineto(tmp_path / "e.json", epoch)).events.rows(named=True)
    assert [r["start_ns"] for r in rows] == [1694128201435418000, 1694128201435419000]


def test_columns_no_event_fills_read_as_nulls_and_events_without_names_are_named(tmp_path: Path) -> None:
    # no event has a name, a byte count or any collective argument: those columns are nulls
    # (held as literals), and the names are the schema's stand-in
    events = [kineto_event("cpu_op", "x", 10, 5), kineto_event("kernel", "k", 12, 2, stream=7, device=0)]
    for e in events:
        del e["name"]
    trace = read_kineto(write_kineto(tmp_path / "t.json", events))
    assert trace.events["name"].to_list() == ["(unnamed)", "(unnamed)"]
    for column in ("bytes", "coll_name", "msg_nelems", "pg_name", "group_size", "seq"):
        assert trace.events[column].null_count() == 2, column
    assert trace.events["stream"].to_list() == [None, 7]
    assert dict(trace.events.schema) == dict(SCHEMA)


def test_legacy_2021_category_names(tmp_path: Path) -> None:
    events = [
        kineto_event("Operator", "ProfilerStep#3", 0, 100),
        kineto_event("Operator", "aten::conv2d", 1, 10),
        kineto_event("Runtime", "cudaLaunchKernel", 2, 1, correlation=5, **{"external id": 9}),
        {**kineto_event("Kernel", "implicit_gemm", 5, 20, correlation=5, stream=7, device=0), "tid": "stream 7"},
        kineto_event("Memcpy", "Memcpy HtoD (Pageable -> Device)", 30, 5, stream=7, device=0),
        kineto_event("Memset", "Memset (Device)", 40, 1, stream=7, device=0),
    ]
    df = read_kineto(write_kineto(tmp_path / "worker0.pt.trace.json", events)).events
    assert df["kind"].cast(pl.String).to_list() == ["step", "cpu_op", "runtime", "kernel", "memcpy", "memset"]
    assert df.filter(kind="runtime")["external_id"].item() == 9
    assert df.filter(kind="kernel")["tid"].item() == 7


def test_array_format_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "rank1.json"
    path.write_text(json.dumps([kineto_event("cpu_op", "aten::mm", 0, 5)]))
    assert read_kineto(path).events.height == 1


def test_off_type_fields_fall_back_to_lenient_decoding(tmp_path: Path) -> None:
    events = [kineto_event("kernel", "k", 0, 5, stream="7", device=0, correlation="12")]
    df = read_kineto(write_kineto(tmp_path / "t.json", events)).events
    assert df["stream"].item() == 7 and df["correlation"].item() == 12


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank3.json", 3),
        ("trace_rank-3.json.gz", 3),
        ("rank_12.pt.trace.json", 12),
        ("worker3_step_12.1694128201545.pt.trace.json", 3),
        ("sampled_rank-1.json.gz", 1),
        ("trace.json", None),
    ],
)
def test_rank_from_name(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


def test_rank_spec() -> None:
    assert parse_rank_spec("0-3,7") == {0, 1, 2, 3, 7}
    with pytest.raises(InputError):
        parse_rank_spec("3-1")
    with pytest.raises(InputError):
        parse_rank_spec("x")


def test_rank_from_file_name_when_distributed_info_is_missing(tmp_path: Path) -> None:
    write_kineto(tmp_path / "rank0.json", simple_step(), rank=None)
    write_kineto(tmp_path / "rank1.json", simple_step(), rank=None)
    run = load_run([tmp_path])
    assert run.rank_ids == [0, 1]
    assert {r.rank_source for r in run.ranks} == {RankFound("file_name")}


def test_single_file_without_rank_is_rank_0_or_rank_option(tmp_path: Path) -> None:
    path = write_kineto(tmp_path / "trace.json", simple_step(), rank=None)
    assert load_run([path]).ranks[0].rank_source == RankFound("assumed_zero")
    assert load_run([path], rank=5).rank_ids == [5]


def test_files_without_any_rank_are_skipped_with_a_reason(tmp_path: Path) -> None:
    write_kineto(tmp_path / "rank0.json", simple_step())
    write_kineto(tmp_path / "a.json", simple_step(), rank=None)
    write_kineto(tmp_path / "b.json", simple_step(), rank=None)
    run = load_run([tmp_path])
    assert run.rank_ids == [0]
    assert sorted(Path(s.path).name for s in run.skipped) == ["a.json", "b.json"]
    assert "--rank" in run.skipped[0].reason


def test_two_files_claiming_one_rank(tmp_path: Path) -> None:
    write_kineto(tmp_path / "x.json", simple_step(), rank=1)
    write_kineto(tmp_path / "y.json", simple_step(), rank=1)
    with pytest.raises(InputError, match=r"two files claim rank 1: .*x\.json and .*y\.json"):
        load_run([tmp_path])


def test_files_of_different_jobs(tmp_path: Path) -> None:
    write_kineto(tmp_path / "rank0.json", simple_step(), rank=0, world_size=2)
    write_kineto(tmp_path / "rank1.json", simple_step(), rank=1, world_size=8)
    with pytest.raises(InputError, match="different jobs"):
        load_run([tmp_path])
    write_kineto(tmp_path / "rank1.json", simple_step(offset=3600e6 * 5), rank=1, world_size=2)
    with pytest.raises(InputError, match="hours apart"):
        load_run([tmp_path])


def bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good = json.dumps({"traceEvents": [kineto_event("cpu_op", "a", 0, 1)] * 50}).encode()
    files = {
        "empty": (tmp_path / "rank1.json", b"", "empty file"),
        "truncated gzip": (tmp_path / "rank2.json.gz", gzip.compress(good)[:-40], "truncated or corrupt gzip"),
        "truncated json": (tmp_path / "rank3.json", good[: len(good) // 2], "truncated JSON"),
        "not a trace": (tmp_path / "rank4.json", b'{"loss": [1, 2]}', "not a Kineto trace"),
        "not json": (tmp_path / "rank5.json", b"hello", "not valid JSON"),
    }
    for path, data, _ in files.values():
        path.write_bytes(data)
    return {k: (p, reason) for k, (p, _, reason) in files.items()}


@pytest.mark.parametrize("case", ["empty", "truncated gzip", "truncated json", "not a trace", "not json"])
def test_bad_file_is_one_error_naming_the_file(tmp_path: Path, case: str) -> None:
    path, reason = bad_files(tmp_path)[case]
    with pytest.raises(TraceReadError, match=reason) as info:
        read_kineto(path)
    assert info.value.path == str(path)
    assert "\n" not in info.value.message
    with pytest.raises(InputError, match=reason):
        load_run([path])


def test_broken_rank_is_skipped_and_the_others_analyzed(tmp_path: Path) -> None:
    bad = bad_files(tmp_path)
    write_kineto(tmp_path / "rank0.json", simple_step())
    run = load_run([tmp_path])
    assert run.rank_ids == [0]
    assert sorted(s.path for s in run.skipped) == sorted(str(p.resolve()) for p, _ in bad.values())


def test_folder_without_traces_and_missing_path(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "summary.json").write_text("{}")  # tracekit's own output is not a trace
    with pytest.raises(InputError, match="no trace files"):
        load_run([tmp_path])
    with pytest.raises(InputError, match="no such file"):
        load_run([tmp_path / "missing"])


def test_ranks_filter(tmp_path: Path) -> None:
    for r in range(4):
        write_kineto(tmp_path / f"rank{r}.json", simple_step(), rank=r, world_size=4)
    assert load_run([tmp_path], ranks={1, 3}).rank_ids == [1, 3]
    with pytest.raises(InputError, match="selects none"):
        load_run([tmp_path], ranks={9})


def test_parallel_parsing_gives_the_same_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for r in range(3):
        write_kineto(tmp_path / f"rank{r}.json", simple_step(), rank=r, world_size=3)
    serial = load_run([tmp_path], jobs=1, use_cache=False)
    monkeypatch.setattr("tracekit.readers.parse.PARALLEL_MIN_BYTES", 0)
    parallel = load_run([tmp_path], jobs=2, use_cache=False)
    assert serial.events.equals(parallel.events)
    # workers that store into the cache, and the parent reading it back
    cached = load_run([tmp_path], jobs=2, cache_dir=tmp_path / "cache")
    assert serial.events.equals(cached.events) and serial.ranks == cached.ranks
    assert len(list((tmp_path / "cache" / "events").glob("*.parquet"))) == 3


def test_process_groups_and_collective_sequence_numbers(tmp_path: Path) -> None:
    pg_config = [
        {"pg_name": "0", "pg_desc": "default_pg", "pg_size": 4, "ranks": [0, 1, 2, 3]},
        {"pg_name": "1", "pg_desc": "tp", "pg_size": 2, "ranks": [0, 1]},
        {"pg_name": "bad", "ranks": ["x"]},  # not integer ranks: left out
    ]
    comms = {"Process Group Name": "1", "Collective name": "allreduce", "Group size": 2, "Seq": 7}
    events = [kineto_event("cpu_op", "record_param_comms", 0, 5, **comms)]
    trace = read_kineto(write_kineto(tmp_path / "rank0.json", events, world_size=4, pg_config=pg_config))
    assert [(g.name, g.ranks, g.description) for g in trace.process_groups] == [
        ("0", (0, 1, 2, 3), "default_pg"),
        ("1", (0, 1), "tp"),
    ]
    row = trace.events.row(0, named=True)
    assert (row["pg_name"], row["coll_name"], row["group_size"], row["seq"]) == ("1", "allreduce", 2, 7)
    run = load_run([tmp_path / "rank0.json"])
    assert run.ranks[0].process_groups == trace.process_groups
    assert load_run([tmp_path / "rank0.json"]).ranks == run.ranks  # the cached read keeps them


def test_a_kernel_s_threads_are_its_grid_times_its_block(tmp_path: Path) -> None:
    """``threads`` is a kernel's launch size (Kineto args ``grid`` and ``block``): one thread for
    <<<1, 1>>>; null for a kernel without them and for any other event, even one that has them."""
    events = [
        kineto_event("kernel", "one_thread", 0, 50, stream=7, device=0, grid=[1, 1, 1], block=[1, 1, 1]),
        kineto_event("kernel", "gemm", 60, 5, stream=7, device=0, grid=[2, 4, 64], block=[8, 32, 1]),
        kineto_event("kernel", "replayed", 70, 5, stream=7, device=0),  # a graph's node: no dimensions
        kineto_event("cuda_runtime", "cudaLaunchKernel", 1, 1, grid=[1, 1, 1], block=[1, 1, 1]),
    ]
    path = write_kineto(tmp_path / "t.json", events)
    df = read_kineto(path).events.sort("start_ns")
    assert df["threads"].to_list() == [1, None, 131072, None]
    assert df.schema["threads"] == pl.Int32
    # the same through the lenient decoder (a string id makes the typed one reject the file)
    events[1]["args"]["correlation"] = "12"
    assert read_kineto(write_kineto(tmp_path / "u.json", events)).events.sort("start_ns")["threads"].to_list() == [
        1,
        None,
        131072,
        None,
    ]
