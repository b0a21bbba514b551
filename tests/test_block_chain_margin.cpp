// A chain of inverted residual blocks replaces the blocks' steps only where the tuner measured it at least 10% faster
// than their replay, the network or sequence kernel at least 5% (plan/gpu/lower_util.hpp): the replay lacks the
// whole graph's overlap search and side streams.
#ifdef CNNRT_WITH_CUDA
#include <doctest/doctest.h>

#include "plan/gpu/lower_util.hpp"

using namespace cnnrt::plan;

TEST_CASE("inverted residual chain: kept only where it measured 10% faster than the blocks' steps") {
  Choice close;  // mobilenet_v2's 14 blocks at batch 16 on an H100: 3% faster alone, the network slower with it
  close.timings = {{"mbchain_cl8", 152.3, 0.0}, {"separate_steps", 157.9, 0.0}, {"mbchain_cl16", 228.2, 0.0}};
  CHECK_FALSE(clearly_faster_than_steps(close, "mbchain_cl8", 0.9));
  Choice clear;  // efficientnet_b0_small's short runs at batch 16: 16% faster
  clear.timings = {{"mbchain_cl16", 69.0, 0.0}, {"separate_steps", 82.5, 0.0}};
  CHECK(clearly_faster_than_steps(clear, "mbchain_cl16", 0.9));
  Choice edge;  // exactly 10% faster stands
  edge.timings = {{"mbchain_cl16", 90.0, 0.0}, {"separate_steps", 100.0, 0.0}};
  CHECK(clearly_faster_than_steps(edge, "mbchain_cl16", 0.9));
  Choice forced;  // forced or heuristic: nothing timed, the choice stands
  forced.how = "forced";
  CHECK(clearly_faster_than_steps(forced, "mbchain_cl16", 0.9));
  Choice dropped;  // the steps' replay failed its check (< 0): the chain stands
  dropped.timings = {{"mbchain_cl16", 90.0, 0.0}, {"separate_steps", -1.0, -1.0}};
  CHECK(clearly_faster_than_steps(dropped, "mbchain_cl16", 0.9));
}

TEST_CASE("network and sequence kernels: kept only where they measured 5% faster than the steps") {
  Choice tie;  // ResNet-20's last stage at batch 1 on an H100: a tie alone, 7 us slower in the network
  tie.timings = {{"separate_steps", 17.76, 0.0}, {"seqnet_cl16_jit_cut0", 17.81, 0.0}};
  CHECK_FALSE(clearly_faster_than_steps(tie, "seqnet_cl16_jit_cut0", 0.95));
  Choice close;  // DenseNet-BC's tail at batch 16: 2% faster alone, 1% slower in the network
  close.timings = {{"seqnet_cl4_jit_cut1", 77.7, 0.0}, {"separate_steps", 79.4, 0.0}};
  CHECK_FALSE(clearly_faster_than_steps(close, "seqnet_cl4_jit_cut1", 0.95));
  Choice clear;  // DenseNet-BC's tail at batch 1: 10% faster, the network 3% faster
  clear.timings = {{"seqnet_cl8_jit_cut1", 48.1, 0.0}, {"separate_steps", 53.3, 0.0}};
  CHECK(clearly_faster_than_steps(clear, "seqnet_cl8_jit_cut1", 0.95));
}
#endif  // CNNRT_WITH_CUDA
