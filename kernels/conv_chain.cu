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
                      const __grid_constant__ ChainLayout L) {
  chain_detail::conv_chain_body<KA, KB>(x, y, d, L);
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
  const bool pool = B.pool.kind != FusedPool::None;
  if (pool && (B.pool.kw > kChainRun || B.pool.dil_h != 1 || B.pool.dil_w != 1)) return false;
  return ((pool ? B.pool.kh : 1) << ceil_log2(B.C)) <= 32;
}

// Whether A's pooling can run as lanes of a warp per pooled value (a_window_lanes): windows of at most 32
// positions, undilated, without pooling pads.
bool a_window_fits(const ChainConv& A) {
  const PoolGeometry& p = A.pool;
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
  L.c_lanes_log2 = ceil_log2(B.C);
  L.fb = B.F / ranks;
  L.segs = (B.OW + kChainSeg - 1) / kChainSeg;
  L.segs_a = (A.OW + kChainSegA - 1) / kChainSegA;
  L.img_h = A.OH + A.K - 1;
  L.img_w = L.segs_a * kChainSegA + A.K - 1;  // whole segments: the columns past the image read zeros
  if (a_window) L.a_lanes_log2 = ceil_log2(A.pool.kind == FusedPool::None ? 1 : A.pool.kh * A.pool.kw);
  L.src_h = B.OH + B.K - 1;
  if (window_lanes) {
    // A lane reads the columns [x0, x0 + kChainRun + K - 1) of B's padded input, x0 = px * stride - pad
    // (conv coordinates): a left margin of the pooling's pad and whole runs on the right keep every read
    // inside the row without a test (the outputs the pooling skips read zeros or the margin).
    const bool pool = B.pool.kind != FusedPool::None;
    L.src_col0 = pool ? B.pool.pad_left : 0;
    L.src_w = std::max((B.PW() - 1) * (pool ? B.pool.sw : 1) + kChainRun + B.K - 1, L.src_col0 + B.OW + B.K - 1);
  } else {
    L.src_w = L.segs * kChainSeg + B.K - 1;
  }
  L.src_w += L.src_w % 2 == 0 ? 1 : 0;  // an odd row pitch spreads a warp's rows over the banks
  // B's window lanes read only the columns and rows of the conv outputs their windows use: without B's pads
  // and with every pooling window inside the conv output, those are all A's pooled values, and the margins
  // need no zeros. The other paths read whole segments.
  {
    const bool pool = B.pool.kind != FusedPool::None;
    const bool unpadded = B.pad_top == 0 && B.pad_left == 0 && B.OH == B.H - B.K + 1 && B.OW == B.W - B.K + 1;
    const bool windows_inside = !pool || (B.pool.pad_top == 0 && B.pool.pad_left == 0 &&
                                          (B.PH() - 1) * B.pool.sh + B.pool.kh <= B.OH &&
                                          (B.PW() - 1) * B.pool.sw + B.pool.kw <= B.OW);
    L.zero_margins = !(window_lanes && unpadded && windows_inside);
  }
  const int window = B.pool.kind == FusedPool::None ? 1 : B.pool.kh * B.pool.kw;
  L.pool_lanes_log2 = ceil_log2(std::min(window, 32));
  // As many channel groups as keep one item per thread; at least one.
  const int per_group = L.fb * B.OH * L.segs;
  const int groups = std::clamp(kChainThreads / std::max(per_group, 1), 1, B.C);
  L.group_channels = (B.C + groups - 1) / groups;
  L.groups = (B.C + L.group_channels - 1) / L.group_channels;
  int at = 0;
  auto take = [&at](int floats) {
    const int offset = at;
    at += round4(floats);
    return offset;
  };
  L.img = take(L.img_h * L.img_w);
  L.wa = take(A.F * A.K * A.K);
  L.ba = take(A.F);
  const bool pool_a = A.pool.kind != FusedPool::None;
  L.rows_a = (A.F * A.PH() + ranks - 1) / ranks;
  L.span_a = pool_a ? (A.pool.kh - 1) * A.pool.dil_h + 1 : 1;
  L.map_a = take(a_window ? 0 : L.rows_a * L.span_a * L.segs_a * kChainSegA);
  L.src_floats = round4(B.C * L.src_h * L.src_w);
  L.src = take(L.src_floats);
  L.wb = take(L.fb * B.C * B.K * B.K);
  L.bb = take(L.fb);
  L.part = take(window_lanes ? 0 : L.fb * L.groups * B.OH * B.OW);
  L.feat = take(L.fb * B.PH() * B.PW());
  L.wfc = take(d.fc.N * L.fb * B.PH() * B.PW());
  L.bfc = take(d.fc.N);
  L.fc_part = take(ranks * d.fc.N);
  L.floats = at;
  L.by_segs_a = FastDiv(L.segs_a);
  L.by_win_rows = FastDiv(pool_a ? A.pool.kh : 1);
  L.by_pha = FastDiv(A.PH());
  L.by_pwa = FastDiv(A.PW());
  L.by_segs = FastDiv(L.segs);
  L.by_ohb = FastDiv(B.OH);
  L.by_groups = FastDiv(L.groups);
  L.by_pb = FastDiv(B.PH() * B.PW());
  L.by_pwb = FastDiv(B.PW());
  L.by_pool_kw = FastDiv(B.pool.kind == FusedPool::None ? 1 : B.pool.kw);
  L.by_pool_kw_a = FastDiv(A.pool.kind == FusedPool::None ? 1 : A.pool.kw);
  L.by_slice = FastDiv(L.fb * B.PH() * B.PW());
  L.by_src_w = FastDiv(L.src_w);
  L.by_img_w = FastDiv(L.img_w);
  L.by_src_h = FastDiv(L.src_h);
  return L;
}

