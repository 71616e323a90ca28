"""CUDA semantics the emulation must reproduce: warps, barriers, shared memory, atomics, math."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from kernelopt_jupyter.backends.base import CompileRequest
from kernelopt_jupyter.backends.cpu import CpuBackend
from kernelopt_jupyter.core.launch import LaunchDims

SOURCE = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__constant__ float weights[4] = {1.0f, 2.0f, 3.0f, 4.0f};
__device__ int launches_seen;

__global__ void shuffles(const int* in, int* out) {
    int lane = threadIdx.x & 31;
    int v = in[threadIdx.x];
    int base = threadIdx.x * 6;
    out[base + 0] = __shfl_sync(0xffffffffu, v, 3);
    out[base + 1] = __shfl_sync(0xffffffffu, v, lane + 1, 8);
    out[base + 2] = __shfl_up_sync(0xffffffffu, v, 2, 16);
    out[base + 3] = __shfl_down_sync(0xffffffffu, v, 4);
    out[base + 4] = __shfl_xor_sync(0xffffffffu, v, 1);
    out[base + 5] = __shfl_xor_sync(0xffffffffu, v, 16, 16);
}

__global__ void votes(const int* pred, unsigned* out) {
    int p = pred[threadIdx.x];
    unsigned b = __ballot_sync(0xffffffffu, p);
    int any = __any_sync(0xffffffffu, p);
    int all = __all_sync(0xffffffffu, p);
    unsigned active = __activemask();
    out[threadIdx.x * 4 + 0] = b;
    out[threadIdx.x * 4 + 1] = any;
    out[threadIdx.x * 4 + 2] = all;
    out[threadIdx.x * 4 + 3] = active;
}

__global__ void barrier_counts(const int* pred, int* out) {
    int p = pred[threadIdx.x];
    out[threadIdx.x * 3 + 0] = __syncthreads_count(p);
    out[threadIdx.x * 3 + 1] = __syncthreads_and(p);
    out[threadIdx.x * 3 + 2] = __syncthreads_or(p);
}

__global__ void split_barriers(int* out) {
    __shared__ int box[64];
    box[threadIdx.x] = threadIdx.x;
    if (threadIdx.x < 32) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = box[63 - threadIdx.x];
}

__global__ void shared_is_per_block(int* out) {
    __shared__ int value;
    if (threadIdx.x == 0) value = blockIdx.x;
    __syncthreads();
    for (int i = 0; i < 100; ++i) {
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = value;
}

template <int N>
__device__ int stage(int x) {
    __shared__ int slots[N];
    slots[threadIdx.x % N] = x * N;
    __syncthreads();
    int r = slots[(threadIdx.x + 1) % N];
    __syncthreads();
    return r;
}

__global__ void two_instances(int* out) {
    int a = stage<4>(threadIdx.x);
    int b = stage<8>(threadIdx.x);
    out[threadIdx.x] = a + 1000 * b;
}

__global__ void atomics(int* counters, unsigned* ucounters, float* fsum, double* dsum,
                        unsigned long long* big) {
    atomicAdd(&counters[0], 1);
    atomicSub(&counters[1], 2);
    atomicMax(&counters[2], (int)(blockIdx.x * blockDim.x + threadIdx.x));
    atomicMin(&counters[3], -(int)threadIdx.x);
    atomicInc(&ucounters[0], 9u);
    atomicDec(&ucounters[1], 9u);
    atomicOr(&ucounters[2], 1u << (threadIdx.x % 32));
    atomicXor(&ucounters[3], 1u);
    atomicAdd(fsum, 0.5f);
    atomicAdd(dsum, 0.25);
    atomicAdd(big, 1ull << 33);
    int seen = atomicCAS(&counters[4], 0, 1);
    if (seen == 0) atomicAdd(&counters[5], 1);
}

__global__ void globals(float* out, int* seen) {
    if (threadIdx.x == 0 && blockIdx.x == 0) *seen = ++launches_seen;
    out[threadIdx.x] = weights[threadIdx.x % 4];
}

__global__ void min_max_mix(float* f, int* i, unsigned* u, double* d) {
    int a = -3;
    unsigned b = 2u;
    float x = 1.5f;
    long long big = 1ll << 40;
    f[0] = min(x, 2);
    f[1] = max(a, 0.25f);
    i[0] = min(a, 7);
    i[1] = max(a, -9);
    u[0] = max(a, b);
    d[0] = min(2.5, x);
    d[1] = (double)max(big, 5);
    f[2] = fminf(x, -1.0f) + fmaxf(x, 4.0f);
}

__global__ void math(const float* x, float* y) {
    int t = threadIdx.x;
    float v = x[t];
    y[t * 8 + 0] = __expf(v);
    y[t * 8 + 1] = rsqrtf(fabsf(v) + 1.0f);
    y[t * 8 + 2] = __fdividef(v, 3.0f);
    y[t * 8 + 3] = __saturatef(v);
    y[t * 8 + 4] = (float)__popc(__float_as_uint(v));
    y[t * 8 + 5] = (float)__clz(t);
    y[t * 8 + 6] = __fmaf_rn(v, 2.0f, 1.0f);
    y[t * 8 + 7] = sinpif(v) + erfinvf(0.5f);
}

__global__ void aggregated(int* counter, int* slots, unsigned* masks) {
    int lane = threadIdx.x & 31;
    if (threadIdx.x % 3 == 0) {
        unsigned mask = __activemask();
        int leader = __ffs(mask) - 1;
        int base = 0;
        if (lane == leader) base = atomicAdd(counter, __popc(mask));
        base = __shfl_sync(mask, base, leader);
        slots[threadIdx.x] = base + __popc(mask & ((1u << lane) - 1));
        masks[threadIdx.x] = mask;
    }
    __syncthreads();
}

__global__ void groups(const int* in, int* out) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<8> tile = cg::tiled_partition<8>(block);
    int v = in[block.thread_rank()];
    int sum = cg::reduce(tile, v, cg::plus<int>());
    int scan = cg::inclusive_scan(tile, v);
    int down = tile.shfl_down(v, 1);
    block.sync();
    int base = block.thread_rank() * 5;
    out[base + 0] = sum;
    out[base + 1] = scan;
    out[base + 2] = down;
    out[base + 3] = (int)tile.meta_group_rank();
    if (block.thread_rank() % 2 == 0) {
        cg::coalesced_group even = cg::coalesced_threads();
        out[base + 4] = (int)even.size() * 100 + (int)even.thread_rank();
    } else {
        out[base + 4] = -1;
    }
}

__global__ void ordered(float* data, float scale) {
    data[threadIdx.x] = data[threadIdx.x] * scale + 1.0f;
}

__global__ void big_locals(float* out) {
    float local[2048];
    for (int i = 0; i < 2048; ++i) local[i] = i * 0.5f + threadIdx.x;
    __syncthreads();
    float s = 0;
    for (int i = 0; i < 2048; i += 97) s += local[i];
    out[threadIdx.x] = s;
}
"""


