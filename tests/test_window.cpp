// The shared sliding-window arithmetic (ir/window.hpp) against hand-computed ONNX and PyTorch cases.
#include <doctest/doctest.h>

#include "core/error.hpp"
#include "ir/window.hpp"

using namespace cnnrt;
using namespace cnnrt::ir;

TEST_CASE("window_output_size: explicit padding, floor and ceil") {
  CHECK(window_output_size(28, 5, 1, 1, 2, 2, false) == 28);  // LeNet conv1, "same"
  CHECK(window_output_size(28, 2, 2, 1, 0, 0, false) == 14);  // 2x2/2 pool
  CHECK(window_output_size(14, 3, 3, 1, 0, 0, false) == 4);   // 3x3/3 pool floors 14/3
  CHECK(window_output_size(14, 3, 3, 1, 0, 0, true) == 5);    // ceil_mode keeps the partial window
  CHECK(window_output_size(4, 3, 2, 1, 0, 0, true) == 2);     // ONNX test_maxpool_2d_ceil
  // ceil_mode never starts a window in the end padding: input 5, pads 1+1, k 2, s 2. Windows would start
  // at -1, 1, 3 and 5; index 5 is end padding, so 3 windows, not 4.
  CHECK(window_output_size(5, 2, 2, 1, 1, 1, true) == 3);
  CHECK(window_output_size(6, 2, 2, 1, 1, 1, true) == 4);
  CHECK(window_output_size(7, 3, 1, 2, 0, 0, false) == 3);    // dilation 2: effective kernel 5
  CHECK(window_output_size(2, 5, 1, 1, 0, 0, false) <= 0);
}

TEST_CASE("resolve_window: auto_pad SAME_UPPER / SAME_LOWER / VALID") {
  Attributes attrs;
  attrs.set("auto_pad", std::string("SAME_UPPER"));
  attrs.set("strides", std::vector<int64_t>{2, 2});
  auto axes = resolve_window(attrs, {7, 8}, {3, 3}, false);
  CHECK(axes[0].output == 4);
  CHECK(axes[0].pad_begin == 1);
  CHECK(axes[0].pad_end == 1);
  CHECK(axes[1].output == 4);  // total pad 1: SAME_UPPER puts it at the end
  CHECK(axes[1].pad_begin == 0);
  CHECK(axes[1].pad_end == 1);
  attrs.set("auto_pad", std::string("SAME_LOWER"));
  axes = resolve_window(attrs, {7, 8}, {3, 3}, false);
  CHECK(axes[1].pad_begin == 1);
  CHECK(axes[1].pad_end == 0);
  attrs.set("auto_pad", std::string("VALID"));
  axes = resolve_window(attrs, {7, 8}, {3, 3}, false);
  CHECK(axes[0].output == 3);
  CHECK(axes[1].output == 3);
}

TEST_CASE("resolve_window: bad attributes are InvalidModel errors that say what is wrong") {
  Attributes attrs;
  attrs.set("strides", std::vector<int64_t>{0, 1});
  CHECK_THROWS_WITH_AS(resolve_window(attrs, {8, 8}, {3, 3}, false), doctest::Contains("stride 0"), Error);
  attrs.set("strides", std::vector<int64_t>{1});
  CHECK_THROWS_WITH_AS(resolve_window(attrs, {8, 8}, {3, 3}, false), doctest::Contains("strides has 1"), Error);
  Attributes empty;
  CHECK_THROWS_WITH_AS(resolve_window(empty, {2, 2}, {5, 5}, false), doctest::Contains("does not fit"), Error);
}

TEST_CASE("broadcast_shapes follows numpy") {
  CHECK(broadcast_shapes({2, 3, 4}, {4}) == Shape{2, 3, 4});
  CHECK(broadcast_shapes({1, 8, 1, 1}, {5, 8, 7, 7}) == Shape{5, 8, 7, 7});
  CHECK(broadcast_shapes({}, {3}) == Shape{3});
  CHECK_THROWS_WITH_AS(broadcast_shapes({2, 3}, {4}), doctest::Contains("do not broadcast"), Error);
}
