// A DenseNet bottleneck layer in one launch: see dense_layer.cuh.
#include "kernels/dense_layer.cuh"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"
#include "kernels/smem_optin.cuh"

namespace cnnrt::kernels {

namespace dense_layer {

constexpr int kThreads = kDenseLayerThreads;

constexpr int round4(int v) { return (v + 3) / 4 * 4; }

// Shared-memory offsets (floats, each a multiple of 4) and the 3x3 phase's split, for one (desc, tile).
struct Layout {
  int Mp = 4, Fp = 4;  // M and F rounded up to 4
  int G = 1;           // shares of the hidden channels in the 3x3 phase
  int w1 = 0, w2 = 0, aff = 0, b1 = 0, xs = 0, hs = 0, red = 0, floats = 0;
};

constexpr int halo_pixels(int th, int tw) { return round4((th + 2) * (tw + 2)); }

Layout layout(const DenseLayerDesc& d, int th, int tw) {
  Layout L;
  L.Mp = round4(d.M);
  L.Fp = round4(d.F);
  const int items = L.Fp / 4 * th * tw;  // 4 outputs x 1 pixel each
  L.G = std::max(1, std::min(kThreads / items, d.M));
  const int pp = halo_pixels(th, tw);
  L.w1 = 0;
  L.w2 = L.w1 + d.C * L.Mp;
  L.aff = L.w2 + d.M * 9 * L.Fp;
  L.b1 = L.aff + (d.scale ? round4(2 * d.C) : 0);
  L.xs = L.b1 + L.Mp;
  L.hs = L.xs + d.C * pp;
  L.red = L.hs + L.Mp * pp;
  L.floats = L.red + (L.G > 1 ? L.G * items * 4 : 0);
  return L;
}

size_t smem_bytes(const Layout& L) { return size_t(L.floats) * sizeof(float); }

template <int TH, int TW>
__global__ void __launch_bounds__(kThreads)
    dense_layer_kernel(const float* __restrict__ x, float* __restrict__ y, const DenseLayerDesc d, const Layout L,
                       int tiles_x) {
  extern __shared__ float4 smem4[];
  float* s = reinterpret_cast<float*>(smem4);
  constexpr int PW = TW + 2, PH = TH + 2, P = PW * PH, PP = halo_pixels(TH, TW), TP = TH * TW;
  const int tid = static_cast<int>(threadIdx.x);
  const int n = static_cast<int>(blockIdx.y);
  const int oy0 = static_cast<int>(blockIdx.x) / tiles_x * TH;
  const int ox0 = static_cast<int>(blockIdx.x) % tiles_x * TW;
  const int m4s = L.Mp / 4, f4s = L.Fp / 4;

  // 0. The constants, under the previous grid's tail: the weights as 16-byte cp.async (every copy in flight at once,
  // not one load's latency a loop turn), the scale, shift and biases through registers.
  {
    cp_async_floats<kThreads>(s + L.w1, d.w1, d.C * L.Mp);
    cp_async_floats<kThreads>(s + L.w2, d.w2, d.M * 9 * L.Fp);
    cp_async_commit();
    if (d.scale) {
      for (int c = tid; c < d.C; c += kThreads) {
        s[L.aff + 2 * c] = __ldg(d.scale + c);
        s[L.aff + 2 * c + 1] = __ldg(d.shift + c);
      }
    }
    for (int m = tid; m < L.Mp; m += kThreads) s[L.b1 + m] = d.b1 && m < d.M ? __ldg(d.b1 + m) : 0.0f;
  }
  wait_for_prior_grid();

  // 1. The input over the tile and its halo (cp.async; zeros outside the image and past P), then through the
  // prologue in place, inside the image only (outside stays the 1x1's zero input).
  const int hw = d.H * d.W;
  const float* xn = x + static_cast<int64_t>(n) * (d.x_image ? d.x_image : int64_t(d.C) * hw);
  auto inside = [&](int p, int& iy, int& ix) {
    iy = oy0 - 1 + p / PW;
    ix = ox0 - 1 + p % PW;
    return p < P && static_cast<unsigned>(iy) < static_cast<unsigned>(d.H) &&
           static_cast<unsigned>(ix) < static_cast<unsigned>(d.W);
  };
  for (int i = tid; i < d.C * PP; i += kThreads) {
    const int c = i / PP, p = i - c * PP;
    int iy, ix;
    const bool in = inside(p, iy, ix);
    cp_async_4(s + L.xs + i, in ? xn + static_cast<int64_t>(c) * hw + iy * d.W + ix : xn, in);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();  // the weights, the input, and the scale and shift staged by other threads
  if (d.scale) {
    for (int i = tid; i < d.C * PP; i += kThreads) {
      const int c = i / PP, p = i - c * PP;
      int iy, ix;
      if (inside(p, iy, ix)) {
        s[L.xs + i] = param_activate(fmaf(s[L.xs + i], s[L.aff + 2 * c], s[L.aff + 2 * c + 1]), d.act0, d.alpha0, d.beta0);
      }
    }
    __syncthreads();
  }

  // 2. The 1x1 layer: 4 hidden channels x 4 halo pixels a thread; lanes on consecutive pixel quads (16-byte loads
  // of the input), the filters' float4 shared by the warp.
  constexpr int p4s = PP / 4;
  for (int it = tid; it < m4s * p4s; it += kThreads) {
    const int m4 = it / p4s, p4 = it - m4 * p4s;
    const float4 b = smem4[L.b1 / 4 + m4];
    const float bv[4] = {b.x, b.y, b.z, b.w};
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[i][k] = bv[i];
    }
#pragma unroll 4
    for (int c = 0; c < d.C; ++c) {
      fma_4x4(acc, smem4[(L.w1 + c * L.Mp) / 4 + m4], smem4[(L.xs + c * PP) / 4 + p4]);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int p = p4 * 4 + k;
      const int iy = oy0 - 1 + p / PW, ix = ox0 - 1 + p % PW;
      const bool inside = p < P && static_cast<unsigned>(iy) < static_cast<unsigned>(d.H) &&
                          static_cast<unsigned>(ix) < static_cast<unsigned>(d.W);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // Outside the image: the 3x3's zero padding (not the activation of the bias).
        s[L.hs + (m4 * 4 + i) * PP + p] = inside ? param_activate(acc[i][k], d.act1, d.alpha1, d.beta1) : 0.0f;
      }
    }
  }
  __syncthreads();

