// Reductions over arbitrary axes, in two shapes of kernel (see reduce.cuh): rows (reduced axes trailing) and
// columns (everything else).
#include "kernels/nd_index.cuh"
#include "kernels/reduce.cuh"
#include "kernels/row_reduce.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {
namespace {

// The reduction as a runtime value, uniform over the launch.
struct ReduceCombine {
  ReduceOp op;

  __device__ float identity() const { return op == ReduceOp::Max ? -INFINITY : op == ReduceOp::Min ? INFINITY : 0.0f; }
  // a is the running value and b the new one: std::max(a, b) semantics, as the CPU reference.
  __device__ float operator()(float a, float b) const {
    switch (op) {
      case ReduceOp::Max: return a < b ? b : a;
      case ReduceOp::Min: return b < a ? b : a;
      default: return a + b;
    }
  }
  __device__ float finish(float value, int64_t reduced_count) const {
    return op == ReduceOp::Mean ? value / static_cast<float>(reduced_count) : value;
  }
};

// y[row] = reduction of the `length` contiguous floats of row `row`, for rows rows.
__global__ void reduce_rows_kernel(ReduceCombine combine, const float* __restrict__ x, float* __restrict__ y,
                                   int64_t rows, int64_t length, bool whole_block, bool use_float4) {
  wait_for_prior_grid();  // launched overlapped (PDL): nothing global is touched before this
  __shared__ float scratch[kWarpSize];
  const RowGroup group = row_group(whole_block);
  for (int64_t row = group.first_row; row < rows; row += group.row_step) {
    const float* values = x + row * length;
    float partial = combine.identity();
    if (use_float4) {  // length % 4 == 0 and x 16-byte aligned
      for (int64_t p = group.lane; p < length / 4; p += group.size) {
        const Pack<4> pack = load_pack<4>(values, 4 * p, false);
#pragma unroll
        for (int e = 0; e < 4; ++e) partial = combine(partial, pack.v[e]);
      }
    } else {
      for (int64_t i = group.lane; i < length; i += group.size) partial = combine(partial, values[i]);
    }
    const float total = group_allreduce(group, partial, combine, scratch);
    if (group.lane == 0) y[row] = combine.finish(total, length);
  }
}

// Short rows, many of them (a global pool over small maps at a large batch: 327,680 rows of 9 at batch 256): a
// thread a row, its values summed in order, a warp's lanes on consecutive rows (one row a warp spends five
// dependent shuffles on 9 values and leaves 23 lanes idle).
constexpr int64_t kShortRow = 32;
constexpr int64_t kShortRowsMin = 8192;

__global__ void reduce_short_rows_kernel(ReduceCombine combine, const float* __restrict__ x, float* __restrict__ y,
                                         int64_t rows, int length) {
  wait_for_prior_grid();  // launched overlapped (PDL): nothing global is touched before this
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; row < rows; row += step) {
    const float* values = x + row * length;
    float total = combine.identity();
    for (int i = 0; i < length; ++i) total = combine(total, __ldg(values + i));
    y[row] = combine.finish(total, length);
  }
}

constexpr int kColumnTile = kWarpSize;  // outputs per block tile: one per lane
constexpr int kColumnSlices = 8;        // warps per block, each reducing every 8th reduced element

// y[j] = reduction over r of x[kept offset(j) + reduced offset(r)]. Block (32, 8): lane x takes output
// tile * 32 + x, warp y the reduced elements y, y + 8, ...; the 8 partials meet in shared memory.
__global__ void reduce_columns_kernel(ReduceCombine combine, const float* __restrict__ x, float* __restrict__ y,
                                      NdIndexer<uint64_t, 1> kept, int64_t outputs, NdIndexer<uint64_t, 1> reduced,
                                      int64_t reduced_count) {
  wait_for_prior_grid();  // launched overlapped (PDL): nothing global is touched before this
  __shared__ float partials[kColumnSlices][kColumnTile + 1];  // +1: the final column reads avoid bank conflicts
  const int64_t tiles = (outputs + kColumnTile - 1) / kColumnTile;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t output = tile * kColumnTile + threadIdx.x;
    float partial = combine.identity();
    if (output < outputs) {
      int64_t base[1];
      kept.offsets_of(output, base);
      for (int64_t r = threadIdx.y; r < reduced_count; r += kColumnSlices) {
        int64_t offset[1];
        reduced.offsets_of(r, offset);
        partial = combine(partial, x[base[0] + offset[0]]);
      }
    }
    partials[threadIdx.y][threadIdx.x] = partial;
    __syncthreads();
    if (threadIdx.y == 0 && output < outputs) {
      float total = partials[0][threadIdx.x];
      for (int s = 1; s < kColumnSlices; ++s) total = combine(total, partials[s][threadIdx.x]);
      y[output] = combine.finish(total, reduced_count);
    }
    __syncthreads();  // partials is rewritten by the next tile
  }
}

}  // namespace

void launch_reduce(ReduceOp op, const float* x, float* y, const ReduceDesc& desc, cudaStream_t stream) {
  bool is_reduced[kMaxRank] = {};
  for (int i = 0; i < desc.axis_count; ++i) is_reduced[desc.axes[i]] = true;
  int64_t in_strides[kMaxRank];
  contiguous_strides(desc.rank, desc.dims, in_strides);

  // Kept and reduced axes as two strided spaces over the input; simplify() drops unit axes and merges
  // neighbours (a reduced group between two kept axes stays one axis of `reduced`).
  StridedSpace<1> kept, reduced;
  for (int axis = 0; axis < desc.rank; ++axis) {
    StridedSpace<1>& space = is_reduced[axis] ? reduced : kept;
    space.extents[space.rank] = desc.dims[axis];
    space.strides[0][space.rank] = in_strides[axis];
    ++space.rank;
  }
  const int64_t outputs = kept.count();
  const int64_t reduced_count = reduced.count();
  if (outputs == 0) return;
  const ReduceCombine combine{op};
  if (reduced_count == 1) {  // nothing reduced (each output is its one element, Mean included)
    cudaMemcpyAsync(y, x, outputs * sizeof(float), cudaMemcpyDefault, stream);
    return;
  }
  kept.simplify();
  reduced.simplify();

  // Reduced elements contiguous at the end of each output's block: rows of reduced_count floats.
  const bool trailing = reduced.rank == 1 && reduced.strides[0][0] == 1;
  if (trailing && reduced_count <= kShortRow && outputs >= kShortRowsMin) {
    launch_overlapped(reduce_short_rows_kernel, dim3(blocks_for(outputs, kRowThreads)), dim3(kRowThreads), 0, stream, 1,
                      combine, x, y, outputs, static_cast<int>(reduced_count));
    return;
  }
  if (trailing) {
    const bool whole_block = rows_need_whole_blocks(outputs, reduced_count);
    const bool use_float4 = reduced_count % 4 == 0 && aligned_16(x);
    launch_overlapped(reduce_rows_kernel, dim3(row_blocks(outputs, whole_block)), dim3(kRowThreads), 0, stream, 1,
        combine, x, y, outputs, reduced_count, whole_block, use_float4);
    return;
  }
  const dim3 block(kColumnTile, kColumnSlices);
  const int64_t tiles = (outputs + kColumnTile - 1) / kColumnTile;
  launch_overlapped(reduce_columns_kernel, dim3(blocks_for(tiles, 1)), block, 0, stream, 1, combine, x, y,
                    kept.indexer<uint64_t>(), outputs, reduced.indexer<uint64_t>(), reduced_count);
}

}  // namespace cnnrt::kernels
