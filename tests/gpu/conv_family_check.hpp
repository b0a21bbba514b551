// Checks one family of the convolution kernel registry (kernels/conv_registry.hpp) the way the planner offers it:
// every variant the family gives a layer runs on poisoned output, against the CPU reference backend, on random
// inputs (never zeros). The family must accept every layer a test hands to check(): where it declines, the test
// fails with the family's reason (eligibility that breaks cannot pass as "nothing to check"). At the end of a
// test case, covered_all() requires that every variant name the registry lists for the family ran at least
// once, so the count of checks is known from the registry and an instantiation no test reaches fails.
// On a device without the family's features, runs_here() reports the test as skipped (exit code 77 to CTest).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "conv_test_util.hpp"
#include "gpu_test_util.hpp"
#include "gpu/device_info.hpp"
#include "kernels/conv_registry.hpp"
#include "plan/gpu/conv_step.hpp"

namespace cnnrt::testing {

// The capabilities of the current device, as the planner reads them (CNNRT_MAX_SM and the loaded code
// included: under a cap, the families the capped architecture lacks report themselves skipped).
inline kernels::DeviceCaps test_device_caps() { return plan::device_caps(gpu::current_device()); }

// A Turing GPU (compute capability 7.5, 64 KB of shared memory a block) as the families' eligibility reads it: the
// device the families that need nothing beyond sm_75 must accept their layers on.
inline kernels::DeviceCaps turing_caps() {
  kernels::DeviceCaps turing;
  turing.cc_major = 7;
  turing.cc_minor = 5;
  turing.smem_optin = 64 * 1024;
  return turing;
}

// The reference output of a layer with its inputs, and the layer as the registry sees it.
struct LayerCase {
  kernels::ConvLayer layer;
  ir::HostTensor x, w, b, residual;
  ir::HostTensor expected;
};

inline LayerCase make_layer_case(const Layer& L, uint32_t seed) {
  LayerCase c;
  const float lo = L.positive ? 0.0f : -1.0f;
  const int64_t cpg = L.C / L.groups;
  c.x = ir::HostTensor::floats({L.N, L.C, L.H, L.W}, random_floats(size_t(L.N) * L.C * L.H * L.W, seed, lo));
  c.w = ir::HostTensor::floats({L.F, cpg, L.K, L.KW()}, random_floats(size_t(L.F) * cpg * L.K * L.KW(), seed + 1, lo));
  c.b = ir::HostTensor::floats({L.F}, random_floats(size_t(L.F), seed + 2));
  // The residual has the conv output's shape: compute it once without one to learn the shape.
  Layer plain = L;
  plain.residual = false;
  plain.pool = kernels::FusedPool::None;
  const Reference shape_ref = reference(plain, c.x, c.w, c.b, nullptr);
  if (L.residual) {
    c.residual = ir::HostTensor::floats(shape_ref.output.shape(), random_floats(size_t(shape_ref.output.numel()), seed + 3));
  }
  Reference ref = reference(L, c.x, c.w, c.b, L.residual ? &c.residual : nullptr);
  c.layer.g = ref.g;
  c.layer.e = ref.e;
  c.layer.residual = L.residual;
  c.expected = std::move(ref.output);
  return c;
}

inline std::string describe(const Layer& L) {
  return "N" + std::to_string(L.N) + " C" + std::to_string(L.C) + " " + std::to_string(L.H) + "x" +
         std::to_string(L.W) + " F" + std::to_string(L.F) + " K" + std::to_string(L.K) + "x" + std::to_string(L.KW()) +
         " s" + std::to_string(L.stride) + "x" + std::to_string(L.SW()) + " d" + std::to_string(L.dil) + " pads " + std::to_string(L.pad_top) + "," + std::to_string(L.pad_left) +
         "," + std::to_string(L.pad_bottom) + "," + std::to_string(L.pad_right) + " g" + std::to_string(L.groups) +
         " act" + std::to_string(static_cast<int>(L.act)) + (L.residual ? " residual" : "") +
         (L.pool != kernels::FusedPool::None ? " pool" + std::to_string(L.pool_k) + "x" + std::to_string(L.PKW()) + "/" +
                                                    std::to_string(L.pool_s) + "x" + std::to_string(L.PSW())
                                              : "");
}

class FamilyCheck {
 public:
  explicit FamilyCheck(const char* family) : dev_(test_device_caps()), family_(kernels::find_conv_family(family)) {
    REQUIRE_MESSAGE(family_ != nullptr, "no family '" << family << "' in the registry");
  }

