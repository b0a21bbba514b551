// A classifier's dense head in one launch (see dense_chain.cuh).
#include "kernels/dense_chain.cuh"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/conv_chain_device.cuh"

namespace cnnrt::kernels {

namespace {

constexpr int kDenseRanks[] = {8, 4, 2, 1, 16};  // portable cluster sizes first (index 0: the untuned choice)
constexpr int kMaxDenseSmemBytes = 200 * 1024;
constexpr int kDenseByThreadFrom = 64;  // first-layer outputs from which the one-a-thread variants are offered

int round4(int floats) { return (floats + 3) / 4 * 4; }

__global__ void __launch_bounds__(kDenseChainThreads)
    dense_chain_kernel(const float* __restrict__ x, float* __restrict__ y, const __grid_constant__ DenseChainDesc d,
                       const __grid_constant__ DenseChainLayout L, unsigned* done) {
#if CNNRT_ARCH_BELOW(900)
  __trap();  // bulk copies and thread-block clusters: compute capability 9.0 (the planner offers it only there)
#else
  using namespace chain_detail;
  extern __shared__ __align__(16) float smem[];
  __shared__ uint64_t weights_ready, partials_ready;
  constexpr int T = kDenseChainThreads, kWarps = T / 32;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int image = blockIdx.x;
  const int rank = blockIdx.z;  // the cluster spans z
  const int R = L.ranks;
  const ChainDense& first = d.layers[0];
  const int n0 = first.N;

  // 0. The weights (constants: before the prior grid's end), by the bulk copy engine.
  if (tid == 0) {
    mbarrier_init(&weights_ready, 1);
    if (R > 1 && rank == 0) mbarrier_init(&partials_ready, 1);
    fence_mbarrier_init();
    mbarrier_arrive_expect_tx(&weights_ready, static_cast<uint32_t>((L.block + L.conv_block) * 4 +
                                                                    (rank == 0 ? L.rank0_bytes : 0)));
    bulk_copy_to_shared(smem + L.w0, first.weights + static_cast<int64_t>(rank) * L.block,
                        static_cast<uint32_t>(L.block * 4), &weights_ready);
    if (L.conv_block > 0) {
      bulk_copy_to_shared(smem + L.conv_w, d.conv.weights + static_cast<int64_t>(rank) * L.conv_block,
                          static_cast<uint32_t>(L.conv_block * 4), &weights_ready);
    }
    if (rank == 0) {
#pragma unroll
      for (int t = 0; t < kDenseChainMax; ++t) {
        if (t >= d.count) break;
        const ChainDense& D = d.layers[t];
        if (D.bias) bulk_copy_to_shared(smem + L.bias[t], D.bias, static_cast<uint32_t>(L.bias_bytes[t]), &weights_ready);
        if (t > 0) bulk_copy_to_shared(smem + L.weights[t], D.weights, static_cast<uint32_t>(L.weight_bytes[t]), &weights_ready);
      }
    }
    // Rank 0: one arrival and every rank's partial of every output.
    if (R > 1 && rank == 0) mbarrier_arrive_expect_tx(&partials_ready, static_cast<uint32_t>(R * n0) * 4u);
  }
  cluster_arrive_relaxed(R);  // this rank's mbarriers are set up
  wait_for_prior_grid();
  float* xs = smem + L.x;
  const int k0 = rank * L.slice;
  const float* row = x + static_cast<int64_t>(image) * d.k;  // (without a pool)
  if (d.conv.channels > 0) {
    // The rank's filters of the convolution at every pixel, activated, then averaged: a thread an output
    // (four partial sums over the channels, added in a fixed order), then a thread a filter in pixel order.
    const int C = d.conv.channels, P = d.pool;
    const float* channels = x + static_cast<int64_t>(image) * C * P;
    float* cx = smem + L.conv_x;
    for_items(C * P, [&](int i) { cx[i] = channels[i]; });
    block_barrier();
    mbarrier_wait_parity0(&weights_ready);
    const float* cw = smem + L.conv_w;
    float* co = smem + L.conv_out;
    for (int it = tid; it < L.slice * P; it += T) {
      const int j = it / P, p = it - j * P;
      const float* wr = cw + j * C;
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
      int c = 0;
      for (; c + 4 <= C; c += 4) {
        s0 = fmaf(wr[c], cx[c * P + p], s0);
        s1 = fmaf(wr[c + 1], cx[(c + 1) * P + p], s1);
        s2 = fmaf(wr[c + 2], cx[(c + 2) * P + p], s2);
        s3 = fmaf(wr[c + 3], cx[(c + 3) * P + p], s3);
      }
      for (; c < C; ++c) s0 = fmaf(wr[c], cx[c * P + p], s0);
      co[it] = (s0 + s1) + (s2 + s3);
    }
    block_barrier();
    const float scale = 1.0f / static_cast<float>(P);
    for (int j = tid; j < L.slice; j += T) {
      float s = 0.0f;
      if (k0 + j < d.k) {
        const float b = d.conv.bias ? d.conv.bias[k0 + j] : 0.0f;
        for (int p = 0; p < P; ++p) s += param_activate(co[j * P + p] + b, d.conv.act, d.conv.alpha, d.conv.beta);
      }
      xs[j] = s * scale;
    }
  } else if (d.pool == 1) {
    for_items(L.slice, [&](int i) { xs[i] = k0 + i < d.k ? row[k0 + i] : 0.0f; });
  } else {
    const float* planes = x + static_cast<int64_t>(image) * d.k * d.pool;
    const float scale = 1.0f / static_cast<float>(d.pool);
    for (int c = warp; c < L.slice; c += kWarps) {
      float s = 0.0f;
      if (k0 + c < d.k) {
        const float* plane = planes + static_cast<int64_t>(k0 + c) * d.pool;
        for (int i = lane; i < d.pool; i += 32) s += plane[i];
      }
#pragma unroll
      for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == 0) xs[c] = s * scale;
    }
  }
  block_barrier();
  cluster_wait(R);  // every rank's mbarriers are set up before any rank stores into rank 0
  mbarrier_wait_parity0(&weights_ready);

