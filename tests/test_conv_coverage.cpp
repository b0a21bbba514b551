// Every kernel of the convolution registry is offered for some layer of its family's GPU test
// (tests/gpu/conv_layers.hpp), on an H100's capabilities: so a GPU test run checks every instantiation the build
// contains, and an instantiation added without a test layer that reaches it fails here, without a GPU.
// The GPU tests themselves (FamilyCheck::covered_all) assert the same for what actually ran.
#ifdef CNNRT_WITH_CUDA
#include <doctest/doctest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpu/conv_layers.hpp"
#include "kernels/conv_registry.hpp"
#include "kernels/mbconv.cuh"

using namespace cnnrt;

TEST_CASE("every registry kernel is offered for a layer of its family's GPU test (H100 capabilities)") {
  kernels::DeviceCaps h100;
  h100.cc_major = 9;
  h100.cc_minor = 0;
  h100.sm_count = 132;
  h100.smem_optin = 227 * 1024;
  // A stand-in for the packed weights' device address: the variants capture it, nothing reads it here.
  kernels::LayerWeights weights;
  const float stand_in = 0.0f;
  weights.filters = weights.packed = &stand_in;
  for (const kernels::ConvFamily* family : kernels::conv_families()) {
    const std::string name_of_family = family->name();
    CAPTURE(name_of_family);
    const std::vector<testing::Layer> layers = testing::family_layers(family->name());
    REQUIRE_MESSAGE(!layers.empty(), "no GPU test layers for family " << family->name());
    std::set<std::string> offered;
    for (const testing::Layer& L : layers) {
      // variants() alone: reject() may ask the driver (wgh's tensor maps), which this machine may lack; the GPU
      // test requires the family to accept each of these layers.
      for (const kernels::ConvVariant& v : family->variants(testing::describe_layer(L), h100, weights)) offered.insert(v.name);
      // Read through an input affine (the `pre` variants), where the family reads one (its GPU test does too).
      kernels::ConvLayer with_affine = testing::describe_layer(L);
      with_affine.in.scale = with_affine.in.shift = &stand_in;
      if (family->reads_prologue(with_affine.in)) {
        for (const kernels::ConvVariant& v : family->variants(with_affine, h100, weights)) offered.insert(v.name);
      }
    }
    int missing = 0;
    for (const std::string& name : family->variant_names()) {
      const std::regex pattern(std::regex_replace(name, std::regex(R"(\*)"), "[0-9x]+"));
      bool seen = false;
      for (const std::string& o : offered) seen = seen || std::regex_match(o, pattern);
      if (!seen) {
        ++missing;
        MESSAGE(family->name() << ": no test layer is offered " << name);
      }
    }
    CHECK(missing == 0);
    for (const std::string& o : offered) {
      bool listed = false;
      for (const std::string& name : family->variant_names()) {
        listed = listed || std::regex_match(o, std::regex(std::regex_replace(name, std::regex(R"(\*)"), "[0-9x]+")));
      }
      CHECK_MESSAGE(listed, o << " is offered but not in variant_names()");
    }
  }
}
TEST_CASE("a layer whose output has an image stride is offered only to the families that write one, never with a residual") {
  kernels::DeviceCaps turing;  // (no family there asks the driver in reject())
  turing.cc_major = 7;
  turing.cc_minor = 5;
  turing.sm_count = 40;
  turing.smem_optin = 64 * 1024;
  const float stand_in[16 * 16 * 9] = {};
  kernels::ConvLayer L = testing::describe_layer(testing::tc_layer(2, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1));
  L.e.out_image_floats = 3 * 16 * 8 * 8;  // the layer's 16 planes an image, of a Concat output of 48
  const kernels::UploadFn upload = [&](const std::vector<float>&, const std::string&) { return stand_in; };
  int offered = 0;
  for (const kernels::FamilyCandidates& fc : kernels::conv_candidates(L, turing, stand_in, nullptr, stand_in, upload)) {
    const std::string family = fc.family->name();
    CAPTURE(family);
    if (!kernels::device_lacks(turing, fc.family->needs()).empty()) continue;
    if (fc.family->writes_image_stride()) {
      if (fc.rejected.empty()) ++offered;
    } else {
      CHECK(fc.rejected == "writes only dense outputs (no image stride)");
    }
  }
  CHECK(offered >= 2);  // igemm and dot run it on every GPU
  // An input with an image stride: only dot and pw read one (pw only 1x1 layers).
  for (const int k : {3, 1}) {
    const int p = k / 2;
    kernels::ConvLayer read = testing::describe_layer(testing::tc_layer(2, 16, 8, 8, 16, k, k, 1, p, p, p, p));
    read.in.image_floats = 3 * 16 * 8 * 8;
    for (const kernels::FamilyCandidates& fc : kernels::conv_candidates(read, turing, stand_in, nullptr, stand_in, upload)) {
      const std::string family = fc.family->name();
      CAPTURE(family);
      CAPTURE(k);
      if (!kernels::device_lacks(turing, fc.family->needs()).empty()) continue;
      if (family == "dot" || (family == "pw" && k == 1)) {
        CHECK(fc.rejected.empty());
      } else if (family == "pw") {
        CHECK(fc.rejected == "needs a 1x1 filter");
      } else {
        CHECK(fc.rejected == "does not read its input through an image stride");
      }
    }
  }
  L.residual = true;
  for (const kernels::FamilyCandidates& fc : kernels::conv_candidates(L, turing, stand_in, nullptr, stand_in, upload)) {
    CHECK(!fc.rejected.empty());
  }
}
// The inverted residual block's variants for two zoo blocks (efficientnet_b0_small's 96 -> 576 -> 160 on 4x4 with its
// gate, mobilenet_v2's 24 -> 144 -> 24 on 6x6): each is named by mbconv_variant_names() (what --force-kernel checks)
// and only the split needs a workspace. On an H100 both get the split and clusters; on a Turing card's 64 KB
// mobilenet_v2's gets the split and no cluster (efficientnet's gate weights, staged whole in every block of the split's
// second launch, do not fit there). The tile is offered for mobilenet_v2's block (no gate) on both, never for a gated
// block.
TEST_CASE("inverted residual block: every variant offered is named, the split on any compute capability") {
  const float stand_in = 0.0f;
  auto block = [&](int C, int hidden, int F, int map, int squeeze) {
    kernels::MbconvDesc d;
    d.C = C;
    d.H = d.W = map;
    d.hidden = hidden;
    d.expand = true;
    d.w_exp = d.w_dw = d.w_pj = &stand_in;
    d.dw = kernels::ConvGeometry{1, hidden, map, map, hidden, 3, 3, map, map, 1, 1, 1, 1, 1, 1, 1, 1, hidden};
    d.squeeze = squeeze;
    d.w_se1 = d.w_se2 = squeeze > 0 ? &stand_in : nullptr;
    d.F = F;
    return d;
  };
  struct Case {
    kernels::MbconvDesc d;
    int arch, optin;
    bool split;
  };
  const kernels::MbconvDesc efficientnet = block(96, 576, 160, 4, 24), mobilenet = block(24, 144, 24, 6, 0);
  const std::vector<std::string> names = kernels::mbconv_variant_names();
  for (const Case& c : {Case{efficientnet, 90, 227 * 1024, true}, Case{mobilenet, 90, 227 * 1024, true},
                        Case{mobilenet, 75, 64 * 1024, true}, Case{efficientnet, 75, 64 * 1024, false}}) {
    CAPTURE(c.d.hidden);
    CAPTURE(c.arch);
    int split = 0, clusters = 0, tile = 0;
    for (const kernels::MbconvVariant& v : kernels::mbconv_variants(c.d, c.optin, c.arch)) {
      CHECK_MESSAGE(std::find(names.begin(), names.end(), v.name) != names.end(), v.name << " is not named");
      const int64_t workspace = kernels::mbconv_workspace_floats(v, c.d);
      if (v.split_channels > 0) {
        ++split;
        CHECK(workspace >= int64_t(c.d.hidden) * c.d.H * c.d.W);
      } else {
        CHECK(workspace == 0);
      }
      if (v.ranks > 1) ++clusters;
      if (v.tile_h > 0) ++tile;
    }
    CHECK((split > 0) == c.split);
    CHECK((tile > 0) == (c.d.squeeze == 0));
    CHECK((clusters > 0) == (c.arch >= 90));
  }
}

