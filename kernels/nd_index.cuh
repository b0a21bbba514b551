// N-D index arithmetic shared by the strided kernels (broadcast arithmetic, strided copy, pad, gather,
// channel affine, reductions, batched GEMM). Internal: included by .cu files only.
//
// A linear index over an N-D extent (row-major, innermost axis last) is split into coordinates, and the
// coordinates give each operand's element offset (sum of coordinate * stride; strides may be 0 or negative).
//
// Two index widths. A launch whose indices and offsets all stay below 2^31 (StridedSpace::fits_index32) uses
// uint32_t, where dividing by a launch-constant extent is a multiply-high and a shift (FixedDivisor<uint32_t>);
// a larger one uses uint64_t and hardware division, several times slower. Launchers instantiate their kernel
// for both widths and pick one per launch.
//
// On the host, StridedSpace<kOperands> describes an iteration in int64 and simplifies it (drops unit axes,
// merges axes that are contiguous for every operand) before it becomes a kernel's NdIndexer; a same-shape
// elementwise op thus becomes rank 1, a per-channel one rank <= 3. A simplified space can also be walked in
// packs of 4 innermost elements (float4 loads and stores) when strides and alignment allow.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/common.cuh"

namespace cnnrt::kernels {

template <class Index>
struct FixedDivisor;

// n / divisor for n < 2^31 and 1 <= divisor < 2^31, computed as (mulhi(n, multiplier) + n) >> shift
// (Granlund and Montgomery, "Division by invariant integers using multiplication", 1994) with
// shift = ceil(log2(divisor)) and multiplier = floor(2^32 * (2^shift - divisor) / divisor) + 1. The sum cannot
// wrap because mulhi(n, multiplier) <= n < 2^31.
template <>
struct FixedDivisor<uint32_t> {
  uint32_t divisor;
  uint32_t multiplier;
  uint32_t shift;

  static FixedDivisor make(uint32_t d) {
    FixedDivisor result{d, 0, 0};
    while ((uint64_t{1} << result.shift) < d) ++result.shift;
    const uint64_t excess = (uint64_t{1} << result.shift) - d;  // < d <= 2^31, so excess * 2^32 fits
    result.multiplier = static_cast<uint32_t>((excess << 32) / d + 1);
    return result;
  }

  __host__ __device__ uint32_t quotient(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t high = __umulhi(n, multiplier);
#else
    const uint32_t high = static_cast<uint32_t>((uint64_t{n} * multiplier) >> 32);
#endif
    return (high + n) >> shift;
  }
};

template <>
struct FixedDivisor<uint64_t> {
  uint64_t divisor;

  static FixedDivisor make(uint64_t d) { return FixedDivisor{d}; }
  __host__ __device__ uint64_t quotient(uint64_t n) const { return n / divisor; }
};

// The kernel-side view of a StridedSpace: extents as divisors and each operand's strides. Host-callable too,
// for tests of the index arithmetic.
template <class Index, int kOperands>
struct NdIndexer {
  using Offset = std::make_signed_t<Index>;  // element offsets; int32 when the launch fits 32-bit indexing

  int rank;                               // 1..kMaxRank
  FixedDivisor<Index> extents[kMaxRank];  // innermost axis at rank - 1
  Offset strides[kOperands][kMaxRank];    // elements

  // Calls visit(axis, coordinate) for each axis of `linear` (< product of the extents), innermost first.
  // Unrolled over constant axes so that whatever the visitor indexes by axis stays in registers.
  template <class Visit>
  __host__ __device__ void for_each_coordinate(Index linear, Visit&& visit) const {
CNNRT_UNROLL
    for (int axis = kMaxRank - 1; axis >= 0; --axis) {
      if (axis >= rank) continue;
      Index coordinate = linear;  // the outermost coordinate is whatever remains: no division
      if (axis > 0) {
        const Index rest = extents[axis].quotient(linear);
        coordinate = linear - rest * extents[axis].divisor;
        linear = rest;
      }
      visit(axis, coordinate);
    }
  }

  // Element offset of each operand at `linear` (< product of the extents).
  __host__ __device__ void offsets_of(Index linear, Offset (&offsets)[kOperands]) const {
CNNRT_UNROLL
    for (int k = 0; k < kOperands; ++k) offsets[k] = 0;
    for_each_coordinate(linear, [&](int axis, Index coordinate) {
CNNRT_UNROLL
      for (int k = 0; k < kOperands; ++k) offsets[k] += static_cast<Offset>(coordinate) * strides[k][axis];
    });
  }

  // The operand's stride along the innermost axis (0: it repeats one value along it).
  __host__ __device__ Offset innermost_stride(int operand) const { return strides[operand][rank - 1]; }
};

// Row-major (contiguous) strides of `extents`, in elements.
inline void contiguous_strides(int rank, const int64_t* extents, int64_t* strides) {
  int64_t stride = 1;
  for (int axis = rank - 1; axis >= 0; --axis) {
    strides[axis] = stride;
    stride *= extents[axis];
  }
}

// Strides of a contiguous operand of `dims` (rank <= out_rank) read from an output of out_rank axes under
// numpy broadcasting (shapes aligned at the last axis): missing leading axes and axes of extent 1 get stride 0.
inline void broadcast_strides(int out_rank, int rank, const int64_t* dims, int64_t* strides) {
  const int missing = out_rank - rank;
  int64_t stride = 1;
  for (int axis = out_rank - 1; axis >= 0; --axis) {
    const int own_axis = axis - missing;
    if (own_axis < 0) {
      strides[axis] = 0;
      continue;
    }
    strides[axis] = dims[own_axis] == 1 ? 0 : stride;
    stride *= dims[own_axis];
  }
}

// Host description of an N-D iteration read (or written) by kOperands operands. By convention of the
// launchers, operand 0 is the output.
template <int kOperands>
struct StridedSpace {
  int rank = 0;
  int64_t extents[kMaxRank] = {};
  int64_t strides[kOperands][kMaxRank] = {};  // elements