  // 1. This rank's partial dot products into rank 0: one warp an output, or one thread an output (by_thread:
  // a warp's loop over a thousand outputs with slices of a few dozen inputs is a chain of shuffle trees).
  float* part = smem + L.part;
  const float* w0 = smem + L.w0;
  if (L.by_thread) {
    for (int n = tid; n < n0; n += T) {
      float s = 0.0f;
      for (int j = 0; j < L.slice; ++j) s = fmaf(w0[j * n0 + n], xs[j], s);
      store_partial(s, part, rank, R, n0, n, &partials_ready);
    }
  } else {
    for (int n = warp; n < n0; n += kWarps) {
      float s = 0.0f;
      for (int j = lane; j < L.slice; j += 32) s = fmaf(w0[n * L.slice + j], xs[j], s);
      push_partial(s, part, rank, R, n0, n, &partials_ready);
    }
  }
  if (rank != 0) return;  // its stores land in rank 0, which lives until they have
  if (R == 1) {
    block_barrier();
  } else {
    mbarrier_wait_parity0(&partials_ready);
  }

  // 2. Rank 0: the first layer's sums in rank order, then the later layers.
  float* io = smem + L.io;
  auto finish_first = [&](int n, float v) {
    v = param_activate(v + (first.bias ? smem[L.bias[0] + n] : 0.0f), first.act, first.alpha, first.beta);
    if (d.count == 1) {
      y[static_cast<int64_t>(image) * n0 + n] = v;
    } else {
      io[n] = v;
    }
  };
  if (L.by_thread) {
    for (int n = tid; n < n0; n += T) {
      float v = 0.0f;
      for (int r = 0; r < R; ++r) v += part[r * n0 + n];
      finish_first(n, v);
    }
  } else {
    for (int n = warp; n < n0; n += kWarps) {
      const float v = sum_partials(part, R, n0, n);
      if (lane == 0) finish_first(n, v);
    }
  }
  float* in = io;
  int k = n0;
#pragma unroll
  for (int t = 1; t < kDenseChainMax; ++t) {
    if (t >= d.count) break;
    const ChainDense& D = d.layers[t];
    const bool last = t + 1 == d.count;
    float* out = io + (t % 2) * L.io_width;
    block_barrier();  // the layer before has written `in`
    dense_layer<T>(D, k, smem + L.weights[t], smem + L.bias[t], in, last ? y + static_cast<int64_t>(image) * D.N : out);
    in = out;
    k = D.N;
  }
  if (done != nullptr && gridDim.x == 1) signal_done(done);  // (rank 0 wrote all of y)
#endif
}

DenseChainLayout make_layout(const DenseChainDesc& d, int ranks, bool by_thread = false) {
  DenseChainLayout L;
  L.ranks = ranks;
  L.by_thread = by_thread;
  const int n0 = d.layers[0].N;
  L.slice = (d.k + ranks - 1) / ranks;
  L.block = round4(n0 * L.slice);
  int at = 0;
  auto take = [&at](int floats) {
    const int offset = at;
    at += round4(floats);
    return offset;
  };
  L.w0 = take(L.block);
  if (d.conv.channels > 0) {
    L.conv_block = round4(L.slice * d.conv.channels);
    L.conv_w = take(L.conv_block);
    L.conv_x = take(d.conv.channels * d.pool);
    L.conv_out = take(L.slice * d.pool);
  }
  L.x = take(L.slice);
  L.part = take(ranks * n0);
  int width = 0;
  for (int t = 0; t + 1 < d.count; ++t) width = std::max(width, d.layers[t].N);
  L.io_width = round4(width);
  L.io = take(2 * L.io_width);
  for (int t = 0, k = n0; t < d.count; ++t) {
    const ChainDense& D = d.layers[t];
    L.bias[t] = take(D.N);
    L.bias_bytes[t] = round4(D.N) * 4;
    if (D.bias) L.rank0_bytes += L.bias_bytes[t];
    if (t > 0) {
      L.weights[t] = take(D.N * k);
      L.weight_bytes[t] = round4(D.N * k) * 4;
      L.rank0_bytes += L.weight_bytes[t];
      k = D.N;
    }
  }
  L.floats = at;
  return L;
}

bool fits(const DenseChainLayout& L, int smem_optin_bytes) {
  return int64_t(L.floats) * 4 <= std::min(smem_optin_bytes, kMaxDenseSmemBytes) &&
         int64_t(L.block + L.conv_block) * 4 + L.rank0_bytes <= kChainTailMaxBytes;
}

}  // namespace

