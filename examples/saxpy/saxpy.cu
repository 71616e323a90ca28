// saxpy: z[i] = a * x[i] + y[i] for 0 <= i < n, in single precision.
//
// The starting point: each thread handles ITEMS_PER_THREAD elements, one float at a time. Block
// b covers the blockDim.x * ITEMS_PER_THREAD consecutive elements that start at
// b * blockDim.x * ITEMS_PER_THREAD, and thread t takes t, t + blockDim.x, t + 2 * blockDim.x, ...
// of them, so each load and store instruction of a warp touches 32 consecutive floats (coalesced).
// The block size is a pure launch setting (blockDim.x), never compiled in.
//
// Room to improve: 16-byte (float4) loads and stores, a grid-stride loop sized to the SM count.

#ifndef ITEMS_PER_THREAD
#define ITEMS_PER_THREAD 1
#endif

extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x,
                                 const float* __restrict__ y, float* __restrict__ z)
{
    const long long first = (long long)blockIdx.x * blockDim.x * ITEMS_PER_THREAD + threadIdx.x;
#pragma unroll
    for (int item = 0; item < ITEMS_PER_THREAD; ++item) {
        const long long i = first + (long long)item * blockDim.x;
        if (i < n) {
            z[i] = a * x[i] + y[i];
        }
    }
}
