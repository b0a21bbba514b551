// Activation memory plan: one arena, offsets from tensor lifetimes.
//
// Each buffer lives from the step that writes it to the last step that reads it. Two buffers may share
// bytes when their lifetimes do not overlap. Offsets are assigned greedily, largest buffer first, at the
// lowest aligned offset that does not collide with any already placed buffer whose lifetime overlaps
// (the classic offset-calculation heuristic for DNN arenas; within a few percent of optimal on CNNs).
#pragma once

#include <cstdint>
#include <vector>

namespace cnnrt::plan {

constexpr int64_t kArenaAlignment = 256;  // bytes: every buffer starts 256-byte aligned (float4 and TMA safe)

struct BufferLifetime {
  int64_t bytes = 0;
  int first_step = 0;  // the step that writes it (-1: written before step 0, e.g. a copied-in input)
  int last_step = 0;   // the last step that reads it (INT32_MAX: read after the run, e.g. an output)
};

struct ArenaPlan {
  std::vector<int64_t> offsets;  // one per buffer, bytes from the arena base
  int64_t arena_bytes = 0;       // total size
  int64_t sum_bytes = 0;         // what one buffer per tensor would take (aligned), for comparison
};

ArenaPlan plan_arena(const std::vector<BufferLifetime>& buffers);

}  // namespace cnnrt::plan
