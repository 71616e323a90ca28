// sum_reduction: *out += x[0] + x[1] + ... + x[n-1], in single precision.
//
// The starting point: block b reads the BLOCK * ITEMS_PER_THREAD consecutive elements that start at
// b * BLOCK * ITEMS_PER_THREAD (thread t takes t, t + BLOCK, ...: coalesced), each thread adds its
// elements in a register, the block combines the BLOCK partial sums with a shared-memory tree
// (one __syncthreads per level), and thread 0 adds the block's sum to *out with one atomicAdd.
// *out must hold 0 before the launch; the result is accumulated into it.
//
// Room to improve: warp shuffles for the last levels of the tree (or all of them), 16-byte loads,
// a grid-stride loop with a fixed number of blocks so far fewer atomics reach *out.

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS_PER_THREAD
#define ITEMS_PER_THREAD 1
#endif

static_assert(BLOCK >= 1 && BLOCK <= 1024 && (BLOCK & (BLOCK - 1)) == 0,
              "BLOCK must be a power of two between 1 and 1024 (the tree halves it)");

extern "C" __global__ void __launch_bounds__(BLOCK)
sum_reduction(const float* __restrict__ x, float* __restrict__ out, int n)
{
    __shared__ float partial[BLOCK];

    const int tid = threadIdx.x;
    const long long first = (long long)blockIdx.x * BLOCK * ITEMS_PER_THREAD + tid;
    float sum = 0.0f;
#pragma unroll
    for (int item = 0; item < ITEMS_PER_THREAD; ++item) {
        const long long i = first + (long long)item * BLOCK;
        if (i < n) {
            sum += x[i];
        }
    }
    partial[tid] = sum;
    __syncthreads();

    for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            partial[tid] += partial[tid + stride];
        }
        __syncthreads();
    }
    if (tid == 0) {
        atomicAdd(out, partial[0]);
    }
}
