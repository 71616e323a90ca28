"""Source preparation, estimates, options and the build cache of the CPU emulation."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from corpus import BY_NAME

from kernelopt_jupyter.backends.base import CompileRequest
from kernelopt_jupyter.backends.cpu import CpuBackend, worker_environment
from kernelopt_jupyter.backends.cpu.backend import parse_options
from kernelopt_jupyter.backends.cpu.translate import TranslationError, translate
from kernelopt_jupyter.core.launch import LaunchDims

SHARED_FORMS = r"""
#define W 8
extern __shared__ float file_scope_dynamic[];
constexpr int H = 4;

__global__ void forms(float* out) {
    __shared__ float a[W], b[H][W + 1];
    volatile __shared__ int flag;
    __shared__ __align__(16) unsigned char bytes[W * 4];
    alignas(16) __shared__ float4 quad;
    extern __shared__ double dyn[];
    int t = threadIdx.x;
    a[t] = t; b[t % H][t] = 2 * t; bytes[t] = t;
    if (t == 0) { flag = 7; quad = make_float4(1, 2, 3, 4); }
    dyn[t] = 0.5 * t;
    __syncthreads();
    out[t] = a[W - 1 - t] + b[t % H][t] + flag + bytes[t] + quad.w + (float)dyn[t]
             + file_scope_dynamic[0] * 0;
}
"""


def test_translation_keeps_every_line_where_it_was() -> None:
    translation = translate(SHARED_FORMS, "forms", "candidate.cu")
    body = translation.text.split('#line 1 "candidate.cu"\n', 1)[1].split('#line 1 "kernelopt-launcher"')[0]
    numbered: dict[int, list[str]] = {}
    number = 1
    for text in body.splitlines():  # what the compiler numbers each line, honouring #line
        if text.startswith("#line "):
            number = int(text.split()[1])
            continue
        numbered.setdefault(number, []).append(text)
        number += 1
    for number, text in enumerate(SHARED_FORMS.splitlines(), start=1):
        if "__shared__" not in text:
            assert text in numbered[number], (number, text)
        else:
            assert any("kocpu_shared_" in rewritten for rewritten in numbered[number])
    names = [d.name for d in translation.shared]
    assert names == ["file_scope_dynamic", "a", "b", "flag", "bytes", "quad", "dyn"]


def test_every_shared_form_works_in_a_kernel(backend: CpuBackend) -> None:
    kernel = backend.compile(CompileRequest(SHARED_FORMS, "forms"))
    out = np.zeros(8, np.float32)
    backend.launch(kernel, LaunchDims((1, 1, 1), (8, 1, 1), 64), [out])
    backend.synchronize(10)
    t = np.arange(8)
    np.testing.assert_allclose(out, (7 - t) + 2 * t + 7 + t + 4 + 0.5 * t)
    assert kernel.attributes.static_shared_bytes == 8 * 4 + 4 * 9 * 4 + 4 + 32 + 16


def test_template_aligned_dynamic_and_file_scope_static_shared(backend: CpuBackend) -> None:
    source = r"""
__shared__ float file_static[32];

