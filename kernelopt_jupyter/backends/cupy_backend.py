"""The CUDA backend: NVRTC through ``cupy.RawModule``, launches on a private stream, CUDA events.

Errors are classified by their CUDA status code, never by message text: the sticky errors that
leave the context unusable (illegal address, trap, misaligned access...) are ``crashed`` and fatal,
so the worker is replaced; a configuration the device refuses is ``invalid``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import cupy
import numpy as np

from ..core.launch import LaunchDims
from ..core.physics import Peaks
from ..core.results import DeviceInfo, KernelAttributes, Status
from ..core.settings import TimingProtocol
from ..core.tuning_space import define_options
from .base import Backend, CompiledKernel, CompileFailed, CompileRequest, LaunchFailed, TimingSamples
from .cupy_timing import Clocks, ColdFlush, Timer
from .nvrtc_pool import Compiled, CompilePool, nvrtc_compile
from .stream_hold import HOLD_LOCK, StreamHold

# CUDA error codes (identical in the runtime and driver APIs for these values).
_NOT_READY = 600
_OUT_OF_MEMORY = 2
_INVALID = {
    1: "invalid argument",
    9: "invalid launch configuration",
    701: "too many resources requested for launch",
}
_STICKY = {
    700: "illegal memory access",
    702: "launch timed out",
    710: "device-side assert triggered",
    714: "hardware stack error",
    715: "illegal instruction",
    716: "misaligned address",
    717: "invalid address space",
    718: "invalid program counter",
    719: "unspecified launch failure (kernel exception)",
    720: "cooperative launch too large",
    999: "unknown error",
}
_DEFAULT_OPTIONS = ("-std=c++17",)
_FMA_SOURCE = r"""
extern "C" __global__ void kernelopt_fma_peak(float* sink, int iterations) {
    float a[8];
    for (int j = 0; j < 8; ++j) a[j] = threadIdx.x * 1e-7f + j;
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], 0.999999f, 1e-7f);
    }
    float total = 0.0f;
    for (int j = 0; j < 8; ++j) total += a[j];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = total;
}
"""

# Reads an L2-resident buffer ``passes`` times in one launch. Loads bypass L1 (``__ldcg``): each
# block reads the same slice every pass, which would otherwise come from L1.
_L2_READ_SOURCE = r"""
extern "C" __global__ void kernelopt_l2_read(const float4* data, long long count, int passes, float* sink) {
    float total = 0.0f;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (int pass = 0; pass < passes; ++pass)
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += stride) {
            float4 v = __ldcg(data + i);
            total += v.x + v.y + v.z + v.w;
        }
    if (total == -1.0f) sink[0] = total;
}
"""


class CupyBackend(Backend):
    name = "cupy"
    emulated = False
    clock = "cuda_events"
    xp = cupy

    def __init__(self, device: int = 0, memcheck: bool = False, cold_flush: ColdFlush = "read") -> None:
        if memcheck:
            raise ValueError(
                "memcheck belongs to the CPU emulation; on a GPU, run compute-sanitizer on a replay script"
            )
        self.device_id = device
        cupy.cuda.Device(device).use()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.stream.use()
        self._info: DeviceInfo | None = None
        self._smem_opt_in: dict[int, int] = {}
        self._timer_instance: Timer | None = None
        self._cold_flush = cold_flush
        self._pool = CompilePool(min(16, os.cpu_count() or 1))
        self._arch = cupy.cuda.compiler._get_arch()  # what RawModule itself would target

    # --- device -----------------------------------------------------------------------------------------
    def device_info(self) -> DeviceInfo:
        if self._info is None:
            self._info = _describe_device(self.device_id)
        return self._info

    # --- compile ------------------------------------------------------------------------------------------
    def compile(self, request: CompileRequest) -> CompiledKernel:
        cupy.cuda.Device(self.device_id).use()  # compile threads need the context current
        options = list(_DEFAULT_OPTIONS)
        options += define_options(request.defines)
        options += [option for option in request.options if option not in options]
        code = f'#line 1 "{request.filename}"\n{request.source}'
        started = time.perf_counter()
        # RawModule's own -ftz=true, said here since NVRTC is called bare, so numerics stay the same.
        flags = (*options, "-ftz=true")
        in_pool = self._pool.enter()
        try:
            if in_pool:
                compiled = self._pool.compile(code, flags, [request.entry], self._arch)
            else:
                compiled = nvrtc_compile(code, flags, [request.entry], self._arch)
        finally:
            self._pool.leave()
        module, kernel = self._load(request, compiled, started)
        attributes = KernelAttributes(
            registers=kernel.num_regs,
            static_shared_bytes=kernel.shared_size_bytes,
            local_bytes=kernel.local_size_bytes,
            const_bytes=kernel.const_size_bytes,
            max_threads_per_block=kernel.max_threads_per_block,
            ptx_version=kernel.ptx_version,
            binary_version=kernel.binary_version,
        )
        elapsed = time.perf_counter() - started
        return CompiledKernel(request.entry, (module, kernel), attributes, _tidy_log(compiled.log), elapsed)

    def _load(self, request: CompileRequest, compiled: Compiled, started: float) -> tuple[Any, Any]:
        """Load a compiled module on this context. NVRTC ran without the device (here or in the
        compile pool); only this load takes :data:`HOLD_LOCK`, so it never meets a held stream and
        compiles never wait for timing, nor timing for compiles."""
        if compiled.cubin is None:
            raise CompileFailed(_tidy_log(compiled.log), _since(started))
        try:
            with HOLD_LOCK:
                module = cupy.RawModule(path=self._pool.cubin_path(compiled.cubin))
                kernel = module.get_function(compiled.mapping.get(request.entry, request.entry))
                kernel.num_regs  # noqa: B018 - a first attribute query may load the function itself
        except cupy.cuda.driver.CUDADriverError as exc:  # the entry point is not in the module
            raise CompileFailed(f"{request.filename}: {exc}", _since(started)) from None
        return module, kernel

    # --- launch -------------------------------------------------------------------------------------------
    def launch(self, kernel: CompiledKernel, dims: LaunchDims, args: Sequence[Any]) -> None:
        raw = kernel.handle[1]
        if dims.shared_mem > 48 * 1024 and self._smem_opt_in.get(id(raw), 0) < dims.shared_mem:
            raw.max_dynamic_shared_size_bytes = dims.shared_mem
            self._smem_opt_in[id(raw)] = dims.shared_mem
        raw(dims.grid, dims.block, tuple(args), shared_mem=dims.shared_mem, stream=self.stream)

    def synchronize(self, timeout_s: float) -> None:
        event = cupy.cuda.Event(block=False, disable_timing=True)
        event.record(self.stream)
        _wait(event, timeout_s)

    # --- timing ---------------------------------------------------------------------------------------------
    def time(
        self,
        run: Callable[[], None],
        request: TimingProtocol,
        *,
        prepare: Callable[[], None] | None = None,
        timeout_s: float = 10.0,
    ) -> TimingSamples:
        """Sample with CUDA events (see :mod:`.cupy_timing`), then check the host's view of the same work."""
        samples = self._timer().measure(run, request, prepare, _wait, timeout_s)
        if request.host_check:
            samples.host_us_per_launch = self._timer().host_time_per_launch(run, prepare)
        return samples

    def _timer(self) -> Timer:
        if self._timer_instance is None:
            info = self.device_info()
            self._timer_instance = Timer(
                self.stream,
                StreamHold(info.sm_clock_mhz),
                Clocks(self.device_id),
                info.l2_cache_bytes or 0,
                self._cold_flush,
            )
        return self._timer_instance

    def measure_peaks(self) -> Peaks:
        """DRAM and L2 copy bandwidth (bytes read + written) and the FMA rate, measured with events."""
        info = self.device_info()
        big = cupy.empty(1 << 28, np.float32)
        big_out = cupy.empty_like(big)
        dram = 2 * big.nbytes / self._best_event_time(lambda: big_out.__setitem__(Ellipsis, big))
        l2 = self._l2_read_bytes_per_s(info)
        fma = cupy.RawKernel(_FMA_SOURCE, "kernelopt_fma_peak")
        blocks, threads, iterations = (info.sm_count or 1) * 16, 256, 2048
        sink = cupy.empty(blocks * threads, np.float32)
        seconds = self._best_event_time(lambda: fma((blocks,), (threads,), (sink, np.int32(iterations))))
        flops = 2.0 * 8 * iterations * blocks * threads / seconds
        return Peaks(
            device=info.name,
            dram_gbs=dram / 1e9,
            l2_gbs=l2 / 1e9,
            fp32_gflops=flops / 1e9,
            method="device copy (1 GiB), L2-resident reads in one launch, FMA-bound kernel; best of 5",
        )

    def _l2_read_bytes_per_s(self, info: DeviceInfo) -> float:
        """Bytes per second read from an L2-resident buffer (a quarter of the L2) by one long
        launch. Timing many short copies from Python instead measured the launch rate: an H200
        read 2.1 TB/s, under its DRAM bandwidth, and the floor then called a 2.9 TB/s
        ``cupy.sum`` impossible."""
        count = max(1 << 16, (info.l2_cache_bytes or 32 << 20) // 4 // 16)
        data = cupy.ones(count * 4, np.float32)
        sink = cupy.zeros(1, np.float32)
        kernel = cupy.RawKernel(_L2_READ_SOURCE, "kernelopt_l2_read")
        blocks, passes = (info.sm_count or 1) * 8, 200
        arguments = (data, np.int64(count), np.int32(passes), sink)
        seconds = self._best_event_time(lambda: kernel((blocks,), (256,), arguments, stream=self.stream))
        return data.nbytes * passes / seconds

    def _best_event_time(self, work: Callable[[], None], repeats: int = 5) -> float:
        work()
        best = float("inf")
        for _ in range(repeats):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(self.stream)
            work()
            end.record(self.stream)
            end.synchronize()
            best = min(best, cupy.cuda.get_elapsed_time(start, end) / 1000.0)
        return best

    # --- errors ---------------------------------------------------------------------------------------------
    def classify_error(self, error: Exception) -> LaunchFailed | None:
        if isinstance(error, cupy.cuda.memory.OutOfMemoryError):
            return LaunchFailed(Status.CRASHED, f"out of device memory: {error}", fatal=True)
        code = getattr(error, "status", None)
        if (
            not isinstance(error, cupy.cuda.runtime.CUDARuntimeError | cupy.cuda.driver.CUDADriverError)
            or code is None
        ):
            return None
        return _failure(int(code), str(error))

    def close(self) -> None:
        self._pool.close()
        self.stream.synchronize()


def _since(started: float) -> float:
    return time.perf_counter() - started


def _failure(code: int, text: str) -> LaunchFailed:
    if code in _INVALID:
        return LaunchFailed(Status.INVALID, f"the device refused the launch: {_INVALID[code]} ({text})")
    if code == _OUT_OF_MEMORY:
        return LaunchFailed(Status.CRASHED, f"out of device memory ({text})", fatal=True)
    description = _STICKY.get(code, f"CUDA error {code}")
    return LaunchFailed(Status.CRASHED, f"{description} ({text})", fatal=True)


def _wait(event: cupy.cuda.Event, timeout_s: float) -> None:
    """Wait for an event, but never longer than the timeout: a hung kernel must not hang us."""
    deadline = time.monotonic() + timeout_s
    pause = 0.0
    while True:
        code = cupy.cuda.runtime.eventQuery(event.ptr)
        if code == 0:
            return
        if code != _NOT_READY:
            raise _failure(int(code), f"cudaEventQuery returned {code}")
        if time.monotonic() > deadline:
            raise LaunchFailed(
                Status.TIMEOUT, f"the kernel did not finish within {timeout_s:g} s", fatal=True
            )
        time.sleep(pause)
        pause = min(0.002, pause + 0.00005)


def _tidy_log(text: str) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return "\n".join(line for line in lines if line and not line.startswith("--"))


def _describe_device(device_id: int) -> DeviceInfo:
    runtime = cupy.cuda.runtime
    props = runtime.getDeviceProperties(device_id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    memory_khz = props.get("memoryClockRate") or 0
    bus_bits = props.get("memoryBusWidth") or 0
    peak = 2.0 * memory_khz * 1e3 * bus_bits / 8 / 1e9 if memory_khz and bus_bits else None
    versions = {
        "cupy": cupy.__version__,
        "cuda_runtime": str(runtime.runtimeGetVersion()),
        "cuda_driver": str(runtime.driverGetVersion()),
        "numpy": np.__version__,
    }
    with contextlib.suppress(Exception):  # NVRTC too old to report a version: leave it out
        versions["nvrtc"] = ".".join(str(v) for v in cupy.cuda.nvrtc.getVersion())
    return DeviceInfo(
        backend="cupy",
        name=name,
        compute_capability=f"{props['major']}.{props['minor']}",
        sm_count=props["multiProcessorCount"],
        max_threads_per_block=props["maxThreadsPerBlock"],
        max_block_dims=list(props["maxThreadsDim"]),
        max_grid_dims=list(props["maxGridSize"]),
        shared_mem_per_block=props["sharedMemPerBlock"],
        shared_mem_per_block_optin=props.get("sharedMemPerBlockOptin"),
        shared_mem_per_sm=props.get("sharedMemPerMultiprocessor"),
        registers_per_block=props["regsPerBlock"],
        registers_per_sm=props.get("regsPerMultiprocessor"),
        l2_cache_bytes=props["l2CacheSize"],
        sm_clock_mhz=(props.get("clockRate") or 0) / 1000 or None,
        memory_clock_mhz=memory_khz / 1000 or None,
        memory_bus_width_bits=bus_bits or None,
        peak_bandwidth_gbs=peak,
        total_memory_bytes=props["totalGlobalMem"],
        warp_size=props["warpSize"],
        driver=versions["cuda_driver"],
        library_versions=versions,
    )
