// MaxPool and AveragePool over 1-D and 2-D windows, and GlobalMaxPool / GlobalAveragePool.
#pragma once

#include "kernels/common.cuh"
#include "kernels/sliding_window.cuh"

namespace cnnrt::kernels {

enum class PoolOp { Max, Average };

// x: contiguous [planes, rows.input, cols.input] (planes = N * C); y: [planes, rows.output, cols.output], or with
// `out_image_floats` set, image n (planes n * channels ...) at y + n * out_image_floats (a strided block of a
// channel Concat's output). 1-D pooling: `rows` left at its defaults (extent 1, kernel 1, no padding), the axis in
// `cols`.
struct Pool2dDesc {
  int64_t planes = 0;
  SlidingAxis rows;                // H
  SlidingAxis cols;                // W
  bool count_include_pad = false;  // Average only
  int64_t channels = 1;            // planes an image (C), read with out_image_floats
  int64_t out_image_floats = 0;    // floats from one output image to the next; 0: dense
};

// Max: the largest input element in the window; padding never wins (-inf when a window holds no input).
// Average: sum of the in-bounds elements divided by their count, or with count_include_pad by the count of
// window positions inside the padded extent [-pad_begin, input + pad_end) (a ceil_mode window that overhangs
// the end padding does not count the overhang; ONNX); 0 when the divisor is 0. Dilation applies to both
// (ONNX AveragePool has none: pass 1). One thread per output element; sums in float.
void launch_pool2d(PoolOp op, const float* x, float* y, const Pool2dDesc& desc, cudaStream_t stream);

// y[p] = max or mean of the plane_size contiguous elements x[p * plane_size ...] for p < planes
// (GlobalMaxPool / GlobalAveragePool over all spatial axes of any rank: plane_size = product of them).
// Runs as a reduction over the trailing axis (launch_reduce): a warp per plane, float4 when aligned.
void launch_global_pool(PoolOp op, const float* x, float* y, int64_t planes, int64_t plane_size, cudaStream_t stream);

}  // namespace cnnrt::kernels
