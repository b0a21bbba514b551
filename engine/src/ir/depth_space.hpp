// DepthToSpace and SpaceToDepth as one strided gather: the output, walked in row-major order over a 6-D
// index space, reads the input at sum(index[d] * in_strides[d]). The CPU kernel and the GPU lowering (a
// strided copy) both take the arithmetic from here, so that the two modes' channel orders live in one place.
#pragma once

#include "ir/graph.hpp"

namespace cnnrt::ir {

struct BlockRearrangement {
  Shape dims;        // 6 extents whose row-major walk is the output's element order
  Shape in_strides;  // the input's element stride along each of them
};

// For a canonical DepthToSpace (blocksize b, mode "DCR" or "CRD") or SpaceToDepth (blocksize b) node and its
// input shape [N, C, H, W]:
//   DepthToSpace DCR: out[n, c, h*b + i, w*b + j] = in[n, (i*b + j) * C/b^2 + c, h, w]
//   DepthToSpace CRD: out[n, c, h*b + i, w*b + j] = in[n, c * b^2 + i*b + j, h, w]
//   SpaceToDepth:     out[n, (i*b + j) * C + c, h, w] = in[n, c, h*b + i, w*b + j]
BlockRearrangement block_rearrangement(const Node& node, const Shape& input);

}  // namespace cnnrt::ir
