// SGEMM: a shared-memory tiled kernel with register blocking for general sizes, and two kernels for m <= 16
// that hold 4 rows of the output a thread (see gemm.cuh for when each runs). All three read A and B through
// (row, k) strides, so transposes cost nothing but the choice of which threads load which elements. The tiled kernel splits K over blocks when
// its tiles alone would leave most SMs idle; a second kernel sums the splits in order.
#include <algorithm>
#include <stdexcept>

#include "kernels/gemm.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/nd_index.cuh"
#include "kernels/row_reduce.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {
namespace {

// One operand as the kernels see it: element (q, p) at q * q_stride + p * p_stride, where q runs along M (for
// A) or N (for B) and p along K.
struct MatrixOperand {
  int64_t q_stride;
  int64_t p_stride;
};

struct GemmParams {
  int64_t m, n, k;
  MatrixOperand a, b;
  float alpha, beta;
  int64_t c_row_stride, c_col_stride;
  NdIndexer<uint64_t, 2> batch;  // batch index -> offsets of A (operand 0) and B (operand 1)
  int64_t batch_count;
  ParamAct act;
  float act_alpha, act_beta;
  int64_t k_chunk;  // depth of one K split (a multiple of kTileK); k when K is not split
  float* partials;  // [splits][m][n] raw sums when K is split, else null
};

enum BatchOperand { kBatchA = 0, kBatchB = 1 };

__device__ inline float gemm_result(const GemmParams& params, const float* c, float sum, int64_t i, int64_t j) {
  float value = params.alpha * sum;
  if (c != nullptr) value += params.beta * c[i * params.c_row_stride + j * params.c_col_stride];
  return param_activate(value, params.act, params.act_alpha, params.act_beta);
}

// ---- tiled kernel ------------------------------------------------------------------------------------

constexpr int kTileM = 64;  // output rows per block
constexpr int kTileN = 64;  // output columns per block
constexpr int kTileK = 16;  // K depth of one shared-memory slice
constexpr int kTiledThreads = 128;
constexpr int kRowsPerThread = 8;  // each thread owns an 8 x 4 block of outputs
constexpr int kColsPerThread = 4;
constexpr int kThreadsAcross = kTileN / kColsPerThread;  // 16 threads along N, 8 along M
constexpr int kSliceStride = 64 + 4;  // floats per shared row: 16-byte aligned rows, staggered banks for stores
constexpr int kSliceLoads = kTileK * 64 / kTiledThreads;  // elements each thread stages per operand and slice
static_assert(kTileM == 64 && kTileN == 64, "one slice layout (kTileK x 64) serves A and B");
static_assert(kThreadsAcross * (kTileM / kRowsPerThread) == kTiledThreads, "threads cover the tile");

// Thread t's share of a kTileK x 64 slice: elements (p + r * p_step, q + r * q_step) for r < kSliceLoads, i.e.
// element t + r * kTiledThreads of the slice in the operand's memory order. When the operand is contiguous
// along K, 16 consecutive threads take the 16 depths of one row q, else 64 consecutive threads take 64
// consecutive rows: global loads coalesce either way.
struct SliceWalk {
  int p;
  int q;
  int p_step;
  int q_step;
};
__device__ inline SliceWalk slice_walk(bool k_contiguous) {
  const int t = static_cast<int>(threadIdx.x);
  return k_contiguous ? SliceWalk{t % kTileK, t / kTileK, 0, kTiledThreads / kTileK}
                      : SliceWalk{t / 64, t % 64, kTiledThreads / 64, 0};
}

// Stages the slice at rows [q0, q0 + 64) and depths [p0, p0 + kTileK) of an operand in registers; elements
// past q_limit or k read as 0, so partial tiles need no other care.
__device__ inline void fetch_slice(const float* matrix, MatrixOperand operand, const SliceWalk& walk, int64_t q0,
                                   int64_t q_limit, int64_t p0, int64_t k, float (&staged)[kSliceLoads]) {
  const int64_t q = q0 + walk.q;
  const int64_t p = p0 + walk.p;
  const int64_t first = q * operand.q_stride + p * operand.p_stride;
  const int64_t step = walk.q_step * operand.q_stride + walk.p_step * operand.p_stride;
#pragma unroll
  for (int r = 0; r < kSliceLoads; ++r) {
    const bool inside = q + r * walk.q_step < q_limit && p + r * walk.p_step < k;
    staged[r] = inside ? matrix[first + r * step] : 0.0f;
  }
}

__device__ inline void store_slice(float (*slice)[kSliceStride], const SliceWalk& walk,
                                   const float (&staged)[kSliceLoads]) {
#pragma unroll
  for (int r = 0; r < kSliceLoads; ++r) slice[walk.p + r * walk.p_step][walk.q + r * walk.q_step] = staged[r];
}

// Grid: x over N tiles, y over M tiles, z over batches (y and z loop past the grid limits), or over K splits
// when params.partials is set (one batch). Launch bounds cap registers at 128 so that 4 blocks (16 warps) fit
// an SM; ptxas reports no spills at that cap (189 uncapped).
__global__ void __launch_bounds__(kTiledThreads, 4)
    gemm_tiled_kernel(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ c,
                      float* __restrict__ out, GemmParams params) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  __shared__ __align__(16) float a_slice[kTileK][kSliceStride];  // a_slice[p][i - m0]
  __shared__ __align__(16) float b_slice[kTileK][kSliceStride];  // b_slice[p][j - n0]
  const int thread_row = threadIdx.x / kThreadsAcross;
  const int thread_col = threadIdx.x % kThreadsAcross;
  const SliceWalk a_walk = slice_walk(params.a.p_stride == 1);
  const SliceWalk b_walk = slice_walk(params.b.p_stride == 1);
  const int64_t m_tiles = (params.m + kTileM - 1) / kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const bool split = params.partials != nullptr;
  const int64_t k_begin = split ? blockIdx.z * params.k_chunk : 0;
  const int64_t k_end = split ? min(params.k, k_begin + params.k_chunk) : params.k;

