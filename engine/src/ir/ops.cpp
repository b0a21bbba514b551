// The op table: each family file (ops_views, ops_elementwise, ops_window, ops_matrix, ops_fold, ops_fused,
// ops_resize) adds its ops; this file assembles them once and answers look-ups. Canonical attributes are
// documented per op in the family files and in docs/ops.md.
#include <algorithm>

#include "core/error.hpp"
#include "ir/ops_util.hpp"

namespace cnnrt::ir {

static std::vector<OpInfo> build_table() {
  std::vector<OpInfo> table;
  add_view_ops(table);
  add_elementwise_ops(table);
  add_window_ops(table);
  add_matrix_ops(table);
  add_fold_ops(table);
  add_fused_ops(table);
  add_resize_ops(table);
  std::sort(table.begin(), table.end(), [](const OpInfo& a, const OpInfo& b) { return a.name < b.name; });
  for (size_t i = 1; i < table.size(); ++i) {
    CNNRT_CHECK(table[i - 1].name != table[i].name, ErrorCode::Internal, "op {} is in the table twice",
                table[i].name);
  }
  return table;
}

static const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> ops = build_table();
  return ops;
}

const OpInfo* find_op(std::string_view op_type) {
  const auto& ops = table();
  auto it = std::lower_bound(ops.begin(), ops.end(), op_type,
                             [](const OpInfo& info, std::string_view name) { return info.name < name; });
  return it != ops.end() && it->name == op_type ? &*it : nullptr;
}

std::vector<std::string_view> supported_ops() {
  std::vector<std::string_view> names;
  for (const OpInfo& info : table()) {
    if (!info.internal) names.push_back(info.name);
  }
  return names;
}

}  // namespace cnnrt::ir