// The split's packed weights: the project layer's [F][hidden] transposed to rows of F rounded up to 16 (zeros past F),
// then the gate's [hidden][squeeze] transposed to [squeeze][hidden]; a size that does not match the block is refused.
TEST_CASE("inverted residual block: the split's weight layouts") {
  kernels::MbconvDesc d;
  d.hidden = 3;
  d.F = 18;
  d.squeeze = 2;
  std::vector<float> pj(size_t(d.F) * d.hidden), se2(size_t(d.hidden) * d.squeeze);
  for (size_t i = 0; i < pj.size(); ++i) pj[i] = 1.0f + float(i);
  for (size_t i = 0; i < se2.size(); ++i) se2[i] = -1.0f - float(i);
  const std::vector<float> packed = kernels::mbconv_split_pack(pj, se2, d);
  const int Fp = 32;
  REQUIRE(packed.size() == size_t(d.hidden) * Fp + se2.size());
  for (int h = 0; h < d.hidden; ++h) {
    for (int o = 0; o < Fp; ++o) {
      CAPTURE(h);
      CAPTURE(o);
      CHECK(packed[size_t(h) * Fp + o] == (o < d.F ? pj[size_t(o) * d.hidden + h] : 0.0f));
    }
  }
  for (int s = 0; s < d.squeeze; ++s) {
    for (int h = 0; h < d.hidden; ++h) CHECK(packed[size_t(d.hidden) * Fp + s * d.hidden + h] == se2[h * d.squeeze + s]);
  }
  d.squeeze = 0;  // no gate: the project weights alone
  CHECK(kernels::mbconv_split_pack(pj, {}, d).size() == size_t(d.hidden) * Fp);
  CHECK_THROWS_AS(kernels::mbconv_split_pack(pj, se2, d), std::invalid_argument);
  d.F = 16;
  CHECK_THROWS_AS(kernels::mbconv_split_pack(pj, {}, d), std::invalid_argument);
}
#endif  // CNNRT_WITH_CUDA