using ChainKernel = void (*)(const float*, float*, ConvChainDesc, ChainLayout);

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
  return c.K >= 1 && c.OH >= 1 && c.OW >= 1 && c.pad_top >= 0 && c.pad_left >= 0 && c.OH + c.K - 1 >= c.H + c.pad_top &&
         c.OW + c.K - 1 >= c.W + c.pad_left && c.PH() >= 1 && c.PW() >= 1;
}

}  // namespace

bool conv_chain_supports(const ConvChainDesc& d, int smem_optin_bytes, std::string* why) {
  auto no = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  const ChainConv& A = d.a;
  const ChainConv& B = d.b;
  if (!chain_kernel(A.K, B.K)) return no(fmt::format("kernel sizes {} and {} (built: 3 and 3, 5 and 5)", A.K, B.K));
  if (A.C != 1) return no(fmt::format("the first convolution has {} input channels (1 supported)", A.C));
  if (B.C != A.F || B.H != A.PH() || B.W != A.PW()) return no("the second convolution does not read the first's output");
  if (!conv_ok(A) || !conv_ok(B)) return no("a convolution's geometry is not stride 1 with non-negative padding");
  if (d.fc.N < 1 || d.batch < 1 || A.F < 1 || B.F < 1) return no("empty tensor");
  for (int ranks : kChainRanks) {
    if (d.b.F % ranks == 0 && fits(make_layout(d, ranks, false, false), smem_optin_bytes)) return true;
  }
  return no("the staged tensors do not fit in shared memory at any cluster size");
}

std::vector<ConvChainVariant> conv_chain_variants(const ConvChainDesc& d, int smem_optin_bytes) {
  std::vector<ConvChainVariant> out;
  if (!conv_chain_supports(d, smem_optin_bytes)) return out;
  // First the pooling in registers wherever it fits (A's windows a lane group each, "_aw"; B's windows a warp
  // each, "_wl"), then the maps in shared memory; the planner times both.
  const bool aw = a_window_fits(d.a), wl = window_lanes_fit(d.b);
  for (bool windows : {true, false}) {
    if (windows && !aw && !wl) continue;
    for (int ranks : kChainRanks) {
      if (d.b.F % ranks != 0) continue;
      const ChainLayout L = make_layout(d, ranks, windows && wl, windows && aw);
      if (!fits(L, smem_optin_bytes)) continue;
      out.push_back({fmt::format("chain_k{}k{}_r{}{}{}", d.a.K, d.b.K, ranks, L.a_window ? "_aw" : "",
                                 L.window_lanes ? "_wl" : ""),
                     L});
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
                       cudaStream_t stream) {
  const ChainKernel kernel = chain_kernel(d.a.K, d.b.K);
  if (d.a.K == 3) {
    allow_dynamic_smem<conv_chain_kernel<3, 3>>(kMaxChainSmemBytes);
    allow_large_clusters<conv_chain_kernel<3, 3>>();
  } else {
    allow_dynamic_smem<conv_chain_kernel<5, 5>>(kMaxChainSmemBytes);
    allow_large_clusters<conv_chain_kernel<5, 5>>();
  }
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config = chain_launch_config(v.layout, d.batch, stream, attributes);
  cudaLaunchKernelEx(&config, kernel, x, y, d, v.layout);
}

}  // namespace cnnrt::kernels
