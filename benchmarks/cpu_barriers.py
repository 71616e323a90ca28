"""Microbenchmark of the CPU emulation's fiber runtime: 1M threads x 20 __syncthreads().

Prints a small table: the barrier kernel, the same work without barriers (what the fibers cost
beyond running the threads at all), and a warp-shuffle variant. Target: 1M x 20 barriers <= 2 s
on 2 cores.

    python benchmarks/cpu_barriers.py [--threads N] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from kernelopt_jupyter.backends.base import CompileRequest
from kernelopt_jupyter.backends.cpu import CpuBackend
from kernelopt_jupyter.core.launch import LaunchDims

SOURCE = r"""
__global__ void barriers(float* out, int rounds) {
    __shared__ float s[1024];
    unsigned t = threadIdx.x;
    float acc = 0.0f;
    for (int r = 0; r < rounds; ++r) {
        s[t] = acc + t;
        __syncthreads();
        acc += s[(t + r + 1) % blockDim.x];
    }
    out[blockIdx.x * blockDim.x + t] = acc;
}

__global__ void no_barriers(float* out, int rounds) {
    unsigned t = threadIdx.x;
    float acc = 0.0f;
    for (int r = 0; r < rounds; ++r) acc += acc * 0.5f + t;
    out[blockIdx.x * blockDim.x + t] = acc;
}

__global__ void shuffles(float* out, int rounds) {
    float acc = threadIdx.x;
    for (int r = 0; r < rounds; ++r) acc += __shfl_xor_sync(0xffffffffu, acc, (r % 5) + 1) * 0.5f;
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""

BLOCK = 1024
GRID = 1024
ROUNDS = 20


def measure(backend: CpuBackend, entry: str, repeat: int) -> float:
    kernel = backend.compile(CompileRequest(SOURCE, entry))
    out = np.zeros(GRID * BLOCK, dtype=np.float32)
    dims = LaunchDims(grid=(GRID, 1, 1), block=(BLOCK, 1, 1), shared_mem=0)
    args = [out, np.int32(ROUNDS)]
    backend.launch(kernel, dims, args)  # warm-up: stacks and shared memory get allocated here
    backend.synchronize(120)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        backend.launch(kernel, dims, args)
        backend.synchronize(120)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="host threads (default: all cores)")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    backend = CpuBackend(threads=options.threads)
    threads = GRID * BLOCK
    print(
        f"{backend.device_info().name}; grid {GRID} x block {BLOCK} = {threads:,} CUDA threads, "
        f"{ROUNDS} rounds, median of {options.repeat}"
    )
    print(f"{'kernel':<26}{'sync points':>12}{'time [s]':>11}{'ns / thread / round':>22}")
    rows = [
        ("20 x __syncthreads()", "barriers", ROUNDS),
        ("no barriers", "no_barriers", 0),
        ("20 x __shfl_xor_sync()", "shuffles", ROUNDS),
    ]
    for label, entry, syncs in rows:
        seconds = measure(backend, entry, options.repeat)
        per = seconds / threads / ROUNDS * 1e9
        print(f"{label:<26}{syncs:>12}{seconds:>11.3f}{per:>22.2f}")
    backend.close()


if __name__ == "__main__":
    main()
