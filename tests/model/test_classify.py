"""Event classification: collectives of every library, memory, sync, compute."""

from __future__ import annotations

import polars as pl
import pytest

from tracekit.model import classify
from tracekit.model.classify import category_expr, with_category
from tracekit.model.schema import Kind


def category(kind: str, name: str) -> str:
    df = pl.DataFrame({"kind": [kind], "name": [name]}, schema={"kind": pl.String, "name": pl.Categorical})
    return str(classify(df)["category"][0])


@pytest.mark.parametrize(
    "name",
    [
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
        "void ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)",
        "rcclKernel_AllReduce",
        "ncclDevKernel_Generic_1",
        "mscclKernel_Sum_half_LL",
    ],
)
def test_collective_kernels(name: str) -> None:
    assert category("kernel", name) == "collective"


@pytest.mark.parametrize(
    "name",
    [
        "void at::native::vectorized_elementwise_kernel<4>",
        "sm90_xmma_gemm_bf16bf16_bf16f32",
        "triton_poi_fused_add_0",
        "void cudnn::bn_bw_1C11_kernel_new",
        "SyncBatchNormKernel",  # HTA calls anything with 'Sync' in its name non-compute
    ],
)
def test_compute_kernels(name: str) -> None:
    assert category("kernel", name) == "compute"


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        ("memcpy", "Memcpy HtoD (Pinned -> Device)", "memory"),
        ("memset", "Memset (Device)", "memory"),
        ("sync", "Stream Wait Event", "sync"),
        ("sync", "Context Sync", "sync"),
        ("cpu_op", "gloo:all_reduce", "collective"),
        ("cpu_op", "c10d::allreduce_", "collective"),
        ("annotation", "nccl:all_reduce", "collective"),
        ("cpu_op", "record_param_comms", "collective"),
        ("cpu_op", "aten::mm", "other"),
        ("runtime", "cudaLaunchKernel", "other"),
    ],
)
def test_other_kinds(kind: str, name: str, expected: str) -> None:
    assert category(kind, name) == expected


def test_categories_from_distinct_names_equal_the_per_event_expression() -> None:
    events = pl.DataFrame(
        {
            "kind": ["kernel", "kernel", "cpu_op", "cpu_op", "memcpy", "sync", "kernel", "annotation", "runtime"],
            "name": [
                "ncclKernel_AllReduce_RING_LL_Sum_float",
                "void gemm",
                "c10d::allreduce_",
                "aten::mm",
                "Memcpy HtoD",
                "cudaStreamWaitEvent",
                None,
                "nccl:all_reduce",
                "ncclKernel_AllReduce_RING_LL_Sum_float",
            ],
        },
        schema={"kind": Kind, "name": pl.Categorical()},
    )
    expected = events.with_columns(category_expr())
    assert with_category(events).equals(expected)
    assert expected["category"].to_list()[:4] == ["collective", "compute", "collective", "other"]
