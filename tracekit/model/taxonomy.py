"""What counts as communication: one table of name patterns, by library.

Each row names a library, what its pattern is matched against (GPU ``kernel`` names, or
``host`` events: CPU operators, ``record_function``/NVTX ranges and Python frames) and, for
kernels, how to name the operation so that the same collective matches across ranks.

===================  ======  =======================================================================
library              target  matches
===================  ======  =======================================================================
NCCL / RCCL / MSCCL  kernel  ``ncclKernel_*``, ``ncclDevKernel_*``, ``rcclKernel_*``, ``mscclKernel_*``
DeepEP               kernel  anything in the ``deep_ep::`` namespace (``_ZN7deep_ep`` mangled):
                             ``notify_dispatch``, ``cached_notify_dispatch``, ``dispatch``,
                             ``cached_notify_combine``, ``combine``, ``cached_notify``,
                             ``internode_ll::dispatch``/``combine``, ``clean_low_latency_buffer``
expert-parallel      kernel  DeepEP's families under other namespaces (DeepSeek's ``dpsk::ep::``,
all-to-all                   UCCL's ``uccl::``, forks): an ``ep``, ``internode``, ``intranode``
                             (``_ll``) namespace holding ``dispatch``, ``combine``,
                             ``dispatch_ll``, ``combine_ll``, ``notify_dispatch``,
                             ``notify_combine``, ``cached_notify*``, ``clean_low_latency_buffer``,
                             ``barrier`` (mangled: ``9internode8dispatchI``...); and, in any
                             namespace, ``notify_dispatch``, ``notify_combine``, ``cached_notify*``
MORI                 kernel  AMD's ``mori::moe::EpDispatch*``/``EpCombine*`` kernels
NVSHMEM              kernel  ``nvshmem*``/``nvshmemi_*``/``rocshmem*`` kernels and NVSHMEM's
                             on-stream collectives (``barrier_on_stream_kernel``,
                             ``alltoall_float_on_stream_kernel``...)
SymmetricMemory      kernel  PyTorch ``multimem_all_reduce_kernel``, ``multimem_one_shot_all_reduce_kernel``,
                             ``multimem_all_gather_kernel``, ``one_shot_all_reduce_kernel``,
                             ``two_shot_all_reduce_kernel[_inplace]``, ``c10d::nvshmem_extension::*``
custom all-reduce    kernel  vLLM/SGLang ``cross_device_reduce_1stage``/``_2stage``; TensorRT-LLM and
                             FBGEMM ``oneShotAllReduceKernel``/``twoShotAllReduceKernel``;
                             TRT-LLM/FlashInfer ``allreduce_fusion_kernel*``/``allReduceFusionKernel*``
TE userbuffers       kernel  TransformerEngine ``userbuffers_*`` and ``kuserbuffers_*``
HCCL / oneCCL        kernel  ``hccl*``, ``hcom_*``, ``oneccl*`` (case-insensitive)
c10d and backends    host    ``c10d::``, ``c10d_functional::``, ``_c10d_functional::`` operators;
                             ``gloo:``, ``nccl:``, ``mpi:``, ``ucc:``, ``xccl:``, ``hccl:`` ranges;
                             ``record_param_comms``
SymmetricMemory      host    ``symm_mem::`` operators that only communicate (all-reduce, all-gather,
                             reduce-scatter, all-to-all, NVSHMEM put/get); not the fused
                             ``symm_mem::fused_all_gather_matmul``-style ones, which also compute
DeepEP               host    the Python entry points ``deep_ep/buffer.py(N): dispatch`` (``combine``,
                             ``internode_``/``low_latency_`` variants), their pybind calls
                             (``<built-in method intranode_dispatch of PyCapsule ...>``) and
                             ``record_function`` ranges named ``deep_ep.dispatch``-like
pplx-kernels         host    its operators ``pplx_kernels::all_to_all_dispatch``/``_combine`` (which
                             launch its ``dispatchKernel``/``combineKernel``) and their Python
                             entry points ``pplx_kernels/all_to_all.py(N): dispatch``/``combine``
===================  ======  =======================================================================

Never communication by name (:data:`NOT_COMM_KERNEL_PATTERN`): kernels that only compute a
layout, DeepEP's ``get_dispatch_layout`` (``deep_ep::layout::``, ``dpsk::ep::cuda::``). A bare
``dispatch`` or ``combine`` outside those namespaces (a GEMM's ``..._dispatch_policy``,
``reduce_kernel<...combine>``, vLLM's ``topk_dispatch``) is compute, and so is other work that
lives in an expert-parallel namespace (``cdpsk::ep::CUB_...::DeviceScanByKeyKernel``, a CUB scan
of DeepSeek's sampler): the namespace alone is not evidence, the namespace and a function of the
family are. Patterns are Rust regular expressions, as polars runs them: no look-around.

Names are one kind of evidence; :func:`tracekit.model.classify.classify_run` adds others, each
sound on its own or only with a second one (the reasons: :mod:`tracekit.model.comm_evidence`):

=========================  ================================================================================
evidence                   makes a compute kernel communication
=========================  ================================================================================
launching host op          alone: launched inside a ``host`` event of the table above (``c10d::``,
                           ``record_param_comms``, ``nccl:``, DeepEP's and pplx's entry points), or linked
                           to one by its external id: the host op is the communication call
weak name + stream         together: a function that *starts* with ``dispatch``/``combine`` or names an
                           all-to-all (:data:`EP_HINT_PATTERN`: pplx's ``dispatchKernel``, TensorRT-LLM's
                           ``moeA2ADispatchKernel``) on a stream whose named collectives take more device
                           time than its other kernels. A plain kernel sharing that stream stays compute
no launch + stream         together: no recorded launch, on a stream where every launched kernel is a
                           collective
user pattern               alone: ``--comm-kernel REGEX``
=========================  ================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import polars as pl

#: The host event kinds a ``host`` pattern is matched against.
HOST_KINDS: Final = ("cpu_op", "annotation", "python")
#: Distributed backends whose collectives run on the host (the GPU, if any, only copies to and
#: from them): a GPU run on one of them has no communication kernel to find.
HOST_BACKENDS: Final = frozenset({"gloo", "mpi"})


@dataclass(frozen=True)
class CommPattern:
    """One row of the taxonomy: a pattern, where it comes from and what it matches."""

    library: str
    target: Literal["kernel", "host"]
    #: A regular expression (polars/Rust syntax) searched in the event name.
    pattern: str
    #: For kernels: a regular expression whose first group names the operation ...
    op: str | None = None
    #: ... after this prefix (``deepep_`` + ``dispatch``).
    op_prefix: str = ""


_DEEPEP_PY = r"(?:^|/)deep_ep/buffer\.py\(\d+\): (?:internode_|intranode_|low_latency_)?(?:dispatch|combine)$"
_DEEPEP_PYBIND = r"^<built-in method (?:internode|intranode|low_latency)_(?:dispatch|combine) of "
_DEEPEP_RANGE = (
    r"(?i:^deep_?ep[._: ]+(?:\w+[._: ]+)*?(?:low_latency_|internode_|intranode_)?(?:dispatch|combine)$)"
    r"|^Buffer\.(?:low_latency_|internode_|intranode_)?(?:dispatch|combine)$"
)
#: The functions of DeepEP's families (the kernels DeepEP and its forks name alike).
_EP_FUNCTIONS = (
    r"(?:cached_notify(?:_dispatch|_combine)?|notify_(?:dispatch|combine)|(?:dispatch|combine)(?:_ll)?"
    r"|clean_low_latency_buffer|barrier)"
)
#: The namespaces that hold them.
_EP_SPACE = r"\b(?:ep|internode|intranode)::(?:\w+::)*"
#: The same functions mangled (Itanium ABI: each name after its length), in those namespaces.
_EP_MANGLED = (
    r"(?:9internode|9intranode|12internode_ll|12intranode_ll)"
    r"(?:8dispatch|7combine|11dispatch_ll|10combine_ll|15notify_dispatch|14notify_combine|13cached_notify"
    r"|22cached_notify_dispatch|21cached_notify_combine|24clean_low_latency_buffer|7barrier)[IE]"
)
#: Functions no other library names so: expert-parallel all-to-all in any namespace.
_EP_NOTIFY = r"\b(?:cached_notify(?:_dispatch|_combine)?|notify_(?:dispatch|combine))\b"
_SYMM_MEM_OPS = (
    r"^symm_mem::(?:multimem_|one_shot_|two_shot_|reduce_scatter|all_to_all|tile_reduce|"
    r"nvshmem_|stream_write_value32|memset32|put_signal|wait_signal)"
)

#: The taxonomy, in the order families are tried when naming an operation.
COMM_PATTERNS: Final[tuple[CommPattern, ...]] = (
    CommPattern(
        "NCCL/RCCL/MSCCL",
        "kernel",
        r"(?i:(?:^|[^a-z])(?:nccl|rccl|msccl))",
        op=r"(?i:(?:nccl|rccl|msccl)(?:Dev)?Kernel_([A-Za-z0-9]+))",
    ),
    CommPattern(
        "DeepEP", "kernel", r"\bdeep_ep::internode_ll::", op=r"deep_ep::internode_ll::(\w+)", op_prefix="deepep_ll_"
    ),
    CommPattern("DeepEP", "kernel", r"\bdeep_ep::|_ZN7deep_ep", op=r"deep_ep::(?:\w+::)*(\w+)", op_prefix="deepep_"),
    CommPattern(
        "expert-parallel all-to-all",
        "kernel",
        rf"\b(?:internode|intranode)_ll::(?:\w+::)*{_EP_FUNCTIONS}\b",
        op=r"\b(?:internode|intranode)_ll::(?:\w+::)*(\w+)",
        op_prefix="ep_ll_",
    ),
    CommPattern(
        "expert-parallel all-to-all",
        "kernel",
        rf"{_EP_SPACE}{_EP_FUNCTIONS}\b|{_EP_MANGLED}|{_EP_NOTIFY}",
        op=rf"(?:{_EP_SPACE})?\b({_EP_FUNCTIONS})\b",
        op_prefix="ep_",
    ),
    CommPattern("MORI", "kernel", r"\bmori::moe::Ep(?:Dispatch|Combine)", op=r"\bmori::moe::(\w+)", op_prefix="mori_"),
    CommPattern(
        "PyTorch SymmetricMemory",
        "kernel",
        r"\b(?:multimem_all_reduce|multimem_one_shot_all_reduce|multimem_all_gather|one_shot_all_reduce|"
        r"two_shot_all_reduce)_kernel",
        op=r"\b(multimem_all_reduce|multimem_one_shot_all_reduce|multimem_all_gather|one_shot_all_reduce|"
        r"two_shot_all_reduce)_kernel",
        op_prefix="symm_mem_",
    ),
    CommPattern(
        "PyTorch SymmetricMemory (NVSHMEM)",
        "kernel",
        r"\bnvshmem_extension::",
        op=r"nvshmem_extension::(\w+)",
        op_prefix="symm_mem_",
    ),
    CommPattern("NVSHMEM", "kernel", r"(?i:\b(?:nvshmem|rocshmem))", op=r"(?i:\b((?:nvshmem|rocshmem)\w*))"),
    CommPattern("NVSHMEM", "kernel", r"\w_on_stream_kernel", op=r"(\w+)_on_stream_kernel", op_prefix="nvshmem_"),
    CommPattern(
        "vLLM/SGLang custom all-reduce",
        "kernel",
        r"\bcross_device_reduce_(?:1|2)stage",
        op=r"\b(cross_device_reduce_(?:1|2)stage)",
    ),
    CommPattern(
        "TensorRT-LLM/FBGEMM custom all-reduce",
        "kernel",
        r"\b(?:oneShot|twoShot|OneShot|TwoShot)AllReduceKernel",
        op=r"\b((?:one|two|One|Two)ShotAllReduce)Kernel",
        op_prefix="custom_",
    ),
    CommPattern(
        "TensorRT-LLM/FlashInfer all-reduce fusion",
        "kernel",
        r"\b(?:allreduce_fusion_kernel|allReduceFusionKernel)",
        op=r"\b(allreduce_fusion_kernel\w*|allReduceFusionKernel\w*)",
    ),
    CommPattern("TransformerEngine userbuffers", "kernel", r"\bk?userbuffers_", op=r"\b(k?userbuffers_\w+)"),
    CommPattern("HCCL/oneCCL", "kernel", r"(?i:\b(?:hccl|hcom_|oneccl))", op=r"(?i:\b((?:hccl|hcom_|oneccl)\w*))"),
    CommPattern(
        "c10d and backends",
        "host",
        r"^(?:gloo:|nccl:|mpi:|ucc:|xccl:|hccl:|c10d::|c10d_functional::|_c10d_functional::)|^record_param_comms$",
    ),
    CommPattern("PyTorch SymmetricMemory", "host", _SYMM_MEM_OPS),
    CommPattern("DeepEP", "host", f"{_DEEPEP_PY}|{_DEEPEP_PYBIND}|{_DEEPEP_RANGE}"),
    CommPattern(
        "pplx-kernels",
        "host",
        r"^pplx_kernels::all_to_all_(?:dispatch|combine)$"
        r"|(?:^|/)pplx_kernels/all_to_all\.py\(\d+\): (?:dispatch|combine)$",
    ),
)

#: Kernels that are never communication by name, though a pattern above matches them.
NOT_COMM_KERNEL_PATTERN: Final = r"get_dispatch_layout|\bdeep_ep::layout::|_ZN7deep_ep6layout"


def _joined(target: str) -> str:
    return "|".join(f"(?:{p.pattern})" for p in COMM_PATTERNS if p.target == target)


#: Every kernel pattern of the table, as one expression.
COMM_KERNEL_PATTERN: Final = _joined("kernel")
#: Every host pattern of the table, as one expression.
COMM_HOST_PATTERN: Final = _joined("host")


def is_comm_kernel_name(name: pl.Expr) -> pl.Expr:
    """Whether a kernel ``name`` (a string expression) is communication by the table."""
    return name.str.contains(COMM_KERNEL_PATTERN) & ~name.str.contains(NOT_COMM_KERNEL_PATTERN)


def is_comm_host_name(name: pl.Expr) -> pl.Expr:
    """Whether a host event ``name`` (a string expression) is communication by the table."""
    return name.str.contains(COMM_HOST_PATTERN)


#: A weak name: a kernel function (its last identifier) that starts with ``dispatch`` or
#: ``combine``, or names an all-to-all. Communication only with a second piece of evidence.
EP_HINT_PATTERN: Final = r"(?i:^(?:dispatch|combine)|a2a|all_?to_?all)"


def kernel_function(name: pl.Expr) -> pl.Expr:
    """A kernel's function with its namespaces: no ``void``, template arguments or parameters."""
    return (
        name.str.replace(r"^void\s+", "")
        .str.replace_all(r"\(anonymous namespace\)::", "")
        .str.extract(r"^([^<(]+)", 1)
        .str.strip_chars()
    )