  // False (and the test case reported as skipped) when this device lacks what the family needs.
  bool runs_here() {
    const std::string lacks = kernels::device_lacks(dev_, family_->needs());
    if (lacks.empty()) return true;
    skip_test_case(std::string(family_->name()) + " " + lacks);
    return false;
  }

  // Every variant of the family on L; the family must accept L.
  void check(const Layer& L, uint32_t seed) { run(L, seed, true, {}); }
  // The same with L's input read through a channel shuffle of `shuffle` groups (the input in memory arranged so
  // that what the convolution sees is the reference's input).
  void check_shuffled(const Layer& L, uint32_t seed, int shuffle) {
    kernels::InputPrologue prologue;
    prologue.shuffle = shuffle;
    run(L, seed, true, prologue);
  }
  // The same with L's input read through a random per-channel affine (scales in [0.5, 1.5), shifts in [-0.5, 0.5))
  // and `act` (the reference convolving the affine's output).
  // `image_gap` > 0: the output written with an image stride, as check_strided() does; `input_gap` > 0: the input
  // read with one, as check_strided_input() does.
  void check_affine(const Layer& L, uint32_t seed, kernels::ParamAct act, float alpha = 0.0f, float beta = 0.0f,
                    int64_t image_gap = 0, int64_t input_gap = 0) {
    const std::vector<float> scale = random_floats(static_cast<size_t>(L.C), seed + 7, 0.5f, 1.5f);
    const std::vector<float> shift = random_floats(static_cast<size_t>(L.C), seed + 8, -0.5f, 0.5f);
    DeviceBuffer dscale(scale), dshift(shift);
    kernels::InputPrologue prologue;
    prologue.scale = dscale.get();
    prologue.shift = dshift.get();
    prologue.act = act;
    prologue.alpha = alpha;
    prologue.beta = beta;
    if (input_gap > 0) prologue.image_floats = int64_t(L.C) * L.H * L.W + input_gap;
    run(L, seed, true, prologue, scale.data(), shift.data(), image_gap);
  }
  // The same where the family may decline L (a layer list shared with other families).
  void check_if_eligible(const Layer& L, uint32_t seed) { run(L, seed, false, {}); }
  // The same writing each image `gap` floats apart (Epilogue::out_image_floats: a block of a channel Concat's output
  // at batch > 1); the gaps between the images must stay poisoned.
  void check_strided(const Layer& L, uint32_t seed, int64_t gap) { run(L, seed, true, {}, nullptr, nullptr, gap); }
  // The same reading each input image `gap` floats past the last (InputPrologue::image_floats: a block of a channel
  // Concat's output), NaN between them.
  void check_strided_input(const Layer& L, uint32_t seed, int64_t gap) {
    kernels::InputPrologue prologue;
    prologue.image_floats = int64_t(L.C) * L.H * L.W + gap;
    run(L, seed, true, prologue);
  }

  int checked() const { return checked_; }

  // Every name the registry lists for the family (those that start with `prefix`) ran at least once ("*" in a
  // name: any value of that token).
  // On a device planned as an architecture before 9.0 (an older GPU, or CNNRT_MAX_SM) some variants are
  // never offered (clusters; more shared memory than it has): there only those it offered must run, which
  // check() already requires.
  void covered_all(const std::string& prefix = "") const {
    if (dev_.arch() < 90) {
      MESSAGE(family_->name() << ": " << checked_ << " variant checks, " << ran_.size()
                              << " distinct variants offered on compute capability " << dev_.arch() / 10 << "."
                              << dev_.arch() % 10);
      return;
    }
    for (const std::string& name : family_->variant_names()) {
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::regex pattern(std::regex_replace(name, std::regex(R"(\*)"), "[0-9x]+"));
      bool seen = false;
      for (const std::string& ran : ran_) seen = seen || std::regex_match(ran, pattern);
      CHECK_MESSAGE(seen, family_->name() << ": no test layer ran variant " << name);
    }
    MESSAGE(family_->name() << ": " << checked_ << " variant checks, " << ran_.size() << " distinct variants of "
                            << family_->variant_names().size() << " names in the registry");
  }

