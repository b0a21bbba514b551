// fuse_pool: a pooling node that is the only reader of a Conv's output, or of a FusedConv's that neither
// pools nor has a residual (the kernels never combine the two), joins the convolution's epilogue:
//   MaxPool (any window, stride, padding, dilation, ceil_mode), AveragePool (any count_include_pad),
//   GlobalAveragePool / GlobalMaxPool as an AveragePool / MaxPool whose window is the whole map.
// The pooling runs after the activation, as it did in the graph. Except a global average pool that starts a
// classifier's dense head (match_dense_chain: views, then Gemms with constant weights) at a batch up to
// kDenseHeadMaxBatch, where the target has a dense head kernel: the GPU planner runs the pool and the Gemms as
// one launch where that measures faster (a conv with the pool fused runs as the conv and a pooling launch in
// most kernel families anyway).
#include <fmt/format.h>

#include "ir/fused.hpp"
#include "ir/ops.hpp"
#include "passes/chain_match.hpp"
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace cnnrt::passes {
namespace {

namespace fused = ir::fused;

bool takes_pool(const ir::Node& conv) {
  if (conv.op == "Conv") return conv.domain.empty();
  return conv.op == fused::kFusedConv && !conv.has_input(fused::kResidualInput) && !fused::has_pool(conv);
}

// The pooling node as a canonical MaxPool/AveragePool over a map of shape `in` ([N, C, spatial...]).
std::optional<ir::Node> as_window_pool(const ir::Node& pool, const ir::Shape& in) {
  if (!pool.domain.empty()) return std::nullopt;
  if (pool.op == "MaxPool" || pool.op == "AveragePool") return pool;
  if (pool.op != "GlobalAveragePool" && pool.op != "GlobalMaxPool") return std::nullopt;
  const size_t spatial = in.size() - 2;
  ir::Node whole = pool;
  whole.op = pool.op == "GlobalMaxPool" ? "MaxPool" : "AveragePool";
  whole.attrs = {};
  whole.attrs.set("kernel_shape", std::vector<int64_t>(in.begin() + 2, in.end()));
  whole.attrs.set("strides", std::vector<int64_t>(spatial, 1));
  whole.attrs.set("pads", std::vector<int64_t>(2 * spatial, 0));
  whole.attrs.set("ceil_mode", int64_t{0});
  if (whole.op == "MaxPool") whole.attrs.set("dilations", std::vector<int64_t>(spatial, 1));
  else whole.attrs.set("count_include_pad", int64_t{0});
  return whole;
}

// Whether `pool` starts a classifier's dense head that `target` runs as one launch (match_dense_chain, the
// planner's own test) at this batch.
bool starts_dense_head(const ir::Graph& graph, const Target& target, int pool_index, const ir::Shape& in) {
  return target.dense_head_kernel && in[0] <= kDenseHeadMaxBatch && match_dense_chain(graph, pool_index).has_value();
}

bool fuse_one(ir::Graph& graph, const Target& target, const std::vector<std::vector<int>>& readers, int pool_index,
              std::vector<std::string>& log) {
  const ir::Node& pool = graph.nodes[pool_index];
  const int x = pool.input(0);
  const ir::Node* conv = producer_of(graph, x);
  if (conv == nullptr || !takes_pool(*conv) || sole_reader(graph, readers, x) != pool_index) return false;
  const ir::Shape& in = graph.shape_of(x);
  if (in.size() != 3 && in.size() != 4) return false;
  if (starts_dense_head(graph, target, pool_index, in)) return false;
  const std::optional<ir::Node> window = as_window_pool(pool, in);
  if (!window || window->outputs.size() != 1) return false;
  ir::Node result = *conv;
  fused::make_fused(result, fused::kFusedConv);
  fused::set_pool(result, *window);
  result.outputs = pool.outputs;
  const std::string line = fmt::format("{} + {} -> FusedConv", log_name(*conv), log_name(pool));
  replace_nodes(graph, {graph.values[x].producer, pool_index}, std::move(result));
  log.push_back(line);
  return true;
}

}  // namespace

void fuse_pool(ir::Graph& graph, const Target& target, std::vector<std::string>& log) {
  rewrite_until_done(graph, [&](ir::Graph& g, const std::vector<std::vector<int>>& readers, int n) {
    return fuse_one(g, target, readers, n, log);
  });
}

}  // namespace cnnrt::passes
