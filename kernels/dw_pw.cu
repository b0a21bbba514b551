// A depthwise + pointwise pair in one launch (see dw_pw.cuh).
#include "kernels/dw_pw.cuh"

#include <cooperative_groups.h>
#include <fmt/format.h>

#include "kernels/conv_chain_device.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/fast_div.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace {

namespace cg = cooperative_groups;

constexpr int kMaxBatch = 16;  // offered up to here: beyond it the layers' own kernels have blocks enough
constexpr int kMaxClusterRanks = 16;

// The tiles, in heuristic order: pixel tile, filters a block, register block (filters x adjacent pixels), the
// channel split (KS thread groups each summing a share of the channels, their partials added in order) and the
// block's threads (256, or 512: twice the warps to hide the serial phases' latencies where a grid has about a
// block an SM, as at batch 16 on 8x8 and 4x4 maps). A tile's pixel groups (TH*TW/RP) times its filter groups
// (FB/RF) times KS make the block's threads.
struct TileShape {
  int th, tw, fb, rf, rp, ks, threads;
};
constexpr TileShape kTiles[] = {
    {8, 8, 32, 2, 4, 1, 256},   {8, 8, 16, 1, 4, 1, 256},  {8, 8, 64, 4, 4, 1, 256},  {4, 4, 16, 1, 1, 1, 256},
    {4, 4, 16, 4, 1, 4, 256},   {4, 4, 8, 2, 1, 4, 256},   {4, 4, 32, 4, 1, 2, 256},  {4, 4, 64, 4, 1, 1, 256},
    {16, 16, 16, 4, 4, 1, 256}, {16, 16, 32, 8, 4, 1, 256}, {8, 8, 128, 8, 4, 1, 256}, {4, 4, 64, 2, 1, 1, 512},
    {4, 4, 64, 4, 1, 2, 512},   {4, 4, 32, 2, 1, 2, 512},  {8, 8, 32, 1, 4, 1, 512},  {8, 8, 64, 2, 4, 1, 512},
    {8, 8, 16, 1, 4, 2, 512},
};
// The register blocks launch_register_block instantiates with 512 threads.
constexpr bool has_512_thread_kernel(int rf, int rp) {
  return (rp == 1 && (rf == 2 || rf == 4)) || (rp == 4 && (rf == 1 || rf == 2));
}
constexpr bool tiles_fill_blocks() {
  for (const TileShape& t : kTiles) {
    if (t.tw % t.rp != 0 || t.fb % t.rf != 0 || (t.th * t.tw / t.rp) * (t.fb / t.rf) * t.ks != t.threads) return false;
    if (t.threads != 256 && (t.threads != 512 || !has_512_thread_kernel(t.rf, t.rp))) return false;
  }
  return true;
}
static_assert(tiles_fill_blocks(), "a tile's pixel groups, filter groups and channel groups must be the block's threads");

__host__ __device__ inline int round4(int v) { return (v + 3) / 4 * 4; }

// Everything a block needs, derived on the host once a launch.
struct Params {
  DwPwDesc d;
  const float* residual;
  int th, tw, fb, ks, ih, iw, tiles_x, kk;
  int ranks;  // blocks of a cluster (the tile's filter groups) sharing the depthwise outputs, or 1
  FastDiv tile_w, in_plane, in_w, tile_p, tiles_x_div;
  FastDiv group_pad;  // a group's channels rounded up to 4: the depthwise outputs' group pitch in channels
  FastDiv shuffle;    // the channel shuffle's groups (1: none)
};

// A group's channels rounded up to 4, and all groups' (the depthwise outputs' channels in shared memory).
__host__ __device__ inline int group_pitch(int C, int groups) { return round4(C / groups); }
// The channel of padded index `pc` (group pc / pitch, channel pc % pitch of it, clamped to the group's end):
// maps a range of padded indices to the range of real channels it holds.
__device__ __forceinline__ int real_channel(int pc, int cg, const FastDiv& pitch) {
  const int grp = pitch.div(pc);
  return grp * cg + min(pc - grp * static_cast<int>(pitch.d), cg);
}

