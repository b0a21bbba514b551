#include "kernels/conv_registry.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace cnnrt::kernels {

#define CNNRT_CONV_FAMILY(fn) const ConvFamily& fn();
#include "kernels/conv_families.inc"
#undef CNNRT_CONV_FAMILY

namespace {

struct FeatureInfo {
  Feature bit;
  const char* name;
  int arch;
};
constexpr FeatureInfo kFeatures[] = {
    {kCpAsync, "cp.async", 80},  {kMmaTf32, "TF32 mma.sync", 80}, {kClusters, "thread-block clusters", 90},
    {kTma, "TMA", 90},           {kWgmma, "wgmma", 90},
};

}  // namespace

int min_arch(unsigned features) {
  int arch = 75;  // the oldest architecture cnnrt builds for
  for (const FeatureInfo& f : kFeatures) {
    if (features & f.bit) arch = std::max(arch, f.arch);
  }
  return arch;
}

std::string feature_names(unsigned features) {
  std::string out;
  for (const FeatureInfo& f : kFeatures) {
    if (!(features & f.bit)) continue;
    if (!out.empty()) out += ", ";
    out += f.name;
  }
  return out.empty() ? "nothing beyond sm_75" : out;
}

std::string device_lacks(const DeviceCaps& dev, const Needs& needs) {
  for (const FeatureInfo& f : kFeatures) {
    if (!(needs.features & f.bit)) continue;
    // wgmma is an arch-specific feature of 9.0 (sm_90a code runs on 9.0 only); the others carry forward.
    const bool has = f.bit == kWgmma ? dev.arch() == 90 && dev.sm90a_code : dev.arch() >= f.arch;
    if (!has) {
      char why[128];
      std::snprintf(why, sizeof why, "needs %s (compute capability %s%d.%d)", f.name, f.bit == kWgmma ? "" : ">= ",
                    f.arch / 10, f.arch % 10);
      return why;
    }
  }
  return "";
}

PackedWeights pack_nothing(const ConvLayer&, const float*, const float*) { return {"onnx", {}, nullptr}; }

const std::vector<const ConvFamily*>& conv_families() {
  static const std::vector<const ConvFamily*> families = {
#define CNNRT_CONV_FAMILY(fn) &fn(),
#include "kernels/conv_families.inc"
#undef CNNRT_CONV_FAMILY
  };
  return families;
}

const ConvFamily* find_conv_family(std::string_view name) {
  for (const ConvFamily* f : conv_families()) {
    if (name == f->name()) return f;
  }
  return nullptr;
}

std::string kernel_set_version() {
  std::vector<std::string> names;
  for (const ConvFamily* f : conv_families()) {
    for (std::string& n : f->variant_names()) names.push_back(std::move(n));
  }
  std::sort(names.begin(), names.end());
  uint64_t hash = 1469598103934665603ull;  // FNV-1a, 64 bits
  for (const std::string& n : names) {
    for (const char c : n + "\n") {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ull;
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

std::vector<FamilyCandidates> conv_candidates(const ConvLayer& layer, const DeviceCaps& dev, const float* filters_host,
                                              const float* bias_host, const float* filters_device,
                                              const UploadFn& upload) {
  std::vector<FamilyCandidates> out;
  std::map<std::string, LayerWeights> packed;  // by layout: one upload per layout
  for (const ConvFamily* family : conv_families()) {
    FamilyCandidates fc;
    fc.family = family;
    fc.rejected = device_lacks(dev, family->needs());
    if (fc.rejected.empty() && !family->reads_prologue(layer.in)) {
      fc.rejected = std::string("does not read its input through ") +
                    (layer.in.shuffle != 1 ? "a channel shuffle"
                     : layer.in.scale  ? "a per-channel affine and activation"
                                       : "an image stride");
    }
    if (fc.rejected.empty() && layer.e.out_image_floats != 0) {
      if (!family->writes_image_stride()) fc.rejected = "writes only dense outputs (no image stride)";
      else if (layer.residual) fc.rejected = "an image stride with a residual";
    }
    if (fc.rejected.empty()) fc.rejected = family->reject(layer, dev);
    if (fc.rejected.empty()) {
      PackedWeights p = family->pack(layer, filters_host, bias_host);
      auto it = packed.find(p.layout);
      if (it == packed.end()) {
        LayerWeights w;
        w.filters = filters_device;
        w.packed = p.device.empty() ? nullptr : upload(p.device, p.layout);
        w.host = std::move(p.host);
        it = packed.emplace(p.layout, std::move(w)).first;
      }
      fc.variants = family->variants(layer, dev, it->second);
      if (fc.variants.empty()) fc.rejected = "no configuration of it fits this layer";
    }
    out.push_back(std::move(fc));
  }
  return out;
}

}  // namespace cnnrt::kernels
