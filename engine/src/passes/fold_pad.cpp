// fold_pad: a constant Pad of zeros on the spatial axes only, read by nothing but
//   a Conv                                          -> the Conv pads that much more (its padding is zeros)
//   an AveragePool that pads nothing itself, or counts its padding (count_include_pad = 1), without ceil_mode
//                                                   -> the AveragePool pads that much more and counts it
// PyTorch writes such a Pad before AvgPool2d(padding=p) (count_include_pad, the default), TensorFlow before
// "same" convolutions; on the GPU each is a whole memory pass of its own. A MaxPool pads with -infinity, so a
// Pad of zeros before one stays.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace cnnrt::passes {
namespace {

// The spatial pads (begins then ends, as a window op writes them) of a canonical Pad that adds zeros around
// the spatial axes of an [N, C, spatial...] tensor and nothing else; nullopt for any other Pad.
std::optional<std::vector<int64_t>> spatial_zero_pads(const ir::Graph& graph, const ir::Node& pad) {
  if (pad.op != "Pad" || !pad.domain.empty() || pad.inputs.size() != 1 || pad.outputs.size() != 1) return std::nullopt;
  if (pad.attrs.get_string("mode", "constant") != "constant" || pad.attrs.get_float("value", 0.0f) != 0.0f) {
    return std::nullopt;
  }
  const std::optional<ir::Shape>& shape = graph.values[pad.input(0)].shape;
  if (!shape || shape->size() < 3) return std::nullopt;
  const size_t rank = shape->size();
  const std::vector<int64_t> pads = pad.attrs.get_ints("pads", {});
  if (pads.size() != 2 * rank) return std::nullopt;
  if (pads[0] != 0 || pads[1] != 0 || pads[rank] != 0 || pads[rank + 1] != 0) return std::nullopt;
  std::vector<int64_t> spatial;
  for (size_t axis = 2; axis < rank; ++axis) spatial.push_back(pads[axis]);
  for (size_t axis = 2; axis < rank; ++axis) spatial.push_back(pads[rank + axis]);
  return spatial;
}

bool fold_one(ir::Graph& graph, const std::vector<std::vector<int>>& readers, int pad_index,
              std::vector<std::string>& log) {
  const ir::Node& pad = graph.nodes[pad_index];
  const std::optional<std::vector<int64_t>> added = spatial_zero_pads(graph, pad);
  if (!added) return false;
  const int reader_index = sole_reader(graph, readers, pad.outputs[0]);
  if (reader_index < 0) return false;
  const ir::Node& reader = graph.nodes[reader_index];
  if (!reader.domain.empty() || reader.input(0) != pad.outputs[0]) return false;
  if (reader.op == "AveragePool") {
    if (reader.attrs.get_int("ceil_mode", 0) != 0) return false;
    const std::vector<int64_t> own = reader.attrs.get_ints("pads", {});
    const bool pads_itself = std::any_of(own.begin(), own.end(), [](int64_t p) { return p != 0; });
    if (pads_itself && reader.attrs.get_int("count_include_pad", 0) == 0) return false;
  } else if (reader.op != "Conv") {
    return false;
  }
  ir::Node result = reader;
  std::vector<int64_t> pads = reader.attrs.get_ints("pads", std::vector<int64_t>(added->size(), 0));
  if (pads.size() != added->size()) return false;
  for (size_t i = 0; i < pads.size(); ++i) pads[i] += (*added)[i];
  result.attrs.set("pads", pads);
  if (reader.op == "AveragePool") result.attrs.set("count_include_pad", int64_t{1});
  result.inputs[0] = pad.input(0);
  log.push_back(fmt::format("{} + {} -> {} padding {}", log_name(pad), log_name(reader), reader.op,
                            fmt::join(pads, ",")));
  replace_nodes(graph, {pad_index, reader_index}, std::move(result));
  return true;
}

}  // namespace

void fold_pad(ir::Graph& graph, const Target&, std::vector<std::string>& log) {
  rewrite_until_done(graph, [&](ir::Graph& g, const std::vector<std::vector<int>>& readers, int n) {
    return fold_one(g, readers, n, log);
  });
}

}  // namespace cnnrt::passes