// Shared memory, in floats, each region a whole number of float4s: the pointwise rows [FB][CGP + 4] (CGP: a
// group's channels rounded up to 4, zeros past them; the pitch keeps a warp's two filter groups off each other's
// banks), the depthwise weights [C][KK] and biases [C], the input tile [C][IH][IW], the depthwise outputs
// [G][CGP][TH*TW] (zeros past each group's channels), and with a channel split the groups' partial sums
// [KS][FB][TH*TW].
struct SmemLayout {
  int w_pw = 0, w_dw = 0, b_dw = 0, in = 0, dw_out = 0, part = 0, floats = 0;
};

__host__ __device__ inline SmemLayout smem_layout(int C, int groups, int kk, int fb, int ks, int ih, int iw, int p) {
  SmemLayout L;
  const int cgp = group_pitch(C, groups);
  L.w_dw = L.w_pw + fb * (cgp + 4);
  L.b_dw = L.w_dw + round4(C * kk);
  L.in = L.b_dw + round4(C);
  L.dw_out = L.in + round4(C * ih * iw);
  L.part = L.dw_out + groups * cgp * p;
  L.floats = L.part + (ks > 1 ? ks * fb * p : 0);
  return L;
}

// GROUPED: a grouped pointwise layer or a channel shuffle in front (the padded channel layout's index arithmetic);
// without, the plain pair's.
template <int RF, int RP, bool GROUPED, int T>
__global__ void __launch_bounds__(T) dw_pw_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                  const __grid_constant__ Params p) {
  extern __shared__ __align__(16) float smem[];
  const DwPwDesc& d = p.d;
  const ConvGeometry& g = d.dw;
  const int C = g.C, G = GROUPED ? p.d.pw_groups : 1, CG = C / G, CGP = group_pitch(C, G), CT = G * CGP, WP = CGP + 4;
  const int F = d.F, FB = p.fb, KK = p.kk, TW = p.tw, P = p.th * p.tw;
  const int tid = threadIdx.x;
  const SmemLayout L = smem_layout(C, G, KK, FB, p.ks, p.ih, p.iw, P);
  float* w_pw = smem + L.w_pw;
  float* w_dw = smem + L.w_dw;
  float* b_dw = smem + L.b_dw;
  float* in = smem + L.in;
  float* dw_out = smem + L.dw_out;
  const int tile_y = p.tiles_x_div.div(static_cast<int>(blockIdx.x));
  const int tile_x = static_cast<int>(blockIdx.x) - tile_y * p.tiles_x;
  const int f0 = static_cast<int>(blockIdx.z) * FB, n = static_cast<int>(blockIdx.y);
  // In a cluster (its ranks: the tile's filter groups along z) each rank computes the depthwise outputs of a share
  // of the (padded) channels and stores them into every rank; alone, a block computes them all.
  const int R = p.ranks, rank = R > 1 ? static_cast<int>(blockIdx.z) : 0;
  const int c_share = R > 1 ? round4((CT + R - 1) / R) : CT;
  const int cd0 = min(CT, rank * c_share), cd1 = min(CT, cd0 + c_share);
  const int cin0 = GROUPED ? real_channel(cd0, CG, p.group_pad) : min(C, cd0);
  const int cin1 = GROUPED ? real_channel(cd1, CG, p.group_pad) : min(C, cd1);

  // 0. The weights (constants: before the prior grid's end): pointwise rows f0 .. f0 + FB, row by row (zeros past F
  // and past the group's channels), 16 bytes a copy where the rows are whole float4s (a warp a row, a lane a
  // float4: no index division).
  if (CG % 4 == 0) {
    const int warp = tid / 32, lane = tid % 32;
    for (int j = warp; j < FB; j += T / 32) {
      const int f = f0 + j;
      const float* row = d.w_pw + static_cast<int64_t>(f < F ? f : 0) * CG;
      for (int c = lane * 4; c < CGP; c += 128) cp_async_16(w_pw + j * WP + c, row + c, f < F);
    }
  } else {
    for (int i = tid; i < FB * CGP; i += T) {
      const int j = i / CGP, c = i - j * CGP, f = f0 + j;
      const bool valid = f < F && c < CG;
      cp_async_4(w_pw + j * WP + c, d.w_pw + (valid ? static_cast<int64_t>(f) * CG + c : 0), valid);
    }
  }
  for (int i = tid; i < C * KK; i += T) cp_async_4(w_dw + i, d.w_dw + i, true);
  const float* dw_bias = d.dw_epilogue.bias;
  for (int i = tid; i < C; i += T) cp_async_4(b_dw + i, dw_bias ? dw_bias + i : d.w_dw, dw_bias != nullptr);
  cp_async_commit();
  chain_detail::wait_for_prior_grid_in_cluster(R);  // every rank has started before any rank stores into it

  // 1. The input tile with its halo, this block's channels (channel c read from its place before the shuffle);
  // zeros outside the image.
  const int iy0 = tile_y * p.th * g.stride_h - g.pad_top, ix0 = tile_x * TW * g.stride_w - g.pad_left;
  const float* xn = x + static_cast<int64_t>(n) * C * g.H * g.W;
  const int plane = p.ih * p.iw, shuffle_rows = C / static_cast<int>(p.shuffle.d);
  for (int i = cin0 * plane + tid; i < cin1 * plane; i += T) {
    const int c = p.in_plane.div(i), r = i - c * plane;
    const int ry = p.in_w.div(r), rx = r - ry * p.iw;
    const int gy = iy0 + ry, gx = ix0 + rx;
    const bool inside = gy >= 0 && gy < g.H && gx >= 0 && gx < g.W;
    const int c_mem = GROUPED ? p.shuffle.mod(c) * shuffle_rows + p.shuffle.div(c) : c;
    cp_async_4(in + i, inside ? xn + (static_cast<int64_t>(c_mem) * g.H + gy) * g.W + gx : xn, inside);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // 2. The depthwise outputs of the tile, this block's (padded) channels, zeros past each group's channels, into
  // every rank.
  for (int i = cd0 * P + tid; i < cd1 * P; i += T) {
    const int pc = p.tile_p.div(i), q = i - pc * P;
    const int grp = GROUPED ? p.group_pad.div(pc) : 0, cl = pc - grp * CGP, c = grp * CG + cl;
    float v = 0.0f;
    if (cl < CG) {
      const int qy = p.tile_w.div(q), qx = q - qy * TW;
      const float* src = in + (c * p.ih + qy * g.stride_h) * p.iw + qx * g.stride_w;
      const float* wc = w_dw + c * KK;
      float acc = 0.0f;
      if (g.KH == 3 && g.KW == 3) {  // the usual filter, unrolled
        const int iw = p.iw;
#pragma unroll
        for (int ky = 0; ky < 3; ++ky) {
#pragma unroll
          for (int kx = 0; kx < 3; ++kx) acc = fmaf(src[ky * iw + kx], wc[ky * 3 + kx], acc);
        }
      } else {
        for (int ky = 0; ky < g.KH; ++ky) {
          for (int kx = 0; kx < g.KW; ++kx) acc = fmaf(src[ky * p.iw + kx], wc[ky * g.KW + kx], acc);
        }
      }
      v = activate<Act::Param>(acc + b_dw[c], d.dw_epilogue);
    }
    if (R == 1) {
      dw_out[i] = v;
    } else {
#if !CNNRT_ARCH_BELOW(900)
      cg::cluster_group cluster = cg::this_cluster();
      for (int r = 0; r < R; ++r) cluster.map_shared_rank(dw_out, r)[i] = v;
#endif
    }
  }
#if !CNNRT_ARCH_BELOW(900)
  if (R > 1) {
    cg::this_cluster().sync();  // every rank's share is in every rank
  } else {
    __syncthreads();
  }
#else
  __syncthreads();
#endif

  // 3. The pointwise sums: this thread's RF filters (of one group: RF divides F / G) x RP adjacent pixels over its
  // thread group's share of that group's channels, four channels a step (a float4 of each filter row).
  const int groups_p = P / RP, groups_f = FB / RF;
  const int pg = tid % groups_p, fg = (tid / groups_p) % groups_f, ks = tid / (groups_p * groups_f);
  const int share = round4((CGP + p.ks - 1) / p.ks);
  const int c_begin = min(CGP, ks * share), c_end = min(CGP, c_begin + share);
  const int filter_group = GROUPED ? min(G - 1, (f0 + fg * RF) / (F / G)) : 0;
  float acc[RF][RP];
#pragma unroll
  for (int r = 0; r < RF; ++r) {
#pragma unroll
    for (int k = 0; k < RP; ++k) acc[r][k] = 0.0f;
  }
  const float* a_col = dw_out + filter_group * CGP * P + pg * RP;
  const float* w_row = w_pw + fg * RF * WP;
#pragma unroll 2
  for (int c = c_begin; c < c_end; c += 4) {
    float4 w[RF];
#pragma unroll
    for (int r = 0; r < RF; ++r) w[r] = *reinterpret_cast<const float4*>(w_row + r * WP + c);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float a[RP];
      if constexpr (RP == 4) {
        const float4 v = *reinterpret_cast<const float4*>(a_col + (c + j) * P);
        a[0] = v.x, a[1] = v.y, a[2] = v.z, a[3] = v.w;
      } else {
#pragma unroll
        for (int k = 0; k < RP; ++k) a[k] = a_col[(c + j) * P + k];
      }
#pragma unroll
      for (int r = 0; r < RF; ++r) {
        const float wj = j == 0 ? w[r].x : j == 1 ? w[r].y : j == 2 ? w[r].z : w[r].w;
#pragma unroll
        for (int k = 0; k < RP; ++k) acc[r][k] = fmaf(wj, a[k], acc[r][k]);
      }
    }
  }
  // With a channel split, the groups' partials meet in shared memory; the first group adds them in order.
  if (p.ks > 1) {
    float* part = smem + L.part;
    const int q0 = pg * RP;
#pragma unroll
    for (int r = 0; r < RF; ++r) {
#pragma unroll
      for (int k = 0; k < RP; ++k) part[(ks * FB + fg * RF + r) * P + q0 + k] = acc[r][k];
    }
    __syncthreads();
    if (ks != 0) return;
#pragma unroll
    for (int r = 0; r < RF; ++r) {
#pragma unroll
      for (int k = 0; k < RP; ++k) {
        float s = 0.0f;
        for (int h = 0; h < p.ks; ++h) s += part[(h * FB + fg * RF + r) * P + q0 + k];
        acc[r][k] = s;
      }
    }
  }

  // 4. Epilogue: + bias, + residual, activation; stored where the pixel and filter exist.
  const int q0 = pg * RP;
  const int qy = p.tile_w.div(q0);
  const int oy = tile_y * p.th + qy, ox0 = tile_x * TW + (q0 - qy * TW);
  if (oy >= g.OH) return;
#pragma unroll
  for (int r = 0; r < RF; ++r) {
    const int f = f0 + fg * RF + r;
    if (f >= F) continue;
    const float b = d.pw_epilogue.bias ? __ldg(d.pw_epilogue.bias + f) : 0.0f;
    const int64_t row = ((static_cast<int64_t>(n) * F + f) * g.OH + oy) * g.OW;
#pragma unroll
    for (int k = 0; k < RP; ++k) {
      const int ox = ox0 + k;  // RP adjacent pixels lie in one tile row (TW is a multiple of RP)
      if (ox >= g.OW) continue;
      float v = acc[r][k] + b;
      if (p.residual) v += __ldg(p.residual + row + ox);
      y[row + ox] = activate<Act::Param>(v, d.pw_epilogue);
    }
  }
}

