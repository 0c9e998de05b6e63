"""What the simulated fleet is made of: code, crash shapes, Xid codes (data, not logic).

The names are the ones an SRE of a GPU training fleet reads every day, so a
simulated alert looks like a real one: ``libnccl.so.2!ncclCommWatchdog``,
Xid 79 "GPU has fallen off the bus". Rates are per host per day and come
from the order of magnitude such fleets report (Xid 13/31/43/45 are
application faults and common; 48/63/64/79/94/95 are hardware and rare).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetepi.contract import TELEMETRY_KINDS

#: (module, innermost functions that crash, callers) per component of a GPU job.
COMPONENTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("libc.so.6", ("abort", "raise", "__memmove_avx_unaligned_erms", "_int_free", "malloc_consolidate",
                   "__GI___pthread_mutex_lock", "pthread_kill", "__strlen_avx2"),
     ("__libc_start_call_main", "start_thread", "clone3")),
    ("libstdc++.so.6", ("std::terminate", "__cxa_throw", "std::__throw_bad_alloc", "__gxx_personality_v0"),
     ("std::thread::_State_impl::_M_run", "execute_native_thread_routine")),
    ("libcuda.so.1", ("cuLaunchKernel", "cuMemcpyHtoDAsync_v2", "cuStreamSynchronize", "cuCtxSynchronize",
                      "cuMemAlloc_v2", "cuEventSynchronize", "cuGraphLaunch", "cuMemFree_v2"),
     ("cudart::cudaApiLaunchKernel", "cudart::cudaApiStreamSynchronize", "cudart::cudaApiMemcpyAsync")),
    ("libnccl.so.2", ("ncclCommWatchdog", "ncclCommAbort", "ncclProxyService", "ncclIbProgress",
                      "ncclGroupEnd", "ncclAllReduce", "ncclTransportP2pSetup"),
     ("c10d::ProcessGroupNCCL::workCleanupLoop", "c10d::ProcessGroupNCCL::ncclCommWatchdog",
      "c10d::ProcessGroupNCCL::allreduce")),
    ("libtorch_cuda.so", ("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
                          "at::native::index_put_kernel", "c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout",
                          "at::cuda::blas::gemm", "flash::run_mha_fwd"),
     ("torch::autograd::Engine::thread_main", "at::native::_efficient_attention_forward",
      "torch::autograd::python::PythonEngine::thread_init")),
    ("libtorch_cpu.so", ("at::TensorIteratorBase::build", "c10::detail::torchCheckFail",
                         "torch::jit::InterpreterStateImpl::runImpl", "at::native::copy_impl"),
     ("torch::autograd::Engine::evaluate_function", "at::_ops::copy_::call")),
    ("libpython3.11.so.1.0", ("_PyEval_EvalFrameDefault", "PyObject_Call", "subtype_dealloc",
                              "_PyObject_GC_Link", "PyGILState_Ensure"),
     ("_PyFunction_Vectorcall", "pymain_run_python", "thread_run")),
    ("libibverbs.so.1", ("ibv_post_send", "ibv_poll_cq", "ibv_reg_mr_iova2"),
     ("ncclIbIsend", "ncclIbTest")),
    ("libmlx5.so.1", ("mlx5_poll_cq", "mlx5_post_send"), ("ibv_poll_cq", "ibv_post_send")),
    ("libjemalloc.so.2", ("je_arena_dalloc_no_tcache", "je_tcache_bin_flush_small"), ("je_free", "je_malloc")),
    ("trainer", ("Trainer::step", "DataLoader::next_batch", "CheckpointWriter::flush", "ShardedOptimizer::apply"),
     ("Trainer::run", "main")),
    ("inference-server", ("BatchScheduler::run", "KVCache::evict", "TokenStream::push", "GrpcFrontend::on_read"),
     ("Worker::loop", "main")),
    ("dcgm-exporter", ("dcgmGetLatestValues", "DcgmWatcher::poll"), ("main",)),
)

#: Executable a signature's process runs, per component module.
EXECUTABLES = ("python3.11", "trainer", "inference-server", "torchrun", "dcgm-exporter")

#: The founding case's software race: returns to NULL in libunwind on many hosts.
UNWIND_RACE_SIGNATURE = "libunwind.so.8!_ULx86_64_step | libgcc_s.so.1!_Unwind_Backtrace"


@dataclass(frozen=True)
class Shape:
    """How a crash looks beyond its stack: what separates a software bug from bad silicon."""

    name: str
    signal: str
    si_code: int | None
    fault_class: str
    flags: tuple[str, ...] = ()
    #: "null", "user", "noncanonical" or "" (no fault address).
    address: str = ""
    #: Range of the bit-flip score; None leaves the field out.
    bitflip: tuple[float, float] | None = None


#: Crash shapes; indices are stored in the crash table.
SHAPES: tuple[Shape, ...] = (
    Shape("null_deref", "SIGSEGV", 1, "null_page", (), "null", (0.0, 0.1)),
    Shape("abort", "SIGABRT", -6, "none"),
    Shape("wild_pointer", "SIGSEGV", 1, "unmapped", (), "user", (0.0, 0.2)),
    Shape("bus_error", "SIGBUS", 2, "mapped", (), "user", (0.0, 0.2)),
    Shape("return_to_null", "SIGSEGV", 1, "null_page", ("return_to_null",), "null", (0.0, 0.05)),
    # Silent CPU corruption (the founding case): non-canonical addresses one bit
    # away from a valid pointer, a stack pointer not 8-byte aligned. The flags keep
    # the first simulator's names (the classic preset is held byte for byte to its
    # recordings); fleetepi.contract.shapes reads them as the agents' names.
    Shape("bit_flip", "SIGSEGV", 128, "non_canonical", ("misaligned_sp", "bit_flip_address"), "noncanonical",
          (0.7, 1.0)),
    Shape("illegal_instruction", "SIGILL", 2, "mapped", ("misaligned_sp",), "user", (0.5, 0.9)),
)
SHAPE_INDEX = {s.name: i for i, s in enumerate(SHAPES)}

#: Shape mix of background crashes (weights, same order as SHAPES).
BACKGROUND_SHAPE_WEIGHTS = np.array([0.35, 0.40, 0.15, 0.06, 0.04, 0.0, 0.0])
#: Shape mix of a host with silently corrupting hardware.
SICK_SHAPE_WEIGHTS = np.array([0.10, 0.05, 0.10, 0.05, 0.0, 0.55, 0.15])


@dataclass(frozen=True)
class XidCode:
    code: int
    rate_per_host_day: float
    message: str


#: Background Xid codes: code, rate per host per day, driver message.
XID_CODES: tuple[XidCode, ...] = (
    XidCode(13, 0.040, "Graphics Engine Exception"),
    XidCode(31, 0.060, "GPU memory page fault"),
    XidCode(43, 0.030, "GPU stopped processing"),
    XidCode(45, 0.080, "Preemptive cleanup, due to previous errors"),
    XidCode(48, 0.002, "Double Bit ECC Error"),
    XidCode(63, 0.008, "ECC page retirement or row remapping recording event"),
    XidCode(64, 0.001, "ECC page retirement or row remapper recording failure"),
    XidCode(74, 0.010, "NVLINK Error"),
    XidCode(79, 0.002, "GPU has fallen off the bus"),
    XidCode(92, 0.003, "High single-bit ECC error rate"),
    XidCode(94, 0.004, "Contained ECC error"),
    XidCode(95, 0.001, "Uncontained ECC error"),
    XidCode(119, 0.003, "GSP RPC Timeout"),
)
XID_MESSAGE = {x.code: x.message for x in XID_CODES}

#: Telemetry kinds in table order: the contract's enum.
TK = {k: i for i, k in enumerate(TELEMETRY_KINDS)}

#: GPUs per host (device names GPU0..GPU7 and PCI bus ids).
GPUS_PER_HOST = 8
DEVICES = tuple(f"0000:{bus:02x}:00.0" for bus in (0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb))


@dataclass(frozen=True)
class SignatureInfo:
    """One crash signature of the catalog, with the stack that yields it."""

    signature: str
    executable: str
    frames: tuple[tuple[str, str, str], ...]  # (module, function, offset)


def make_signatures(n: int, rng: np.random.Generator) -> list[SignatureInfo]:
    """``n`` distinct signatures ``module!function | module!function`` (2 or 3 frames).

    The frame offsets are fixed per signature: equal crashes on different
    hosts carry byte-identical symbolized stacks, as the contract requires.
    """
    out: list[SignatureInfo] = []
    seen: set[str] = set()
    weights = np.array([len(c[1]) for c in COMPONENTS], dtype=float)
    weights /= weights.sum()
    while len(out) < n:
        ci = int(rng.choice(len(COMPONENTS), p=weights))
        mod, inner, callers = COMPONENTS[ci]
        fn = inner[int(rng.integers(len(inner)))]
        if rng.random() < 0.5:  # called from inside its own component
            caller = (mod, callers[int(rng.integers(len(callers)))])
        else:  # called from another component's code (torch -> libcuda, nccl -> ibverbs, ...)
            m2, inner2, _ = COMPONENTS[int(rng.integers(len(COMPONENTS)))]
            caller = (m2, inner2[int(rng.integers(len(inner2)))])
        frames = [(mod, fn), caller]
        if rng.random() < 0.3:
            m3, _, c3 = COMPONENTS[int(rng.integers(len(COMPONENTS)))]
            frames.append((m3, c3[int(rng.integers(len(c3)))]))
        sig = " | ".join(f"{m}!{f}" for m, f in frames)
        if sig in seen or len(sig) > 1024:
            continue
        seen.add(sig)
        exe = EXECUTABLES[int(rng.integers(len(EXECUTABLES)))] if mod not in ("trainer", "inference-server",
                                                                                 "dcgm-exporter") else mod
        offs = tuple(f"0x{int(rng.integers(0x40, 0x4000)):x}" for _ in frames)
        out.append(SignatureInfo(sig, exe, tuple((m, f, o) for (m, f), o in zip(frames, offs))))
    return out


def unwind_race_info() -> SignatureInfo:
    return SignatureInfo(
        UNWIND_RACE_SIGNATURE,
        "trainer",
        (("libunwind.so.8", "_ULx86_64_step", "0x1d2"), ("libgcc_s.so.1", "_Unwind_Backtrace", "0x9e")),
    )


__all__ = [
    "BACKGROUND_SHAPE_WEIGHTS",
    "COMPONENTS",
    "DEVICES",
    "GPUS_PER_HOST",
    "SHAPES",
    "SHAPE_INDEX",
    "SICK_SHAPE_WEIGHTS",
    "TELEMETRY_KINDS",
    "TK",
    "UNWIND_RACE_SIGNATURE",
    "XID_CODES",
    "XID_MESSAGE",
    "Shape",
    "SignatureInfo",
    "XidCode",
    "make_signatures",
    "unwind_race_info",
]
