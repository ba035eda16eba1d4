"""The communication taxonomy: real kernel and host names of every library, and look-alikes."""

from __future__ import annotations

import polars as pl
import pytest

from tracekit.model import classify
from tracekit.model.taxonomy import COMM_PATTERNS, is_ep_hint_name, kernel_op_expr


def category(kind: str, name: str) -> str:
    df = pl.DataFrame({"kind": [kind], "name": [name]}, schema={"kind": pl.String, "name": pl.Categorical})
    return str(classify(df)["category"][0])


def op(name: str) -> str:
    return str(pl.select(kernel_op_expr(pl.lit(name))).item())


#: (kernel name as CUPTI/nsys demangle it, the operation it is matched as across ranks)
COMM_KERNELS = [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "AllReduce"),
    (
        "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int const*, int*, int, int, int, "
        "bool const*, int*, int*, int, int, void**, int**, int)",
        "deepep_notify_dispatch",
    ),
    (
        "void deep_ep::intranode::cached_notify_dispatch<8>(int const*, int, void**, int**, int)",
        "deepep_cached_notify_dispatch",
    ),
    (
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, "
        "int4 const*, float const*, long const*, float const*, bool const*, int const*, int, int, int, int, "
        "int, int, int, void**, int, int, int)",
        "deepep_dispatch",
    ),
    (
        "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int, int, int, int**, int)",
        "deepep_cached_notify_combine",
    ),
    ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*)", "deepep_combine"),
    ("void deep_ep::internode::notify_dispatch<true, 8>(int const*, int*, int)", "deepep_notify_dispatch"),
    ("void deep_ep::internode::dispatch<false, 2, true, 4, 8>(int4*, float*)", "deepep_dispatch"),
    ("void deep_ep::internode::cached_notify<2, 8>(int, int, int, int, int)", "deepep_cached_notify"),
    ("void deep_ep::internode::combine<2, __nv_bfloat16, 8, 4>(int4*, float*)", "deepep_combine"),
    ("void deep_ep::internode_ll::dispatch<true, false, 7168>(void*, void*, int*)", "deepep_ll_dispatch"),
    ("void deep_ep::internode_ll::combine<7168, 9, false>(void*, void*, int*)", "deepep_ll_combine"),
    (
        "void deep_ep::internode_ll::clean_low_latency_buffer<32>(int*, int, int*, int)",
        "deepep_ll_clean_low_latency_buffer",
    ),
    ("_ZN7deep_ep9intranode8dispatchILi8ELi768ELi8192EEEvP4int4PfPiPlS3_S4_S4_", None),
    ("barrier_on_stream_kernel(int, int, int, long*, long*)", "nvshmem_barrier"),
    ("alltoall_float_on_stream_kernel(float*, float const*, unsigned long, int, int, int)", "nvshmem_alltoall_float"),
    ("nvshmemi_int_wait_until_on_stream_kernel(int volatile*, int, int)", "nvshmemi_int_wait_until_on_stream_kernel"),
    (
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
        "unsigned int**, unsigned long, unsigned long)",
        "symm_mem_multimem_all_reduce",
    ),
    (
        "void (anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 16, 8>(c10::BFloat16**, "
        "c10::BFloat16*, c10::BFloat16*, unsigned long, unsigned long, unsigned int**, unsigned long, unsigned long)",
        "symm_mem_one_shot_all_reduce",
    ),
    (
        "void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<float, 16, 4>(float**, unsigned long)",
        "symm_mem_two_shot_all_reduce",
    ),
    (
        "void (anonymous namespace)::multimem_all_gather_kernel<16>(char*, char*, unsigned long)",
        "symm_mem_multimem_all_gather",
    ),
    ("c10d::nvshmem_extension::allToAllV(void*, long*, void*, long*, long, int)", "symm_mem_allToAllV"),
    (
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, "
        "vllm::Signal*, __nv_bfloat16*, int, int)",
        "cross_device_reduce_1stage",
    ),
    (
        "void vllm::cross_device_reduce_2stage<float, 4>(vllm::RankData*, vllm::RankSignals)",
        "cross_device_reduce_2stage",
    ),
    (
        "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8, false>(AllReduceParams)",
        "custom_oneShotAllReduce",
    ),
    (
        "void tensorrt_llm::kernels::twoShotAllReduceKernel<half, 4>(tensorrt_llm::kernels::AllReduceParams)",
        "custom_twoShotAllReduce",
    ),
    (
        "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<half, 8>(Params)",
        "allreduce_fusion_kernel_oneshot_lamport",
    ),
    (
        "void userbuffers_fp16_sum_inplace_gpu_rr_rs<8>(int, int, int, int, int, int, int, void**, int, unsigned long)",
        "userbuffers_fp16_sum_inplace_gpu_rr_rs",
    ),
    ("kuserbuffers_pushsendrecv(int*, int*, int4*, int4*, int, int*, int*)", "kuserbuffers_pushsendrecv"),
    ("hcom_allReduce__520_0_1", "hcom_allReduce__520_0_1"),
    # DeepEP's families under vendors' namespaces: DeepSeek's profile-data (dpsk::ep::), UCCL-EP,
    # forks that keep DeepEP's namespace inside their own (primus_turbo::deep_ep::)
    ("void dpsk::ep::internode::dispatch<false, 4, false, 4>(int4*, float*, long*, float*)", "ep_dispatch"),
    ("void dpsk::ep::internode::combine<false, 4, __nv_bfloat16, 4>(int4*, float*)", "ep_combine"),
    ("void dpsk::ep::internode::notify_dispatch<false, 4>(int const*, int*, int)", "ep_notify_dispatch"),
    ("void dpsk::ep::internode::cached_notify<false>(int, int, int)", "ep_cached_notify"),
    ("void dpsk::ep::internode::dispatch_ll<true, 3, 10, 7168>(void*, float*, int*, long*)", "ep_dispatch_ll"),
    ("void dpsk::ep::internode::combine_ll<7168, 9>(void*, void*, int*)", "ep_combine_ll"),
    ("void uccl::internode::dispatch<false, 2, true, 4, 8>(int4*, float*)", "ep_dispatch"),
    ("void uccl::intranode::notify_combine<8>(void**, int*, int)", "ep_notify_combine"),
    ("void uccl::internode_ll::combine<7168, 9, false>(void*, void*, int*)", "ep_ll_combine"),
    ("void vendor::ep::intranode::barrier<8>(int**, int)", "ep_barrier"),
    ("void primus_turbo::deep_ep::internode::dispatch<false, 2>(int4*, float*)", "deepep_dispatch"),
    ("void notify_dispatch<8>(int const*, int*, int)", "ep_notify_dispatch"),  # no namespace: the name alone
    ("void cached_notify_combine<8>(void**, int*, int)", "ep_cached_notify_combine"),
    ("_ZN4dpsk2ep9internode8dispatchILb0ELi4ELb0ELi4EEEvP4int4PfPlS4_", None),  # mangled
    ("_ZN4uccl12internode_ll7combineILi7168ELi9ELb0EEEvPvS2_Pi", None),
    (
        "void mori::moe::EpDispatchIntraNodeKernel<__hip_bfloat16>(mori::moe::EpDispatchCombineArgs<__hip_bfloat16>)",
        "mori_EpDispatchIntraNodeKernel",
    ),
    (
        "void mori::moe::EpCombineInterNodeKernel<float>(mori::moe::EpDispatchCombineArgs<float>)",
        "mori_EpCombineInterNodeKernel",
    ),
]


