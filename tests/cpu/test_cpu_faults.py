"""Planted faults: each must give the status and a message that points at the guilty line."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from corpus import CORPUS, CorpusKernel

from kernelopt_jupyter.backends.base import CompiledKernel, CompileFailed, CompileRequest, LaunchFailed
from kernelopt_jupyter.backends.cpu import CpuBackend
from kernelopt_jupyter.core.launch import LaunchDims
from kernelopt_jupyter.core.results import Status

FAULTS = r"""
__global__ void divergent_barrier(float* out) {
    out[threadIdx.x] = 1.0f;
    if (threadIdx.x < 16) {
        __syncthreads();
    }
}

__global__ void collective_vs_barrier(float* out) {
    float v = threadIdx.x;
    if (threadIdx.x < 16) {
        v = __shfl_sync(0xffffffffu, v, 0);
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = v;
}

__global__ void off_by_one(const float* a, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) {
        c[i] = 2.0f * a[i < n ? i : 0];
    }
}

__global__ void shared_overrun(float* out) {
    __shared__ float tile[64];
    __shared__ float other[64];
    tile[threadIdx.x] = 1.0f;
    other[threadIdx.x] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x + 1];
}

__global__ void null_write(float* out) {
    float* p = nullptr;
    p[threadIdx.x] = out[0];
}

__global__ void divide(int* out, int d) {
    out[threadIdx.x] = 100 / (d - (int)threadIdx.x);
}

__global__ void checked(int n) {
    assert(threadIdx.x < n);
}

template <int N>
__device__ float big_stage(float x) {
    __shared__ float buffer[N];
    buffer[threadIdx.x] = x;
    __syncthreads();
    return buffer[0];
}

__global__ void too_much_static_shared(float* out) {
    out[threadIdx.x] = big_stage<16384>(1.0f);
}

