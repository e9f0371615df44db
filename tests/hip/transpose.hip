#include "hip/hip_runtime.h"

/*
 * transpose.hip: out = in transposed, through a tile in static shared
 * memory so that both the reads and the writes are coalesced.
 *
 * Entry
 *   transpose_f32(float *out, const float *in, int rows, int cols)
 *     in is rows x cols, out is cols x rows, both row-major and dense.
 * Launch
 *   block   (TILE, TILE_ROWS, 1) = (32, 8, 1)
 *   grid    (ceil(cols / 32), ceil(rows / 32), 1)
 *   shared  none dynamic (the tile is static)
 */

#define TILE 32
#define TILE_ROWS 8

template <typename T, int N>
__device__ void transpose_tile(T *out, const T *in, int rows, int cols)
{
  /* One column of padding: a tile column lands in distinct banks. */
  __shared__ T tile[N][N + 1];
  int x = hipBlockIdx_x * N + hipThreadIdx_x;
  int y = hipBlockIdx_y * N + hipThreadIdx_y;
  for (int j = 0; j < N; j += TILE_ROWS)
    if (x < cols && y + j < rows)
      tile[hipThreadIdx_y + j][hipThreadIdx_x] = in[(size_t)(y + j) * cols + x];
  __syncthreads();
  x = hipBlockIdx_y * N + hipThreadIdx_x;
  y = hipBlockIdx_x * N + hipThreadIdx_y;
  for (int j = 0; j < N; j += TILE_ROWS)
    if (x < rows && y + j < cols)
      out[(size_t)(y + j) * rows + x] = tile[hipThreadIdx_x][hipThreadIdx_y + j];
}

extern "C" __global__ void __launch_bounds__(TILE * TILE_ROWS)
    transpose_f32(float *out, const float *in, int rows, int cols)
{
  transpose_tile<float, TILE>(out, in, rows, cols);
}