  // 3. The 3x3 layer: 4 outputs x 1 pixel a thread over one of G shares of the hidden channels (lanes on
  // consecutive pixels, the filters' float4 shared); where G > 1 the shares' sums are added in share order.
  const int64_t y_image = d.y_image ? d.y_image : int64_t(d.F) * hw;
  float* yn = y + static_cast<int64_t>(n) * y_image;
  auto store = [&](int f4, int p, float4 acc) {
    const int oy = oy0 + p / TW, ox = ox0 + p % TW;
    if (oy >= d.H || ox >= d.W) return;
    const float av[4] = {acc.x, acc.y, acc.z, acc.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int f = f4 * 4 + i;
      if (f >= d.F) break;
      const float v = av[i] + (d.b2 ? __ldg(d.b2 + f) : 0.0f);
      yn[static_cast<int64_t>(f) * hw + oy * d.W + ox] = param_activate(v, d.act2, d.alpha2, d.beta2);
    }
  };
  const int items = f4s * TP;
  const int share = (d.M + L.G - 1) / L.G;
  for (int it = tid; it < items * L.G; it += kThreads) {
    const int g = it / items, r = it - g * items;
    const int f4 = r / TP, p = r - f4 * TP;
    const int ty = p / TW, tx = p - ty * TW;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const int m1 = min(d.M, (g + 1) * share);
    for (int m = g * share; m < m1; ++m) {
      const float* h = s + L.hs + m * PP + ty * PW + tx;
      const float4* w = smem4 + (L.w2 + m * 9 * L.Fp) / 4 + f4;
#pragma unroll
      for (int t = 0; t < 9; ++t) {
        const float hv = h[(t / 3) * PW + t % 3];
        const float4 wv = w[t * f4s];
        acc.x = fmaf(hv, wv.x, acc.x);
        acc.y = fmaf(hv, wv.y, acc.y);
        acc.z = fmaf(hv, wv.z, acc.z);
        acc.w = fmaf(hv, wv.w, acc.w);
      }
    }
    if (L.G == 1) {
      store(f4, p, acc);
    } else {
      smem4[L.red / 4 + it] = acc;
    }
  }
  if (L.G > 1) {
    __syncthreads();
    for (int r = tid; r < items; r += kThreads) {
      float4 acc = smem4[L.red / 4 + r];
      for (int g = 1; g < L.G; ++g) {
        const float4 v = smem4[L.red / 4 + g * items + r];
        acc.x += v.x;
        acc.y += v.y;
        acc.z += v.z;
        acc.w += v.w;
      }
      store(r / TP, r % TP, acc);
    }
  }
}

template <int TH, int TW>
void launch(const float* x, float* y, const DenseLayerDesc& d, cudaStream_t stream) {
  const Layout L = layout(d, TH, TW);
  const int tiles_x = (d.W + TW - 1) / TW, tiles_y = (d.H + TH - 1) / TH;
  allow_all_dynamic_smem<dense_layer_kernel<TH, TW>>();
  launch_overlapped(dense_layer_kernel<TH, TW>, dim3(static_cast<unsigned>(tiles_x * tiles_y),
                                                     static_cast<unsigned>(d.batch)),
                    dim3(kThreads), smem_bytes(L), stream, 1, x, y, d, L, tiles_x);
}

struct Entry {
  int th, tw;
  void (*launch)(const float*, float*, const DenseLayerDesc&, cudaStream_t);
};

const Entry kEntries[] = {{4, 4, &launch<4, 4>}, {4, 8, &launch<4, 8>}, {8, 8, &launch<8, 8>}};

std::string variant_name(int th, int tw) { return "dense_layer_t" + std::to_string(th) + "x" + std::to_string(tw); }

}  // namespace dense_layer

