// Entry points of the individual passes (one .cpp each in this folder); see pass_list.inc for the order.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::passes {
}  // namespace cnnrt::passes