// Launches the RF x RP instantiation with `bytes` of shared memory (the device's opt-in allowed once).
// With ranks > 1 the grid's z (the filter groups) is one cluster.
template <int RF, int RP, bool GROUPED, int T = 256>
void launch_tile(dim3 grid, int bytes, int smem_optin_bytes, cudaStream_t stream, const float* x, float* y,
                 const Params& p) {
  if (bytes > 48 * 1024) allow_dynamic_smem<dw_pw_kernel<RF, RP, GROUPED, T>>(smem_optin_bytes);
  if (p.ranks > 8) allow_large_clusters<dw_pw_kernel<RF, RP, GROUPED, T>>();
  launch_overlapped(dw_pw_kernel<RF, RP, GROUPED, T>, grid, dim3(T), static_cast<size_t>(bytes), stream,
                    static_cast<unsigned>(p.ranks), x, y, p);
}

// The instantiation of v's register block.
template <bool GROUPED>
void launch_register_block(const DwPwVariant& v, dim3 grid, int bytes, int smem_optin_bytes, cudaStream_t stream,
                           const float* x, float* y, const Params& p) {
  if (v.threads == 512) {
    switch (v.rp * 16 + v.rf) {
      case 16 + 2: launch_tile<2, 1, GROUPED, 512>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
      case 16 + 4: launch_tile<4, 1, GROUPED, 512>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
      case 64 + 1: launch_tile<1, 4, GROUPED, 512>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
      case 64 + 2: launch_tile<2, 4, GROUPED, 512>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
      default: break;  // has_512_thread_kernel: tiles_fill_blocks holds the 512-thread tiles to these
    }
    return;
  }
  switch (v.rp * 16 + v.rf) {
    case 16 + 1: launch_tile<1, 1, GROUPED>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
    case 16 + 2: launch_tile<2, 1, GROUPED>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
    case 16 + 4: launch_tile<4, 1, GROUPED>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
    case 64 + 1: launch_tile<1, 4, GROUPED>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
    case 64 + 2: launch_tile<2, 4, GROUPED>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
    case 64 + 4: launch_tile<4, 4, GROUPED>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
    case 64 + 8: launch_tile<8, 4, GROUPED>(grid, bytes, smem_optin_bytes, stream, x, y, p); break;
    default: break;  // dw_pw_variants offers no other register block
  }
}

