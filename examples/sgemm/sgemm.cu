// sgemm: C = A * B in single precision, all row-major: A is M x K, B is K x N, C is M x N.
//
// A register-blocked, shared-memory-tiled kernel. Each block computes a BM x BN tile of C with
// (BM / TM) * (BN / TN) threads; each thread computes a TM x TN sub-tile in registers. The block walks
// along K in steps of BK: it stages a BM x BK tile of A and a BK x BN tile of B in shared memory
// (coalesced loads, zero-filled past the edges of the matrices), then every thread accumulates
// TM * TN outer-product terms per k from a column of As and a row of Bs. Stores are bounds-checked,
// so M, N and K need not be multiples of anything.
//
// The tile sizes are -D knobs (the defaults below let the file compile on its own); the launch
// must match them: grid (ceil(N / BN), ceil(M / BM)), block (BM / TM) * (BN / TN).
//
// Room to improve: 16-byte (float4) loads, a transposed As so the inner loop reads it with vector
// loads, double-buffered shared tiles, warp-level tiling, and a thread-to-output mapping without
// the shared-memory bank conflicts the contiguous TN-wide columns cause.

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif

#define NUM_THREADS ((BM / TM) * (BN / TN))

static_assert(BM % TM == 0 && BN % TN == 0, "the block tile must be a whole number of thread tiles");
static_assert(NUM_THREADS >= 1 && NUM_THREADS <= 1024, "1 to 1024 threads per block");
static_assert((BM * BK) % NUM_THREADS == 0 && (BK * BN) % NUM_THREADS == 0,
              "every thread loads the same number of elements of each shared tile");
static_assert(4 * (BM * BK + BK * BN) <= 48 * 1024, "static shared memory is limited to 48 KiB");

extern "C" __global__ void __launch_bounds__(NUM_THREADS)
sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];

    const int tid = threadIdx.x;
    const int thread_row = tid / (BN / TN);  // this thread's outputs: rows thread_row * TM + i
    const int thread_col = tid % (BN / TN);  // and columns thread_col * TN + j of the block tile
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = 0.0f;
        }
    }
    float a_frag[TM];
    float b_frag[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Stage A[block_row .. +BM][k0 .. +BK]: consecutive threads read consecutive k (coalesced).
#pragma unroll
        for (int load = 0; load < (BM * BK) / NUM_THREADS; ++load) {
            const int index = tid + load * NUM_THREADS;
            const int r = index / BK;
            const int c = index % BK;
            const int row = block_row + r;
            const int k = k0 + c;
            As[r][c] = (row < M && k < K) ? A[(size_t)row * K + k] : 0.0f;
        }
        // Stage B[k0 .. +BK][block_col .. +BN]: consecutive threads read consecutive columns.
#pragma unroll
        for (int load = 0; load < (BK * BN) / NUM_THREADS; ++load) {
            const int index = tid + load * NUM_THREADS;
            const int r = index / BN;
            const int c = index % BN;
            const int k = k0 + r;
            const int col = block_col + c;
            Bs[r][c] = (k < K && col < N) ? B[(size_t)k * N + col] : 0.0f;
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                a_frag[i] = As[thread_row * TM + i][k];
            }
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                b_frag[j] = Bs[k][thread_col * TN + j];
            }
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] += a_frag[i] * b_frag[j];
                }
            }
        }
        __syncthreads();  // everyone is done with this step's tiles before they are overwritten
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = block_row + thread_row * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = block_col + thread_col * TN + j;
            if (row < M && col < N) {
                C[(size_t)row * N + col] = acc[i][j];
            }
        }
    }
}
