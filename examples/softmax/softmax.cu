// softmax: y[r][c] = exp(x[r][c] - max_r) / sum_c' exp(x[r][c'] - max_r), row by row, for a
// row-major rows x cols float32 matrix. Subtracting the row's maximum keeps expf from overflowing.
//
// The starting point: one block per row; its threads stride across the row three times (find the
// maximum, add up the exponentials, write the results), and each of the two reductions goes through
// a shared-memory tree. Any block size from 1 to 1024 works; the scratch space is dynamic shared
// memory of blockDim.x floats (the launch's shared_mem).
//
// Room to improve: read the row once (keep it in registers or shared memory, or use an online
// max-and-sum), warp shuffles instead of the shared tree, 16-byte loads, several rows per block.

// The lowest finite float: the identity of max() for finite inputs.
#define LOWEST_FLOAT (-3.402823466e+38f)

// Combines one value per thread of the block (all threads must call it). Returns the result to
// every thread.
__device__ float block_reduce(float value, float* scratch, bool take_max)
{
    const unsigned tid = threadIdx.x;
    const unsigned count = blockDim.x;
    scratch[tid] = value;
    __syncthreads();
    // Start from the largest power of two below count, so any block size works.
    unsigned stride = 1;
    while (stride < count) {
        stride *= 2;
    }
    for (stride /= 2; stride > 0; stride /= 2) {
        if (tid < stride && tid + stride < count) {
            const float other = scratch[tid + stride];
            scratch[tid] = take_max ? fmaxf(scratch[tid], other) : scratch[tid] + other;
        }
        __syncthreads();
    }
    const float result = scratch[0];
    __syncthreads();  // every thread has read scratch[0] before the next call overwrites it
    return result;
}

extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ y, int rows, int cols)
{
    extern __shared__ float scratch[];  // blockDim.x floats

    const int row = blockIdx.x;
    if (row >= rows) {
        return;  // the whole block leaves together, so no barrier is left waiting
    }
    const float* in = x + (size_t)row * cols;
    float* out = y + (size_t)row * cols;

    float row_max = LOWEST_FLOAT;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        row_max = fmaxf(row_max, in[c]);
    }
    row_max = block_reduce(row_max, scratch, true);

    float row_sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        row_sum += expf(in[c] - row_max);
    }
    row_sum = block_reduce(row_sum, scratch, false);

    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        out[c] = expf(in[c] - row_max) / row_sum;
    }
}
