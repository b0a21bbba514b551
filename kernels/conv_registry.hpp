// The convolution kernel families: one list that the planner, the kernel lab, the GPU tests, --force-kernel,
// `cnnrt plan --explain` and the tuning cache all iterate (docs/kernels.md names every family and defines
// the tokens of a variant's name).
//
// A family is one algorithm with its instantiated configurations ("variants"). Its registry entry says what
// the device must offer (Needs), whether it runs a layer (or why not), how it packs the layer's weights, and
// which variants it offers for the layer, each a name and a launch. Adding a family is one new file that
// defines it and one line in conv_families.inc.
//
// The sequence every user runs is conv_candidates(): for each family in registry order, check the device and
// the layer, pack the weights (once per layout: families that read the same layout share one upload), and
// collect the variants. Registry order is the heuristic order (the choice when tuning is off); the planner
// measures every candidate against the reference (conv2d_direct.cuh) and keeps the fastest.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/common.cuh"
#include "kernels/layer.hpp"

namespace cnnrt::kernels {

// What a device offers the families (read from the CUDA device, possibly capped to an older architecture).
struct DeviceCaps {
  int cc_major = 0, cc_minor = 0;  // compute capability
  int sm_count = 1;
  int smem_optin = 48 * 1024;      // bytes of shared memory a block may use after opting in
  bool sm90a_code = true;          // whether the sm_90a kernels have machine code for the device
  int arch() const { return cc_major * 10 + cc_minor; }
};

// Hardware features a family's kernels use, each available from a compute capability on.
enum Feature : unsigned {
  kCpAsync = 1u << 0,   // cp.async copies to shared memory (8.0; cp_async.cuh runs them as plain copies on
                        // 7.5, so a family that needs nothing else of 8.0 does not declare it)
  kMmaTf32 = 1u << 1,   // mma.sync with TF32 operands (8.0)
  kClusters = 1u << 2,  // thread-block clusters and distributed shared memory (9.0)
  kTma = 1u << 3,       // the tensor memory accelerator, cp.async.bulk.tensor (9.0)
  kWgmma = 1u << 4,     // warpgroup MMA, wgmma.mma_async (9.0a: arch-specific, 9.0 exactly)
};

struct Needs {
  unsigned features = 0;  // a set of Feature bits
};

// The lowest compute capability (major * 10 + minor) that has every feature in `features`.
int min_arch(unsigned features);
// The names of the feature bits in `features` ("cp.async, clusters").
std::string feature_names(unsigned features);
// "" when `dev` offers what `needs` asks; else why not ("needs thread-block clusters (compute capability 9.0)").
std::string device_lacks(const DeviceCaps& dev, const Needs& needs);

// The buffers one launch reads and writes (device pointers).
struct ConvArgs {
  const float* x = nullptr;         // [N, C, H, W]
  float* y = nullptr;               // [N, F, OH, OW], or [N, F, PH, PW] when the epilogue pools
  const float* residual = nullptr;  // [N, F, OH, OW] when the layer adds one, else null
  float* workspace = nullptr;       // ConvVariant::workspace_floats of scratch, when the variant needs it
};

using ConvLaunch = std::function<void(const ConvArgs& args, cudaStream_t stream)>;

struct ConvVariant {
  std::string name;    // unique in the registry, stable (the tuning cache and --force-kernel use it)
  std::string config;  // what the variant does on this layer beyond its name, for plans ("" if nothing)
  ConvLaunch launch;
  int64_t workspace_floats = 0;  // device scratch each launch needs (ConvArgs::workspace), 0: none
};

// A family's weights for one layer, packed on the host. `device` is uploaded once (16-byte aligned) and
// reaches variants() as a device pointer; `host` is data the launches keep on the host (a parameter block).
// Families that name the same `layout` read the same bytes, and share one upload per layer.
struct PackedWeights {
  std::string layout;
  std::vector<float> device;
  std::shared_ptr<const void> host;
};

// A layer's weights where the variants read them.
struct LayerWeights {
  const float* filters = nullptr;     // device, as ONNX stores them: [F][C / groups][KH][KW]
  const float* packed = nullptr;      // device copy of PackedWeights::device (null when empty)
  std::shared_ptr<const void> host;   // PackedWeights::host
};

// Packs a layer's weights in a family's layout: `filters` [F][C / groups][KH][KW] and `bias` [F] (or null), on the
// host. Families that read the same layout share one PackFn.
using PackFn = PackedWeights (*)(const ConvLayer& layer, const float* filters, const float* bias);

// The weights as ONNX stores them: nothing to pack (the variants read LayerWeights::filters).
PackedWeights pack_nothing(const ConvLayer& layer, const float* filters, const float* bias);

class ConvFamily {
 public:
  // `name`: the first token of every variant name ("c1", "wgh"); `summary`: the algorithm in one line.
  ConvFamily(const char* name, const char* summary, Needs needs, PackFn packer)
      : name_(name), summary_(summary), needs_(needs), pack_(packer) {}
  virtual ~ConvFamily() = default;
  const char* name() const { return name_; }
  const char* summary() const { return summary_; }
  const Needs& needs() const { return needs_; }
  // "" when the family runs `layer` on a device that has its Needs; else the first reason it does not.
  virtual std::string reject(const ConvLayer& layer, const DeviceCaps& dev) const = 0;
  // Whether its kernels read their input through `prologue` (ConvLayer::in); a family that does not is never
  // offered a layer with one.
  virtual bool reads_prologue(const InputPrologue& prologue) const { return !prologue.any(); }
  // Whether its kernels write an output with an image stride (Epilogue::out_image_floats): a block of a channel
  // Concat's output at batch > 1. A family that does not is never offered such a layer.
  virtual bool writes_image_stride() const { return false; }
  // The weights in the family's layout (PackFn).
  PackedWeights pack(const ConvLayer& layer, const float* filters, const float* bias) const {
    return pack_(layer, filters, bias);
  }
  // The variants for `layer` (which the family accepts), best guess first.
  virtual std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev,
                                            const LayerWeights& weights) const = 0;
  // Every name variants() can return, for any layer ("*" in a name: a token whose value variants() chooses
  // per layer).
  virtual std::vector<std::string> variant_names() const = 0;

