// A chain of inverted residual blocks replaces the blocks' steps only where the tuner measured it at least 10% faster
// than their replay (plan/gpu/lower_chain.hpp): the replay lacks the whole graph's overlap search.
#ifdef CNNRT_WITH_CUDA
#include <doctest/doctest.h>

#include "plan/gpu/lower_chain.hpp"

using namespace cnnrt::plan;

TEST_CASE("inverted residual chain: kept only where it measured 10% faster than the blocks' steps") {
  Choice close;  // mobilenet_v2's 14 blocks at batch 16 on an H100: 3% faster alone, the network slower with it
  close.timings = {{"mbchain_cl8", 152.3, 0.0}, {"separate_steps", 157.9, 0.0}, {"mbchain_cl16", 228.2, 0.0}};
  CHECK_FALSE(chain_clearly_faster(close, "mbchain_cl8"));
  Choice clear;  // efficientnet_b0_small's short runs at batch 16: 16% faster
  clear.timings = {{"mbchain_cl16", 69.0, 0.0}, {"separate_steps", 82.5, 0.0}};
  CHECK(chain_clearly_faster(clear, "mbchain_cl16"));
  Choice edge;  // exactly 10% faster stands
  edge.timings = {{"mbchain_cl16", 90.0, 0.0}, {"separate_steps", 100.0, 0.0}};
  CHECK(chain_clearly_faster(edge, "mbchain_cl16"));
  Choice forced;  // forced or heuristic: nothing timed, the choice stands
  forced.how = "forced";
  CHECK(chain_clearly_faster(forced, "mbchain_cl16"));
  Choice dropped;  // the steps' replay failed its check (< 0): the chain stands
  dropped.timings = {{"mbchain_cl16", 90.0, 0.0}, {"separate_steps", -1.0, -1.0}};
  CHECK(chain_clearly_faster(dropped, "mbchain_cl16"));
}
#endif  // CNNRT_WITH_CUDA