template <typename T>
__global__ void reverse(const T* in, T* out, int n) {
    extern __shared__ __align__(sizeof(T)) unsigned char raw[];
    T* staged = reinterpret_cast<T*>(raw);
    staged[threadIdx.x] = in[threadIdx.x];
    file_static[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = staged[n - 1 - threadIdx.x] * (T)file_static[n - 1 - threadIdx.x];
}
"""
    kernel = backend.compile(CompileRequest(source, "reverse<double>"))
    assert kernel.attributes.static_shared_bytes is None  # a file-scope array may be used: unknown
    values, out = np.arange(32, dtype=np.float64), np.zeros(32)
    backend.launch(kernel, LaunchDims((1, 1, 1), (32, 1, 1), 32 * 8), [values, out, np.int32(32)])
    backend.synchronize(10)
    np.testing.assert_array_equal(out, values[::-1])


@pytest.mark.parametrize(
    ("declaration", "words"),
    [
        ("__shared__ int x = 0;", "cannot have an initializer"),
        ("extern __shared__ float s[32];", "array of unknown size"),
        ("__shared__ float;", "this form of __shared__ declaration"),
    ],
)
def test_unsupported_shared_forms_name_the_line(declaration: str, words: str) -> None:
    source = f"__global__ void k(float* o) {{\n    int i = 0;\n    {declaration}\n}}\n"
    with pytest.raises(TranslationError) as caught:
        translate(source, "k", "candidate.cu")
    assert caught.value.line == 3 and words in caught.value.message


def test_comments_and_strings_do_not_trigger_the_scan() -> None:
    source = (
        '// asm("x"); __half\n/* <<< wmma:: */\n__global__ void k(float* o) { printf("asm(%d) <<<", 1); }\n'
    )
    translate(source, "k", "candidate.cu")


@pytest.mark.parametrize(
    ("name", "static_bytes", "limit"),
    [
        ("tiled_sgemm", 2 * 16 * 16 * 4, 1024),
        ("transpose_padded", 32 * 33 * 4, 1024),
        ("shared_reduction", 256 * 4, 256),
        ("templated_axpby", 128 * 8, 128),
        ("histogram_atomics", 0, 1024),
        ("vector_add", 0, 1024),
    ],
)
def test_attributes_estimate_static_shared_and_launch_bounds(
    backend: CpuBackend, name: str, static_bytes: int, limit: int
) -> None:
    kernel = BY_NAME[name]
    compiled = backend.compile(CompileRequest(kernel.source(), kernel.entry))
    assert compiled.attributes.static_shared_bytes == static_bytes
    assert compiled.attributes.max_threads_per_block == limit


def test_defines_reach_the_source_and_the_estimate(backend: CpuBackend) -> None:
    source = BY_NAME["tiled_sgemm"].source()
    compiled = backend.compile(CompileRequest(source, "sgemm_tiled", defines={"TILE": 8}))
    assert compiled.attributes.static_shared_bytes == 2 * 8 * 8 * 4
    compiled = backend.compile(CompileRequest(source, "sgemm_tiled", options=["-DTILE=32"]))
    assert compiled.attributes.static_shared_bytes == 2 * 32 * 32 * 4


def test_a_kernel_may_share_its_name_with_a_c_library_function(backend: CpuBackend) -> None:
    source = "__global__ void div(int* out, int d) { out[threadIdx.x] = 100 / (d + threadIdx.x); }\n"
    kernel = backend.compile(CompileRequest(source, "div"))
    out = np.zeros(4, np.int32)
    backend.launch(kernel, LaunchDims((1, 1, 1), (4, 1, 1), 0), [out, np.int32(1)])
    backend.synchronize(10)
    np.testing.assert_array_equal(out, 100 // np.arange(1, 5))


def test_gpu_only_options_are_ignored_and_noted(backend: CpuBackend) -> None:
    options = [
        "-arch=sm_80",
        "--use_fast_math",
        "-lineinfo",
        "-Xptxas",
        "-v",
        "--std=c++17",
        "-DX=1",
        "--fmad=false",
    ]
    compiled = backend.compile(
        CompileRequest("__global__ void k(int* o) { o[0] = X; }\n", "k", options=options)
    )
    assert (
        "ignored GPU-only options: -arch=sm_80 --use_fast_math -lineinfo -Xptxas -v --fmad=false"
        in compiled.compile_log
    )
    parsed = parse_options(["-std=c++11", "-I", "/tmp/include", "--define-macro=Y=2"])
    assert parsed.std == "c++17" and "-I/tmp/include" in parsed.flags and parsed.defines == {"Y": "2"}


def test_a_repeated_compile_comes_from_the_cache(backend: CpuBackend) -> None:
    source = "__global__ void cached_kernel(float* o) { o[threadIdx.x] = 3.0f; }\n"
    first = backend.compile(CompileRequest(source, "cached_kernel"))
    started = time.perf_counter()
    second = backend.compile(CompileRequest(source, "cached_kernel"))
    assert time.perf_counter() - started < 0.1
    assert second.handle.library.path == first.handle.library.path
    other = backend.compile(CompileRequest(source, "cached_kernel", defines={"UNUSED": 1}))
    assert other.handle.library.path != first.handle.library.path


def test_device_info_says_emulation(backend: CpuBackend) -> None:
    info = backend.device_info()
    assert info.backend == "cpu" and info.emulated and info.name.startswith("CPU emulation (")
    assert (info.max_threads_per_block, info.max_block_dims, info.warp_size) == (1024, [1024, 1024, 64], 32)
    assert (info.shared_mem_per_block, info.shared_mem_per_block_optin) == (49152, 232448)
    assert info.sm_count == backend.threads and info.registers_per_block is None
    assert worker_environment(True) == {} and worker_environment(False) == {}


def _run_script(body: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **env},
    )


def test_printf_from_kernels_reaches_stdout() -> None:
    done = _run_script(
        """
        import numpy as np
        from kernelopt_jupyter.backends.base import CompileRequest
        from kernelopt_jupyter.backends.cpu import CpuBackend
        from kernelopt_jupyter.core.launch import LaunchDims
        source = (
            '__global__ void hello(int n) {'
            ' if (threadIdx.x < n) printf("thread %d of %d\\\\n", threadIdx.x, n); }'
        )
        backend = CpuBackend()
        kernel = backend.compile(CompileRequest(source, "hello"))
        backend.launch(kernel, LaunchDims((1, 1, 1), (4, 1, 1), 0), [np.int32(2)])
        backend.synchronize(10)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["thread 0 of 2", "thread 1 of 2"]


def test_the_ucontext_fallback_runs_barriers_and_shuffles() -> None:
    done = _run_script(
        """
        import numpy as np
        from corpus import BY_NAME
        from kernelopt_jupyter.backends.base import CompileRequest
        from kernelopt_jupyter.backends.cpu import CpuBackend
        backend = CpuBackend()
        for name in ("shared_reduction", "warp_shuffle_reduction"):
            kernel = BY_NAME[name]
            compiled = backend.compile(CompileRequest(kernel.source(), kernel.entry))
            args = kernel.arguments()
            before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            backend.launch(compiled, kernel.launch(args), args)
            backend.synchronize(60)
            for index, want in kernel.expected(before).items():
                np.testing.assert_allclose(args[index], want, rtol=kernel.rtol, atol=kernel.atol)
        print(backend._runtime.kocpu_rt_switch_kind().decode())
        """,
        KERNELOPT_CPU_UCONTEXT="1",
        PYTHONPATH=os.path.dirname(__file__),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ucontext"


def test_c_math_macros_nvrtc_lacks_are_not_defined_either(backend) -> None:
    """INFINITY compiles with the host's headers but not with NVRTC; both backends must refuse it."""
    import pytest as _pytest

    from kernelopt_jupyter.backends.base import CompileFailed, CompileRequest

    source = 'extern "C" __global__ void k(float* y) { y[0] = -INFINITY; }\n'
    with _pytest.raises(CompileFailed, match="INFINITY"):
        backend.compile(CompileRequest(source, "k"))
