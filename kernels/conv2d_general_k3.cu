// Instantiations of the general convolution kernel for 3x3 filters (one file per size: parallel builds).
#include "kernels/conv2d_general_impl.cuh"

namespace cnnrt::kernels::general {

extern const Entry kEntriesK3[] = {GEN_PLAIN_AND_SPLIT(3), GEN_POOLED(3), GEN_WHOLE_TILES(3)};
extern const int kEntryCountK3 = sizeof(kEntriesK3) / sizeof(kEntriesK3[0]);

}  // namespace cnnrt::kernels::general
