// Which GPUs cnnrt plans for and how, without a GPU: the architecture cap (CNNRT_MAX_SM), code loaded as PTX,
// the messages for a GPU or driver cnnrt cannot use, and the kernel families each architecture gets (every
// convolution geometry keeps a family on Turing).
#ifdef CNNRT_WITH_CUDA
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "cnnrt/cnnrt.hpp"
#include "gpu/device_info.hpp"
#include "kernels/conv_registry.hpp"

using namespace cnnrt;

namespace {

gpu::DeviceInfo h100() {
  gpu::DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.sm_count = 132;
  d.cc_major = 9;
  d.cc_minor = 0;
  d.device_arch = 90;
  d.smem_per_block_optin = 227 * 1024;
  return d;
}

// CNNRT_MAX_SM set to `value` for the scope, restored after.
struct MaxSm {
  explicit MaxSm(const char* value) {
    if (const char* old = std::getenv("CNNRT_MAX_SM")) saved = old;
    setenv("CNNRT_MAX_SM", value, 1);
  }
  ~MaxSm() { saved.empty() ? unsetenv("CNNRT_MAX_SM") : setenv("CNNRT_MAX_SM", saved.c_str(), 1); }
  std::string saved;
};

}  // namespace

TEST_CASE("CNNRT_MAX_SM: two or three digits or major.minor; anything else is a usage error") {
  {
    MaxSm cap("80");
    CHECK(gpu::max_arch_from_environment() == 80);
  }
  {
    MaxSm cap("8.6");
    CHECK(gpu::max_arch_from_environment() == 86);
  }
  {
    MaxSm cap("120");
    CHECK(gpu::max_arch_from_environment() == 120);
  }
  {
    MaxSm cap("");
    CHECK(gpu::max_arch_from_environment() == 0);
  }
  for (const char* bad : {"sm_80", "8", "eighty", "8.x"}) {
    CAPTURE(bad);
    MaxSm cap(bad);
    try {
      gpu::max_arch_from_environment();
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Usage);
      CHECK(std::string(e.what()).find(std::string("CNNRT_MAX_SM='") + bad + "'") != std::string::npos);
    }
  }
}

TEST_CASE("a cap plans an H100 as an older GPU: its compute capability and shared memory, and says so in its name") {
  const gpu::DeviceInfo turing = gpu::capped(h100(), 75);
  CHECK(turing.arch() == 75);
  CHECK(turing.smem_per_block_optin == 64 * 1024);
  CHECK(turing.name == "NVIDIA H100 80GB HBM3 as sm_75");
  CHECK(turing.sm_count == 132);
  CHECK(gpu::capped(h100(), 86).smem_per_block_optin == 99 * 1024);
  CHECK(gpu::capped(h100(), 80).smem_per_block_optin == 163 * 1024);
  // A cap at or above the device's own changes nothing.
  CHECK(gpu::capped(h100(), 90).name == h100().name);
  CHECK(gpu::capped(h100(), 120).arch() == 90);
  // Code loaded from sm_75 PTX (a Blackwell card, CUDA_FORCE_PTX_JIT=1) bounds the plan without a cap.
  const gpu::DeviceInfo jit = gpu::capped(h100(), 0, 75);
  CHECK(jit.arch() == 75);
  CHECK(jit.name == h100().name);
}

TEST_CASE("a GPU before Turing and a driver older than the runtime get messages naming the reason") {
  gpu::DeviceInfo pascal = h100();
  pascal.name = "Tesla P100";
  pascal.cc_major = 6;
  pascal.cc_minor = 0;
  CHECK(gpu::unusable_reason(pascal) == "Tesla P100 has compute capability 6.0; cnnrt runs on 7.5 (Turing) and later");
  CHECK(gpu::unusable_reason(h100()).empty());
  CHECK(gpu::unusable_reason(gpu::capped(h100(), 75)).empty());
  CHECK(!gpu::unusable_reason(gpu::capped(h100(), 70)).empty());
  CHECK(gpu::old_driver_message(12020, 13000) ==
        "the NVIDIA driver supports CUDA 12.2 but cnnrt was built with CUDA 13.0; install a driver for CUDA 13.0 or "
        "later");
  CHECK(gpu::old_driver_message(0, 13000).find("no NVIDIA driver") != std::string::npos);
}

TEST_CASE("each architecture gets the families it can run; every geometry keeps one on Turing") {
  kernels::DeviceCaps turing;
  turing.cc_major = 7;
  turing.cc_minor = 5;
  turing.smem_optin = 64 * 1024;
  kernels::DeviceCaps ampere = turing;
  ampere.cc_major = 8;
  ampere.cc_minor = 0;
  kernels::DeviceCaps hopper = turing;
  hopper.cc_major = 9;
  hopper.cc_minor = 0;
  kernels::DeviceCaps hopper_jit = hopper;
  hopper_jit.sm90a_code = false;
  auto runs = [](const char* family, const kernels::DeviceCaps& dev) {
    const kernels::ConvFamily* f = kernels::find_conv_family(family);
    REQUIRE(f != nullptr);
    return kernels::device_lacks(dev, f->needs()).empty();
  };
  for (const char* family : {"dw", "c1stream", "c1", "small", "gen", "igemm", "dot"}) {
    CAPTURE(family);
    CHECK(runs(family, turing));
  }
  CHECK_FALSE(runs("tc", turing));
  CHECK(runs("tc", ampere));
  CHECK_FALSE(runs("wgr", ampere));
  CHECK(runs("wgr", hopper));
  CHECK_FALSE(runs("wgh", hopper_jit));  // sm_90a code does not load from PTX

  // The geometries of the zoo that only tc took before: igemm runs them on Turing.
  const kernels::ConvFamily* igemm = kernels::find_conv_family("igemm");
  REQUIRE(igemm != nullptr);
  struct Geometry {
    int C, H, W, F, KH, KW, stride, pad, dil, groups;
  };
  for (const Geometry& s : {Geometry{3, 224, 224, 32, 7, 7, 2, 3, 1, 1}, Geometry{3, 227, 227, 64, 11, 11, 4, 2, 1, 1},
                            Geometry{240, 28, 28, 240, 1, 1, 1, 0, 1, 3}, Geometry{1, 1, 16000, 32, 1, 80, 4, 0, 1, 1},
                            Geometry{16, 31, 33, 24, 3, 3, 1, 2, 2, 1}, Geometry{8, 17, 17, 8, 5, 3, 3, 1, 1, 1}}) {
    kernels::ConvLayer L;
    L.g.N = 4;
    L.g.C = s.C;
    L.g.H = s.H;
    L.g.W = s.W;
    L.g.F = s.F;
    L.g.KH = s.KH;
    L.g.KW = s.KW;
    L.g.stride_h = L.g.stride_w = s.stride;
    L.g.pad_top = L.g.pad_bottom = s.KH > 1 ? s.pad : 0;
    L.g.pad_left = L.g.pad_right = s.pad;
    L.g.dil_h = L.g.dil_w = s.dil;
    L.g.groups = s.groups;
    L.g.OH = (L.g.H + 2 * L.g.pad_top - s.dil * (s.KH - 1) - 1) / s.stride + 1;
    L.g.OW = (L.g.W + 2 * L.g.pad_left - s.dil * (s.KW - 1) - 1) / s.stride + 1;
    CAPTURE(s.KH);
    CAPTURE(s.groups);
    CHECK(igemm->reject(L, turing).empty());
  }
}
#endif  // CNNRT_WITH_CUDA
