// Host checks of the index arithmetic the kernels share (kernels/nd_index.cuh, kernels/sliding_window.cuh):
// the multiply-high division against '/', StridedSpace simplification against a naive walk, the float4
// eligibility rules, and the O(1) tap ranges against a scan of every tap. Compiled by nvcc because the
// headers hold device code next to the host-callable parts; nothing here launches a kernel.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/nd_index.cuh"
#include "kernels/sliding_window.cuh"

namespace cnnrt::kernels {
namespace {

TEST_CASE("FixedDivisor<uint32_t> divides like '/' below 2^31") {
  std::mt19937 rng(7);
  std::vector<uint32_t> divisors = {1,
                                    2,
                                    3,
                                    5,
                                    7,
                                    31,
                                    32,
                                    33,
                                    49,
                                    64,
                                    1000,
                                    3136,
                                    12544,
                                    65535,
                                    65536,
                                    65537,
                                    (1u << 30) - 1,
                                    1u << 30,
                                    (1u << 30) + 1,
                                    (1u << 31) - 1};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % ((1u << 31) - 1));
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % 5000);
  for (uint32_t d : divisors) {
    const FixedDivisor<uint32_t> divisor = FixedDivisor<uint32_t>::make(d);
    std::vector<uint32_t> dividends = {0, 1, d - 1, d, d + 1, 2 * d - 1, (1u << 31) - 1, (1u << 31) - 2};
    for (uint32_t k = 1; k < 64; ++k) {
      const uint64_t multiple = uint64_t{d} * (rng() % 4096 + k);
      if (multiple < (1u << 31)) {
        dividends.push_back(static_cast<uint32_t>(multiple));
        dividends.push_back(static_cast<uint32_t>(multiple - 1));
      }
      dividends.push_back(rng() % (1u << 31));
    }
    for (uint32_t n : dividends) {
      if (n >= (1u << 31)) continue;
      INFO("n = " << n << ", d = " << d);
      REQUIRE(divisor.quotient(n) == n / d);
    }
  }
}

// Offsets of every operand for every linear index, by counting through the space as an odometer.
template <int kOperands>
std::vector<std::vector<int64_t>> naive_offsets(const StridedSpace<kOperands>& space) {
  std::vector<std::vector<int64_t>> result(kOperands);
  std::vector<int64_t> index(space.rank, 0);
  for (int64_t linear = 0; linear < space.count(); ++linear) {
    for (int k = 0; k < kOperands; ++k) {
      int64_t offset = 0;
      for (int axis = 0; axis < space.rank; ++axis) offset += index[axis] * space.strides[k][axis];
      result[k].push_back(offset);
    }
    for (int axis = space.rank - 1; axis >= 0; --axis) {
      if (++index[axis] < space.extents[axis]) break;
      index[axis] = 0;
    }
  }
  return result;
}

template <class Index, int kOperands>
void check_indexer_matches(const StridedSpace<kOperands>& original) {
  StridedSpace<kOperands> simplified = original;
  simplified.simplify();
  REQUIRE(simplified.count() == original.count());
  const std::vector<std::vector<int64_t>> want = naive_offsets(original);
  const NdIndexer<Index, kOperands> indexer = simplified.template indexer<Index>();
  for (int64_t linear = 0; linear < original.count(); ++linear) {
    typename NdIndexer<Index, kOperands>::Offset offsets[kOperands];
    indexer.offsets_of(static_cast<Index>(linear), offsets);
    for (int k = 0; k < kOperands; ++k) REQUIRE(offsets[k] == want[k][linear]);
  }
}

TEST_CASE("StridedSpace simplification keeps every offset") {
  // out, a, b of a broadcast [2, 3, 4, 5] + [3, 1, 5] + [1, 1, 4, 1], then a transposed and a sliced copy.
  StridedSpace<3> broadcast;
  broadcast.rank = 4;
  const int64_t extents[4] = {2, 3, 4, 5};
  const int64_t out[4] = {60, 20, 5, 1}, a[4] = {0, 5, 0, 1}, b[4] = {0, 0, 1, 0};
  for (int axis = 0; axis < 4; ++axis) {
    broadcast.extents[axis] = extents[axis];
    broadcast.strides[0][axis] = out[axis];
    broadcast.strides[1][axis] = a[axis];
    broadcast.strides[2][axis] = b[axis];
  }
  check_indexer_matches<uint32_t>(broadcast);
  check_indexer_matches<uint64_t>(broadcast);

  StridedSpace<2> copy;  // out contiguous [3, 1, 4, 2]; in: negative and permuted strides
  copy.rank = 4;
  const int64_t copy_extents[4] = {3, 1, 4, 2};
  const int64_t copy_out[4] = {8, 8, 2, 1}, copy_in[4] = {-1, 7, 12, -48};
  for (int axis = 0; axis < 4; ++axis) {
    copy.extents[axis] = copy_extents[axis];
    copy.strides[0][axis] = copy_out[axis];
    copy.strides[1][axis] = copy_in[axis];
  }
  check_indexer_matches<uint32_t>(copy);
  check_indexer_matches<uint64_t>(copy);

  StridedSpace<2> same_shape;  // contiguous on both sides: merges to one axis
  same_shape.rank = 3;
  const int64_t same_extents[3] = {4, 6, 8};
  for (int axis = 0; axis < 3; ++axis) same_shape.extents[axis] = same_extents[axis];
  contiguous_strides(3, same_shape.extents, same_shape.strides[0]);
  contiguous_strides(3, same_shape.extents, same_shape.strides[1]);
  StridedSpace<2> merged = same_shape;
  merged.simplify();
  CHECK(merged.rank == 1);
  CHECK(merged.extents[0] == 192);
  check_indexer_matches<uint32_t>(same_shape);

  StridedSpace<1> single;  // rank 0: one element
  single.simplify();
  CHECK(single.rank == 1);
  CHECK(single.count() == 1);
}

