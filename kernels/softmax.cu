// Softmax with an online (running max, rescaled sum) pass followed by an output pass, so each element is read
// twice and exponentiated twice at most.
#include "kernels/nd_index.cuh"
#include "kernels/row_reduce.cuh"
#include "kernels/softmax.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {
namespace {

// sum of exp(x_i - max) over the values seen so far. The empty state is {-inf, 0}.
struct MaxSum {
  float max;
  float sum;
};

__device__ MaxSum shuffle_xor(MaxSum value, int lane_mask) {
  return MaxSum{__shfl_xor_sync(kFullWarpMask, value.max, lane_mask),
                __shfl_xor_sync(kFullWarpMask, value.sum, lane_mask)};
}

// Merges two partial states, rescaling each sum to the common maximum. An empty state (sum 0) contributes
// nothing, which also keeps exp(-inf - (-inf)) = NaN out when both are empty.
struct MaxSumCombine {
  __device__ MaxSum operator()(MaxSum a, MaxSum b) const {
    const float max = a.max < b.max ? b.max : a.max;
    const float a_part = a.sum == 0.0f ? 0.0f : a.sum * expf(a.max - max);
    const float b_part = b.sum == 0.0f ? 0.0f : b.sum * expf(b.max - max);
    return MaxSum{max, a_part + b_part};
  }
};

// One exponential per value: either the new value or the old sum is rescaled, never both.
__device__ inline MaxSum add_value(MaxSum state, float value) {
  if (value > state.max) return MaxSum{value, state.sum * expf(state.max - value) + 1.0f};
  return MaxSum{state.max, state.sum + expf(value - state.max)};
}

__device__ inline float softmax_output(SoftmaxKind kind, float value, float max, float sum, float log_sum) {
  return kind == SoftmaxKind::Softmax ? expf(value - max) / sum : value - max - log_sum;
}

// The group's share of one row in packs of kWidth: state over the row, then the outputs.
template <int kWidth>
__device__ MaxSum row_state(const float* row, int64_t length, const RowGroup& group) {
  MaxSum state{-INFINITY, 0.0f};
  for (int64_t p = group.lane; p < length / kWidth; p += group.size) {
    const Pack<kWidth> pack = load_pack<kWidth>(row, p * kWidth, false);
#pragma unroll
    for (int e = 0; e < kWidth; ++e) state = add_value(state, pack.v[e]);
  }
  return state;
}

template <int kWidth>
__device__ void row_output(SoftmaxKind kind, const float* row, float* out, int64_t length, const RowGroup& group,
                           MaxSum total) {
  const float log_sum = logf(total.sum);
  for (int64_t p = group.lane; p < length / kWidth; p += group.size) {
    Pack<kWidth> pack = load_pack<kWidth>(row, p * kWidth, false);
#pragma unroll
    for (int e = 0; e < kWidth; ++e) pack.v[e] = softmax_output(kind, pack.v[e], total.max, total.sum, log_sum);
    store_pack<kWidth>(out, p * kWidth, pack);
  }
}

// inner == 1: contiguous rows. use_float4: length % 4 == 0 and x, y 16-byte aligned.
__global__ void softmax_rows_kernel(SoftmaxKind kind, const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                                    int64_t length, bool whole_block, bool use_float4) {
  wait_for_prior_grid();  // launched overlapped (PDL): nothing global is touched before this
  __shared__ MaxSum scratch[kWarpSize];
  const RowGroup group = row_group(whole_block);
  for (int64_t row = group.first_row; row < rows; row += group.row_step) {
    const float* in = x + row * length;
    float* out = y + row * length;
    const MaxSum partial = use_float4 ? row_state<4>(in, length, group) : row_state<1>(in, length, group);
    const MaxSum total = group_allreduce(group, partial, MaxSumCombine{}, scratch);
    if (use_float4) {
      row_output<4>(kind, in, out, length, group, total);
    } else {
      row_output<1>(kind, in, out, length, group, total);
    }
  }
}

// inner > 1: thread per column (o, i), walking the axis with stride inner; neighbouring threads take
// neighbouring i, so every step of the walk is a coalesced access.
__global__ void softmax_columns_kernel(SoftmaxKind kind, const float* __restrict__ x, float* __restrict__ y,
                                       int64_t columns, int64_t length, int64_t inner) {
  wait_for_prior_grid();  // launched overlapped (PDL): nothing global is touched before this
  for (int64_t column = global_thread_index<int64_t>(); column < columns; column += global_thread_count<int64_t>()) {
    const int64_t o = column / inner;
    const int64_t start = o * length * inner + (column - o * inner);
    MaxSum state{-INFINITY, 0.0f};
    for (int64_t k = 0; k < length; ++k) state = add_value(state, x[start + k * inner]);
    const float log_sum = logf(state.sum);
    for (int64_t k = 0; k < length; ++k) {
      y[start + k * inner] = softmax_output(kind, x[start + k * inner], state.max, state.sum, log_sum);
    }
  }
}

constexpr int kColumnThreads = 256;

}  // namespace

void launch_softmax(SoftmaxKind kind, const float* x, float* y, int64_t outer, int64_t length, int64_t inner,
                    cudaStream_t stream) {
  if (outer * length * inner == 0) return;
  if (inner == 1) {
    const bool whole_block = rows_need_whole_blocks(outer, length);
    const bool use_float4 = length % 4 == 0 && aligned_16(x) && aligned_16(y);
    launch_overlapped(softmax_rows_kernel, dim3(row_blocks(outer, whole_block)), dim3(kRowThreads), 0, stream, 1, kind,
                      x, y, outer, length, whole_block, use_float4);
    return;
  }
  const int64_t columns = outer * inner;
  launch_overlapped(softmax_columns_kernel, dim3(blocks_for(columns, kColumnThreads)), dim3(kColumnThreads), 0, stream,
                    1, kind, x, y, columns, length, inner);
}

}  // namespace cnnrt::kernels
