// Every variant of every family that writes an image stride (ConvFamily::writes_image_stride: each image of the
// output `gap` floats past the last, as a block of a channel Concat's output at batch > 1) on its own GPU test's
// layers, against the CPU reference backend, with odd gaps (the images off every vector alignment) and even ones;
// whatever lies between the images must stay poisoned. Residual layers run without their residual (a strided
// output never has one).
#include <doctest/doctest.h>

#include <string>

#include "conv_family_check.hpp"
#include "conv_layers.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

namespace {

// `affine`: each layer also read through a per-channel affine and ReLU (the family's `pre` variants).
void check_image_stride(const char* family, uint32_t seed, bool affine = false) {
  FamilyCheck fc(family);
  if (!fc.runs_here()) return;
  int64_t gap = 1;
  auto check = [&](const Layer& L) {
    fc.check_strided(L, seed++, gap);
    if (affine) fc.check_affine(L, seed++, kernels::ParamAct::Relu, 0.0f, 0.0f, gap);
    gap = gap == 1 ? 64 : gap == 64 ? 3 : 1;
  };
  for (Layer L : family_layers(family)) {
    L.residual = false;
    check(L);
    if (L.N == 1) {  // the batch-1 layers again with a second image, which lies at the stride
      L.N = 2;
      check(L);
    }
  }
  fc.covered_all();
}

}  // namespace

TEST_CASE("image stride: every tc variant writes its images apart") { check_image_stride("tc", 5100); }
TEST_CASE("image stride: every igemm variant writes its images apart") { check_image_stride("igemm", 5300); }
TEST_CASE("image stride: every dot variant writes its images apart, pooled and read through an affine too") {
  check_image_stride("dot", 5500, true);
}
TEST_CASE("image stride: every wgr variant writes its images apart") { check_image_stride("wgr", 5700); }
TEST_CASE("image stride: every wgh variant writes its images apart") { check_image_stride("wgh", 5900); }