bool dense_chain_supports(const DenseChainDesc& d, int smem_optin_bytes, std::string* why) {
  auto no = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  const int fewest = d.pool > 1 || d.conv.channels > 0 ? 1 : 2;
  if (d.count < fewest || d.count > kDenseChainMax) {
    return no(fmt::format("{} dense layers ({} to {})", d.count, fewest, kDenseChainMax));
  }
  if (d.batch < 1 || d.k < 1 || d.pool < 1 || d.conv.channels < 0) return no("empty tensor");
  if (int64_t(d.conv.channels) * d.pool * 4 > kMaxDenseSmemBytes) {
    return no("the convolution's input exceeds shared memory");
  }
  for (int t = 0, k = d.k; t < d.count; k = d.layers[t].N, ++t) {
    if (d.layers[t].N < 1) return no("empty tensor");
    // (the layout's arithmetic is in int: far larger layers fail the shared-memory check anyway)
    if (int64_t(d.layers[t].N) * k * 4 > (int64_t(1) << 30)) return no("a layer's weights take over 1 GB");
  }
  for (int ranks : kDenseRanks) {
    if (fits(make_layout(d, ranks), smem_optin_bytes)) return true;
  }
  return no("the weights do not fit in shared memory at any cluster size");
}

std::vector<DenseChainVariant> dense_chain_variants(const DenseChainDesc& d, int smem_optin_bytes) {
  std::vector<DenseChainVariant> out;
  if (!dense_chain_supports(d, smem_optin_bytes)) return out;
  for (int ranks : kDenseRanks) {
    const DenseChainLayout L = make_layout(d, ranks);
    if (ranks > 1 && L.slice * (ranks - 1) >= d.k) continue;  // a rank with no inputs
    if (!fits(L, smem_optin_bytes)) continue;
    const char* prefix = d.conv.channels > 0 ? "conv_" : "";
    out.push_back({fmt::format("{}dense_chain_cl{}", prefix, ranks), L});
    // One thread an output, where the outputs are enough to occupy a block's warps that way.
    if (d.layers[0].N >= kDenseByThreadFrom) {
      out.push_back({fmt::format("{}dense_chain_cl{}_t", prefix, ranks), make_layout(d, ranks, true)});
    }
  }
  return out;
}

