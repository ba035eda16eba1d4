"""The kernel summary: the ranks' rows keep each name as a code until the cross-rank part has
grouped them, and the results give names as text, with figures worked out by hand."""

from __future__ import annotations

import pickle

import polars as pl

from tests.factories import ev, make_run
from tracekit.analyzers.kernels import kernel_summary, kernels_by_rank, summarize_kernels
from tracekit.analyzers.steps import gpu_activity

LONG = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>" * 3


def _activity() -> pl.DataFrame:
    """Rank 0: gemm 10+30 ns, LONG 20 ns; rank 1: gemm 40 ns, LONG 20 ns, a copy 5 ns."""
    rows = [
        ev("kernel", "gemm", 0, 10, rank=0),
        ev("kernel", LONG, 10, 30, rank=0),
        ev("kernel", "gemm", 30, 60, rank=0),
        ev("kernel", "gemm", 0, 40, rank=1),
        ev("kernel", LONG, 40, 60, rank=1),
        ev("memcpy", "Memcpy HtoD (Pageable -> Device)", 60, 65, rank=1),
    ]
    return gpu_activity(make_run(rows))


def test_the_ranks_rows_hold_names_as_codes() -> None:
    by_rank = kernels_by_rank(_activity())
    assert by_rank.schema["name"] == pl.Categorical
    assert isinstance(by_rank.schema["kind"], pl.Enum) and isinstance(by_rank.schema["category"], pl.Enum)
    # a rank repeats the run's names: as codes, LONG is held once however many ranks name it
    text = by_rank.with_columns(pl.col("name").cast(pl.String))
    assert by_rank.get_column("name").estimated_size() < text.get_column("name").estimated_size()


def test_the_results_name_kernels_as_text_with_hand_worked_figures() -> None:
    k = kernel_summary(_activity())
    for table in (k.top, k.per_rank, k.by_category):
        assert all(dtype == pl.String for name, dtype in table.schema.items() if name in ("name", "kind", "category"))
    top = {row["name"]: row for row in k.top.iter_rows(named=True)}
    assert (top["gemm"]["count"], top["gemm"]["total_ns"], top["gemm"]["ranks"], top["gemm"]["max_ns"]) == (
        3,
        80,
        2,
        40,
    )
    assert (top[LONG]["count"], top[LONG]["total_ns"]) == (2, 40)
    assert abs(top["gemm"]["share_pct"] - 100 * 80 / 125) < 1e-9
    assert k.top["name"].to_list()[0] == "gemm"  # the largest first
    rank1 = k.per_rank.filter(pl.col("rank") == 1)
    assert rank1["name"].to_list() == ["gemm", LONG, "Memcpy HtoD (Pageable -> Device)"]
    assert rank1["share_pct"].round(6).to_list() == [
        round(100 * 40 / 65, 6),
        round(100 * 20 / 65, 6),
        round(100 * 5 / 65, 6),
    ]
    categories = dict(zip(k.by_category["category"], k.by_category["total_ns"], strict=True))
    assert categories == {"compute": 120, "memory": 5}


def test_ties_order_by_name_as_text_and_ranks_from_other_processes_join() -> None:
    """Two ranks summarized apart (their parts pickled, as from two workers) and together give
    the same rows; names tied on time order as text, not by their codes."""
    rows = [ev("kernel", n, 10 * i, 10 * i + 5, rank=r) for r in (0, 1) for i, n in enumerate(["zeta", "alpha", "mid"])]
    activity = gpu_activity(make_run(rows))
    whole = kernel_summary(activity)
    apart = [pickle.loads(pickle.dumps(kernels_by_rank(activity.filter(pl.col("rank") == r)))) for r in (1, 0)]
    joined = summarize_kernels(pl.concat(apart, how="vertical_relaxed").sort("rank", maintain_order=True))
    assert whole.top["name"].to_list() == ["alpha", "mid", "zeta"]
    assert joined.top.equals(whole.top) and joined.by_category.equals(whole.by_category)
    assert joined.per_rank.equals(whole.per_rank)