@pytest.mark.parametrize(("name", "expected_op"), COMM_KERNELS)
def test_every_library_is_communication(name: str, expected_op: str | None) -> None:
    assert category("kernel", name) == "collective"
    assert op(name) == (expected_op or name)


@pytest.mark.parametrize(
    "name",
    [
        "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int)",
        "void deep_ep::internode::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int)",
        "_ZN7deep_ep6layout19get_dispatch_layoutILi256ELi32ELi8EEEvPKlPiS3_S3_Pbiiii",
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_64x64_32x6_tn_align8_dispatch_policy>(Params)",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_dispatch",
        "void moe_align_block_size_dispatch_kernel<int>(int const*, int*, int*)",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::combine_t>>(ReduceOp)",
        "void fused_moe_combine_kernel<half>(half*, half const*)",
        "void vllm::moe::topk_dispatch<float>(float const*)",
        "void at::native::(anonymous namespace)::one_shot_sort_kernel<float>(float*)",
        "barrier_kernel(unsigned int**, unsigned long, unsigned long)",  # symm_mem's, too generic by name
        # an expert-parallel namespace is not evidence by itself: DeepSeek's sampler runs a CUB scan in
        # cdpsk::ep::, and the layout kernel computes
        "void cdpsk::ep::CUB_200200_900_NS::DeviceScanByKeyKernel<cdpsk::ep::CUB_200200_900_NS::Policy>(int*)",
        "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int)",
        "void vendor::intranode::dispatch_layout<8>(int const*, int*)",
        "void vendor::ep::permute_tokens<8>(int4*, int const*)",
        "void deep_epsilon::dispatch<8>(int4*)",  # a namespace that only starts like deep_ep
        # weak names: communication only with a second piece of evidence (test_classify_run.py)
        "void dispatchKernel<10u, true, false>(int*, unsigned long, std::byte*)",
        "void combineKernel<10u, true, true>(std::byte*, unsigned long)",
        "void tensorrt_llm::kernels::moeA2ADispatchKernel<__nv_bfloat16>(Params)",
    ],
)
def test_look_alikes_are_compute(name: str) -> None:
    assert category("kernel", name) == "compute"


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        ("python", "deep_ep/buffer.py(341): dispatch", "collective"),
        ("python", "/opt/DeepEP/deep_ep/buffer.py(512): low_latency_combine", "collective"),
        ("python", "deep_ep/buffer.py(250): get_dispatch_layout", "other"),
        ("python", "<built-in method intranode_dispatch of PyCapsule object at 0x7f3e2c0>", "collective"),
        ("python", "<built-in method get_dispatch_layout of PyCapsule object at 0x7f3e2c0>", "other"),
        ("python", "megatron/core/transformer/moe/token_dispatcher.py(120): dispatch", "other"),
        ("annotation", "deep_ep.dispatch", "collective"),
        ("annotation", "DeepEP::low_latency_dispatch", "collective"),
        ("annotation", "deepep_combine", "collective"),
        ("annotation", "Buffer.dispatch", "collective"),
        ("annotation", "deep_ep.get_dispatch_layout", "other"),
        ("annotation", "token_dispatch", "other"),
        ("cpu_op", "symm_mem::one_shot_all_reduce", "collective"),
        ("cpu_op", "symm_mem::multimem_all_reduce_", "collective"),
        ("cpu_op", "symm_mem::all_to_all_vdev", "collective"),
        ("cpu_op", "symm_mem::fused_all_gather_matmul", "other"),
        ("cpu_op", "symm_mem::fused_matmul_reduce_scatter", "other"),
        ("annotation", "xccl:all_reduce", "collective"),
        ("cpu_op", "_c10d_functional::all_gather_into_tensor", "collective"),
        ("cpu_op", "pplx_kernels::all_to_all_dispatch", "collective"),
        ("cpu_op", "pplx_kernels::all_to_all_combine", "collective"),
        ("python", "pplx_kernels/all_to_all.py(48): dispatch", "collective"),
        ("python", "pplx_kernels/all_to_all.py(21): __init__", "other"),
        ("cpu_op", "pplx_kernels::all_to_all_create", "other"),
    ],
)
def test_host_events(kind: str, name: str, expected: str) -> None:
    assert category(kind, name) == expected


def test_the_table_documents_every_pattern() -> None:
    assert {p.target for p in COMM_PATTERNS} == {"kernel", "host"}
    assert all(p.library and p.pattern for p in COMM_PATTERNS)
    assert all(p.op is not None for p in COMM_PATTERNS if p.target == "kernel")


@pytest.mark.parametrize(
    ("name", "hinted"),
    [
        ("void dispatchKernel<10u, true, false>(int*, unsigned long)", True),  # pplx-kernels
        ("void combineKernel<10u, true, true>(std::byte*)", True),
        ("void tensorrt_llm::kernels::moeA2ADispatchKernel<half>(Params)", True),
        ("all_to_all_single_kernel(float*)", True),
        ("void ns::AllToAllKernel<4>(int*)", True),
        ("void moe_align_block_size_dispatch_kernel<int>(int const*)", False),  # dispatch is not its start
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_dispatch", False),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::combine_t>>(ReduceOp)", False),
        ("void vllm::moe::topk_dispatch<float>(float const*)", False),
    ],
)
def test_weak_all_to_all_names(name: str, *, hinted: bool) -> None:
    assert pl.select(is_ep_hint_name(pl.lit(name))).item() is hinted
