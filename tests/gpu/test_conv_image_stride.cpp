// Every variant of every family that writes an image stride (ConvFamily::writes_image_stride: each image of the
// output `gap` floats past the last, as a block of a channel Concat's output at batch > 1) on its own GPU test's
// layers, against the CPU reference backend, with odd gaps (the images off every vector alignment) and even ones;
// whatever lies between the images must stay poisoned. Residual layers run without their residual (a strided
// output never has one). And every variant of the families that read one (dot and pw: InputPrologue::image_floats,
// DenseNet's running stack read through its normalization), with NaN between the input's images.
#include <doctest/doctest.h>

#include <string>

#include "conv_family_check.hpp"
#include "conv_layers.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

namespace {

// `reads`: each layer also read through a per-channel affine and ReLU (the family's `pre` variants), and with an
// input image stride, alone and with the affine.
void check_image_stride(const char* family, uint32_t seed, bool reads = false) {
  FamilyCheck fc(family);
  if (!fc.runs_here()) return;
  int64_t gap = 1;
  auto check = [&](const Layer& L) {
    fc.check_strided(L, seed++, gap);
    if (reads) {
      fc.check_affine(L, seed++, kernels::ParamAct::Relu, 0.0f, 0.0f, gap);
      fc.check_strided_input(L, seed++, gap);
      fc.check_affine(L, seed++, kernels::ParamAct::Relu, 0.0f, 0.0f, 0, gap);
    }
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
TEST_CASE("image stride: every dot variant writes its images apart, pooled and read through an affine too; and reads them apart") {
  check_image_stride("dot", 5500, true);
}
TEST_CASE("image stride: every wgr variant writes its images apart") { check_image_stride("wgr", 5700); }
TEST_CASE("image stride: every small variant writes its images apart, pooled too") { check_image_stride("small", 6100); }
TEST_CASE("image stride: every gen variant writes its images apart, pooled and split too") { check_image_stride("gen", 6300); }
TEST_CASE("image stride: every stem variant writes its images apart, pooled too") { check_image_stride("stem", 6500); }
TEST_CASE("image stride: every dw variant writes its images apart") { check_image_stride("dw", 6700); }
TEST_CASE("image stride: every wgh variant writes its images apart") { check_image_stride("wgh", 5900); }
TEST_CASE("image stride: every pw variant writes its images apart, read through an affine too; and reads them apart") {
  check_image_stride("pw", 6900, true);
}