def _run(backend: CpuBackend, entry: str, grid: int, block: int, args: list, shared: int = 0) -> None:
    kernel = backend.compile(CompileRequest(SOURCE, entry))
    backend.launch(kernel, LaunchDims((grid, 1, 1), (block, 1, 1), shared), args)
    backend.synchronize(30)


def test_shuffle_variants_follow_cuda_lane_rules(backend: CpuBackend) -> None:
    values = np.arange(64, dtype=np.int32) * 10
    out = np.zeros(64 * 6, np.int32)
    _run(backend, "shuffles", 1, 64, [values, out])
    got = out.reshape(64, 6)
    lane = np.arange(64) % 32
    warp_base = np.arange(64) - lane
    np.testing.assert_array_equal(got[:, 0], values[warp_base + 3])
    np.testing.assert_array_equal(got[:, 1], values[warp_base + (lane // 8) * 8 + (lane + 1) % 8])
    up_src = np.where(lane % 16 >= 2, np.arange(64) - 2, np.arange(64))
    np.testing.assert_array_equal(got[:, 2], values[up_src])
    down_src = np.where(lane + 4 < 32, np.arange(64) + 4, np.arange(64))
    np.testing.assert_array_equal(got[:, 3], values[down_src])
    np.testing.assert_array_equal(got[:, 4], values[np.arange(64) ^ 1])
    # with width 16, lane ^ 16 may read an earlier segment but not a later one (own value then)
    xor_src = np.where(lane >= 16, np.arange(64) - 16, np.arange(64))
    np.testing.assert_array_equal(got[:, 5], values[xor_src])


def test_votes_and_activemask_in_a_partial_warp(backend: CpuBackend) -> None:
    block = 40  # the second warp has 8 lanes; lanes that do not exist take no part
    pred = (np.arange(block) % 3 == 0).astype(np.int32)
    out = np.zeros(block * 4, np.uint32)
    _run(backend, "votes", 1, block, [pred, out])
    got = out.reshape(block, 4)
    for warp in range(2):
        lanes = np.arange(warp * 32, min(block, warp * 32 + 32))
        ballot = sum(1 << (int(i) - warp * 32) for i in lanes if pred[i])
        assert set(got[lanes, 0]) == {ballot}
        assert set(got[lanes, 1]) == {int(pred[lanes].any())}
        assert set(got[lanes, 2]) == {int(pred[lanes].all())}
        assert set(got[lanes, 3]) == {(1 << len(lanes)) - 1}


def test_syncthreads_count_and_or(backend: CpuBackend) -> None:
    pred = np.zeros(96, np.int32)
    pred[[3, 50, 95]] = 1
    out = np.zeros(96 * 3, np.int32)
    _run(backend, "barrier_counts", 1, 96, [pred, out])
    np.testing.assert_array_equal(out.reshape(96, 3), np.tile([3, 0, 1], (96, 1)))


def test_arrivals_at_different_barrier_lines_count_together(backend: CpuBackend) -> None:
    out = np.zeros(64, np.int32)
    _run(backend, "split_barriers", 1, 64, [out])
    np.testing.assert_array_equal(out, 63 - np.arange(64))


def test_shared_memory_is_private_to_each_block(backend: CpuBackend) -> None:
    out = np.full(64 * 33, -1, np.int32)
    _run(backend, "shared_is_per_block", 64, 33, [out])
    np.testing.assert_array_equal(out.reshape(64, 33), np.repeat(np.arange(64), 33).reshape(64, 33))


def test_each_template_instance_has_its_own_shared_array(backend: CpuBackend) -> None:
    out = np.zeros(16, np.int32)
    _run(backend, "two_instances", 1, 16, [out])
    t = np.arange(16)
    a = 4 * np.array([[i for i in range(16) if i % 4 == (k + 1) % 4][-1] for k in t])
    b = 8 * np.array([[i for i in range(16) if i % 8 == (k + 1) % 8][-1] for k in t])
    np.testing.assert_array_equal(out, a + 1000 * b)


def test_atomics_are_atomic_across_parallel_blocks() -> None:
    backend = CpuBackend(threads=2)
    try:
        grid, block = 64, 128
        total = grid * block
        counters = np.array([0, 0, -1, 0, 0, 0], np.int32)
        ucounters = np.array([0, 5, 0, 0], np.uint32)
        fsum, dsum, big = np.zeros(1, np.float32), np.zeros(1, np.float64), np.zeros(1, np.uint64)
        _run(backend, "atomics", grid, block, [counters, ucounters, fsum, dsum, big])
        assert counters.tolist() == [total, -2 * total, total - 1, -(block - 1), 1, 1]
        assert ucounters[0] == total % 10
        assert ucounters[2] == 0xFFFFFFFF and ucounters[3] == 0
        assert fsum[0] == pytest.approx(0.5 * total) and dsum[0] == pytest.approx(0.25 * total)
        assert int(big[0]) == total << 33
        decrements = 5  # atomicDec wraps to the limit below zero: 5,4,...,0,9,8,...
        assert ucounters[1] == (decrements - total) % 10
    finally:
        backend.close()


def test_constant_arrays_and_device_globals_persist_across_launches(backend: CpuBackend) -> None:
    out, seen = np.zeros(8, np.float32), np.zeros(1, np.int32)
    kernel = backend.compile(CompileRequest(SOURCE, "globals"))
    for expected_count in (1, 2, 3):
        backend.launch(kernel, LaunchDims((1, 1, 1), (8, 1, 1), 0), [out, seen])
        backend.synchronize(10)
        assert seen[0] == expected_count
    np.testing.assert_array_equal(out, [1, 2, 3, 4, 1, 2, 3, 4])


def test_min_max_accept_mixed_types_like_cuda(backend: CpuBackend) -> None:
    f, i, u, d = (
        np.zeros(3, np.float32),
        np.zeros(2, np.int32),
        np.zeros(1, np.uint32),
        np.zeros(2, np.float64),
    )
    _run(backend, "min_max_mix", 1, 1, [f, i, u, d])
    np.testing.assert_array_equal(f, [1.5, 0.25, -1.0 + 4.0])
    np.testing.assert_array_equal(i, [-3, -3])
    assert u[0] == np.uint32(np.int64(-3) % 2**32)  # int mixed with unsigned compares as unsigned
    np.testing.assert_array_equal(d, [1.5, float(1 << 40)])


def test_math_intrinsics(backend: CpuBackend) -> None:
    x = np.array([-2.0, -0.5, 0.0, 0.25, 1.0, 3.0, 0.5, 7.0], np.float32)
    y = np.zeros(8 * 8, np.float32)
    _run(backend, "math", 1, 8, [x, y])
    got = y.reshape(8, 8)
    np.testing.assert_allclose(got[:, 0], np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(got[:, 1], 1 / np.sqrt(np.abs(x) + 1), rtol=1e-6)
    np.testing.assert_allclose(got[:, 2], x / 3, rtol=1e-6)
    np.testing.assert_array_equal(got[:, 3], np.clip(x, 0, 1))
    np.testing.assert_array_equal(got[:, 4], [bin(v).count("1") for v in x.view(np.uint32)])
    np.testing.assert_array_equal(got[:, 5], [32, 31, 30, 30, 29, 29, 29, 29])
    np.testing.assert_allclose(got[:, 6], 2 * x + 1, rtol=1e-6)
    np.testing.assert_allclose(
        got[:, 7], np.sin(np.pi * x.astype(np.float64)) + 0.4769362762044699, atol=2e-6
    )


def test_activemask_is_the_converged_lanes_of_a_divergent_branch(backend: CpuBackend) -> None:
    block = 80
    counter, slots, masks = np.zeros(1, np.int32), np.full(block, -1, np.int32), np.zeros(block, np.uint32)
    _run(backend, "aggregated", 1, block, [counter, slots, masks])
    active = np.arange(block) % 3 == 0
    assert counter[0] == active.sum()
    assert sorted(slots[active].tolist()) == list(range(active.sum()))
    for t in np.flatnonzero(active):
        warp = np.arange(block)[(np.arange(block) // 32 == t // 32) & active]
        assert masks[t] == sum(1 << (int(i) % 32) for i in warp)


def test_cooperative_groups_within_a_block(backend: CpuBackend) -> None:
    block = 48
    values = (np.arange(block) * 7 % 11).astype(np.int32)
    out = np.zeros(block * 5, np.int32)
    _run(backend, "groups", 1, block, [values, out])
    got = out.reshape(block, 5)
    tiles = values.reshape(-1, 8)
    np.testing.assert_array_equal(got[:, 0], np.repeat(tiles.sum(axis=1), 8))
    np.testing.assert_array_equal(got[:, 1], np.cumsum(tiles, axis=1).ravel())
    down = np.where(np.arange(block) % 8 < 7, np.roll(values, -1), values)
    np.testing.assert_array_equal(got[:, 2], down)
    np.testing.assert_array_equal(got[:, 3], np.arange(block) // 8)
    lanes = np.arange(block) % 32
    evens_in_warp = np.where(np.arange(block) < 32, 16, 8)
    want = np.where(lanes % 2 == 0, evens_in_warp * 100 + lanes // 2, -1)
    np.testing.assert_array_equal(got[:, 4], want)


def test_launches_run_in_order_before_one_synchronize(backend: CpuBackend) -> None:
    data = np.ones(32, np.float32)
    kernel = backend.compile(CompileRequest(SOURCE, "ordered"))
    dims = LaunchDims((1, 1, 1), (32, 1, 1), 0)
    for scale in (2.0, 3.0, 5.0):
        backend.launch(kernel, dims, [data, np.float32(scale)])
    backend.synchronize(10)
    np.testing.assert_array_equal(data, ((1 * 2 + 1) * 3 + 1) * 5 + 1)


def test_threads_keep_their_stacks_across_barriers(backend: CpuBackend) -> None:
    out = np.zeros(256, np.float32)
    _run(backend, "big_locals", 2, 256, [out])
    want = sum(i * 0.5 for i in range(0, 2048, 97)) + np.arange(256) * len(range(0, 2048, 97))
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_compiles_from_several_threads_at_once(backend: CpuBackend) -> None:
    errors: list[BaseException] = []

    def compile_variant(tile: int) -> None:
        try:
            kernel = backend.compile(
                CompileRequest(SOURCE + f"\n// variant {tile}\n", "ordered", defines={"V": tile})
            )
            assert kernel.entry == "ordered"
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=compile_variant, args=(tile,)) for tile in (1, 2, 3, 4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