  int64_t count() const {
    int64_t product = 1;
    for (int axis = 0; axis < rank; ++axis) product *= extents[axis];
    return product;
  }

  // Drops unit axes and merges each axis into the one before it when every operand steps through the pair
  // as through one axis (outer stride == inner stride * inner extent). Leaves rank >= 1.
  void simplify() {
    int kept = 0;
    for (int axis = 0; axis < rank; ++axis) {
      if (extents[axis] == 1) continue;
      bool merges = kept > 0;
      for (int k = 0; k < kOperands && merges; ++k) {
        merges = strides[k][kept - 1] == strides[k][axis] * extents[axis];
      }
      if (merges) {
        extents[kept - 1] *= extents[axis];
        for (int k = 0; k < kOperands; ++k) strides[k][kept - 1] = strides[k][axis];
      } else {
        extents[kept] = extents[axis];
        for (int k = 0; k < kOperands; ++k) strides[k][kept] = strides[k][axis];
        ++kept;
      }
    }
    if (kept == 0) {  // a single element
      extents[0] = 1;
      for (int k = 0; k < kOperands; ++k) strides[k][0] = 0;
      kept = 1;
    }
    rank = kept;
  }

  // True when the element count and every offset an operand can reach (relative to its base pointer) are
  // below 2^31, so that the uint32_t index path is exact.
  bool fits_index32() const {
    constexpr int64_t kLimit = int64_t{1} << 31;
    if (count() >= kLimit) return false;
    for (int k = 0; k < kOperands; ++k) {
      int64_t span = 0;  // largest |offset| reachable
      for (int axis = 0; axis < rank; ++axis) {
        const int64_t stride = strides[k][axis] < 0 ? -strides[k][axis] : strides[k][axis];
        if (stride >= kLimit) return false;
        span += (extents[axis] - 1) * stride;  // each term < 2^62 and span < 2^31 before it: no overflow
        if (span >= kLimit) return false;
      }
    }
    return true;
  }

  // True when the (simplified) space may be walked in packs of 4 innermost elements: the innermost extent
  // is a multiple of 4, the output (operand 0) has innermost stride 1, and every other operand either
  // repeats one value along the innermost axis (stride 0: one scalar load per pack) or has stride 1 there,
  // outer strides that are multiples of 4 and a 16-byte aligned base (one float4 per pack).
  bool allows_packs_of_4(const void* const (&bases)[kOperands]) const {
    if (extents[rank - 1] % 4 != 0 || strides[0][rank - 1] != 1) return false;
    for (int k = 0; k < kOperands; ++k) {
      if (strides[k][rank - 1] == 0) continue;
      if (strides[k][rank - 1] != 1 || !aligned_16(bases[k])) return false;
      for (int axis = 0; axis + 1 < rank; ++axis) {
        if (strides[k][axis] % 4 != 0) return false;
      }
    }
    return true;
  }

  // The same space with each pack of 4 innermost elements as one element (see allows_packs_of_4).
  StridedSpace packs_of_4() const {
    StridedSpace packs = *this;
    packs.extents[rank - 1] /= 4;
    for (int k = 0; k < kOperands; ++k) packs.strides[k][rank - 1] *= 4;
    return packs;
  }

  template <class Index>
  NdIndexer<Index, kOperands> indexer() const {
    NdIndexer<Index, kOperands> result{};
    result.rank = rank;
    for (int axis = 0; axis < kMaxRank; ++axis) {
      const bool used = axis < rank;
      result.extents[axis] = FixedDivisor<Index>::make(used ? static_cast<Index>(extents[axis]) : 1);
      for (int k = 0; k < kOperands; ++k) {
        result.strides[k][axis] =
            used ? static_cast<typename NdIndexer<Index, kOperands>::Offset>(strides[k][axis]) : 0;
      }
    }
    return result;
  }
};

// kWidth consecutive innermost elements of one operand: the unit of work of the pack-walking kernels.
template <int kWidth>
struct Pack {
  float v[kWidth];
};

// Reads the pack at base + offset; a `repeated` operand (innermost stride 0) holds one value for the pack.
template <int kWidth, class Offset>
__device__ inline Pack<kWidth> load_pack(const float* base, Offset offset, bool repeated) {
  Pack<kWidth> pack;
  if constexpr (kWidth == 4) {
    if (!repeated) {
      const float4 q = *reinterpret_cast<const float4*>(base + offset);
      pack.v[0] = q.x;
      pack.v[1] = q.y;
      pack.v[2] = q.z;
      pack.v[3] = q.w;
      return pack;
    }
  }
  const float value = base[offset];
#pragma unroll
  for (int e = 0; e < kWidth; ++e) pack.v[e] = value;
  return pack;
}

template <int kWidth, class Offset>
__device__ inline void store_pack(float* base, Offset offset, const Pack<kWidth>& pack) {
  if constexpr (kWidth == 4) {
    *reinterpret_cast<float4*>(base + offset) = make_float4(pack.v[0], pack.v[1], pack.v[2], pack.v[3]);
  } else {
    base[offset] = pack.v[0];
  }
}

// Grid-stride loop bounds for a 1-D grid, in the launch's index width.
template <class Index>
__device__ inline Index global_thread_index() {
  return static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x;
}
template <class Index>
__device__ inline Index global_thread_count() {
  return static_cast<Index>(gridDim.x) * blockDim.x;
}

}  // namespace cnnrt::kernels
