// The sequence kernel (seqnet.cuh): one cluster an image runs a chain of layers, its activations in shared memory.
#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <map>
#include <stdexcept>

#include "kernels/seqnet.cuh"

#include "kernels/jit.hpp"
#include "kernels/launch.cuh"
#include "kernels/seqnet_device.cuh"
#include "kernels/smem_optin.cuh"

namespace cnnrt::kernels {

namespace {

using seq_detail::kSeqBarrierFloats;
using seq_detail::kSeqWarps;
using seq_detail::seq_weight_row;
using seq_detail::SeqParams;

// The kernel for any program: its layers from the table in shared memory. (At least one block an SM, said
// explicitly: without it ptxas held the kernel to 64 registers and spilled.)
__global__ void __launch_bounds__(kSeqThreads, 1) seqnet_kernel(const __grid_constant__ SeqParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const seq_detail::SeqBlock b = seq_detail::seq_start(p, smem);
  const SeqLayer* layers = reinterpret_cast<const SeqLayer*>(smem);
  for (int k = 0; k < p.n_layers; ++k) seq_detail::seq_layer(layers[k], k, k + 1 == p.n_layers, p, b);
}

static_assert(sizeof(SeqLayer) % sizeof(int4) == 0);

// A tensor's layout: dense [C][H][W], or with the zero halo of a convolution's padding.
struct Layout {
  int cs = 1, rs = 1, off = 0, pt = 0, pl = 0, hp = 1, wp = 1;
};
Layout dense_layout(int H, int W) { return {H * W, W, 0, 0, 0, H, W}; }

}  // namespace

size_t SeqProgram::smem_bytes() const {
  return layers.size() * sizeof(SeqLayer) +
         (kSeqBarrierFloats + static_cast<size_t>(act_floats) + partial_floats + staged_floats()) * sizeof(float);
}

std::vector<SeqVariant> seqnet_variants(int arch, int max_cluster) {
  std::vector<SeqVariant> out;
  if (arch >= 90) {
    for (int ranks : {16, 8, 4}) {
      if (ranks <= max_cluster) out.push_back({"seqnet_cl" + std::to_string(ranks), ranks});
    }
  }
  out.push_back({"seqnet_cl1", 1});
  return out;
}

std::vector<std::string> seqnet_variant_names() {
  std::vector<std::string> names;
  for (const SeqVariant& v : seqnet_variants(90)) names.push_back(v.name);
  return names;
}

std::optional<SeqProgram> build_seqnet(const std::vector<NetOp>& ops, int ranks, int smem_optin, std::string* why,
                                       const SeqAliases* aliases) {
  auto refuse = [why](const std::string& reason) {
    if (why) *why = reason;
    return std::optional<SeqProgram>{};
  };
  if (ops.empty()) return refuse("no ops");
  SeqProgram prog;
  prog.ranks = ranks;
  const int input = ops.front().in0;
  // Each layer's tensors by slot: what it reads (in; res: a residual or a binary op's b; their floats from one image
  // to the next in global memory, where they come from before the cut) and writes (out, from float out_at of it: a
  // Concat's block copied); `bcast`: res has one value a channel.
  struct Io {
    int in = -1, res = -1, out = -1;
    int in_stride = 0, res_stride = 0;
    int64_t out_at = 0;
    bool bcast = false;
    bool block = false;  // writes a block of its output tensor (a Concat's, copied), not the whole of it
  };
  std::vector<Io> io;
  std::map<int, int> op_readers;
  for (const NetOp& o : ops) {
    for (int s : {o.in0, o.in1}) {
      if (s >= 0) ++op_readers[s];
    }
  }
  std::map<int, std::array<int, 3>> written_shape;  // per slot an op wrote: its [C, H, W]
  // The ops as layers: a Conv and the Pool that alone reads it (the network kernel's pooled convolution, or a
  // pooling node after one) as one layer.
  for (size_t k = 0; k < ops.size(); ++k) {
    const NetOp& o = ops[k];
    SeqLayer l;
    l.kind = o.kind;
    Io t;
    t.in = o.in0;
    t.in_stride = o.in0_stride, t.res_stride = o.in1_stride;
    t.out = o.out;
    switch (o.kind) {
      case NetOpKind::Conv: {
        const ConvGeometry& g = o.g;
        if (g.groups < 1 || g.C % g.groups != 0 || g.F % g.groups != 0) return refuse("a convolution's groups");
        l.g = g;
        l.C = g.C, l.H = g.H, l.W = g.W;
        l.OC = g.F, l.OH = g.OH, l.OW = g.OW;
        l.w = o.w;
        l.bias = o.bias;
        l.act = o.act;
        l.alpha = o.alpha;
        l.beta = o.beta;
        t.res = o.in1;
        if (o.in1 < 0 && k + 1 < ops.size() && ops[k + 1].kind == NetOpKind::Pool && ops[k + 1].in0 == o.out &&
            op_readers[o.out] == 1) {
          const NetOp& pool = ops[k + 1];
          if (pool.g.C != g.F || pool.g.H != g.OH || pool.g.W != g.OW) return refuse("a pool of another shape");
          l.pool = pool.pool;
          l.OH = pool.g.OH, l.OW = pool.g.OW;
          t.out = pool.out;
          ++k;
        }
        break;
      }
      case NetOpKind::Pool:
        l.C = l.OC = o.g.C, l.H = o.g.H, l.W = o.g.W;
        l.OH = o.g.OH, l.OW = o.g.OW;
        l.pool = o.pool;
        break;
      case NetOpKind::GlobalPool:
        l.C = l.OC = o.g.C, l.H = o.g.H, l.W = std::max(1, o.g.W);
        l.pool = o.pool;
        break;
      case NetOpKind::Affine:
        if (o.inner < 1 || o.count % o.inner != 0) return refuse("an affine map's extents");
        l.C = l.OC = o.count / o.inner, l.H = l.OH = o.inner, l.W = l.OW = 1;
        l.w = o.w;
        l.bias = o.bias;
        l.act = o.act;
        l.alpha = o.alpha;
        l.beta = o.beta;
        break;
      case NetOpKind::Binary: {
        // [C], [C][W] or [C][H][W]: a and b dense, or one of them one value a channel (b, swapped where the op
        // commutes).
        const int r = o.rank;
        if (r < 1 || r > 3 || o.in1 < 0) return refuse("a binary op of rank other than 1 to 3");
        auto dense = [&](const int* st) {
          int64_t stride = 1;
          for (int d = r - 1; d >= 0; --d) {
            if (o.dims[d] != 1 && st[d] != stride) return false;
            stride *= o.dims[d];
          }
          return true;
        };
        auto per_channel = [&](const int* st) {
          for (int d = 1; d < r; ++d) {
            if (o.dims[d] != 1 && st[d] != 0) return false;
          }
          return o.dims[0] == 1 || st[0] == 1;
        };
        t.res = o.in1;
        if (dense(o.sa) && dense(o.sb)) {
        } else if (dense(o.sa) && per_channel(o.sb)) {
          t.bcast = true;
        } else if (dense(o.sb) && per_channel(o.sa) && (o.binary == NetBinary::Add || o.binary == NetBinary::Mul)) {
          std::swap(t.in, t.res);
          std::swap(t.in_stride, t.res_stride);
          t.bcast = true;
        } else {
          return refuse("a binary op that broadcasts other than one value a channel");
        }
        l.C = l.OC = o.dims[0];
        l.H = l.OH = r == 3 ? o.dims[1] : 1;
        l.W = l.OW = r == 1 ? 1 : o.dims[r - 1];
        l.binary = o.binary;
        break;
      }
      case NetOpKind::Permute: {
        // A channel shuffle: the axes after the batch permuted, the last two (rows, columns) kept; out channel c
        // reads in channel map[c] (staged with the tap offsets).
        const int r = o.rank;
        if (r < 3 || o.sa[r - 1] != 1 || o.sa[r - 2] != o.dims[r - 1]) {
          return refuse("a transpose that moves a map's rows or columns");
        }
        const int H = o.dims[r - 2], W = o.dims[r - 1], plane = H * W;
        int C = 1;
        for (int d = 0; d < r - 2; ++d) C *= o.dims[d];
        l.C = l.OC = C, l.H = l.OH = H, l.W = l.OW = W;
        l.t_at = static_cast<int>(prog.channel_maps.size());
        for (int c = 0; c < C; ++c) {
          int64_t at = 0;
          for (int d = r - 3, rest = c; d >= 0; --d) {
            at += int64_t(rest % o.dims[d]) * o.sa[d];
            rest /= o.dims[d];
          }
          if (at % plane != 0 || at / plane >= C) return refuse("a transpose that is not a channel permutation");
          prog.channel_maps.push_back(static_cast<int>(at / plane));
        }
        break;
      }
      case NetOpKind::Copy: {
        // A block of a Concat that is not written in place: the input copied (an affine map of scale 1, shift 0).
        auto at = written_shape.find(o.in0);
        if (at == written_shape.end()) return refuse("a Concat block of the cut's input");
        l.kind = NetOpKind::Affine;
        l.C = l.OC = at->second[0], l.H = l.OH = at->second[1], l.W = l.OW = at->second[2];
        t.out_at = o.out_offset;
        t.block = o.count != o.out_stride;
        break;
      }
      default: return refuse("an op other than a convolution, pool, global pool, affine map, binary op, Concat or channel shuffle");
    }
    if (t.out_at == 0 && !t.block) written_shape[t.out] = {l.OC, l.OH, l.OW};
    prog.out_image_floats = ops[k].out_stride;
    prog.layers.push_back(l);
    io.push_back(t);
  }
  const size_t n = prog.layers.size();
  if (n > size_t(kSeqMaxLayers)) return refuse("more layers than the kernel's table holds");
  if (io.back().out_at != 0 || (aliases && aliases->count(io.back().out))) return refuse("an output inside another tensor");

  // The tensors in shared memory: each slot a block of a root (itself, or the in-place Concat's output it lies in),
  // `c0` its first channel there. A root's channels are written once each, by a layer or the staged input (-1).
  struct Root {
    int H = 0, W = 0, C = 0;
    int pt = 0, pb = 0, pl = 0, pr = 0;  // the most padding of a convolution that reads it
    bool flat = false;                   // read as other extents of as many values (a flatten)
    std::vector<int> writer;             // per channel: the layer that writes it (-1: the input)
    std::vector<int> writes, reads;      // the layers
    Layout lay;
    int base = 0, begin = 0, end = 0;
  };
  struct View {
    int root = -1, c0 = 0, C = 1, H = 1, W = 1;
    bool flat = false;  // read as the reader's extents (the root dense)
  };
  std::map<int, Root> roots;
  auto root_of = [aliases](int slot) -> std::pair<int, int64_t> {
    if (aliases) {
      auto at = aliases->find(slot);
      if (at != aliases->end()) return {at->second.first, at->second.second / static_cast<int64_t>(sizeof(float))};
    }
    return {slot, 0};
  };
  constexpr int kUnwritten = INT_MAX;
  // A block of C channels of H x W from float `at` of root `r`'s image, written by `layer`.
  auto write = [&](int r, int64_t at, int C, int H, int W, int layer, View* view) -> std::string {
    Root& root = roots[r];
    if (root.H == 0) root.H = H, root.W = W;
    if (root.H != H || root.W != W) return "Concat blocks of other extents";
    if (at % (int64_t(H) * W) != 0) return "a Concat block that does not start at a channel";
    const int c0 = static_cast<int>(at / (int64_t(H) * W));
    if (int(root.writer.size()) < c0 + C) root.writer.resize(static_cast<size_t>(c0 + C), kUnwritten);
    for (int c = c0; c < c0 + C; ++c) {
      if (root.writer[static_cast<size_t>(c)] != kUnwritten) return "a tensor written twice";
      root.writer[static_cast<size_t>(c)] = layer;
    }
    root.C = std::max(root.C, c0 + C);
    if (layer >= 0) root.writes.push_back(layer);
    *view = {r, c0, C, H, W, false};
    return {};
  };
  // What layer j reads from slot s as [C][H][W]: the block the layer before wrote there, the whole of a Concat (or a
  // block of one) written before it, or a tensor from before the cut (the first op's input first), staged as an input
  // (`stride`: its floats from one image to the next). With `adopt` (a per-channel layer that takes its input's
  // extents), H and W become the tensor's where it has C channels of H * W values.
  std::map<int, View> latest;  // per slot: the block last written there
  std::vector<std::pair<int, int>> staged;  // the inputs: slot, stride
  // Per root, the extents a convolution or pool of the program writes a block of it with: a staged block of a Concat
  // read first by an affine map ([C][H*W][1] to it) takes them (DenseNet's stage after a transition).
  std::map<int, std::pair<int, int>> written_extents;
  for (size_t j = 0; j + 1 < n; ++j) {
    if (prog.layers[j].kind != NetOpKind::Conv && prog.layers[j].kind != NetOpKind::Pool) continue;
    written_extents.emplace(root_of(io[j].out).first, std::make_pair(prog.layers[j].OH, prog.layers[j].OW));
  }
  auto read = [&](int s, int j, int C, int& H, int& W, bool adopt, int stride, View* view) -> std::string {
    auto it = latest.find(s);
    bool found = it != latest.end();
    if (found) {
      *view = it->second;
    } else if (s != input) {
      // A Concat or a block of one, where layers before j wrote every channel of it.
      const auto [r, at] = root_of(s);
      auto root = roots.find(r);
      if (root != roots.end() && root->second.H > 0) {
        const int64_t plane = int64_t(root->second.H) * root->second.W, numel = int64_t(C) * H * W;
        if (at % plane != 0 || numel % plane != 0) return "a read of a Concat's channels that is not whole channels";
        const int c0 = static_cast<int>(at / plane), n_c = static_cast<int>(numel / plane);
        found = c0 + n_c <= int(root->second.writer.size());
        for (int c = c0; found && c < c0 + n_c; ++c) found = root->second.writer[static_cast<size_t>(c)] < j;
        if (found) *view = {r, c0, n_c, root->second.H, root->second.W, false};
      }
    }
    if (!found) {
      if (staged.size() == size_t(kSeqMaxInputs)) return "more tensors from before the cut than the kernel stages";
      const auto [r, at] = root_of(s);
      auto hint = written_extents.find(r);
      if (adopt && roots[r].H == 0 && hint != written_extents.end() &&
          int64_t(hint->second.first) * hint->second.second == int64_t(H) * W) {
        H = hint->second.first, W = hint->second.second;
      }
      if (std::string e = write(r, at, C, H, W, -1, view); !e.empty()) return e;
      latest[s] = *view;
      staged.emplace_back(s, stride);
    }
    Root& root = roots[view->root];
    for (int c = view->c0; c < view->c0 + view->C; ++c) {
      if (c >= int(root.writer.size()) || root.writer[static_cast<size_t>(c)] >= j) {
        return "an op that reads a tensor from before the cut";
      }
    }
    if (adopt && view->C == C && view->H * view->W == H * W) H = view->H, W = view->W;
    if (!(view->C == C && view->H == H && view->W == W)) {
      if (int64_t(view->C) * view->H * view->W != int64_t(C) * H * W) {
        auto dims = [](int c, int h, int w) {
          return std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
        };
        return "a layer whose input has other extents (layer " + std::to_string(j) + " reads " + dims(C, H, W) +
               " from a tensor of " + dims(view->C, view->H, view->W) + ")";
      }
      view->flat = true;
      view->C = C, view->H = H, view->W = W;
      root.flat = true;
    }
    root.reads.push_back(j);
    return {};
  };
  std::vector<View> in_view(n), res_view(n), out_view(n);
  for (size_t j = 0; j < n; ++j) {
    SeqLayer& l = prog.layers[j];
    const Io& t = io[j];
    const int J = static_cast<int>(j);
    // An affine map and a global pool take their input's extents (an affine map's output has them too).
    const bool adopt = l.kind == NetOpKind::Affine || l.kind == NetOpKind::GlobalPool;
    if (std::string e = read(t.in, J, l.C, l.H, l.W, adopt, t.in_stride, &in_view[j]); !e.empty()) return refuse(e);
    if (l.kind == NetOpKind::Affine) l.OH = l.H, l.OW = l.W;
    if (t.res >= 0) {
      // A residual has the convolution's output extents (no pool after it: build merges none after a residual).
      int rh = t.bcast ? 1 : l.OH, rw = t.bcast ? 1 : l.OW;
      if (std::string e = read(t.res, J, l.OC, rh, rw, false, t.res_stride, &res_view[j]); !e.empty()) {
        return refuse(e);
      }
      if (res_view[j].flat && t.bcast) return refuse("a binary op's operand of other extents");
    }
    if (j + 1 == n) break;
    const auto [r, at] = root_of(t.out);
    if (std::string e = write(r, at + t.out_at, l.OC, l.OH, l.OW, J, &out_view[j]); !e.empty()) return refuse(e);
    // (A Concat's first block copied is not the tensor: its readers find the whole of it through its root.)
    if (t.out_at == 0 && !t.block) latest[t.out] = out_view[j];
  }
  for (size_t j = 0; j + 1 < n; ++j) {
    if (io[j].out == io.back().out) return refuse("an output inside another tensor");
  }
  // The roots' layouts: a convolution's padding as a zero halo (the most of any convolution that reads it; planes a
  // multiple of 16 bytes apart: a rank's channels go to the others by 16-byte stores); dense where read flattened.
  for (size_t j = 0; j < n; ++j) {
    const SeqLayer& l = prog.layers[j];
    if (l.kind != NetOpKind::Conv || in_view[j].flat) continue;
    Root& root = roots[in_view[j].root];
    root.pt = std::max(root.pt, l.g.pad_top), root.pb = std::max(root.pb, l.g.pad_bottom);
    root.pl = std::max(root.pl, l.g.pad_left), root.pr = std::max(root.pr, l.g.pad_right);
  }
  for (auto& [slot, root] : roots) {
    Layout lay = dense_layout(root.H, root.W);
    if (root.pt + root.pb + root.pl + root.pr > 0) {
      if (root.flat) return refuse("a tensor read both padded and flattened");
      lay.pt = root.pt, lay.pl = root.pl;
      lay.hp = root.H + root.pt + root.pb, lay.wp = root.W + root.pl + root.pr;
      lay.rs = lay.wp, lay.cs = (lay.hp * lay.wp + 3) / 4 * 4, lay.off = lay.pt * lay.rs + lay.pl;
    }
    root.lay = lay;
  }
  // Each layer's reads and writes in those layouts, the ranks' shares, the convolutions' work.
  auto read_layout = [&roots](const View& v, int* cs, int* rs, int* off) {
    const Layout& lay = roots[v.root].lay;
    if (v.flat) {
      *cs = v.H * v.W, *rs = v.W, *off = 0;
    } else {
      *cs = lay.cs, *rs = lay.rs, *off = lay.off;
    }
  };
  int tap_at = static_cast<int>(prog.channel_maps.size());  // (the channel maps first)
  for (size_t k = 0; k < n; ++k) {
    SeqLayer& l = prog.layers[k];
    const bool last = k + 1 == n;
    read_layout(in_view[k], &l.in_cs, &l.in_rs, &l.in_off);
    if (io[k].res >= 0) {
      read_layout(res_view[k], &l.res_cs, &l.res_rs, &l.res_off);
      l.res_xs = 1;
      if (io[k].bcast) l.res_rs = l.res_xs = 0;
    }
    const Layout out = last ? dense_layout(l.OH, l.OW) : roots[out_view[k].root].lay;
    l.out_cs = out.cs, l.out_rs = out.rs, l.out_off = out.off;
    l.out_pt = out.pt, l.out_pl = out.pl, l.out_hp = out.hp, l.out_wp = out.wp;
    l.cb = (l.OC + ranks - 1) / ranks;
    l.in_p_d = FastDiv(std::max(1, l.H * l.W)), l.in_w_d = FastDiv(std::max(1, l.W));
    l.out_p_d = FastDiv(std::max(1, l.OH * l.OW)), l.out_w_d = FastDiv(std::max(1, l.OW));
    if (!last) {
      // The output's zero halo a channel: the rows above the interior, the side columns of its rows, the rows below.
      l.halo_top = out.pt * out.wp;
      l.halo_sides = out.wp - l.OW;
      l.halo_n = l.halo_top + l.OH * l.halo_sides + (out.hp - out.pt - l.OH) * out.wp;
      l.halo_d = FastDiv(std::max(1, l.halo_n)), l.halo_wp_d = FastDiv(std::max(1, out.wp));
      l.halo_sides_d = FastDiv(std::max(1, l.halo_sides));
    }
    if (l.kind != NetOpKind::Conv) continue;
    const ConvGeometry& g = l.g;
    const int cg = g.C / g.groups, fg = g.F / g.groups, kk = g.KH * g.KW;
    const int P = g.OH * g.OW, T = cg * kk;
    l.cg = cg, l.T = T;
    l.fg_d = FastDiv(fg), l.ow_d = FastDiv(std::max(1, g.OW)), l.p_d = FastDiv(std::max(1, P));
    l.kk_d = FastDiv(kk), l.kw_d = FastDiv(std::max(1, g.KW));
    if (P >= 24) {
      // Direct: the register block and tap split of the least estimated time: instructions an item (a tap: its
      // offset, the weights' vector reads, pb inputs, fb * pb multiply-adds) times the items a warp runs, stretched
      // where fewer items than warps leave the schedulers without warps to switch between; plus the epilogue's pass
      // over the split sums.
      double best = 1e30;
      for (int fb : {8, 4, 2, 1}) {
        if (l.cb % fb != 0 || fg % fb != 0) continue;
        for (int pb : {1, 2}) {
          if (pb > 1 && (16 * pb >= P || fb < 4)) continue;  // (its last 32 lanes would find no position; the
                                                             // blocks instantiated: conv_sums)
          for (int ks = 1; ks <= 16 && (ks == 1 || T / ks >= 8); ks *= 2) {
            const int items = l.cb / fb * ((P + 32 * pb - 1) / (32 * pb)) * ks;
            const double per_item = double((T + ks - 1) / ks) * (1 + (fb + 3) / 4 + pb + fb * pb);
            double cost = per_item * ((items + kSeqWarps - 1) / kSeqWarps) * kSeqWarps / std::min(items, kSeqWarps);
            if (ks > 1) cost += 100.0 + double((l.cb * P + kSeqThreads - 1) / kSeqThreads) * ks * 4;
            if (cost < best) best = cost, l.fb = fb, l.pb = pb, l.ks = ks;
          }
        }
      }
      l.lanes = 1;
      l.direct = 1;
      l.per = (T + l.ks - 1) / l.ks;
      l.tiles = (P + 32 * l.pb - 1) / (32 * l.pb);
      l.ks_d = FastDiv(l.ks), l.tiles_d = FastDiv(l.tiles);
      l.t_at = tap_at;
      tap_at += T;
      prog.partial_floats = std::max(prog.partial_floats, l.ks * l.cb * P);
    } else {
      l.fb = l.pb = l.ks = 1;
      l.lanes = 1;
      while (l.lanes < 32 && int64_t(l.cb) * P * l.lanes * 2 <= kSeqThreads && l.lanes * 2 <= cg) l.lanes *= 2;
      if (l.pool.kind != FusedPool::None) prog.partial_floats = std::max(prog.partial_floats, l.cb * P);
    }
  }
  prog.partial_floats = (prog.partial_floats + 3) / 4 * 4;
  prog.tap_ints = tap_at;
  // Local layers: every layer that reads their output reads only the rank's own channels of it (per channel, the same
  // split: a pool, global pool, affine map, binary op, a residual, a depthwise convolution), and it is a tensor of its
  // own (not a block of a Concat).
  std::vector<int> can_be_local(n, 0);
  for (size_t k = 0; k + 1 < n; ++k) {
    const SeqLayer& l = prog.layers[k];
    const Root& root = roots[out_view[k].root];
    bool ok = root.writes.size() == 1 && root.C == l.OC && out_view[k].c0 == 0;
    for (size_t j = k + 1; ok && j < n; ++j) {
      const SeqLayer& r = prog.layers[j];
      for (int operand = 0; operand < 2 && ok; ++operand) {
        const View& v = operand == 0 ? in_view[j] : res_view[j];
        if ((operand == 1 && io[j].res < 0) || v.root != out_view[k].root) continue;
        const bool depthwise = r.kind == NetOpKind::Conv && r.g.groups == r.g.C && r.g.F == r.g.C;
        const bool per_channel = operand == 1 || r.kind == NetOpKind::Pool || r.kind == NetOpKind::GlobalPool ||
                                 r.kind == NetOpKind::Affine || r.kind == NetOpKind::Binary || depthwise;
        ok = per_channel && !v.flat && v.C == l.OC && r.OC == l.OC && r.cb == l.cb;
      }
    }
    can_be_local[k] = ok ? 1 : 0;
  }
  // Where each tensor lies: from the first layer any rank may write it at (a local layer's own; a shared layer's: the
  // one after the last shared layer before it that every rank still reading has sent, after its reads, before any
  // rank's share of this one arrives) to its last reader, no two of overlapping spans in overlapping floats (first
  // fit).
  auto place_tensors = [&](bool locals) {
    int last_shared = -1;
    int busy = 0;  // ranks 0 .. busy - 1 ran a local layer since last_shared (ranks with channels are a prefix)
    std::vector<int> first_at(n, 0);
    for (size_t k = 0; k + 1 < n; ++k) {
      SeqLayer& l = prog.layers[k];
      l.local = locals ? can_be_local[k] : 0;
      first_at[k] = l.local ? static_cast<int>(k) : last_shared + 1;
      const int senders = (l.OC + l.cb - 1) / l.cb;  // the ranks with channels of the layer
      if (l.local) {
        busy = std::max(busy, senders);
      } else if (senders >= busy) {
        // (A rank that sends a shared layer nothing, and ran a local layer since the last one, may still read that
        // local layer's tensors when the others pass this layer's wait: not a layer every rank has passed.)
        last_shared = static_cast<int>(k);
        busy = 0;
      }
    }
    std::vector<Root*> order;
    for (auto& [slot, root] : roots) {
      root.begin = root.writer.empty() || *std::min_element(root.writer.begin(), root.writer.end()) < 0 ? 0 : INT_MAX;
      for (int w : root.writes) root.begin = std::min(root.begin, first_at[static_cast<size_t>(w)]);
      root.end = root.begin;
      for (int w : root.writes) root.end = std::max(root.end, w);
      for (int r : root.reads) root.end = std::max(root.end, r);
      order.push_back(&root);
    }
    std::stable_sort(order.begin(), order.end(), [](const Root* a, const Root* b) { return a->begin < b->begin; });
    std::vector<const Root*> placed;
    prog.act_floats = 0;
    for (Root* root : order) {
      const int size = (root->C * root->lay.cs + 4 + 3) / 4 * 4;
      int at = 0;
      for (bool moved = true; moved;) {
        moved = false;
        for (const Root* other : placed) {
          const int other_size = (other->C * other->lay.cs + 4 + 3) / 4 * 4;
          const bool live = other->begin <= root->end && root->begin <= other->end;
          if (live && other->base < at + size && at < other->base + other_size) {
            at = other->base + other_size;
            moved = true;
          }
        }
      }
      root->base = at;
      placed.push_back(root);
      prog.act_floats = std::max(prog.act_floats, at + size);
    }
    for (size_t k = 0; k < n; ++k) {
      SeqLayer& l = prog.layers[k];
      auto base = [&roots](const View& v) { return roots[v.root].base + v.c0 * roots[v.root].lay.cs; };
      l.in_base = base(in_view[k]);
      if (io[k].res >= 0) l.res_base = base(res_view[k]);
      if (k + 1 < n) l.out_base = base(out_view[k]);
    }
  };
  // Where each rank stages its weights: the direct layers' tap-major (rows 16-byte aligned) with their biases beside
  // them, the lanes' layers' as they are; those of one output position (each weight read once) too where all fit,
  // else they are read from global memory.
  auto place_weights = [&prog](bool stage_single) {
    int at = 0;
    for (SeqLayer& l : prog.layers) {
      if (l.kind != NetOpKind::Conv) continue;
      if (l.direct) {
        at = (at + 3) / 4 * 4;
        l.w_at = at;
        at += l.T * seq_weight_row(l.cb);
        l.b_at = at;
        at += l.cb;
      } else if (stage_single || l.g.OH * l.g.OW > 1) {
        l.w_at = at;
        at += l.cb * l.T;
      } else {
        l.w_at = -1;
      }
    }
    prog.weight_floats = (at + 3) / 4 * 4;  // (each rank's block 16-byte aligned: copied by 16-byte cp.async)
  };
  const size_t limit = static_cast<size_t>(std::max(0, smem_optin - 1024));
  place_tensors(true);
  place_weights(true);
  if (prog.smem_bytes() > limit) place_weights(false);
  if (prog.smem_bytes() > limit) place_tensors(false);
  if (prog.smem_bytes() > limit) return refuse("activations and weights beyond a block's shared memory");
  // The inputs as they are staged.
  for (const auto& [slot, stride] : staged) {
    const View& v = latest[slot];
    const Root& root = roots[v.root];
    SeqInput in;
    in.slot = slot;
    in.image_floats = stride;
    in.base = root.base + v.c0 * root.lay.cs;
    in.c = v.C, in.h = root.H, in.w = root.W;
    in.cs = root.lay.cs, in.rs = root.lay.rs, in.pt = root.lay.pt, in.pl = root.lay.pl;
    prog.inputs.push_back(in);
  }
  return prog;
}

std::vector<float> seqnet_packed_weights(const SeqProgram& program, SeqHostCopies* copies) {
  const int WF = program.staged_floats();
  std::vector<float> packed(static_cast<size_t>(WF) * program.ranks, 0.0f);
  SeqHostCopies own;
  SeqHostCopies& host = copies ? *copies : own;
  auto fetch = [&host](const float* device, size_t n) -> const std::vector<float>& {
    auto [it, added] = host.try_emplace(device);
    if (added || it->second.size() < n) {
      it->second.resize(n);
      if (n > 0 && cudaMemcpy(it->second.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
        host.erase(it);
        throw std::runtime_error("seqnet_packed_weights: reading a layer's weights back failed");
      }
    }
    return it->second;
  };
  static const std::vector<float> none;
  for (int rank = 0; rank < program.ranks; ++rank) {
    if (!program.channel_maps.empty()) {
      std::memcpy(packed.data() + static_cast<size_t>(rank) * WF + program.weight_floats, program.channel_maps.data(),
                  program.channel_maps.size() * sizeof(int));
    }
  }
  for (const SeqLayer& l : program.layers) {
    if (l.kind != NetOpKind::Conv || l.t_at < 0) continue;
    // Tap t's offset in the input (its channel, filter row and column), after every rank's weights.
    const ConvGeometry& g = l.g;
    for (int t = 0; t < l.T; ++t) {
      const int c = t / (g.KH * g.KW), r = t % (g.KH * g.KW);
      const int offset = c * l.in_cs + r / g.KW * g.dil_h * l.in_rs + r % g.KW * g.dil_w;
      for (int rank = 0; rank < program.ranks; ++rank) {
        std::memcpy(packed.data() + static_cast<size_t>(rank) * WF + program.weight_floats + l.t_at + t, &offset,
                    sizeof(float));
      }
    }
  }
  for (const SeqLayer& l : program.layers) {
    if (l.kind != NetOpKind::Conv || l.w_at < 0) continue;
    const int T = l.T;
    const std::vector<float>& w = fetch(l.w, static_cast<size_t>(l.OC) * T);
    const std::vector<float>& b = l.bias ? fetch(l.bias, static_cast<size_t>(l.OC)) : none;
    for (int r = 0; r < program.ranks; ++r) {
      float* block = packed.data() + static_cast<size_t>(r) * WF;
      const int f_lo = std::min(l.OC, r * l.cb), nf = std::min(l.OC, f_lo + l.cb) - f_lo;
      for (int f = 0; f < nf; ++f) {
        for (int t = 0; t < T; ++t) {
          const float v = w[static_cast<size_t>(f_lo + f) * T + t];
          if (!l.direct) {
            block[l.w_at + f * T + t] = v;  // [filter][tap]
          } else {
            block[l.w_at + t * seq_weight_row(l.cb) + f] = v;  // tap-major
          }
        }
        if (l.b_at >= 0 && !b.empty()) block[l.b_at + f] = b[static_cast<size_t>(f_lo + f)];
      }
    }
  }
  return packed;
}

namespace {

// Throws where a launch of `program` for `batch` images is beyond the kernel's limits.
void check_launch(const SeqProgram& program, int batch) {
  const int n = static_cast<int>(program.layers.size());
  const int n_inputs = static_cast<int>(program.inputs.size());
  if (n < 1 || n > kSeqMaxLayers || batch < 1 || batch > 65535 || (program.staged_floats() > 0 && !program.packed) ||
      n_inputs < 1 || n_inputs > kSeqMaxInputs) {
    throw std::invalid_argument("launch_seqnet: " + std::to_string(n) + " layers, " + std::to_string(n_inputs) +
                                " inputs, batch " + std::to_string(batch) + ": beyond the kernel's limits");
  }
}

// The kernel's parameters for `program` (its table at `layers`; null for the kernel compiled for it, which has
// no table) on inputs `x` (null: none yet) into `y`.
SeqParams seq_params(const SeqProgram& program, const SeqLayer* layers, const float* const* x, float* y,
                     unsigned long long* trace) {
  const int n = static_cast<int>(program.layers.size());
  const int n_inputs = std::min(static_cast<int>(program.inputs.size()), kSeqMaxInputs);
  SeqParams p{};
  p.layers = layers;
  p.n_layers = n;
  p.ranks = program.ranks;
  p.table_floats = layers ? n * static_cast<int>(sizeof(SeqLayer) / sizeof(float)) : 0;
  p.act_floats = program.act_floats;
  p.partial_floats = program.partial_floats;
  p.weight_floats = program.weight_floats;
  p.staged_floats = program.staged_floats();
  p.n_inputs = n_inputs;
  for (int s = 0; s < n_inputs; ++s) {
    const SeqInput& in = program.inputs[static_cast<size_t>(s)];
    p.in[s] = {x ? x[s] : nullptr, in.image_floats, in.base, in.c, in.h, in.w, in.cs, in.rs, in.pt, in.pl,
               FastDiv(std::max(1, in.cs)), FastDiv(std::max(1, in.rs))};
  }
  p.out_image = program.out_image_floats;
  p.packed = program.packed;
  p.y = y;
  p.trace = trace;
  return p;
}

}  // namespace

void launch_seqnet(const SeqProgram& program, const SeqLayer* layers, const float* const* x, float* y, int batch,
                   cudaStream_t stream, unsigned long long* trace) {
  check_launch(program, batch);
  const SeqParams p = seq_params(program, layers, x, y, trace);
  allow_all_dynamic_smem<seqnet_kernel>();  // (the table and the staging may take all a block can have)
  if (program.ranks > 8) allow_large_clusters<seqnet_kernel>();
  launch_overlapped(seqnet_kernel, dim3(1, static_cast<unsigned>(batch), static_cast<unsigned>(program.ranks)),
                    dim3(kSeqThreads), program.smem_bytes(), stream, static_cast<unsigned>(program.ranks), p);
}

void launch_seqnet(const SeqProgram& program, const SeqLayer* layers, const float* x, float* y, int batch,
                   cudaStream_t stream, unsigned long long* trace) {
  if (program.inputs.size() != 1) {
    throw std::invalid_argument("launch_seqnet: a program of " + std::to_string(program.inputs.size()) +
                                " inputs given one");
  }
  launch_seqnet(program, layers, &x, y, batch, stream, trace);
}

const char* const kSeqJitEntry = "cnnrt_seqnet";

size_t SeqProgram::jit_smem_bytes() const { return smem_bytes() - layers.size() * sizeof(SeqLayer); }

std::string seqnet_jit_source(const SeqProgram& program) {
  // The parameters' constants: the layout and the inputs' geometry (every pointer comes at launch).
  SeqParams constants = seq_params(program, nullptr, nullptr, nullptr, nullptr);
  constants.packed = nullptr;
  std::string out = "// The sequence kernel for one program (" + std::to_string(program.layers.size()) +
                    " layers, clusters of " + std::to_string(program.ranks) + "), generated by seqnet.cu.\n";
  out += R"(#include "kernels/seqnet_device.cuh"

static_assert(sizeof(cnnrt::kernels::SeqLayer) == )" +
         std::to_string(sizeof(SeqLayer)) + " && sizeof(cnnrt::kernels::seq_detail::SeqParams) == " +
         std::to_string(sizeof(SeqParams)) + R"(,
              "NVRTC lays the sequence kernel's structs out as the host compiler does");

extern "C" __global__ void __launch_bounds__(cnnrt::kernels::kSeqThreads, 1)
    )" + std::string(kSeqJitEntry) + R"((const __grid_constant__ cnnrt::kernels::seq_detail::SeqParams run) {
  using namespace cnnrt::kernels;
  using namespace cnnrt::kernels::seq_detail;
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr unsigned kParams[] = {)" + jit_words(&constants, sizeof constants) + R"(};
  SeqParams p;
  memcpy(&p, kParams, sizeof p);
)";
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    out += "  p.in[" + std::to_string(i) + "].x = run.in[" + std::to_string(i) + "].x;\n";
  }
  out += "  p.packed = run.packed;\n  p.y = run.y;\n  const SeqBlock b = seq_start(p, smem);\n";
  // Each layer's fields (its weights' addresses among them: the kernel serves this program only) as constants.
  for (size_t k = 0; k < program.layers.size(); ++k) {
    const SeqLayer& l = program.layers[k];
    out += "  {\n    constexpr unsigned kLayer[] = {" + jit_words(&l, sizeof l) + "};\n";
    out += "    SeqLayer l;\n    memcpy(&l, kLayer, sizeof l);\n";
    out += "    seq_layer(l, " + std::to_string(k) + ", " + (k + 1 == program.layers.size() ? "true" : "false") +
           ", p, b);\n  }\n";
  }
  out += "}\n";
  return out;
}

SeqJitKernel::SeqJitKernel(const std::string& cubin, const SeqProgram& program)
    : kernel_(std::make_unique<JitKernel>(cubin, kSeqJitEntry, program.jit_smem_bytes(), program.ranks > 8)) {}

SeqJitKernel::~SeqJitKernel() = default;

void SeqJitKernel::launch(const SeqProgram& program, const float* const* x, float* y, int batch,
                          cudaStream_t stream) const {
  check_launch(program, batch);
  const SeqParams p = seq_params(program, nullptr, x, y, nullptr);
  void* args[] = {const_cast<SeqParams*>(&p)};
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config =
      overlapped_config(dim3(1, static_cast<unsigned>(batch), static_cast<unsigned>(program.ranks)), dim3(kSeqThreads),
                        program.jit_smem_bytes(), stream, static_cast<unsigned>(program.ranks), attributes);
  cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(kernel_->kernel()), args);
}

}  // namespace cnnrt::kernels
