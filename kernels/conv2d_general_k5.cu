// Instantiations of the general convolution kernel for 5x5 filters (one file per size: parallel builds).
#include "kernels/conv2d_general_impl.cuh"

namespace cnnrt::kernels::general {

extern const Entry kEntriesK5[] = {GEN_PLAIN_AND_SPLIT(5), GEN_POOLED(5)};
extern const int kEntryCountK5 = sizeof(kEntriesK5) / sizeof(kEntriesK5[0]);

}  // namespace cnnrt::kernels::general
