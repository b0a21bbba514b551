// Instantiations of the c1 kernel with filter groups, for kernels/lab/conv_lab (see c1_filter_groups.cuh).
#include "kernels/lab/c1_filter_groups.cuh"

#include <string>

#include "kernels/conv2d_c1_impl.cuh"

namespace cnnrt::kernels::lab {

namespace {

struct Entry {
  int k, fmax;
  const char* tile;
  void (*launch)(const float*, float*, const ConvGeometry&, const Epilogue&, const C1Filters&, const float*, cudaStream_t);
};

#define FG_ENTRY(K, TW, TH, ROWS, FMAX, TILE) \
  Entry { K, FMAX, TILE, &c1::launch_c1<c1::C1Cfg<K, 1, TW, TH, ROWS, FMAX, Act::None, false, true, true>> }
#define FG_K(K)                                                                                          \
  FG_ENTRY(K, 32, 32, 2, 2, "32x32r2"), FG_ENTRY(K, 64, 32, 4, 2, "64x32r4"), FG_ENTRY(K, 32, 32, 2, 4, "32x32r2"), \
      FG_ENTRY(K, 64, 32, 4, 4, "64x32r4")

const Entry kEntries[] = {FG_K(1), FG_K(3), FG_K(5)};

}  // namespace

std::vector<C1Variant> c1_filter_group_variants(const ConvGeometry& g, const Epilogue& e) {
  std::vector<C1Variant> out;
  if (!conv2d_c1_supports(g, e) || g.stride_h != 1 || g.KH != g.KW || e.pool.kind != FusedPool::None || e.residual ||
      e.param_act != ParamAct::None) {
    return out;
  }
  for (const Entry& en : kEntries) {
    if (en.k != g.KH || en.fmax >= g.F) continue;  // one group would be the planner's own _smemw variant
    out.push_back({"c1_k" + std::to_string(en.k) + "s1_fg" + std::to_string(en.fmax) + "_" + en.tile + "_none_smemw",
                   en.launch, true});
  }
  return out;
}

}  // namespace cnnrt::kernels::lab
