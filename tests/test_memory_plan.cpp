// The arena planner: buffers with overlapping lifetimes never share bytes; disjoint ones may.
#include <doctest/doctest.h>

#include <random>

#include "plan/memory_plan.hpp"

using namespace cnnrt::plan;

namespace {
bool collide(const ArenaPlan& plan, const std::vector<BufferLifetime>& b, size_t i, size_t j) {
  const bool live_together = b[i].first_step <= b[j].last_step && b[j].first_step <= b[i].last_step;
  const bool bytes_together =
      plan.offsets[i] < plan.offsets[j] + b[j].bytes && plan.offsets[j] < plan.offsets[i] + b[i].bytes;
  return live_together && bytes_together;
}
}  // namespace

TEST_CASE("plan_arena reuses the memory of dead tensors in a chain") {
  // A chain a -> b -> c -> d: each tensor dies when the next step has read it.
  std::vector<BufferLifetime> chain = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  const ArenaPlan plan = plan_arena(chain);
  CHECK(plan.arena_bytes == 2 * 1024);  // two live at a time, each rounded up to 256-byte alignment
  CHECK(plan.sum_bytes == 4 * 1024);
  for (size_t i = 0; i < chain.size(); ++i) CHECK(plan.offsets[i] % kArenaAlignment == 0);
}

TEST_CASE("plan_arena never overlaps live buffers (random lifetimes)") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferLifetime> buffers(1 + rng() % 40);
    for (auto& b : buffers) {
      b.bytes = 1 + rng() % 100000;
      b.first_step = static_cast<int>(rng() % 30) - 1;
      b.last_step = b.first_step + static_cast<int>(rng() % 10);
    }
    const ArenaPlan plan = plan_arena(buffers);
    int64_t peak_live = 0;
    for (int step = -1; step < 45; ++step) {
      int64_t live = 0;
      for (const auto& b : buffers) live += (b.first_step <= step && step <= b.last_step) ? b.bytes : 0;
      peak_live = std::max(peak_live, live);
    }
    CHECK(plan.arena_bytes >= peak_live);
    CHECK(plan.arena_bytes <= plan.sum_bytes);
    for (size_t i = 0; i < buffers.size(); ++i) {
      CHECK(plan.offsets[i] + buffers[i].bytes <= plan.arena_bytes);
      for (size_t j = i + 1; j < buffers.size(); ++j) CHECK_FALSE(collide(plan, buffers, i, j));
    }
  }
}
