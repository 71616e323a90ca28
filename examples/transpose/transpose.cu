// transpose: dst = src^T for a row-major rows x cols matrix src (dst is cols x rows).
//
// The starting point is the classic shared-memory tiled transpose. A block of TILE x BLOCK_ROWS
// threads moves one TILE x TILE tile: it reads the tile row by row (consecutive threads read
// consecutive columns, coalesced), parks it in shared memory, and writes it out transposed, again
// row by row so the stores are coalesced too. Each thread moves TILE / BLOCK_ROWS elements each way.
// The tile is padded by PAD columns: with PAD = 1 the column-wise reads of the shared tile fall in
// 32 different banks; with PAD = 0 they all fall in the same one (a 32-way bank conflict).
//
// Room to improve: more elements per thread, wider (float2/float4) global accesses.

#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif
#ifndef PAD
#define PAD 1
#endif

static_assert(TILE % BLOCK_ROWS == 0, "each thread moves TILE / BLOCK_ROWS rows of the tile");
static_assert(TILE * BLOCK_ROWS <= 1024, "at most 1024 threads per block");

extern "C" __global__ void __launch_bounds__(TILE * BLOCK_ROWS)
transpose(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols)
{
    __shared__ float tile[TILE][TILE + PAD];

    // Read the tile whose top-left corner is src[blockIdx.y * TILE][blockIdx.x * TILE].
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int row0 = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int row = row0 + j;
        if (row < rows && col < cols) {
            tile[threadIdx.y + j][threadIdx.x] = src[(size_t)row * cols + col];
        }
    }
    __syncthreads();

    // Write it to dst[blockIdx.x * TILE ...][blockIdx.y * TILE ...]: dst[c][r] = src[r][c].
    const int dst_col = blockIdx.y * TILE + threadIdx.x;   // a row of src
    const int dst_row0 = blockIdx.x * TILE + threadIdx.y;  // a column of src
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int dst_row = dst_row0 + j;
        if (dst_row < cols && dst_col < rows) {
            dst[(size_t)dst_row * rows + dst_col] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