int halo(int tile, int stride, int kernel) { return (tile - 1) * stride + kernel; }

int64_t smem_bytes(const DwPwDesc& d, const TileShape& t) {
  const ConvGeometry& g = d.dw;
  return int64_t(smem_layout(g.C, d.pw_groups, g.KH * g.KW, t.fb, t.ks, halo(t.th, g.stride_h, g.KH),
                             halo(t.tw, g.stride_w, g.KW), t.th * t.tw).floats) * 4;
}

std::string variant_name(const TileShape& t, bool cluster) {
  return fmt::format("dw_pw_{}x{}_f{}{}{}{}", t.th, t.tw, t.fb, t.ks > 1 ? fmt::format("_ks{}", t.ks) : "",
                     t.threads == 512 ? "_t512" : "", cluster ? "_cl" : "");
}

}  // namespace

bool dw_pw_supports(const DwPwDesc& d, std::string* why) {
  const ConvGeometry& g = d.dw;
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (g.groups != g.C || g.F != g.C) return no("the first layer is not depthwise with one filter a channel");
  if (d.pw_groups < 1 || g.C % d.pw_groups != 0 || d.F % d.pw_groups != 0) {
    return no(fmt::format("{} pointwise groups of {} channels and {} filters", d.pw_groups, g.C, d.F));
  }
  if (d.shuffle < 1 || g.C % d.shuffle != 0) return no(fmt::format("a shuffle of {} groups of {} channels", d.shuffle, g.C));
  if (g.KH > 7 || g.KW > 7) return no(fmt::format("{}x{} depthwise filters (at most 7x7)", g.KH, g.KW));
  if (g.stride_h > 2 || g.stride_w > 2) return no("depthwise stride above 2");
  if (g.dil_h != 1 || g.dil_w != 1) return no("dilated depthwise filters");
  if (d.dw_epilogue.pool.kind != FusedPool::None) return no("a pool after the depthwise layer");
  if (d.pw_epilogue.pool.kind != FusedPool::None) return no("a pool after the pointwise layer");
  if (g.N > kMaxBatch) return no(fmt::format("batch {} (the pair kernel runs batches up to {})", g.N, kMaxBatch));
  if (int64_t(g.N) * std::max(g.C, d.F) * std::max<int64_t>(int64_t(g.H) * g.W, int64_t(g.OH) * g.OW) >= (int64_t(1) << 31)) {
    return no("tensors beyond 32-bit offsets");
  }
  return true;
}