__global__ void __launch_bounds__(128) bounded(float* out) {
    out[threadIdx.x] = 0.0f;
}
"""


def line_of(fragment: str, after: str = "") -> int:
    """The candidate line holding ``fragment`` (the first one after the line holding ``after``)."""
    lines = FAULTS.splitlines()
    start = next(i for i, text in enumerate(lines) if after in text) if after else 0
    return next(i for i, text in enumerate(lines) if i >= start and fragment in text) + 1


def compile_fault(backend: CpuBackend, entry: str) -> CompiledKernel:
    return backend.compile(CompileRequest(FAULTS, entry))


def failure(
    backend: CpuBackend, entry: str, grid: int, block: int, args: list, shared: int = 0
) -> LaunchFailed:
    kernel = compile_fault(backend, entry)
    backend.launch(kernel, LaunchDims((grid, 1, 1), (block, 1, 1), shared), args)
    with pytest.raises(LaunchFailed) as caught:
        backend.synchronize(30)
    return caught.value


def test_divergent_barrier_is_a_deadlock_with_its_line(backend: CpuBackend) -> None:
    error = failure(backend, "divergent_barrier", 2, 32, [np.zeros(32, np.float32)])
    assert error.status == Status.CRASHED and not error.fatal
    assert "deadlock" in error.message
    assert f"__syncthreads() at candidate.cu:{line_of('__syncthreads()')}" in error.message
    assert "reached by 16 of 32 threads" in error.message
    assert "16 exited (threads 16-31)" in error.message


def test_collective_waiting_for_lanes_at_a_barrier_is_a_deadlock(backend: CpuBackend) -> None:
    error = failure(backend, "collective_vs_barrier", 1, 32, [np.zeros(32, np.float32)])
    assert error.status == Status.CRASHED and "deadlock" in error.message
    assert f"__shfl_sync() at candidate.cu:{line_of('__shfl_sync(0xffffffffu, v, 0)')}" in error.message
    barrier = line_of("__syncthreads()", after="collective_vs_barrier")
    assert f"__syncthreads() at candidate.cu:{barrier} was reached by 16 of 32 threads" in error.message


def test_backend_keeps_working_after_a_deadlock(backend: CpuBackend) -> None:
    failure(backend, "divergent_barrier", 1, 64, [np.zeros(64, np.float32)])
    out = np.zeros(32, np.float32)
    kernel = compile_fault(backend, "bounded")
    out[:] = 5
    backend.launch(kernel, LaunchDims((1, 1, 1), (32, 1, 1), 0), [out])
    backend.synchronize(10)
    assert not out.any()


def test_memcheck_reports_an_off_by_one_write_with_its_line(memcheck_backend: CpuBackend) -> None:
    n = 1000
    a, c = np.ones(n, np.float32), np.zeros(n, np.float32)
    error = failure(memcheck_backend, "off_by_one", 4, 256, [a, c, np.int32(n)])
    assert error.status == Status.CRASHED and not error.fatal
    assert "memcheck: out-of-bounds 4-byte write" in error.message
    assert f"at candidate.cu:{line_of('c[i] = 2.0f')}" in error.message
    assert "0 bytes past the end of argument 1 (c, 4000 B)" in error.message
    assert "thread (232,0,0)" in error.message and "block (3,0,0)" in error.message


def test_without_memcheck_the_same_overrun_goes_unnoticed(backend: CpuBackend) -> None:
    n = 1000
    a, c = np.ones(n + 16, np.float32), np.zeros(n + 16, np.float32)
    kernel = compile_fault(backend, "off_by_one")
    backend.launch(kernel, LaunchDims((4, 1, 1), (256, 1, 1), 0), [a[:n], c[:n], np.int32(n)])
    backend.synchronize(10)
    assert c[n] == 2.0  # the element past the end was written: only memcheck tells


def test_memcheck_reports_a_shared_memory_overrun(memcheck_backend: CpuBackend) -> None:
    error = failure(memcheck_backend, "shared_overrun", 1, 64, [np.zeros(64, np.float32)])
    assert "out-of-bounds 4-byte read" in error.message
    assert f"at candidate.cu:{line_of('tile[threadIdx.x + 1]')}" in error.message
    assert f"the __shared__ variable declared at candidate.cu:{line_of('float tile[64]')}" in error.message


def test_memcheck_reports_a_null_pointer_write(memcheck_backend: CpuBackend) -> None:
    error = failure(memcheck_backend, "null_write", 1, 8, [np.zeros(8, np.float32)])
    assert "write of address 0x0" in error.message
    assert f"at candidate.cu:{line_of('p[threadIdx.x] = out[0]')}" in error.message


@pytest.mark.parametrize("kernel", CORPUS, ids=[k.name for k in CORPUS])
def test_memcheck_has_no_false_positives_on_the_corpus(
    memcheck_backend: CpuBackend, kernel: CorpusKernel
) -> None:
    compiled = memcheck_backend.compile(
        CompileRequest(kernel.source(), kernel.entry, defines=dict(kernel.defines))
    )
    args = kernel.arguments()
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    memcheck_backend.launch(compiled, kernel.launch(args), args)
    memcheck_backend.synchronize(120)
    for index, want in kernel.expected(before).items():
        np.testing.assert_allclose(args[index], want, rtol=kernel.rtol, atol=kernel.atol)


def test_a_segfault_is_caught_and_reported_with_its_line(backend: CpuBackend) -> None:
    error = failure(backend, "null_write", 1, 8, [np.zeros(8, np.float32)])
    assert error.status == Status.CRASHED and error.fatal
    assert "Segmentation fault" in error.message and "address 0x0" in error.message
    assert f"candidate.cu:{line_of('p[threadIdx.x] = out[0]')}" in error.message


def test_integer_division_by_zero_is_caught_with_its_line(backend: CpuBackend) -> None:
    error = failure(backend, "divide", 1, 8, [np.zeros(8, np.int32), np.int32(5)])
    assert error.status == Status.CRASHED and error.fatal
    assert "SIGFPE" in error.message and "thread (5,0,0)" in error.message
    assert f"at candidate.cu:{line_of('100 / (d -')}" in error.message


def test_device_assert_reports_expression_and_line(backend: CpuBackend) -> None:
    error = failure(backend, "checked", 1, 8, [np.int32(3)])
    assert error.status == Status.CRASHED and not error.fatal
    assert f"assertion failed: threadIdx.x < n at candidate.cu:{line_of('assert(')}" in error.message
    assert "thread (3,0,0)" in error.message


def test_static_shared_memory_beyond_cuda_limit_is_invalid(backend: CpuBackend) -> None:
    kernel = compile_fault(backend, "too_much_static_shared")
    assert kernel.attributes.static_shared_bytes is None  # a device function's array: not knowable ahead
    backend.launch(kernel, LaunchDims((1, 1, 1), (32, 1, 1), 0), [np.zeros(32, np.float32)])
    with pytest.raises(LaunchFailed) as caught:
        backend.synchronize(10)
    assert caught.value.status == Status.INVALID
    assert f"candidate.cu:{line_of('float buffer[N]')}" in caught.value.message
    assert "65536 B" in caught.value.message and "49152 B" in caught.value.message


def test_check_launch_gives_the_cuda_backend_reasons(backend: CpuBackend) -> None:
    kernel = compile_fault(backend, "divergent_barrier")
    ok = LaunchDims((4, 1, 1), (1024, 1, 1), 0)
    assert backend.check_launch(kernel, ok) is None
    too_big = backend.check_launch(kernel, LaunchDims((1, 1, 1), (1025, 1, 1), 0))
    assert too_big is not None and "1025 threads; the limit is 1024" in too_big
    too_much_shared = backend.check_launch(kernel, LaunchDims((1, 1, 1), (32, 1, 1), 232449))
    assert too_much_shared is not None and "exceeds the 232448 B per block" in too_much_shared
    empty = backend.check_launch(kernel, LaunchDims((0, 1, 1), (32, 1, 1), 0))
    assert empty is not None and "must be at least 1" in empty
    deep = backend.check_launch(kernel, LaunchDims((1, 1, 1), (1, 1, 65), 0))
    assert deep is not None and "block dimension z is 65" in deep
    bounded = compile_fault(backend, "bounded")
    assert bounded.attributes.max_threads_per_block == 128
    assert "limit of 128" in (backend.check_launch(bounded, LaunchDims((1, 1, 1), (256, 1, 1), 0)) or "")


def test_arguments_that_do_not_match_the_signature_are_refused(backend: CpuBackend) -> None:
    kernel = compile_fault(backend, "off_by_one")
    dims = LaunchDims((1, 1, 1), (32, 1, 1), 0)
    a = np.zeros(32, np.float32)
    for args, words in [
        ([a, a], "takes 3 arguments"),
        ([a, np.int32(3), np.int32(3)], "takes a pointer"),
        ([a, a, np.float32(3)], "signed integer of 4 bytes"),
        ([a, a, np.int64(3)], "got int64"),
    ]:
        with pytest.raises(LaunchFailed) as caught:
            backend.launch(kernel, dims, args)
        assert caught.value.status == Status.INVALID and words in caught.value.message


@pytest.mark.parametrize(
    ("code", "construct"),
    [
        ('asm volatile("membar.gl;");', "inline PTX (asm)"),
        ("wmma::fragment<int> f;", "tensor-core matrix operations"),
        ("__pipeline_commit();", "asynchronous copies"),
        ("__half h = __float2half(x[0]);", "half precision (__half)"),
        ("float t = tex1Dfetch<float>(0, 1);", "textures and surfaces"),
        ("child<<<1, 1>>>(x);", "dynamic parallelism"),
        ("cooperative_groups::this_grid().sync();", "grid-wide cooperative groups"),
        ("float v = __shfl(x[0], 0);", "warp intrinsics without _sync"),
    ],
)
def test_unsupported_constructs_fail_with_one_line(backend: CpuBackend, code: str, construct: str) -> None:
    source = (
        f"// header\n__global__ void child(float* x) {{}}\n\n__global__ void k(float* x) {{\n    {code}\n}}\n"
    )
    with pytest.raises(CompileFailed) as caught:
        backend.compile(CompileRequest(source, "k"))
    log = caught.value.log
    assert log.count("\n") == 0, log
    assert (
        log.startswith("candidate.cu:5: ")
        and construct in log
        and "not supported by the CPU emulation" in log
    )


def test_compile_errors_point_at_the_candidate_line(backend: CpuBackend) -> None:
    source = "#include <cuda_runtime.h>\n\n__global__ void k(float* x) {\n    x[0] = undefined_name;\n}\n"
    with pytest.raises(CompileFailed) as caught:
        backend.compile(CompileRequest(source, "k", filename="mine.cu"))
    log = caught.value.log
    assert "mine.cu:4:" in log and "undefined_name" in log
    assert "kocpu" not in log and "In file included" not in log
    assert len(log.splitlines()) <= 5


def test_a_missing_entry_names_the_entry(backend: CpuBackend) -> None:
    with pytest.raises(CompileFailed) as caught:
        backend.compile(CompileRequest("__global__ void k(float* x) {}\n", "kk"))
    assert "cannot use entry 'kk' as the kernel" in caught.value.log


def test_an_infinite_loop_times_out_and_the_backend_still_closes(tmp_path) -> None:
    script = textwrap.dedent(
        """
        import time, numpy as np
        from kernelopt_jupyter.backends.base import CompileRequest, LaunchFailed
        from kernelopt_jupyter.backends.cpu import CpuBackend
        from kernelopt_jupyter.core.launch import LaunchDims
        source = "__global__ void spin(volatile int* flag) { while (flag[0] == 0) { } }"
        backend = CpuBackend()
        kernel = backend.compile(CompileRequest(source, "spin"))
        backend.launch(kernel, LaunchDims((4, 1, 1), (64, 1, 1), 0), [np.zeros(1, np.int32)])
        started = time.perf_counter()
        try:
            backend.synchronize(1.0)
            print("no timeout")
        except LaunchFailed as error:
            print(error.status.value, error.fatal, round(time.perf_counter() - started, 1))
        backend.close()
        print("closed")
        """
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ},
    )
    assert done.returncode == 0, done.stderr
    status, fatal, waited = done.stdout.split("\n")[0].split()
    assert (status, fatal) == ("timeout", "True")
    assert 0.9 <= float(waited) < 10
    assert done.stdout.split("\n")[1] == "closed"
    assert time.perf_counter() - started < 60
