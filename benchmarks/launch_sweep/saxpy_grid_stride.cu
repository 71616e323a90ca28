// z = a*x + y with a grid-stride loop: any grid size is correct, so the block size and the grid
// size are pure launch choices (the source names neither).
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, const float* __restrict__ y,
                                 float* __restrict__ z, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        z[i] = fmaf(a, x[i], y[i]);
    }
}