 private:
  const char* name_;
  const char* summary_;
  Needs needs_;
  PackFn pack_;
};

// A launch of one instantiation whose entry point is `fn(x, y, weights, g, e, extra..., stream)`, for `layer`
// (copied into the launch), with the residual bound per launch.
template <class Fn, class... Extra>
ConvLaunch bind_launch(Fn fn, const ConvLayer& layer, const float* weights, Extra... extra) {
  return [fn, layer, weights, extra...](const ConvArgs& a, cudaStream_t stream) {
    Epilogue e = layer.e;
    e.residual = a.residual;
    fn(a.x, a.y, weights, layer.g, e, extra..., stream);
  };
}

// The names of a table of instantiations, `name(entry)` each.
template <class Entry, size_t N, class NameFn>
std::vector<std::string> entry_names(const Entry (&entries)[N], NameFn name) {
  std::vector<std::string> out;
  for (const Entry& en : entries) out.push_back(name(en));
  return out;
}

// The registry, in heuristic order.
const std::vector<const ConvFamily*>& conv_families();
// The family called `name`, or null.
const ConvFamily* find_conv_family(std::string_view name);
// A fingerprint of every variant name of every family (hex): the kernel-set version of the tuning cache,
// so that a new, renamed or removed variant invalidates cached choices without anyone bumping a number.
std::string kernel_set_version();

// Uploads `data` (a packed layout) to the device and keeps it alive as long as the variants may run;
// returns the device pointer.
using UploadFn = std::function<const float*(const std::vector<float>& data, const std::string& layout)>;

struct FamilyCandidates {
  const ConvFamily* family = nullptr;
  std::string rejected;               // why the family does not run the layer ("" when it does)
  std::vector<ConvVariant> variants;  // empty when rejected
};

// Every family's answer for `layer` on `dev`, in registry order: the sequence the planner, the lab and the
// tests share. `filters_host`/`bias_host` as ConvFamily::pack takes them; `filters_device` the same filters
// uploaded.
std::vector<FamilyCandidates> conv_candidates(const ConvLayer& layer, const DeviceCaps& dev, const float* filters_host,
                                              const float* bias_host, const float* filters_device,
                                              const UploadFn& upload);

}  // namespace cnnrt::kernels
