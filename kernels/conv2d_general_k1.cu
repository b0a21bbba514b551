// Instantiations of the general convolution kernel for 1x1 filters (one file per size: parallel builds).
#include "kernels/conv2d_general_impl.cuh"

namespace cnnrt::kernels::general {

extern const Entry kEntriesK1[] = {GEN_PLAIN_AND_SPLIT(1)};
extern const int kEntryCountK1 = sizeof(kEntriesK1) / sizeof(kEntriesK1[0]);

}  // namespace cnnrt::kernels::general
