// The CPU reference backend: one function per op, plain loops, the oracle for every test.
//
// The executor gives each kernel its inputs (nullptr for an omitted optional input) and outputs that are
// already allocated with the dtype and shape shape inference gave them. Kernels read the node's canonical
// attributes (ir/ops.hpp). Float32 everywhere; int64 where constant folding needs it (shape arithmetic,
// Gather/Slice/Concat of shapes). Sums accumulate in double.
#pragma once

#include <string_view>
#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::cpu {

using Inputs = std::vector<const ir::HostTensor*>;
using Outputs = std::vector<ir::HostTensor*>;
using KernelFn = void (*)(const ir::Node& node, const Inputs& inputs, Outputs& outputs);

// nullptr when the CPU backend has no kernel for the op.
KernelFn find_kernel(std::string_view op);

}  // namespace cnnrt::cpu
