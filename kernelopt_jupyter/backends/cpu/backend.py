"""``CpuBackend``: compile CUDA C++ with the host compiler and run it on fibers (CPU emulation).

Launches are queued to one dispatcher thread that calls into the runtime through ctypes (which
releases the GIL), so ``launch`` returns at once, launches run in FIFO order, and ``synchronize``
can give up on a kernel that never finishes. On a timeout the runtime is asked to interrupt the
stuck host threads; if that fails the backend refuses further work (the worker must go anyway).
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.cuda_source import find_kernel
from ...core.launch import LaunchDims
from ...core.results import DeviceInfo, KernelAttributes, Status
from ...core.tuning_space import define_options
from ..base import Backend, CompiledKernel, CompileFailed, CompileRequest, LaunchFailed
from . import analysis, native, toolchain
from .native import ArgumentError, KernelLibrary, LaunchDesc, LaunchReport, PackedArgs
from .reports import launch_failure
from .translate import LAUNCHER_FILE, TranslationError, translate

MAX_THREADS_PER_BLOCK = 1024
SHARED_PER_BLOCK = 49152
SHARED_PER_BLOCK_OPTIN = 232448
CANCEL_GRACE_S = 3.0

_GPU_ONLY_OPTIONS = (
    "-arch",
    "--gpu-architecture",
    "-code",
    "--gpu-code",
    "--use_fast_math",
    "-use_fast_math",
    "-lineinfo",
    "--generate-line-info",
    "-G",
    "--device-debug",
    "--fmad",
    "-fmad",
    "-Xptxas",
    "--ptxas-options",
    "-ftz",
    "--ftz",
    "-prec-div",
    "--prec-div",
    "-prec-sqrt",
    "--prec-sqrt",
    "-maxrregcount",
    "--maxrregcount",
    "-rdc",
    "--relocatable-device-code",
    "-dlto",
    "--dlto",
    "--extra-device-vectorization",
    "-dopt",
    "--dopt",
    "--restrict",
    "-restrict",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "-default-device",
    "--default-device",
)


@dataclass
class CpuKernel:
    """``CompiledKernel.handle`` of this backend."""

    library: KernelLibrary
    filename: str


@dataclass
class _Options:
    std: str = "c++17"
    flags: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def parse_options(options: Sequence[str]) -> _Options:
    """NVRTC-style options: keep -std/-D/-I, note and drop GPU-only ones."""
    parsed, ignored = _Options(), []
    items = list(options)
    index = 0
    while index < len(items):
        option = items[index]
        index += 1
        if option in ("-D", "--define-macro", "-I", "--include-path") and index < len(items):
            option = ("-D" if option in ("-D", "--define-macro") else "-I") + items[index]
            index += 1
        if option.startswith(("-std=", "--std=")):
            std = option.split("=", 1)[1]
            if std in ("c++03", "c++11", "c++14"):
                parsed.notes.append(f"CPU emulation: compiled as c++17 (asked for {std})")
                std = "c++17"
            parsed.std = std
        elif option.startswith(("-D", "--define-macro=")):
            text = option[2:] if option.startswith("-D") else option.split("=", 1)[1]
            name, _, value = text.partition("=")
            parsed.defines[name] = value or "1"
            parsed.flags.append(f"-D{text}")
        elif option.startswith(("-I", "--include-path=")):
            parsed.flags.append("-I" + (option[2:] if option.startswith("-I") else option.split("=", 1)[1]))
        else:
            if option in ("-Xptxas", "--ptxas-options") and index < len(items):
                option = f"{option} {items[index]}"
                index += 1
            ignored.append(option)
    if ignored:
        known = [o for o in ignored if o.split("=")[0].split()[0] in _GPU_ONLY_OPTIONS]
        other = [o for o in ignored if o not in known]
        if known:
            parsed.notes.append(f"CPU emulation: ignored GPU-only options: {' '.join(known)}")
        if other:
            parsed.notes.append(f"CPU emulation: ignored options: {' '.join(other)}")
    return parsed


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "host CPU"


@dataclass
class _Job:
    desc: LaunchDesc
    packed: PackedArgs
    kernel: CpuKernel
    report: LaunchReport = field(default_factory=LaunchReport)


class CpuBackend(Backend):
    """CUDA C++ kernels compiled for the host and run as fibers: a GPU-free stand-in for ``cupy``."""

    name = "cpu"
    emulated = True
    clock = "host"
    xp = np

    def __init__(self, memcheck: bool = False, threads: int | None = None) -> None:
        self.memcheck = bool(memcheck)
        self.threads = max(1, int(threads or os.cpu_count() or 1))
        self._setup_lock = threading.Lock()
        self._runtime: ctypes.CDLL | None = None
        self._compiler: toolchain.Compiler | None = None
        self._runtime_path: Any = None
        self._info: DeviceInfo | None = None
        self._cv = threading.Condition()
        self._jobs: deque[_Job] = deque()
        self._busy = False
        self._running: _Job | None = None
        self._failure: LaunchFailed | None = None
        self._dispatcher: threading.Thread | None = None
        self._hung = False
        self._closed = False

    # ----------------------------------------------------------------------------------- setup
    def _ensure_runtime(self) -> tuple[toolchain.Compiler, ctypes.CDLL]:
        with self._setup_lock:
            if self._runtime is None or self._compiler is None:
                compiler = toolchain.find_compiler()
                path = toolchain.runtime_library(
                    compiler, ucontext=os.environ.get("KERNELOPT_CPU_UCONTEXT") == "1"
                )
                self._runtime = native.load_runtime(path)
                self._compiler, self._runtime_path = compiler, path
            return self._compiler, self._runtime

    def device_info(self) -> DeviceInfo:
        if self._info is None:
            versions = {"numpy": np.__version__}
            try:
                versions["compiler"] = toolchain.find_compiler().describe()
            except toolchain.ToolchainError:
                versions["compiler"] = "none found"
            try:
                memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            except (ValueError, OSError):
                memory = None
            mode = ", memcheck" if self.memcheck else ""
            self._info = DeviceInfo(
                backend="cpu",
                emulated=True,
                name=f"CPU emulation ({_cpu_model()}, {self.threads} threads{mode})",
                sm_count=self.threads,
                max_threads_per_block=MAX_THREADS_PER_BLOCK,
                max_block_dims=[1024, 1024, 64],
                shared_mem_per_block=SHARED_PER_BLOCK,
                shared_mem_per_block_optin=SHARED_PER_BLOCK_OPTIN,
                warp_size=32,
                total_memory_bytes=memory,
                library_versions=versions,
            )
        return self._info

    # --------------------------------------------------------------------------------- compile
    def compile(self, request: CompileRequest) -> CompiledKernel:
        started = time.perf_counter()

        def failed(log: str) -> CompileFailed:
            return CompileFailed(log, time.perf_counter() - started)

        options = parse_options(request.options)
        try:
            translation = translate(request.source, request.entry, request.filename)
        except TranslationError as exc:
            raise failed(f"{request.filename}:{exc.line}: {exc.message}") from None
        try:
            compiler, _ = self._ensure_runtime()
            flags = toolchain.kernel_flags(compiler, memcheck=self.memcheck, std=options.std)
            flags += define_options(request.defines) + options.flags
            build = toolchain.build_kernel(compiler, translation.text, flags, self._runtime_path)
        except toolchain.ToolchainError as exc:
            summary = toolchain.summarize_log(exc.log, request.filename, request.entry, LAUNCHER_FILE)
            raise failed(summary or str(exc)) from None
        declaration = find_kernel(request.source, request.entry)
        names = [_parameter_name(p.text) for p in declaration.parameters] if declaration else []
        try:
            library = KernelLibrary.load(build.path, names, self.memcheck)
        except (OSError, RuntimeError) as exc:
            raise failed(
                f"{request.filename}: the CPU emulation could not load the compiled kernel: {exc}"
            ) from None
        defines = {**options.defines, **{k: str(v) for k, v in request.defines.items()}}
        static_shared, bounds = analysis.estimate(
            translation.stripped, request.entry, translation.shared, defines
        )
        limit = MAX_THREADS_PER_BLOCK if not bounds or bounds <= 0 else min(bounds, MAX_THREADS_PER_BLOCK)
        warnings = toolchain.summarize_log(build.log, request.filename, request.entry, LAUNCHER_FILE)
        return CompiledKernel(
            entry=request.entry,
            handle=CpuKernel(library, request.filename),
            attributes=KernelAttributes(max_threads_per_block=limit, static_shared_bytes=static_shared),
            compile_log="\n".join([*options.notes, warnings] if warnings else options.notes),
            compile_time_s=time.perf_counter() - started,
        )

    # ---------------------------------------------------------------------------------- launch
    def launch(self, kernel: CompiledKernel, dims: LaunchDims, args: Sequence[Any]) -> None:
        if self._closed:
            raise LaunchFailed(Status.CRASHED, "the CPU emulation backend is closed", fatal=True)
        if self._hung:
            raise LaunchFailed(
                Status.TIMEOUT, "the CPU emulation is still stuck in an earlier launch", fatal=True
            )
        _, runtime = self._ensure_runtime()
        handle: CpuKernel = kernel.handle
        try:
            packed = native.pack_arguments(handle.library, args)
        except ArgumentError as exc:
            raise LaunchFailed(Status.INVALID, str(exc)) from None
        desc = LaunchDesc(
            kernel_main=handle.library.main,
            args=ctypes.cast(packed.argv, ctypes.POINTER(ctypes.c_void_p)),
            grid=(ctypes.c_uint * 3)(*dims.grid),
            block=(ctypes.c_uint * 3)(*dims.block),
            dynamic_shared=dims.shared_mem,
            threads=self.threads,
            memcheck=int(handle.library.memcheck),
            nregions=len(handle.library.kinds),
            region_base=ctypes.cast(packed.region_base, ctypes.POINTER(ctypes.c_ulonglong)),
            region_size=ctypes.cast(packed.region_size, ctypes.POINTER(ctypes.c_ulonglong)),
            filename=handle.filename.encode(),
        )
        with self._cv:
            self._jobs.append(_Job(desc, packed, handle))
            if self._dispatcher is None:
                self._dispatcher = threading.Thread(
                    target=self._dispatch, args=(runtime,), daemon=True, name="kernelopt-cpu-launcher"
                )
                self._dispatcher.start()
            self._cv.notify_all()

    def _dispatch(self, runtime: ctypes.CDLL) -> None:
        while True:
            with self._cv:
                while not self._jobs and not self._closed:
                    self._cv.wait()
                if not self._jobs:
                    return
                job = self._jobs.popleft()
                self._busy, self._running = True, job
            failure: LaunchFailed | None = None
            try:
                status = runtime.kocpu_rt_launch(ctypes.byref(job.desc), ctypes.byref(job.report))
                if status not in (native.STATUS_OK, native.STATUS_CANCELLED):
                    failure = launch_failure(job.report, job.kernel.library, job.kernel.filename)
            except Exception as exc:  # a bug here must surface at synchronize, not kill the thread
                failure = LaunchFailed(Status.CRASHED, f"CPU emulation launch failed: {exc!r}", fatal=True)
            with self._cv:
                self._busy, self._running = False, None
                if failure is not None and self._failure is None:
                    self._failure = failure
                    self._jobs.clear()  # later launches would run on a failed launch's results
                self._cv.notify_all()

    def _idle(self) -> bool:
        return not self._jobs and not self._busy

    def synchronize(self, timeout_s: float) -> None:
        with self._cv:
            finished = self._cv.wait_for(self._idle, timeout=max(0.0, timeout_s))
            if finished:
                failure, self._failure = self._failure, None
                if failure is not None:
                    raise failure
                return
            self._jobs.clear()
        stopped = self._cancel_running()
        with self._cv:
            self._failure = None
        self._hung = not stopped
        detail = "" if stopped else "; its host threads could not be stopped"
        raise LaunchFailed(
            Status.TIMEOUT,
            f"the kernel did not finish within {timeout_s:g} s (CPU emulation{detail}): an endless loop, or "
            "threads of a block that wait for each other without a barrier (fibers switch only at "
            "barriers and warp collectives)",
            fatal=True,
        )

    def _cancel_running(self) -> bool:
        """Interrupt the running launch; True once the dispatcher is idle again."""
        runtime = self._runtime
        deadline = time.monotonic() + CANCEL_GRACE_S
        with self._cv:
            while self._busy and time.monotonic() < deadline:
                if runtime is not None and self._running is not None:
                    runtime.kocpu_rt_cancel(ctypes.byref(self._running.desc))
                self._cv.wait(timeout=0.05)
            return not self._busy

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._jobs.clear()
            self._cv.notify_all()
        if not self._cancel_running():
            self._hung = True
            return
        if self._dispatcher is not None:
            self._dispatcher.join(timeout=CANCEL_GRACE_S)


def _parameter_name(text: str) -> str:
    words = [w for w in text.replace("*", " ").replace("&", " ").split() if w[0].isalpha() or w[0] == "_"]
    return words[-1] if len(words) > 1 else ""
