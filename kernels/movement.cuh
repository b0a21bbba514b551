// Data movement: strided N-D copy (Transpose, Slice, Concat, Expand), Pad, Gather.
#pragma once

#include "kernels/common.cuh"

namespace cnnrt::kernels {

// For every index (i_0, ..., i_{rank-1}) within dims:
//   out[out_offset + sum_d i_d * out_strides[d]] = in[in_offset + sum_d i_d * in_strides[d]]
// Offsets and strides in elements; in_strides may be 0 (broadcast) or negative (Slice with negative steps).
// Distinct indices must write distinct output elements, and in and out must not overlap.
struct StridedCopyDesc {
  int rank = 0;                 // 0..kMaxRank (0: one element)
  int64_t dims[kMaxRank] = {};  // extents of the copied index space
  int64_t in_offset = 0;
  int64_t in_strides[kMaxRank] = {};
  int64_t out_offset = 0;
  int64_t out_strides[kMaxRank] = {};
};

// Descriptors of the ops the strided copy implements; inputs and outputs contiguous, dims row-major.
// Transpose: output axis d is input axis perm[d].
StridedCopyDesc transpose_desc(int rank, const int64_t* in_dims, const int64_t* perm);
// Slice (canonical form of docs/ops.md): output element i along axis d reads input index
// starts[d] + i * steps[d]; out_dims gives the counts. Steps may be negative, never 0.
StridedCopyDesc slice_desc(int rank, const int64_t* in_dims, const int64_t* out_dims, const int64_t* starts,
                           const int64_t* steps);
// Concat: the input of in_dims goes to the output (out_dims) at axis_offset along `axis`, one launch per input
// (the planner uses launch_concat below for up to kMaxConcatInputs inputs).
StridedCopyDesc concat_input_desc(int rank, const int64_t* in_dims, const int64_t* out_dims, int axis,
                                  int64_t axis_offset);

// Concat of up to kMaxConcatInputs contiguous inputs in one launch. The output is viewed as `outer` rows
// (the extents before the axis) of `row` elements; input k fills columns [starts[k], starts[k + 1]) of every
// row (its extent along the axis times the extents after it), so it is read as [outer, starts[k + 1] -
// starts[k]]. Writes are coalesced over whole rows; float4 accesses when every boundary and the row are
// multiples of 4 and every pointer is 16-byte aligned.
constexpr int kMaxConcatInputs = 16;
struct ConcatDesc {
  int inputs = 0;
  int64_t outer = 1;
  int64_t row = 0;                             // starts[inputs]
  int64_t starts[kMaxConcatInputs + 1] = {};   // starts[0] = 0
};
ConcatDesc concat_desc(int inputs, int rank, const int64_t* const* in_dims, const int64_t* out_dims, int axis);
void launch_concat(const float* const* inputs, float* out, const ConcatDesc& desc, cudaStream_t stream);

// Runs the copy. Axes are merged where possible, so a Concat input is a 2-D block copy and an identity
// permutation a flat copy; float4 accesses when the innermost extent is a multiple of 4, both innermost
// strides are 1 (or the input's is 0), outer strides are multiples of 4 and both bases (pointer + offset) are
// 16-byte aligned. Writes are coalesced; a Transpose that moves the innermost axis reads with a stride.
void launch_strided_copy(const float* in, float* out, const StridedCopyDesc& desc, cudaStream_t stream);

enum class PadMode {
  Constant,  // positions outside the input get `value`
  Edge,      // the nearest edge element
  Reflect,   // mirrored without repeating the edge, periodically (numpy) when a pad exceeds extent - 1;
             // an axis of extent 1 repeats its element
};

// out has extents in_dims[d] + pads_begin[d] + pads_end[d]; out[..., j, ...] reads input index
// j - pads_begin[d] along axis d when that lies inside, else what the mode says. Contiguous in and out.
struct PadDesc {
  int rank = 0;  // 1..kMaxRank
  int64_t in_dims[kMaxRank] = {};
  int64_t out_dims[kMaxRank] = {};
  int64_t pads_begin[kMaxRank] = {};  // >= 0
  PadMode mode = PadMode::Constant;
  float value = 0.0f;  // Constant mode only
};

void launch_pad(const float* in, float* out, const PadDesc& desc, cudaStream_t stream);

// Gather along one axis: data viewed as [outer, axis_extent, inner], out as [outer, index_count, inner]
// (out shape = data[:axis] + indices.shape + data[axis+1:]):
//   out[o, j, i] = data[o, index, i] with index = indices[j] (+ axis_extent when negative).
// indices: int64 in device memory, in [-axis_extent, axis_extent) (the engine validates; no check here).
struct GatherDesc {
  int64_t outer = 1;        // product of data extents before the axis
  int64_t axis_extent = 0;  // data extent along the axis
  int64_t inner = 1;        // product of data extents after the axis
  int64_t index_count = 0;  // number of indices
};

void launch_gather(const float* data, const int64_t* indices, float* out, const GatherDesc& desc, cudaStream_t stream);

}  // namespace cnnrt::kernels