  for (int64_t batch = split ? 0 : blockIdx.z; batch < params.batch_count; batch += gridDim.z) {
    int64_t offsets[2];
    params.batch.offsets_of(batch, offsets);
    const float* a_matrix = a + offsets[kBatchA];
    const float* b_matrix = b + offsets[kBatchB];
    float* out_matrix = split ? params.partials + blockIdx.z * params.m * params.n : out + batch * params.m * params.n;
    for (int64_t m_tile = blockIdx.y; m_tile < m_tiles; m_tile += gridDim.y) {
      const int64_t m0 = m_tile * kTileM;
      float sums[kRowsPerThread][kColsPerThread] = {};
      float a_staged[kSliceLoads];
      float b_staged[kSliceLoads];
      fetch_slice(a_matrix, params.a, a_walk, m0, params.m, k_begin, k_end, a_staged);
      fetch_slice(b_matrix, params.b, b_walk, n0, params.n, k_begin, k_end, b_staged);
      for (int64_t p0 = k_begin; p0 < k_end; p0 += kTileK) {
        store_slice(a_slice, a_walk, a_staged);
        store_slice(b_slice, b_walk, b_staged);
        __syncthreads();              // the slices are complete
        if (p0 + kTileK < k_end) {    // the next slice's loads overlap this slice's arithmetic
          fetch_slice(a_matrix, params.a, a_walk, m0, params.m, p0 + kTileK, k_end, a_staged);
          fetch_slice(b_matrix, params.b, b_walk, n0, params.n, p0 + kTileK, k_end, b_staged);
        }
#pragma unroll
        for (int p = 0; p < kTileK; ++p) {
          const float4 a_low = *reinterpret_cast<const float4*>(&a_slice[p][thread_row * kRowsPerThread]);
          const float4 a_high = *reinterpret_cast<const float4*>(&a_slice[p][thread_row * kRowsPerThread + 4]);
          const float4 b_row = *reinterpret_cast<const float4*>(&b_slice[p][thread_col * kColsPerThread]);
          const float a_values[kRowsPerThread] = {a_low.x,  a_low.y,  a_low.z,  a_low.w,
                                                  a_high.x, a_high.y, a_high.z, a_high.w};
          const float b_values[kColsPerThread] = {b_row.x, b_row.y, b_row.z, b_row.w};
#pragma unroll
          for (int r = 0; r < kRowsPerThread; ++r) {
#pragma unroll
            for (int s = 0; s < kColsPerThread; ++s) sums[r][s] = fmaf(a_values[r], b_values[s], sums[r][s]);
          }
        }
        __syncthreads();  // everyone is done reading before the slices are overwritten
      }
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        const int64_t i = m0 + thread_row * kRowsPerThread + r;
        if (i >= params.m) continue;
#pragma unroll
        for (int s = 0; s < kColsPerThread; ++s) {
          const int64_t j = n0 + thread_col * kColsPerThread + s;
          if (j < params.n) out_matrix[i * params.n + j] = split ? sums[r][s] : gemm_result(params, c, sums[r][s], i, j);
        }
      }
    }
  }
}