def is_ep_hint_name(name: pl.Expr) -> pl.Expr:
    """Whether a kernel ``name`` reads as expert-parallel all-to-all (:data:`EP_HINT_PATTERN`)."""
    return kernel_function(name).str.extract(r"(\w+)$", 1).str.contains(EP_HINT_PATTERN).fill_null(False)


def kernel_op_expr(name: pl.Expr) -> pl.Expr:
    """The operation a communication kernel performs, the same on every rank.

    The first family whose ``op`` expression matches names it (``AllReduce``,
    ``deepep_dispatch``, ``symm_mem_one_shot_all_reduce``); any other kernel (a user's
    pattern, a mangled name) is named by its function, without ``void``, template arguments
    and parameters.
    """
    named = [
        pl.lit(p.op_prefix) + name.str.extract(p.op, 1) if p.op_prefix else name.str.extract(p.op, 1)
        for p in COMM_PATTERNS
        if p.op is not None
    ]
    function = kernel_function(name)
    return pl.coalesce(*named, pl.when(function != "").then(function), name)


#: Host ranges of one-time work: autotuning, compilation, lazy initialization, module loading,
#: CUDA graph recording (torch.compile's cudagraph trees), the profiler's own frames (its start
#: and flush; those that recur every step are not one-time, see ``host_causes._recurring``).
#: Shared by warm-up detection (a first step holding them) and the idle causes (``one_time``).
ONE_TIME_RANGES: Final = (
    r"(?i:autotun|benchmark_all_configs|select_algorithm|cudnn_?find|find_?algorithm"
    r"|torch/_dynamo/(?:convert_frame|symbolic_convert|output_graph)"
    r"|torch/_inductor/(?:compile_fx|codecache|graph|scheduler|async_compile)"
    r"|compile_fx|compile_inner|dynamo_timed|aot_?autograd|create_aot_dispatcher"
    r"|lazy_?init|load_?module|module_?load"
    r"|cudagraph_trees|CUDAGraphNode\.record|cudagraphify|graph_?capture"
    r"|^torch/(?:profiler/|autograd/profiler\.py))"
)
#: Runtime and driver calls of one-time work: allocator growth, set-up, module loading.
ONE_TIME_CALLS: Final = (
    r"^(?:cuda|hip)(?:Malloc|MallocHost|MallocManaged|MallocPitch|HostAlloc|HostRegister|Free|FreeHost"
    r"|GraphInstantiate\w*|GraphUpload|StreamBeginCapture\w*|StreamEndCapture|SetDevice|GetDeviceProperties\w*)"
    r"(?:_v\d+)?$"
    r"|^cu(?:MemAlloc\w*|MemFree\w*|MemCreate|MemMap|MemHostAlloc\w*|ModuleLoad\w*|LibraryLoad\w*"
    r"|ModuleGetFunction|LibraryGetKernel|CtxCreate\w*|DevicePrimaryCtxRetain|Init)(?:_v\d+)?$"
)
#: Either of the above.
ONE_TIME_WORK: Final = f"{ONE_TIME_RANGES}|{ONE_TIME_CALLS}"
