// Kernel choice for the general convolution: eligibility, the configurations worth timing, weight packing.
#include <algorithm>
#include <cstdio>
#include <string>

#include "kernels/conv2d_general_impl.cuh"
#include "kernels/conv_registry.hpp"

namespace cnnrt::kernels {

namespace general {
extern const Entry kEntriesK1[], kEntriesK3[], kEntriesK5[];
extern const int kEntryCountK1, kEntryCountK3, kEntryCountK5;
}  // namespace general

std::vector<float> pack_general_filters(const float* weights, int F, int C, int KH, int KW) {
  const int f_pad = (F + 3) & ~3;
  const int taps = KH * KW;
  std::vector<float> packed(static_cast<size_t>(C) * taps * f_pad, 0.0f);
  for (int f = 0; f < F; ++f) {
    for (int c = 0; c < C; ++c) {
      for (int t = 0; t < taps; ++t) {
        packed[(static_cast<size_t>(c) * taps + t) * f_pad + f] = weights[(static_cast<size_t>(f) * C + c) * taps + t];
      }
    }
  }
  return packed;
}

PackedWeights pack_general(const ConvLayer& layer, const float* filters, const float*) {
  return {"cwf", pack_general_filters(filters, layer.g.F, layer.g.C, layer.g.KH, layer.g.KW), nullptr};
}

namespace {

struct EntryList {
  const general::Entry* entries;
  int count;
};

EntryList entries_for(int K) {
  if (K == 1) return {general::kEntriesK1, general::kEntryCountK1};
  if (K == 3) return {general::kEntriesK3, general::kEntryCountK3};
  return {general::kEntriesK5, general::kEntryCountK5};
}

constexpr int kSplits[] = {2, 4, 8, 16};

std::string variant_name(const general::Entry& en, int split) {
  char name[96];
  std::snprintf(name, sizeof name, "gen_k%d_s%d_f%d_rb%dx%d_t%dx%d_c%d_%s%s", en.k, en.s, en.ft * en.tx, en.ft, en.wt,
                en.wt * en.tpx, en.th, en.csh, en.act == Act::Relu ? "relu" : "act", en.pool ? "_pool" : "");
  return std::string(name) + (split > 1 ? "_split" + std::to_string(split) : "");
}

class GeneralFamily final : public ConvFamily {
 public:
  bool writes_image_stride() const override { return true; }
  // The _split variants need clusters: variants() checks.
  GeneralFamily()
      : ConvFamily("gen",
                   "multi-channel direct convolution (DAC 2017 Algorithm 2): filters x pixels a block, a register tile a "
                   "thread, channel groups of input and filters double-buffered in shared memory; _split variants divide "
                   "the channels over a thread-block cluster",
                   {}, pack_general) {}

  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override {
    const ConvGeometry& g = layer.g;
    if (g.groups != 1) return "grouped convolution";
    if (g.KH != g.KW || (g.KH != 1 && g.KH != 3 && g.KH != 5)) return "kernel not 1x1, 3x3 or 5x5";
    if (g.stride_h != g.stride_w || g.stride_h > 2) return "stride other than 1 or 2";
    if (g.dil_h != 1 || g.dil_w != 1) return "dilation";
    if (layer.pooled() && (layer.residual || g.stride_h != 1)) return "pooling with residual or stride";
    return "";
  }


  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const Epilogue& e = layer.e;
    const int sm_count = std::max(1, dev.sm_count);
    const bool clusters = device_lacks(dev, {kClusters}).empty();
    const bool pool = layer.pooled();
    const bool relu = e.param_act == ParamAct::Relu;
    const EntryList list = entries_for(g.KH);
    std::vector<std::pair<ConvVariant, double>> scored;  // score: estimated relative time, lower is better
    for (int i = 0; i < list.count; ++i) {
      const general::Entry& en = list.entries[i];
      if (en.s != g.stride_h || en.pool != pool) continue;
      if (en.act == Act::Relu && !relu) continue;
      if (en.split && !clusters) continue;
      const int ftb = en.ft * en.tx, tw = en.wt * en.tpx;
      int tiles;
      double useful;  // fraction of computed outputs that are kept
      if (pool) {
        const int ph = pooled_tile(en.th, e.pool.kh, e.pool.dil_h, e.pool.sh);
        const int pw = pooled_tile(tw, e.pool.kw, e.pool.dil_w, e.pool.sw);
        if (ph < 1 || pw < 1) continue;
        tiles = ((e.pool.PH + ph - 1) / ph) * ((e.pool.PW + pw - 1) / pw);
        useful = 1.0;
      } else {
        const int ty = (g.OH + en.th - 1) / en.th, tx = (g.OW + tw - 1) / tw;
        tiles = tx * ty;
        useful = double(g.OH) * g.OW / (double(ty) * en.th * tx * tw);
      }
      const int fblocks = (g.F + ftb - 1) / ftb;
      useful *= double(g.F) / (double(fblocks) * ftb);
      const double blocks = double(tiles) * g.N * fblocks;
      // Splits worth trying: enough to give every SM a few blocks, never below CSH channels per block.
      std::vector<int> splits = {1};
      if (en.split) {
        splits.clear();
        for (int s : kSplits) {
          if (g.C / s >= en.csh && blocks * s <= 4.0 * sm_count) splits.push_back(s);
        }
      }
      for (int s : splits) {
        const double waves = std::max(1.0, blocks * s / (2.0 * sm_count));
        const double fill = std::min(1.0, blocks * s / (2.0 * sm_count));
        const double score = waves / (useful * fill) * (en.act == Act::Param && relu ? 1.02 : 1.0);
        scored.push_back({{variant_name(en, s), "", bind_launch(en.launch, layer, w.packed, s)}, score});
      }
    }
    return rank_by_score(std::move(scored));
  }

  std::vector<std::string> variant_names() const override {
    std::vector<std::string> names;
    for (int K : {1, 3, 5}) {
      const EntryList list = entries_for(K);
      for (int i = 0; i < list.count; ++i) {
        const general::Entry& en = list.entries[i];
        if (!en.split) names.push_back(variant_name(en, 1));
        for (int s : kSplits) {
          if (en.split) names.push_back(variant_name(en, s));
        }
      }
    }
    return names;
  }
};

}  // namespace

const ConvFamily& conv2d_gen_family() {
  static const GeneralFamily family;
  return family;
}

}  // namespace cnnrt::kernels
