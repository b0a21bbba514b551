// The LeNet-class chain kernel (see conv_chain.cuh for the plan of one launch).
#include <fmt/format.h>

#include <algorithm>

#include "kernels/conv_chain_device.cuh"

namespace cnnrt::kernels {

namespace {

// Cluster sizes tried, portable ones first (16 is H100's largest, non-portable, cluster).
constexpr int kChainRanks[] = {8, 16, 4, 2, 1};
constexpr int kMaxChainSmemBytes = 160 * 1024;  // what a variant may stage (opted in once per kernel)

// The kernels built ahead of time, for any shapes (the parameters in constant memory).
template <int KA, int KB>
__global__ void __launch_bounds__(kChainThreads)
    conv_chain_kernel(const float* __restrict__ x, float* __restrict__ y, const __grid_constant__ ConvChainDesc d,
                      const __grid_constant__ ChainLayout L, bool image_once, unsigned* done) {
#if CNNRT_ARCH_BELOW(900)
  __trap();  // thread-block clusters: compute capability 9.0 (the planner offers the chain only there)
#else
  chain_detail::conv_chain_body<KA, KB>(x, y, d, L, image_once, done);
#endif
}

int round4(int floats) { return (floats + 3) / 4 * 4; }

// The smallest e with 2^e >= n.
int ceil_log2(int n) {
  int e = 0;
  while ((1 << e) < n) ++e;
  return e;
}

// Whether B's pooling can run as window lanes (b_window_lanes): windows at most kChainRun wide, undilated,
// and a warp holds the lanes of every (window row, channel).
bool window_lanes_fit(const ChainConv& B) {
  const bool pool = B.e.pool.kind != FusedPool::None;
  if (pool && (B.e.pool.kw > kChainRun || B.e.pool.dil_h != 1 || B.e.pool.dil_w != 1)) return false;
  return ((pool ? B.e.pool.kh : 1) << ceil_log2(B.g.C)) <= 32;
}

// Whether A's pooling can run as lanes of a warp per pooled value (a_window_lanes): windows of at most 32
// positions, undilated, without pooling pads.
bool a_window_fits(const ChainConv& A) {
  const PoolGeometry& p = A.e.pool;
  return p.kind == FusedPool::None ||
         (p.kh * p.kw <= 32 && p.dil_h == 1 && p.dil_w == 1 && p.pad_top == 0 && p.pad_left == 0);
}

ChainLayout make_layout(const ConvChainDesc& d, int ranks, bool window_lanes, bool a_window) {
  const ChainConv& A = d.a;
  const ChainConv& B = d.b;
  ChainLayout L;
  L.ranks = ranks;
  L.window_lanes = window_lanes;
  L.a_window = a_window;
  L.c_lanes_log2 = ceil_log2(B.g.C);
  L.fb = B.g.F / ranks;
  L.segs = (B.g.OW + kChainSeg - 1) / kChainSeg;
  L.segs_a = (A.g.OW + kChainSegA - 1) / kChainSegA;
  L.img_h = A.g.OH + A.g.KH - 1;
  L.img_w = L.segs_a * kChainSegA + A.g.KH - 1;  // whole segments: the columns past the image read zeros
  if (a_window) L.a_lanes_log2 = ceil_log2(A.e.pool.kind == FusedPool::None ? 1 : A.e.pool.kh * A.e.pool.kw);
  L.src_h = B.g.OH + B.g.KH - 1;
  if (window_lanes) {
    // A lane reads the columns [x0, x0 + kChainRun + K - 1) of B's padded input, x0 = px * stride - pad
    // (conv coordinates): a left margin of the pooling's pad and whole runs on the right keep every read
    // inside the row without a test (the outputs the pooling skips read zeros or the margin).
    const bool pool = B.e.pool.kind != FusedPool::None;
    L.src_col0 = pool ? B.e.pool.pad_left : 0;
    L.src_w = std::max((B.PW() - 1) * (pool ? B.e.pool.sw : 1) + kChainRun + B.g.KH - 1, L.src_col0 + B.g.OW + B.g.KH - 1);
  } else {
    L.src_w = L.segs * kChainSeg + B.g.KH - 1;
  }
  L.src_w += L.src_w % 2 == 0 ? 1 : 0;  // an odd row pitch spreads a warp's rows over the banks
  // B's window lanes read only the columns and rows of the conv outputs their windows use: without B's pads
  // and with every pooling window inside the conv output, those are all A's pooled values, and the margins
  // need no zeros. The other paths read whole segments.
  {
    const bool pool = B.e.pool.kind != FusedPool::None;
    const bool unpadded = B.g.pad_top == 0 && B.g.pad_left == 0 && B.g.OH == B.g.H - B.g.KH + 1 && B.g.OW == B.g.W - B.g.KH + 1;
    const bool windows_inside = !pool || (B.e.pool.pad_top == 0 && B.e.pool.pad_left == 0 &&
                                          (B.PH() - 1) * B.e.pool.sh + B.e.pool.kh <= B.g.OH &&
                                          (B.PW() - 1) * B.e.pool.sw + B.e.pool.kw <= B.g.OW);
    L.zero_margins = !(window_lanes && unpadded && windows_inside);
  }
  const int window = B.e.pool.kind == FusedPool::None ? 1 : B.e.pool.kh * B.e.pool.kw;
  L.pool_lanes_log2 = ceil_log2(std::min(window, 32));
  // As many channel groups as keep one item per thread; at least one.
  const int per_group = L.fb * B.g.OH * L.segs;
  const int groups = std::clamp(kChainThreads / std::max(per_group, 1), 1, B.g.C);
  L.group_channels = (B.g.C + groups - 1) / groups;
  L.groups = (B.g.C + L.group_channels - 1) / L.group_channels;
  int at = 0;
  auto take = [&at](int floats) {
    const int offset = at;
    at += round4(floats);
    return offset;
  };
  L.img = take(L.img_h * L.img_w);
  L.wa = take(A.g.F * A.g.KH * A.g.KH);
  L.ba = take(A.g.F);
  const bool pool_a = A.e.pool.kind != FusedPool::None;
  L.rows_a = (A.g.F * A.PH() + ranks - 1) / ranks;
  L.span_a = pool_a ? (A.e.pool.kh - 1) * A.e.pool.dil_h + 1 : 1;
  L.map_a = take(a_window ? 0 : L.rows_a * L.span_a * L.segs_a * kChainSegA);
  L.src_floats = round4(B.g.C * L.src_h * L.src_w);
  L.src = take(L.src_floats);
  L.wb = take(L.fb * B.g.C * B.g.KH * B.g.KH);
  L.bb = take(L.fb);
  L.part = take(window_lanes ? 0 : L.fb * L.groups * B.g.OH * B.g.OW);
  L.feat = take(L.fb * B.PH() * B.PW());
  L.fc_stride = round4(d.fc.N * B.PH() * B.PW());
  L.fc_bytes = L.fb * L.fc_stride * 4;
  L.wfc = take(L.fb * L.fc_stride);
  L.bfc = take(d.fc.N);
  L.fc_part = take(ranks * d.fc.N);
  // The tail's inputs and outputs: fc's outputs and every tail layer's but the last (which goes to y).
  L.dense_width = d.tail_count > 0 ? d.fc.N : 0;
  for (int t = 0; t + 1 < d.tail_count; ++t) L.dense_width = std::max(L.dense_width, d.tail[t].N);
  L.dense_width = round4(L.dense_width);
  L.dense_io = take(2 * L.dense_width);
  static_assert(kChainTailMax == 2, "ChainLayout's tail arrays hold two layers");
  for (int t = 0, k = d.fc.N; t < d.tail_count; k = d.tail[t].N, ++t) {
    L.tail_w_bytes[t] = round4(d.tail[t].N * k) * 4;
    L.tail_b_bytes[t] = round4(d.tail[t].N) * 4;
    L.tail_w[t] = take(round4(d.tail[t].N * k));
    L.tail_b[t] = take(round4(d.tail[t].N));
    L.tail_bytes += L.tail_w_bytes[t] + (d.tail[t].bias ? L.tail_b_bytes[t] : 0);
  }
  L.floats = at;
  L.by_segs_a = FastDiv(L.segs_a);
  L.by_win_rows = FastDiv(pool_a ? A.e.pool.kh : 1);
  L.by_pha = FastDiv(A.PH());
  L.by_pwa = FastDiv(A.PW());
  L.by_segs = FastDiv(L.segs);
  L.by_ohb = FastDiv(B.g.OH);
  L.by_groups = FastDiv(L.groups);
  L.by_pb = FastDiv(B.PH() * B.PW());
  L.by_pwb = FastDiv(B.PW());
  L.by_pool_kw = FastDiv(B.e.pool.kind == FusedPool::None ? 1 : B.e.pool.kw);
  L.by_pool_kw_a = FastDiv(A.e.pool.kind == FusedPool::None ? 1 : A.e.pool.kw);
  L.by_slice = FastDiv(L.fb * B.PH() * B.PW());
  L.by_src_w = FastDiv(L.src_w);
  L.by_img_w = FastDiv(L.img_w);
  L.by_src_h = FastDiv(L.src_h);
  return L;
}

using ChainKernel = void (*)(const float*, float*, ConvChainDesc, ChainLayout, bool, unsigned*);

ChainKernel chain_kernel(int ka, int kb) {
  if (ka == 3 && kb == 3) return conv_chain_kernel<3, 3>;
  if (ka == 5 && kb == 5) return conv_chain_kernel<5, 5>;
  return nullptr;
}

bool fits(const ChainLayout& L, int smem_optin_bytes) {
  return int64_t(L.floats) * 4 <= std::min(smem_optin_bytes, kMaxChainSmemBytes);
}

// Stride 1: OH = pad_top + H + pad_bottom - K + 1, so the end pads are OH + K - 1 - H - pad_top (>= 0).
bool conv_ok(const ChainConv& c) {
  const ConvGeometry& g = c.g;
  return g.KH >= 1 && g.KW == g.KH && g.OH >= 1 && g.OW >= 1 && g.pad_top >= 0 && g.pad_left >= 0 &&
         g.OH + g.KH - 1 >= g.H + g.pad_top && g.OW + g.KW - 1 >= g.W + g.pad_left && g.stride_h == 1 &&
         g.stride_w == 1 && g.dil_h == 1 && g.dil_w == 1 && g.groups == 1 && c.PH() >= 1 && c.PW() >= 1;
}

}  // namespace

std::vector<float> chain_fc_weights(const std::vector<float>& nk, const ConvChainDesc& d) {
  const int64_t n_out = d.fc.N, filters = d.b.g.F, p_count = int64_t(d.b.PH()) * d.b.PW();
  const int64_t k = filters * p_count, stride = round4(static_cast<int>(n_out * p_count));
  std::vector<float> out(static_cast<size_t>(filters * stride), 0.0f);
  for (int64_t f = 0; f < filters; ++f) {
    for (int64_t n = 0; n < n_out; ++n) {
      for (int64_t p = 0; p < p_count; ++p) out[f * stride + n * p_count + p] = nk[n * k + f * p_count + p];
    }
  }
  return out;
}

bool conv_chain_supports(const ConvChainDesc& d, int smem_optin_bytes, std::string* why) {
  auto no = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  const ChainConv& A = d.a;
  const ChainConv& B = d.b;
  if (!chain_kernel(A.g.KH, B.g.KH)) return no(fmt::format("kernel sizes {} and {} (built: 3 and 3, 5 and 5)", A.g.KH, B.g.KH));
  if (A.g.C != 1) return no(fmt::format("the first convolution has {} input channels (1 supported)", A.g.C));
  if (B.g.C != A.g.F || B.g.H != A.PH() || B.g.W != A.PW()) return no("the second convolution does not read the first's output");
  if (!conv_ok(A) || !conv_ok(B)) return no("a convolution's geometry is not stride 1 with non-negative padding");
  if (d.fc.N < 1 || d.batch < 1 || A.g.F < 1 || B.g.F < 1) return no("empty tensor");
  if (d.tail_count < 0 || d.tail_count > kChainTailMax) {
    return no(fmt::format("{} dense layers after the first ({} supported)", d.tail_count, kChainTailMax));
  }
  int64_t tail_bytes = 0;
  for (int t = 0, k = d.fc.N; t < d.tail_count; k = d.tail[t].N, ++t) {
    if (d.tail[t].N < 1) return no("empty tensor");
    tail_bytes += 4 * (int64_t(round4(d.tail[t].N)) + (int64_t(d.tail[t].N) * k + 3) / 4 * 4);
  }
  if (int64_t(d.fc.N) * B.PH() * B.PW() * 4 > kChainTailMaxBytes) return no("the dense layer's weights per filter take over 1 MB");
  if (tail_bytes > kChainTailMaxBytes) return no(fmt::format("the dense layers after the first take {} bytes", tail_bytes));
  for (int ranks : kChainRanks) {
    if (d.b.g.F % ranks == 0 && fits(make_layout(d, ranks, false, false), smem_optin_bytes)) return true;
  }
  return no("the staged tensors do not fit in shared memory at any cluster size");
}

std::string chain_variant_name(int ka, int kb, int ranks, bool a_window, bool b_window) {
  return fmt::format("chain_k{}k{}_cl{}{}{}", ka, kb, ranks, a_window ? "_aw" : "", b_window ? "_bw" : "");
}

std::vector<std::string> conv_chain_variant_names() {
  std::vector<std::string> names;
  for (int k : {3, 5}) {
    for (int ranks : kChainRanks) {
      for (bool aw : {false, true}) {
        for (bool bw : {false, true}) names.push_back(chain_variant_name(k, k, ranks, aw, bw));
      }
    }
  }
  return names;
}

std::vector<ConvChainVariant> conv_chain_variants(const ConvChainDesc& d, int smem_optin_bytes) {
  std::vector<ConvChainVariant> out;
  if (!conv_chain_supports(d, smem_optin_bytes)) return out;
  // First the pooling in registers wherever it fits (A's windows a lane group each, "_aw"; B's windows a warp
  // each, "_bw"), then the maps in shared memory; the planner times both.
  const bool aw = a_window_fits(d.a), wl = window_lanes_fit(d.b);
  for (bool windows : {true, false}) {
    if (windows && !aw && !wl) continue;
    for (int ranks : kChainRanks) {
      if (d.b.g.F % ranks != 0) continue;
      const ChainLayout L = make_layout(d, ranks, windows && wl, windows && aw);
      if (!fits(L, smem_optin_bytes)) continue;
      out.push_back({chain_variant_name(d.a.g.KH, d.b.g.KH, ranks, L.a_window, L.window_lanes), L});
    }
  }
  return out;
}

cudaLaunchConfig_t chain_launch_config(const ChainLayout& L, int batch, cudaStream_t stream,
                                       cudaLaunchAttribute (&attributes)[2]) {
  return overlapped_config(dim3(static_cast<unsigned>(batch), 1, static_cast<unsigned>(L.ranks)), dim3(kChainThreads),
                           static_cast<size_t>(L.floats) * sizeof(float), stream, static_cast<unsigned>(L.ranks),
                           attributes);
}

void launch_conv_chain(const ConvChainVariant& v, const float* x, float* y, const ConvChainDesc& d,
                       cudaStream_t stream, bool image_once, unsigned* done) {
  const ChainKernel kernel = chain_kernel(d.a.g.KH, d.b.g.KH);
  if (d.a.g.KH == 3) {
    allow_dynamic_smem<conv_chain_kernel<3, 3>>(kMaxChainSmemBytes);
    allow_large_clusters<conv_chain_kernel<3, 3>>();
  } else {
    allow_dynamic_smem<conv_chain_kernel<5, 5>>(kMaxChainSmemBytes);
    allow_large_clusters<conv_chain_kernel<5, 5>>();
  }
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config = chain_launch_config(v.layout, d.batch, stream, attributes);
  cudaLaunchKernelEx(&config, kernel, x, y, d, v.layout, image_once, done);
}

}  // namespace cnnrt::kernels