 private:
  void run(const Layer& L, uint32_t seed, bool required, const kernels::InputPrologue& prologue,
           const float* scale_host = nullptr, const float* shift_host = nullptr, int64_t image_gap = 0) {
    const std::string where = describe(L) + (prologue.shuffle != 1 ? " shuffle " + std::to_string(prologue.shuffle) : "") +
                              (prologue.scale ? " affine act" + std::to_string(static_cast<int>(prologue.act)) : "") +
                              (prologue.image_floats ? " input image " + std::to_string(prologue.image_floats) : "") +
                              (image_gap > 0 ? " image gap " + std::to_string(image_gap) : "");
    LayerCase c = make_layer_case(L, seed);
    if (prologue.scale) {  // what the convolution sees: the affine's output (for the reference)
      kernels::ConvLayer seen = c.layer;
      seen.in = prologue;
      seen.in.shuffle = 1;
      ir::HostTensor x_seen = ir::HostTensor::floats(
          c.x.shape(), kernels::apply_input_prologue(seen, c.x.f32(), scale_host, shift_host));
      c.expected = reference(L, x_seen, c.w, c.b, L.residual ? &c.residual : nullptr).output;
    }
    // In memory, channel c of what the convolution sees lies at prologue.channel(c), image n at n times the input's
    // image stride (NaN between images: a read there poisons the output).
    const size_t plane = static_cast<size_t>(L.H) * L.W;
    const size_t in_image = static_cast<size_t>(L.C) * plane;
    const size_t in_stride = prologue.image_floats ? static_cast<size_t>(prologue.image_floats) : in_image;
    std::vector<float> x_memory((static_cast<size_t>(L.N) - 1) * in_stride + in_image, std::nanf(""));
    for (int n = 0; n < L.N; ++n) {
      for (int ch = 0; ch < L.C; ++ch) {
        const float* from = c.x.f32() + (static_cast<size_t>(n) * L.C + ch) * plane;
        std::copy(from, from + plane, x_memory.begin() + static_cast<std::ptrdiff_t>(
                                                            n * in_stride + prologue.channel(ch, L.C) * plane));
      }
    }
    DeviceBuffer dx(x_memory), dw(c.w.float_values()), db(c.b.float_values());
    DeviceBuffer dres(L.residual ? c.residual.float_values() : std::vector<float>{0.0f});
    kernels::ConvLayer layer = c.layer;
    layer.in = prologue;
    layer.e.bias = db.get();
    const int64_t image = c.expected.numel() / L.N;  // floats of one output image
    if (image_gap > 0) layer.e.out_image_floats = image + image_gap;
    std::vector<DeviceBuffer> packed;
    const auto families = kernels::conv_candidates(layer, dev_, c.w.f32(), c.b.f32(), dw.get(),
                                                   [&](const std::vector<float>& data, const std::string&) {
                                                     packed.emplace_back(data);
                                                     return static_cast<const float*>(packed.back().get());
                                                   });
    for (const kernels::FamilyCandidates& fc : families) {
      if (fc.family != family_) continue;
      if (!fc.rejected.empty()) {
        if (required) FAIL_CHECK(family_->name() << " declined " << where << ": " << fc.rejected);
        return;
      }
      for (const kernels::ConvVariant& v : fc.variants) {
        INFO(v.name << " @ " << where);
        note_check_point(v.name + " @ " + where);
        DeviceBuffer y(static_cast<size_t>(layer.out_extent_floats()));  // poisoned (NaN) until written
        DeviceBuffer scratch(static_cast<size_t>(std::max<int64_t>(1, v.workspace_floats)));  // poisoned too
        kernels::ConvArgs args;
        args.x = dx.get();
        args.y = y.get();
        args.residual = L.residual ? dres.get() : nullptr;
        args.workspace = v.workspace_floats > 0 ? scratch.get() : nullptr;
        v.launch(args, nullptr);
        GPU_CHECK(cudaGetLastError());
        std::vector<float> got = y.download();
        if (image_gap > 0) {
          // The images, each from its place; anything written between them is a store outside the block.
          std::vector<float> dense(static_cast<size_t>(c.expected.numel()));
          int64_t written_in_gaps = 0;
          for (int64_t n = 0; n < L.N; ++n) {
            const auto from = got.begin() + static_cast<std::ptrdiff_t>(n * layer.e.out_image_floats);
            std::copy(from, from + image, dense.begin() + static_cast<std::ptrdiff_t>(n * image));
            if (n + 1 == L.N) continue;
            written_in_gaps += std::count_if(from + image, from + image + image_gap, [](float value) { return !std::isnan(value); });
          }
          CHECK_MESSAGE(written_in_gaps == 0, v.name << " @ " << where << ": " << written_in_gaps << " floats written between images");
          got = std::move(dense);
        }
        const double err = relative_error(got, c.expected.float_values());
        CHECK_MESSAGE(err < kTolerance, v.name << " @ " << where << ": relative error " << err);
        ++checked_;
        ran_.insert(v.name);
      }
    }
  }

  kernels::DeviceCaps dev_;
  const kernels::ConvFamily* family_;
  int checked_ = 0;
  std::set<std::string> ran_;
};

}  // namespace cnnrt::testing
