#include "plan/memory_plan.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace cnnrt::plan {

namespace {
int64_t align_up(int64_t bytes) { return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

bool overlaps(const BufferLifetime& a, const BufferLifetime& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}
}  // namespace

ArenaPlan plan_arena(const std::vector<BufferLifetime>& buffers) {
  ArenaPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by earlier start so the result does not depend on sort stability.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return std::tie(buffers[a].first_step, a) < std::tie(buffers[b].first_step, b);
  });

  struct Placed {
    int64_t begin, end;
    size_t index;
  };
  std::vector<Placed> placed;
  for (size_t i : order) {
    const int64_t size = align_up(std::max<int64_t>(buffers[i].bytes, 1));
    plan.sum_bytes += size;
    // Intervals already placed whose lifetimes overlap this buffer's, by offset.
    std::vector<Placed> conflicts;
    for (const Placed& p : placed) {
      if (overlaps(buffers[p.index], buffers[i])) conflicts.push_back(p);
    }
    std::sort(conflicts.begin(), conflicts.end(), [](const Placed& a, const Placed& b) { return a.begin < b.begin; });
    int64_t offset = 0;
    for (const Placed& c : conflicts) {
      if (offset + size <= c.begin) break;  // fits in the gap before this one
      offset = std::max(offset, c.end);
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back({offset, offset + size, i});
  }
  return plan;
}

}  // namespace cnnrt::plan