// The K splits' partial sums [splits][m][n] added in split order (the result does not depend on timing), then
// alpha, C and the activation.
__global__ void gemm_sum_splits_kernel(const float* __restrict__ c, float* __restrict__ out, GemmParams params,
                                       int splits) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  const int64_t count = params.m * params.n;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < count; idx += int64_t(gridDim.x) * blockDim.x) {
    float total = 0.0f;
    for (int s = 0; s < splits; ++s) total += params.partials[s * count + idx];
    const int64_t i = idx / params.n;
    out[idx] = gemm_result(params, c, total, i, idx - i * params.n);
  }
}

// ---- m <= kSmallMRows -------------------------------------------------------------------------------

// Rows of the output a thread holds: the small-m kernels take m rows in chunks of this many, each chunk an item
// of its own (B is read once per chunk: from L2 after the first).
constexpr int kSmallM = 4;
constexpr int kSmallMRows = 16;  // the most rows these kernels take; above, the tiled kernel
constexpr int kSmallMThreads = 256;

__host__ __device__ inline int64_t row_chunks(int64_t m) { return (m + kSmallM - 1) / kSmallM; }

__device__ inline float a_element(const float* a_matrix, const MatrixOperand& a, int64_t i, int64_t p) {
  return a_matrix[i * a.q_stride + p * a.p_stride];
}

// op(B) contiguous along K: `warps_per_column` warps per (batch, j) output column (1, 2, 4 or 8), each
// taking one span of K with its lanes striding along it (coalesced; float4 when both operands allow), all m
// rows at once so that B is read once; warp sums, then the column's warps meet in shared memory. Splitting K
// over warps keeps enough loads in flight when there are few columns: a batch-1 fully connected layer is
// otherwise a long chain of dependent memory latencies per warp.
constexpr int kDotWarps = kSmallMThreads / kWarpSize;