TEST_CASE("float4 packs only where strides and alignment allow") {
  alignas(16) static float buffer[64];
  StridedSpace<2> space;  // [2, 8] contiguous out, in [2, 8] with row stride 12
  space.rank = 2;
  space.extents[0] = 2;
  space.extents[1] = 8;
  space.strides[0][0] = 8;
  space.strides[0][1] = 1;
  space.strides[1][0] = 12;
  space.strides[1][1] = 1;
  CHECK(space.allows_packs_of_4({buffer, buffer + 16}));
  CHECK_FALSE(space.allows_packs_of_4({buffer, buffer + 17}));  // misaligned input
  space.strides[1][0] = 13;
  CHECK_FALSE(space.allows_packs_of_4({buffer, buffer + 16}));  // rows of the input start misaligned
  space.strides[1][0] = 1;
  space.strides[1][1] = 0;  // the input repeats along the innermost axis: scalar loads, any alignment
  CHECK(space.allows_packs_of_4({buffer, buffer + 17}));
  space.extents[1] = 6;
  CHECK_FALSE(space.allows_packs_of_4({buffer, buffer + 16}));  // 6 is not a multiple of 4
  space.extents[1] = 8;
  const StridedSpace<2> packs = space.packs_of_4();
  CHECK(packs.extents[1] == 2);
  CHECK(packs.strides[0][1] == 4);
  CHECK(packs.strides[1][1] == 0);
}

TEST_CASE("32-bit indexing only when every offset fits") {
  StridedSpace<1> space;
  space.rank = 2;
  space.extents[0] = 1 << 16;
  space.extents[1] = 1 << 14;
  space.strides[0][0] = 1 << 14;
  space.strides[0][1] = 1;
  CHECK(space.fits_index32());  // 2^30 elements
  space.extents[0] = 1 << 17;
  space.strides[0][0] = 1 << 14;
  CHECK_FALSE(space.fits_index32());  // 2^31 elements
  space.extents[0] = 2;
  space.strides[0][0] = -(int64_t{1} << 31);
  CHECK_FALSE(space.fits_index32());  // few elements, far apart
}

TEST_CASE("tap ranges match a scan of every tap") {
  for (int64_t input : {1, 2, 5, 8}) {
    for (int64_t kernel : {1, 2, 3, 5}) {
      for (int64_t stride : {1, 2, 3}) {
        for (int64_t dilation : {1, 2, 3}) {
          for (int64_t pad_begin : {0, 1, 2, 4}) {
            for (int64_t pad_end : {0, 1, 3}) {
              SlidingAxis axis;
              axis.input = input;
              axis.kernel = kernel;
              axis.stride = stride;
              axis.dilation = dilation;
              axis.pad_begin = pad_begin;
              axis.pad_end = pad_end;
              for (int64_t o = 0; o < 8; ++o) {
                int64_t inside = 0, padded = 0, first_inside = -1;
                for (int64_t t = 0; t < kernel; ++t) {
                  const int64_t position = tap_position(axis, o, t);
                  if (position >= 0 && position < input) {
                    if (first_inside < 0) first_inside = t;
                    ++inside;
                  }
                  if (position >= -pad_begin && position < input + pad_end) ++padded;
                }
                const TapRange range = taps_inside(axis, o);
                INFO("input " << input << " kernel " << kernel << " stride " << stride << " dilation " << dilation
                              << " pads " << pad_begin << "," << pad_end << " output " << o);
                REQUIRE(range.count() == inside);
                if (inside > 0) REQUIRE(range.first == first_inside);
                REQUIRE(taps_inside_padding(axis, o).count() == padded);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("numpy broadcast strides") {
  const int64_t dims[2] = {3, 1};
  int64_t strides[4];
  broadcast_strides(4, 2, dims, strides);
  CHECK(strides[0] == 0);
  CHECK(strides[1] == 0);
  CHECK(strides[2] == 1);
  CHECK(strides[3] == 0);
}

}  // namespace
}  // namespace cnnrt::kernels
