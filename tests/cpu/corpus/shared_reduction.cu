// Per-block sums with a shared-memory tree reduction (sequential addressing).
#define BLOCK 256

__global__ void __launch_bounds__(BLOCK) block_sum(const float* in, float* partial, int n) {
    __shared__ float cache[BLOCK];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
    float v = 0.0f;
    if (i < n) v += in[i];
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    cache[tid] = v;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            cache[tid] += cache[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = cache[0];
}