std::vector<std::string> dense_chain_variant_names() {
  std::vector<std::string> names;
  for (const char* prefix : {"", "conv_"}) {
    for (int ranks : kDenseRanks) {
      names.push_back(fmt::format("{}dense_chain_cl{}", prefix, ranks));
      names.push_back(fmt::format("{}dense_chain_cl{}_t", prefix, ranks));
    }
  }
  return names;
}

std::vector<float> dense_chain_weights(const std::vector<float>& nk, const DenseChainDesc& d, const DenseChainLayout& L) {
  const int n0 = d.layers[0].N;
  std::vector<float> out(static_cast<size_t>(L.ranks) * L.block, 0.0f);
  for (int r = 0; r < L.ranks; ++r) {
    for (int n = 0; n < n0; ++n) {
      for (int j = 0; j < L.slice; ++j) {
        const int64_t k = int64_t(r) * L.slice + j;
        if (k >= d.k) continue;
        const size_t at = L.by_thread ? size_t(j) * n0 + n : size_t(n) * L.slice + j;
        out[size_t(r) * L.block + at] = nk[size_t(n) * d.k + k];
      }
    }
  }
  return out;
}

std::vector<float> dense_chain_conv_weights(const std::vector<float>& kc, const DenseChainDesc& d,
                                            const DenseChainLayout& L) {
  const int C = d.conv.channels;
  std::vector<float> out(static_cast<size_t>(L.ranks) * L.conv_block, 0.0f);
  for (int r = 0; r < L.ranks; ++r) {
    for (int j = 0; j < L.slice; ++j) {
      const int64_t k = int64_t(r) * L.slice + j;
      if (k >= d.k) continue;
      std::copy_n(kc.begin() + k * C, C, out.begin() + int64_t(r) * L.conv_block + int64_t(j) * C);
    }
  }
  return out;
}

void launch_dense_chain(const DenseChainVariant& v, const float* x, float* y, const DenseChainDesc& d, cudaStream_t stream,
                        unsigned* done) {
  allow_dynamic_smem<dense_chain_kernel>(kMaxDenseSmemBytes);
  if (v.layout.ranks > 8) allow_large_clusters<dense_chain_kernel>();
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config =
      overlapped_config(dim3(static_cast<unsigned>(d.batch), 1, static_cast<unsigned>(v.layout.ranks)),
                        dim3(kDenseChainThreads), static_cast<size_t>(v.layout.floats) * sizeof(float), stream,
                        static_cast<unsigned>(v.layout.ranks), attributes);
  cudaLaunchKernelEx(&config, dense_chain_kernel, x, y, d, v.layout, done);
}

}  // namespace cnnrt::kernels
