// The model zoo on the GPU backend (the twin of tests/test_zoo.cpp): every model of models/zoo/ planned with
// the default options (kernels chosen by measurement) against PyTorch's answer, as `cnnrt run --device gpu`.
#include <doctest/doctest.h>

#include "gpu_test_util.hpp"
#include "zoo.hpp"

using namespace cnnrt;

#define CNNRT_ZOO_GPU_CASE(name)                                  \
  TEST_CASE("zoo: " name " on the GPU matches PyTorch") {         \
    testing::note_check_point("zoo model " name " on the GPU");   \
    testing::check_zoo_model(name, Device::Gpu);                  \
  }

CNNRT_ZOO_MODELS(CNNRT_ZOO_GPU_CASE)