__global__ void gemm_small_m_dot_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                        const float* __restrict__ c, float* __restrict__ out, GemmParams params,
                                        int warps_per_column, bool vector4) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  __shared__ float partial[kDotWarps][kSmallM];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int columns_per_block = kDotWarps / warps_per_column;
  const int part = warp % warps_per_column;
  const int64_t chunks = row_chunks(params.m);
  const int64_t items = params.batch_count * chunks * params.n;  // (batch, chunk of rows, column)
  // Span of K per warp, whole float4 groups.
  const int64_t span = ((params.k + warps_per_column - 1) / warps_per_column + 3) / 4 * 4;
  const int64_t p_begin = part * span, p_end = max(p_begin, min(params.k, p_begin + span));
  for (int64_t first = int64_t(blockIdx.x) * columns_per_block; first < items;
       first += int64_t(gridDim.x) * columns_per_block) {  // uniform per block: barriers are safe
    const int64_t item = first + warp / warps_per_column;
    float sums[kSmallM] = {};
    int64_t batch = 0, j = 0, row0 = 0;
    int rows = 0;
    if (item < items) {
      batch = item / (chunks * params.n);
      const int64_t rest = item - batch * chunks * params.n;
      const int64_t chunk = rest / params.n;
      j = rest - chunk * params.n;
      row0 = chunk * kSmallM;
      rows = static_cast<int>(min(int64_t(kSmallM), params.m - row0));
      int64_t offsets[2];
      params.batch.offsets_of(batch, offsets);
      const float* a_matrix = a + offsets[kBatchA] + row0 * params.a.q_stride;
      const float* b_column = b + offsets[kBatchB] + j * params.b.q_stride;  // p_stride == 1
      // float4 over whole sweeps of the warp (128 elements), then the rest a float a lane.
      const int64_t vector_end = vector4 ? p_begin + (p_end - p_begin) / (4 * kWarpSize) * (4 * kWarpSize) : p_begin;
#pragma unroll 2
      for (int64_t p = p_begin + 4 * lane; p < vector_end; p += 4 * kWarpSize) {
        const float4 bv = *reinterpret_cast<const float4*>(b_column + p);
#pragma unroll
        for (int i = 0; i < kSmallM; ++i) {
          if (i < rows) {
            const float4 av = *reinterpret_cast<const float4*>(a_matrix + i * params.a.q_stride + p);
            sums[i] = fmaf(av.x, bv.x, fmaf(av.y, bv.y, fmaf(av.z, bv.z, fmaf(av.w, bv.w, sums[i]))));
          }
        }
      }
      for (int64_t p = vector_end + lane; p < p_end; p += kWarpSize) {
        const float b_value = b_column[p];
#pragma unroll
        for (int i = 0; i < kSmallM; ++i) {
          if (i < rows) sums[i] = fmaf(a_element(a_matrix, params.a, i, p), b_value, sums[i]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kSmallM; ++i) {
      const float total = warp_allreduce(sums[i], SumCombine{});
      if (lane == 0) partial[warp][i] = total;
    }
    __syncthreads();
    if (part == 0 && lane < rows && item < items) {
      float total = 0.0f;
      for (int w = 0; w < warps_per_column; ++w) total += partial[warp + w][lane];
      const int64_t i = row0 + lane;
      out[batch * params.m * params.n + i * params.n + j] = gemm_result(params, c, total, i, j);
    }
    __syncthreads();  // partial is rewritten by the next columns
  }
}

constexpr int kColumnsPerBlock = kWarpSize;
constexpr int kKSlices = kSmallMThreads / kWarpSize;  // warps per block, each taking every 8th p

// op(B) contiguous along N: block (32, 8) per (batch, 32 columns); lane x takes column j, warp y the depths
// p = y, y + 8, ... (each warp reads 32 consecutive floats of a row of B); partial sums meet in shared memory.
__global__ void gemm_small_m_columns_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                            const float* __restrict__ c, float* __restrict__ out, GemmParams params) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  __shared__ float partials[kSmallM][kKSlices][kColumnsPerBlock + 1];
  const int64_t column_tiles = (params.n + kColumnsPerBlock - 1) / kColumnsPerBlock;
  const int64_t chunks = row_chunks(params.m);
  const int64_t items = params.batch_count * chunks * column_tiles;  // (batch, chunk of rows, 32 columns)
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {  // uniform per block: barriers are safe
    const int64_t batch = item / (chunks * column_tiles);
    const int64_t rest = item - batch * chunks * column_tiles;
    const int64_t chunk = rest / column_tiles;
    const int64_t j = (rest - chunk * column_tiles) * kColumnsPerBlock + threadIdx.x;
    const int64_t row0 = chunk * kSmallM;
    const int rows = static_cast<int>(min(int64_t(kSmallM), params.m - row0));
    int64_t offsets[2];
    params.batch.offsets_of(batch, offsets);
    const float* a_matrix = a + offsets[kBatchA] + row0 * params.a.q_stride;
    const float* b_matrix = b + offsets[kBatchB];
    float sums[kSmallM] = {};
    if (j < params.n) {
#pragma unroll 4
      for (int64_t p = threadIdx.y; p < params.k; p += kKSlices) {
        const float b_value = b_matrix[p * params.b.p_stride + j * params.b.q_stride];
#pragma unroll
        for (int i = 0; i < kSmallM; ++i) {
          if (i < rows) sums[i] = fmaf(a_element(a_matrix, params.a, i, p), b_value, sums[i]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kSmallM; ++i) partials[i][threadIdx.y][threadIdx.x] = sums[i];
    __syncthreads();
    const int i = threadIdx.y;  // warp i (< rows) finishes row row0 + i
    if (i < rows && j < params.n) {
      float total = 0.0f;
      for (int s = 0; s < kKSlices; ++s) total += partials[i][s][threadIdx.x];
      out[batch * params.m * params.n + (row0 + i) * params.n + j] = gemm_result(params, c, total, row0 + i, j);
    }
    __syncthreads();  // partials is rewritten by the next item
  }
}
static_assert(kSmallM <= kKSlices, "one warp finishes each output row");

GemmParams make_params(const GemmDesc& desc) {
  GemmParams params{};
  params.m = desc.m;
  params.n = desc.n;
  params.k = desc.k;
  params.a = desc.trans_a ? MatrixOperand{1, desc.lda} : MatrixOperand{desc.lda, 1};
  params.b = desc.trans_b ? MatrixOperand{desc.ldb, 1} : MatrixOperand{1, desc.ldb};
  params.alpha = desc.alpha;
  params.beta = desc.beta;
  params.c_row_stride = desc.c_row_stride;
  params.c_col_stride = desc.c_col_stride;
  StridedSpace<2> batch;
  batch.rank = desc.batch_rank;
  for (int axis = 0; axis < desc.batch_rank; ++axis) {
    batch.extents[axis] = desc.batch_dims[axis];
    batch.strides[kBatchA][axis] = desc.a_batch_strides[axis];
    batch.strides[kBatchB][axis] = desc.b_batch_strides[axis];
  }
  params.batch_count = batch.count();
  if (params.batch_count > 0) batch.simplify();
  params.batch = batch.indexer<uint64_t>();
  params.act = desc.act;
  params.act_alpha = desc.act_alpha;
  params.act_beta = desc.act_beta;
  params.k_chunk = params.k;
  params.partials = nullptr;
  return params;
}

// K slices of one split: the depth split over `splits` blocks, rounded up to whole slices.
int64_t split_chunk(int64_t k, int splits) {
  const int64_t slices = (k + kTileK - 1) / kTileK;
  return (slices + splits - 1) / splits * kTileK;
}

}  // namespace

GemmDesc onnx_gemm_desc(const int64_t* a_dims, bool trans_a, const int64_t* b_dims, bool trans_b, float alpha,
                        float beta, int c_rank, const int64_t* c_dims) {
  GemmDesc desc;
  desc.trans_a = trans_a;
  desc.trans_b = trans_b;
  desc.m = trans_a ? a_dims[1] : a_dims[0];
  desc.k = trans_a ? a_dims[0] : a_dims[1];
  desc.n = trans_b ? b_dims[0] : b_dims[1];
  desc.lda = a_dims[1];
  desc.ldb = b_dims[1];
  desc.alpha = alpha;
  desc.beta = beta;
  if (c_rank >= 0) {  // C broadcast to [M, N]
    int64_t c_strides[2];
    broadcast_strides(2, c_rank, c_dims, c_strides);
    desc.c_row_stride = c_strides[0];
    desc.c_col_stride = c_strides[1];
  }
  return desc;
}

GemmDesc matmul_desc(int a_rank, const int64_t* a_dims, int b_rank, const int64_t* b_dims) {
  GemmDesc desc;
  desc.m = a_rank == 1 ? 1 : a_dims[a_rank - 2];
  desc.k = a_dims[a_rank - 1];
  desc.n = b_rank == 1 ? 1 : b_dims[b_rank - 1];
  desc.lda = desc.k;
  desc.ldb = desc.n;
  const int a_batch_rank = a_rank > 2 ? a_rank - 2 : 0;
  const int b_batch_rank = b_rank > 2 ? b_rank - 2 : 0;
  desc.batch_rank = a_batch_rank > b_batch_rank ? a_batch_rank : b_batch_rank;
  // Batch extents: numpy broadcasting of the two batch shapes, aligned at their last axis.
  for (int axis = 0; axis < desc.batch_rank; ++axis) {
    const int a_axis = axis - (desc.batch_rank - a_batch_rank);
    const int b_axis = axis - (desc.batch_rank - b_batch_rank);
    const int64_t a_extent = a_axis >= 0 ? a_dims[a_axis] : 1;
    const int64_t b_extent = b_axis >= 0 ? b_dims[b_axis] : 1;
    desc.batch_dims[axis] = a_extent == 1 ? b_extent : a_extent;
  }
  // Strides in whole matrices, then in elements.
  broadcast_strides(desc.batch_rank, a_batch_rank, a_dims, desc.a_batch_strides);
  broadcast_strides(desc.batch_rank, b_batch_rank, b_dims, desc.b_batch_strides);
  for (int axis = 0; axis < desc.batch_rank; ++axis) {
    desc.a_batch_strides[axis] *= desc.m * desc.k;
    desc.b_batch_strides[axis] *= desc.k * desc.n;
  }
  return desc;
}

int gemm_split_k(const GemmDesc& desc, int sm_count) {
  int64_t batches = 1;
  for (int axis = 0; axis < desc.batch_rank; ++axis) batches *= desc.batch_dims[axis];
  if (desc.m <= kSmallMRows || batches != 1 || sm_count <= 0) return 1;
  const int64_t tiles = ((desc.m + kTileM - 1) / kTileM) * ((desc.n + kTileN - 1) / kTileN);
  // Two blocks an SM, each split at least 4 slices deep; at most 64 splits.
  const int64_t wanted = (2 * int64_t(sm_count) + tiles - 1) / tiles;
  const int64_t deepest = desc.k / (4 * kTileK);
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>({wanted, deepest, 64}));
  // Splits of equal whole-slice depth: no split may be empty.
  const int64_t chunk = split_chunk(desc.k, static_cast<int>(splits));
  return static_cast<int>((desc.k + chunk - 1) / chunk);
}

int64_t gemm_workspace_floats(const GemmDesc& desc) {
  return desc.split_k > 1 ? int64_t(desc.split_k) * desc.m * desc.n : 0;
}

void launch_gemm(const float* a, const float* b, const float* c, float* out, const GemmDesc& desc,
                 cudaStream_t stream, float* workspace) {
  GemmParams params = make_params(desc);
  if (params.m == 0 || params.n == 0 || params.batch_count == 0) return;
  if (params.m <= kSmallMRows) {
    if (params.b.p_stride == 1) {
      const int64_t items = params.batch_count * row_chunks(params.m) * params.n;
      // More warps per column while there are under ~4096 warps and each keeps 256 or more of K.
      int warps_per_column = 1;
      while (warps_per_column < kDotWarps && items * warps_per_column * 2 <= 4096 &&
             params.k / (warps_per_column * 2) >= 256) {
        warps_per_column *= 2;
      }
      // float4 loads: rows of A and columns of B contiguous along K and 16-byte aligned, at every row and batch.
      bool vector4 = params.a.p_stride == 1 && params.a.q_stride % 4 == 0 && params.b.q_stride % 4 == 0 &&
                     aligned_16(a) && aligned_16(b);
      for (int axis = 0; axis < desc.batch_rank; ++axis) {
        vector4 = vector4 && desc.a_batch_strides[axis] % 4 == 0 && desc.b_batch_strides[axis] % 4 == 0;
      }
      const int columns_per_block = kDotWarps / warps_per_column;
      launch_overlapped(gemm_small_m_dot_kernel, dim3(blocks_for(items, columns_per_block)), dim3(kSmallMThreads), 0,
                        stream, 1, a, b, c, out, params, warps_per_column, vector4);
    } else {
      const int64_t items =
          params.batch_count * row_chunks(params.m) * ((params.n + kColumnsPerBlock - 1) / kColumnsPerBlock);
      launch_overlapped(gemm_small_m_columns_kernel, dim3(blocks_for(items, 1)), dim3(kColumnsPerBlock, kKSlices), 0,
                        stream, 1, a, b, c, out, params);
    }
    return;
  }
  const int64_t m_tiles = (params.m + kTileM - 1) / kTileM;
  const int64_t n_tiles = (params.n + kTileN - 1) / kTileN;
  if (desc.split_k > 1) {
    if (workspace == nullptr || params.batch_count != 1) {
      throw std::invalid_argument("launch_gemm: a K split needs one product and its workspace (gemm_workspace_floats)");
    }
    params.k_chunk = split_chunk(params.k, desc.split_k);
    params.partials = workspace;
    const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(std::min<int64_t>(m_tiles, kMaxGridYZ)),
                    static_cast<unsigned>(desc.split_k));
    launch_overlapped(gemm_tiled_kernel, grid, dim3(kTiledThreads), 0, stream, 1, a, b, c, out, params);
    launch_overlapped(gemm_sum_splits_kernel, dim3(blocks_for(params.m * params.n, 256)), dim3(256), 0, stream, 1, c,
                      out, params, desc.split_k);
    return;
  }
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles < kMaxGridYZ ? m_tiles : kMaxGridYZ),
                  static_cast<unsigned>(params.batch_count < kMaxGridYZ ? params.batch_count : kMaxGridYZ));
  launch_overlapped(gemm_tiled_kernel, grid, dim3(kTiledThreads), 0, stream, 1, a, b, c, out, params);
}

}  // namespace cnnrt::kernels
