// Per-block sums: shuffle-reduce each warp, then the first warp reduces the warp sums.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = warpSize / 2; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
}

__global__ void warp_block_sum(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float warp_sums[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % warpSize;
    int warp = threadIdx.x / warpSize;
    float v = i < n ? in[i] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int warps = (blockDim.x + warpSize - 1) / warpSize;
        v = lane < warps ? warp_sums[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) out[blockIdx.x] = v;
    }
}
