#include "ir/depth_space.hpp"

#include "core/error.hpp"

namespace cnnrt::ir {

BlockRearrangement block_rearrangement(const Node& node, const Shape& input) {
  CNNRT_CHECK(input.size() == 4, ErrorCode::Internal, "{} of a rank-{} input", node.op, input.size());
  const int64_t b = node.attrs.get_int("blocksize", 0);
  CNNRT_CHECK(b >= 1, ErrorCode::Internal, "{} is not canonical (blocksize {})", node.op, b);
  const int64_t n = input[0], c = input[1], h = input[2], w = input[3];
  const int64_t plane = h * w, image = c * plane;
  BlockRearrangement r;
  if (node.op == "SpaceToDepth") {
    // Output axes (n, i, j, c, h/b, w/b): channel (i*b + j) * C + c at (h/b, w/b) reads (c, h/b*b + i, w/b*b + j).
    r.dims = {n, b, b, c, h / b, w / b};
    r.in_strides = {image, w, 1, plane, b * w, b};
    return r;
  }
  CNNRT_CHECK(node.op == "DepthToSpace", ErrorCode::Internal, "{} is not a block rearrangement", node.op);
  const int64_t out_c = c / (b * b);
  const bool crd = node.attrs.get_string("mode", "DCR") == "CRD";
  // Output axes (n, c, h, i, w, j): pixel (h*b + i, w*b + j) of channel c.
  const int64_t c_stride = crd ? b * b * plane : plane;
  const int64_t i_stride = crd ? b * plane : b * out_c * plane;
  const int64_t j_stride = crd ? plane : out_c * plane;
  r.dims = {n, out_c, h, b, w, b};
  r.in_strides = {image, c_stride, w, i_stride, 1, j_stride};
  return r;
}

}  // namespace cnnrt::ir
