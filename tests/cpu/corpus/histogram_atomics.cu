// Histogram: per-block counts with shared-memory atomics, merged with global atomics.
__global__ void histogram(const unsigned int* __restrict__ data, unsigned int* __restrict__ bins, int n, int nbins) {
    extern __shared__ unsigned int local[];
    for (int b = threadIdx.x; b < nbins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        atomicAdd(&local[data[i] % nbins], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < nbins; b += blockDim.x) {
        if (local[b]) atomicAdd(&bins[b], local[b]);
    }
}