bool dense_layer_supports(const DenseLayerDesc& d, std::string* why) {
  auto no = [why](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (d.batch < 1 || d.C < 1 || d.H < 1 || d.W < 1 || d.M < 1 || d.F < 1) return no("an empty extent");
  if (d.batch > 65535) return no("more than 65535 images");
  if (!d.w1 || !d.w2) return no("no packed weights");
  if (reinterpret_cast<uintptr_t>(d.w1) % 16 != 0 || reinterpret_cast<uintptr_t>(d.w2) % 16 != 0) {
    return no("packed weights not 16-byte aligned");
  }
  if ((d.scale == nullptr) != (d.shift == nullptr)) return no("a prologue's scale without its shift");
  const int64_t hw = int64_t(d.H) * d.W;
  if ((d.x_image != 0 && d.x_image < d.C * hw) || (d.y_image != 0 && d.y_image < d.F * hw)) {
    return no("images closer together than their extent");
  }
  if (int64_t(d.batch) * std::max(d.x_image, d.C * hw) >= (int64_t(1) << 40) || d.C * hw >= (int64_t(1) << 31) ||
      d.F * hw >= (int64_t(1) << 31)) {
    return no("too large for the kernel's offsets");
  }
  if (d.M > 256 || d.F > 256 || d.C > 1024) return no("more than 1024 inputs or 256 hidden or output channels");
  return true;
}

std::vector<DenseLayerVariant> dense_layer_variants(const DenseLayerDesc& d, int smem_optin_bytes) {
  std::vector<DenseLayerVariant> out;
  if (!dense_layer_supports(d)) return out;
  // Untuned choice: the largest tile that still gives every SM of an H100-class GPU a block (132); else the smallest.
  std::vector<std::pair<DenseLayerVariant, int64_t>> fits;
  for (const dense_layer::Entry& en : dense_layer::kEntries) {
    if (dense_layer::smem_bytes(dense_layer::layout(d, en.th, en.tw)) > size_t(smem_optin_bytes)) continue;
    const int64_t blocks = int64_t(d.batch) * ((d.H + en.th - 1) / en.th) * ((d.W + en.tw - 1) / en.tw);
    fits.push_back({{dense_layer::variant_name(en.th, en.tw), en.th, en.tw}, blocks});
  }
  std::stable_sort(fits.begin(), fits.end(), [](const auto& a, const auto& b) {
    const bool wa = a.second >= 132, wb = b.second >= 132;
    if (wa != wb) return wa;
    return wa ? a.second < b.second : a.second > b.second;  // fewest blocks of a full wave; else the most
  });
  for (auto& f : fits) out.push_back(std::move(f.first));
  return out;
}

std::vector<std::string> dense_layer_variant_names() {
  std::vector<std::string> out;
  for (const dense_layer::Entry& en : dense_layer::kEntries) out.push_back(dense_layer::variant_name(en.th, en.tw));
  return out;
}

size_t dense_layer_w2_offset(const DenseLayerDesc& d) { return size_t(d.C) * dense_layer::round4(d.M); }

std::vector<float> dense_layer_pack(const std::vector<float>& w1, const std::vector<float>& w2, const DenseLayerDesc& d) {
  const int Mp = dense_layer::round4(d.M), Fp = dense_layer::round4(d.F);
  std::vector<float> out(dense_layer_w2_offset(d) + size_t(d.M) * 9 * Fp, 0.0f);
  for (int m = 0; m < d.M; ++m) {
    for (int c = 0; c < d.C; ++c) out[size_t(c) * Mp + m] = w1.at(size_t(m) * d.C + c);
  }
  float* p2 = out.data() + dense_layer_w2_offset(d);
  for (int f = 0; f < d.F; ++f) {
    for (int m = 0; m < d.M; ++m) {
      for (int t = 0; t < 9; ++t) p2[(size_t(m) * 9 + t) * Fp + f] = w2.at((size_t(f) * d.M + m) * 9 + t);
    }
  }
  return out;
}

void launch_dense_layer(const DenseLayerVariant& v, const float* x, float* y, const DenseLayerDesc& d,
                        cudaStream_t stream) {
  for (const dense_layer::Entry& en : dense_layer::kEntries) {
    if (en.th == v.th && en.tw == v.tw) {
      en.launch(x, y, d, stream);
      return;
    }
  }
}

}  // namespace cnnrt::kernels
