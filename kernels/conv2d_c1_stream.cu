// The single-filter streaming convolution (conv2d_c1_stream.cuh for the algorithm): registry entry "c1stream".
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/conv2d_c1.cuh"
#include "kernels/conv2d_c1_stream.cuh"

namespace cnnrt::kernels {

namespace {

// One instantiation per K and activation; the rows each warp streams are compiled in too, offered at a few
// values (more rows: less vertical halo read twice; fewer: more warps for a small image).
struct StreamEntry {
  int k, rows;
  Act act;
  C1LaunchFn launch;
};
#define C1_STREAM_ENTRY(K, ACT, ROWS) StreamEntry{K, ROWS, ACT, &c1::launch_c1_stream<K, ACT, ROWS>}
#define C1_STREAM_ROWS(K, ACT)                                                                                   \
  C1_STREAM_ENTRY(K, ACT, 2), C1_STREAM_ENTRY(K, ACT, 4), C1_STREAM_ENTRY(K, ACT, 8), C1_STREAM_ENTRY(K, ACT, 16), \
      C1_STREAM_ENTRY(K, ACT, 32), C1_STREAM_ENTRY(K, ACT, 64)
#define C1_STREAM(K) C1_STREAM_ROWS(K, Act::None), C1_STREAM_ROWS(K, Act::Relu)
const StreamEntry kStreamEntries[] = {C1_STREAM(1), C1_STREAM(3), C1_STREAM(5)};
#undef C1_STREAM
#undef C1_STREAM_ROWS
#undef C1_STREAM_ENTRY

std::string entry_name(const StreamEntry& en) {
  return "c1stream_k" + std::to_string(en.k) + "_s1_r" + std::to_string(en.rows) + "_" +
         (en.act == Act::Relu ? "relu" : "none");
}

class C1StreamFamily final : public ConvFamily {
 public:
  // A misaligned input goes to the tiled kernel's shared-memory-filter instantiation, which uses cp.async.
  C1StreamFamily()
      : ConvFamily("c1stream",
                   "one input channel, one filter: each warp streams a 128-column strip down r rows through a register "
                   "window, no shared memory",
                   {}, pack_c1) {}
  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override {
    std::string why = c1_reject(layer);
    if (!why.empty()) return why;
    if (layer.g.F != 1) return "more than one filter";
    if (!c1::c1_stream_eligible(layer.g, layer.e)) {
      return "needs K 1, 3 or 5, stride 1, left pad (K-1)/2, width a multiple of 4, no pooling, no or ReLU activation";
    }
    return "";
  }

  // The row count that makes about 16 warps an SM first; a row count only where the next smaller one
  // leaves more than one chunk of rows.
  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const Act act = compiled_act(layer.e.param_act);
    std::vector<const StreamEntry*> fitting;
    for (const StreamEntry& en : kStreamEntries) {
      if (en.k == g.KH && en.act == act && (en.rows == 2 || en.rows / 2 < g.OH)) fitting.push_back(&en);
    }
    const double strips = std::ceil(g.OW / double(c1::kStreamStrip));
    auto distance = [&](const StreamEntry* en) {
      const double warps = double(g.N) * strips * std::ceil(g.OH / double(en->rows));
      return std::fabs(std::log(warps / (double(std::max(1, dev.sm_count)) * 16.0)));
    };
    std::stable_sort(fitting.begin(), fitting.end(),
                     [&](const StreamEntry* a, const StreamEntry* b) { return distance(a) < distance(b); });
    std::vector<ConvVariant> out;
    for (const StreamEntry* en : fitting) out.push_back({entry_name(*en), "", c1_launch(en->launch, layer, w)});
    return out;
  }

  std::vector<std::string> variant_names() const override { return entry_names(kStreamEntries, entry_name); }
};

}  // namespace

const ConvFamily& conv2d_c1_stream_family() {
  static const C1StreamFamily family;
  return family;
}

}  // namespace cnnrt::kernels