std::vector<DwPwVariant> dw_pw_variants(const DwPwDesc& d, int smem_optin_bytes, int arch) {
  std::vector<DwPwVariant> out;
  if (!dw_pw_supports(d)) return out;
  const ConvGeometry& g = d.dw;
  const int map = std::max(g.OH, g.OW);
  const int f_room = (d.F + 15) / 16 * 16;  // filters a block beyond this only compute zeros
  for (const TileShape& t : kTiles) {
    const int tile = std::max(t.th, t.tw);
    if (tile > 4 && map <= tile / 2) continue;  // the smaller tile covers the map already
    if (t.fb > 16 && t.fb > f_room) continue;
    if ((d.F / d.pw_groups) % t.rf != 0) continue;  // a thread's filters would straddle two groups
    if (t.ks > 1 && group_pitch(g.C, d.pw_groups) < 16 * t.ks) continue;  // a split of few channels: the unsplit tile does it
    if (smem_bytes(d, t) > smem_optin_bytes) continue;
    out.push_back({variant_name(t, false), t.th, t.tw, t.fb, t.rf, t.rp, t.ks, 1, t.threads});
  }
  // Clusters of a tile's filter groups, sharing the depthwise outputs (compute capability 9.0; up to 16 blocks).
  const size_t alone = out.size();
  for (size_t i = 0; i < alone && arch >= 90; ++i) {
    const int groups = (d.F + out[i].fb - 1) / out[i].fb;
    if (groups < 2 || groups > kMaxClusterRanks || std::max(out[i].th, out[i].tw) > 8) continue;
    DwPwVariant v = out[i];
    v.name = variant_name({v.th, v.tw, v.fb, v.rf, v.rp, v.ks, v.threads}, true);
    v.ranks = groups;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::string> dw_pw_variant_names() {
  std::vector<std::string> names;
  for (const TileShape& t : kTiles) {
    for (bool cluster : {false, true}) names.push_back(variant_name(t, cluster));
  }
  return names;
}

void launch_dw_pw(const DwPwVariant& v, const float* x, const float* residual, float* y, const DwPwDesc& d,
                  int smem_optin_bytes, cudaStream_t stream) {
  const ConvGeometry& g = d.dw;
  Params p;
  p.d = d;
  p.residual = residual;
  p.th = v.th;
  p.tw = v.tw;
  p.fb = v.fb;
  p.ks = v.ks;
  p.ranks = v.ranks;
  p.group_pad = FastDiv(group_pitch(g.C, d.pw_groups));
  p.shuffle = FastDiv(d.shuffle);
  p.ih = halo(v.th, g.stride_h, g.KH);
  p.iw = halo(v.tw, g.stride_w, g.KW);
  p.kk = g.KH * g.KW;
  p.tiles_x = (g.OW + v.tw - 1) / v.tw;
  const int tiles_y = (g.OH + v.th - 1) / v.th;
  p.tile_w = FastDiv(v.tw);
  p.in_plane = FastDiv(p.ih * p.iw);
  p.in_w = FastDiv(p.iw);
  p.tile_p = FastDiv(v.th * v.tw);
  p.tiles_x_div = FastDiv(p.tiles_x);
  const TileShape t{v.th, v.tw, v.fb, v.rf, v.rp, v.ks, v.threads};
  const int bytes = static_cast<int>(smem_bytes(d, t));
  const dim3 grid(static_cast<unsigned>(tiles_y * p.tiles_x), static_cast<unsigned>(g.N),
                  static_cast<unsigned>((d.F + v.fb - 1) / v.fb));
  if (d.pw_groups > 1 || d.shuffle > 1) {
    launch_register_block<true>(v, grid, bytes, smem_optin_bytes, stream, x, y, p);
  } else {
    launch_register_block<false>(v, grid, bytes, smem_optin_bytes, stream, x, y, p);
  }
}

}  // namespace cnnrt::kernels
