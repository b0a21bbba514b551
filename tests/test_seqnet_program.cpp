// The sequence kernel's program (kernels/seqnet.cuh, build_seqnet): what it runs, how it lays out each layer's
// input in shared memory (a convolution's padding as a zero halo, dense where a flatten follows), how it splits
// and blocks the work, and what it refuses. Host only: no GPU.
#ifdef CNNRT_WITH_CUDA
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/jit.hpp"
#include "kernels/seqnet.cuh"

using namespace cnnrt;
using kernels::NetOp;
using kernels::NetOpKind;

namespace {

constexpr int kOptin = 227 * 1024;

NetOp conv1d(int in, int out, int C, int L, int F, int K, int stride, int pad_l, int pad_r, int groups = 1) {
  NetOp o;
  o.kind = NetOpKind::Conv;
  o.in0 = in;
  o.out = out;
  o.g.C = C, o.g.H = 1, o.g.W = L, o.g.F = F, o.g.KH = 1, o.g.KW = K;
  o.g.stride_w = stride, o.g.pad_left = pad_l, o.g.pad_right = pad_r, o.g.groups = groups;
  o.g.OH = 1, o.g.OW = (L + pad_l + pad_r - K) / stride + 1;
  o.in0_stride = C * L;
  o.out_stride = F * o.g.OW;
  return o;
}

NetOp max_pool1d(int in, int out, int C, int L, int k) {
  NetOp o;
  o.kind = NetOpKind::Pool;
  o.in0 = in;
  o.out = out;
  o.g.C = C, o.g.H = 1, o.g.W = L, o.g.OH = 1, o.g.OW = L / k;
  o.pool.kind = kernels::FusedPool::Max;
  o.pool.kw = o.pool.sw = k;
  o.pool.PH = 1, o.pool.PW = L / k;
  o.out_stride = C * (L / k);
  return o;
}

NetOp global_pool(int in, int out, int C, int map) {
  NetOp o;
  o.kind = NetOpKind::GlobalPool;
  o.in0 = in;
  o.out = out;
  o.g.C = C, o.g.H = map;
  o.pool.kind = kernels::FusedPool::Avg;
  o.out_stride = C;
  return o;
}

NetOp dense(int in, int out, int K, int N) {
  NetOp o;
  o.kind = NetOpKind::Conv;
  o.in0 = in;
  o.out = out;
  o.g.C = K, o.g.F = N;
  o.out_stride = N;
  return o;
}

// ts_cnn1d's shape: 9x128 -> conv k7 (32) + pool 2 -> conv k5 (64) + pool 2 -> conv k3 (128) -> GAP -> dense 6.
std::vector<NetOp> series() {
  return {conv1d(0, 1, 9, 128, 32, 7, 1, 3, 3), max_pool1d(1, 2, 32, 128, 2), conv1d(2, 3, 32, 64, 64, 5, 1, 2, 2),
          max_pool1d(3, 4, 64, 64, 2),           conv1d(4, 5, 64, 32, 128, 3, 1, 1, 1), global_pool(5, 6, 128, 32),
          dense(6, 7, 128, 6)};
}

}  // namespace

TEST_CASE("sequence kernel program: a 1-D network's layers, layouts and shares") {
  std::string why;
  const std::optional<kernels::SeqProgram> p = kernels::build_seqnet(series(), 8, kOptin, &why);
  REQUIRE_MESSAGE(p.has_value(), why);
  // Each convolution and the pool that reads it are one layer.
  REQUIRE(p->layers.size() == 5);
  const kernels::SeqLayer& a = p->layers[0];
  CHECK(a.pool.kind == kernels::FusedPool::Max);
  CHECK((a.OC == 32 && a.OH == 1 && a.OW == 64));
  // Its input with the padding of 3 a side as a zero halo; its output as the next convolution reads it (2 a side).
  CHECK((a.in_rs == 134 && a.in_cs == 136 && a.in_off == 3));  // (planes 16 bytes apart)
  CHECK((a.out_rs == 68 && a.out_cs == 68 && a.out_off == 2 && a.out_pl == 2 && a.out_wp == 68));
  CHECK(a.cb == 4);
  // The last convolution writes densely for the global pool; the dense layer reads its 128 inputs densely.
  CHECK((p->layers[2].out_cs == 32 && p->layers[2].out_off == 0));
  const kernels::SeqLayer& d = p->layers[4];
  CHECK(d.C == 128);
  CHECK(d.in_cs == 1);
  CHECK(d.OC == 6);
  CHECK(d.cb == 1);
  // One output position: lanes an output, its weights staged too (all fit); the others staged tap-major, every
  // warp an item (with their taps split where a rank has few outputs), the split sums' room set aside.
  CHECK((d.direct == 0 && d.lanes == 32));
  CHECK(d.w_at >= 0);
  for (int k : {0, 1, 2}) {
    const kernels::SeqLayer& l = p->layers[static_cast<size_t>(k)];
    CAPTURE(k);
    CHECK(l.direct == 1);
    CHECK(l.w_at >= 0);
    CHECK(l.t_at >= 0);
    CHECK(l.cb / l.fb * ((l.g.OH * l.g.OW + 32 * l.pb - 1) / (32 * l.pb)) * l.ks >= kernels::kSeqThreads / 32);
    CHECK(p->partial_floats >= l.ks * l.cb * l.g.OH * l.g.OW);
  }
  CHECK(p->tap_ints == 9 * 7 + 32 * 5 + 64 * 3);
  // Each convolution's weights tap-major (rows of its 4, 8, 16 filters) and its biases.
  CHECK(p->weight_floats == 4 * 9 * 7 + 4 + 8 * 32 * 5 + 8 + 16 * 64 * 3 + 16 + 1 * 128);
  REQUIRE(p->inputs.size() == 1);
  CHECK((p->inputs[0].slot == 0 && p->inputs[0].image_floats == 9 * 128));
  CHECK(p->out_image_floats == 6);
  CHECK(p->smem_bytes() < static_cast<size_t>(kOptin));
}

// Float ranges of the activation area: [at, at + n).
struct Region {
  int at = 0, n = 0;
  bool overlaps(const Region& o) const { return n > 0 && o.n > 0 && at < o.at + o.n && o.at < at + n; }
};
Region in_region(const kernels::SeqLayer& l) { return {l.in_base, l.C * l.in_cs}; }
Region res_region(const kernels::SeqLayer& l) { return l.res_base < 0 ? Region{} : Region{l.res_base, l.OC * l.res_cs}; }
Region out_region(const kernels::SeqLayer& l) { return {l.out_base, l.OC * l.out_cs}; }

// What the kernel relies on, where layer j reads what the layers in_from[j] (and res_from[j], its second operand)
// wrote (-1 - i: the staged input i): a write lands in every rank at some time from the first layer it can (a local
// layer's own; a shared layer's: the one after the last shared layer before it) to its own layer, so no write other
// than those can land in the floats a layer reads between the writes it reads and the read.
void check_regions(const kernels::SeqProgram& p, const std::vector<std::vector<int>>& in_from,
                   const std::vector<std::vector<int>>& res_from = {}) {
  const size_t n = p.layers.size();
  REQUIRE(in_from.size() == n);
  std::vector<int> first_at(n, 0);
  int last_shared = -1;
  for (size_t k = 0; k + 1 < n; ++k) {
    const kernels::SeqLayer& l = p.layers[k];
    first_at[k] = l.local ? static_cast<int>(k) : last_shared + 1;
    if (!l.local) last_shared = static_cast<int>(k);
    CHECK(out_region(l).at + out_region(l).n <= p.act_floats);
  }
  std::vector<Region> inputs;
  for (const kernels::SeqInput& in : p.inputs) {
    inputs.push_back({in.base, in.c * in.cs});
    CHECK(inputs.back().at + inputs.back().n <= p.act_floats);
  }
  // (-1 - i: the staged input i)
  auto region_of = [&](int k) {
    return k < 0 ? inputs.at(static_cast<size_t>(-1 - k)) : out_region(p.layers[static_cast<size_t>(k)]);
  };
  auto start_of = [&](int k) { return k < 0 ? -1 : first_at[static_cast<size_t>(k)]; };
  for (size_t j = 0; j < n; ++j) {
    for (int operand = 0; operand < 2; ++operand) {
      const Region r = operand == 0 ? in_region(p.layers[j]) : res_region(p.layers[j]);
      const std::vector<int> none;
      const std::vector<int>& from = operand == 0 ? in_from[j] : (j < res_from.size() ? res_from[j] : none);
      CAPTURE(j);
      CAPTURE(operand);
      CHECK((r.n == 0) == from.empty());
      if (r.n == 0) continue;
      CHECK((r.at >= 0 && r.at + r.n <= p.act_floats));
      int earliest = INT_MAX;
      for (int w : from) {
        CHECK(w < static_cast<int>(j));
        CHECK(region_of(w).overlaps(r));
        earliest = std::min(earliest, start_of(w));
      }
      for (size_t k = 0; k + 1 < n; ++k) {
        if (std::find(from.begin(), from.end(), static_cast<int>(k)) != from.end()) continue;
        if (!out_region(p.layers[k]).overlaps(r)) continue;
        CAPTURE(k);
        CHECK((static_cast<int>(k) < earliest || first_at[k] > static_cast<int>(j)));
      }
    }
  }
}

// A chain: layer j reads what layer j - 1 wrote.
std::vector<std::vector<int>> chain_of(size_t n) {
  std::vector<std::vector<int>> from(n);
  for (size_t j = 0; j < n; ++j) from[j] = {static_cast<int>(j) - 1};
  return from;
}

TEST_CASE("sequence kernel program: per-channel layers read the rank's own channels, in buffers no rank still reads") {
  std::string why;
  // ts_cnn1d's last convolution feeds the global pool, which reads only the rank's channels: local, its output
  // kept in the rank; the pool's output (shared with every rank for the dense layer) in the third buffer, since a
  // slower rank may still read the other two.
  const std::optional<kernels::SeqProgram> p = kernels::build_seqnet(series(), 16, kOptin, &why);
  REQUIRE_MESSAGE(p.has_value(), why);
  REQUIRE(p->layers.size() == 5);
  CHECK(p->layers[0].local == 0);
  CHECK(p->layers[1].local == 0);
  CHECK(p->layers[2].local == 1);
  CHECK(p->layers[3].local == 0);
  check_regions(*p, chain_of(p->layers.size()));
  // A depthwise convolution (and its pool) after a convolution of as many channels: that convolution is local.
  std::vector<NetOp> ops = {conv1d(0, 1, 8, 64, 32, 3, 1, 1, 1), conv1d(1, 2, 32, 64, 32, 3, 1, 1, 1, 32),
                            max_pool1d(2, 3, 32, 64, 2), conv1d(3, 4, 32, 32, 16, 1, 1, 0, 0)};
  const std::optional<kernels::SeqProgram> q = kernels::build_seqnet(ops, 8, kOptin, &why);
  REQUIRE_MESSAGE(q.has_value(), why);
  REQUIRE(q->layers.size() == 3);  // (the depthwise convolution and its pool are one layer)
  CHECK(q->layers[0].local == 1);
  check_regions(*q, chain_of(q->layers.size()));
  // A shared layer, then two local layers, then a shared one: the last's output goes where no rank still reads.
  const std::vector<NetOp> chain = {conv1d(0, 1, 8, 64, 32, 3, 1, 1, 1),          conv1d(1, 2, 32, 64, 32, 3, 1, 1, 1, 32),
                                    conv1d(2, 3, 32, 64, 32, 1, 1, 0, 0),         conv1d(3, 4, 32, 64, 32, 3, 1, 1, 1, 32),
                                    conv1d(4, 5, 32, 64, 32, 3, 1, 1, 1, 32),      conv1d(5, 6, 32, 64, 16, 1, 1, 0, 0)};
  const std::optional<kernels::SeqProgram> r = kernels::build_seqnet(chain, 8, kOptin, &why);
  REQUIRE_MESSAGE(r.has_value(), why);
  REQUIRE(r->layers.size() == 6);
  CHECK(r->layers[2].local == 1);
  CHECK(r->layers[3].local == 1);
  check_regions(*r, chain_of(r->layers.size()));
  // Every ranks' count: locals are the same decision for any split of equal channels.
  for (int ranks : {1, 4, 8}) {
    const std::optional<kernels::SeqProgram> s = kernels::build_seqnet(series(), ranks, kOptin, &why);
    REQUIRE_MESSAGE(s.has_value(), why);
    check_regions(*s, chain_of(s->layers.size()));
  }
}

NetOp conv2d(int in, int out, int C, int H, int F, int K, int stride, int pad, int groups = 1) {
  NetOp o;
  o.kind = NetOpKind::Conv;
  o.in0 = in;
  o.out = out;
  o.g.C = C, o.g.H = H, o.g.W = H, o.g.F = F, o.g.KH = K, o.g.KW = K, o.g.groups = groups;
  o.g.stride_h = o.g.stride_w = stride, o.g.pad_top = o.g.pad_left = o.g.pad_bottom = o.g.pad_right = pad;
  o.g.OH = o.g.OW = (H + 2 * pad - K) / stride + 1;
  o.in0_stride = C * H * H;
  o.out_stride = F * o.g.OH * o.g.OW;
  return o;
}

// A normalization as the planner describes it: one scale and shift a channel over `inner` values ([C][inner][1]).
NetOp affine(int in, int out, int C, int inner) {
  NetOp o;
  o.kind = NetOpKind::Affine;
  o.in0 = in;
  o.out = out;
  o.count = C * inner;
  o.inner = inner;
  o.in0_stride = o.out_stride = C * inner;
  return o;
}

NetOp binary(int a, int b, int out, kernels::NetBinary op, int C, int H, bool b_per_channel) {
  NetOp o;
  o.kind = NetOpKind::Binary;
  o.binary = op;
  o.in0 = a, o.in1 = b, o.out = out;
  o.rank = 3;
  o.dims[0] = C, o.dims[1] = H, o.dims[2] = H;
  o.sa[0] = H * H, o.sa[1] = H, o.sa[2] = 1;
  if (b_per_channel) {
    o.sb[0] = 1;
  } else {
    o.sb[0] = H * H, o.sb[1] = H, o.sb[2] = 1;
  }
  o.out_stride = o.count = C * H * H;
  return o;
}

TEST_CASE("sequence kernel program: residuals, Concat blocks written in place, a squeeze-excitation gate") {
  std::string why;
  // A basic residual block at 7x7: conv + ReLU, conv + the block's input (residual) + ReLU; a strided block with a
  // 1x1 shortcut; the global pool and a dense layer.
  std::vector<NetOp> ops = {conv2d(0, 1, 32, 7, 32, 3, 1, 1), conv2d(1, 2, 32, 7, 32, 3, 1, 1),
                            conv2d(2, 3, 32, 7, 64, 3, 2, 1),  conv2d(2, 4, 32, 7, 64, 1, 2, 0),
                            conv2d(3, 5, 64, 4, 64, 3, 1, 1),  global_pool(5, 6, 64, 16), dense(6, 7, 64, 10)};
  ops[1].in1 = 0;
  ops[4].in1 = 4;
  for (int ranks : {4, 16}) {  // (one block cannot hold the weights)
    CAPTURE(ranks);
    const std::optional<kernels::SeqProgram> p = kernels::build_seqnet(ops, ranks, kOptin, &why);
    REQUIRE_MESSAGE(p.has_value(), why);
    REQUIRE(p->layers.size() == 7);
    // The residuals read the input and the shortcut where they lie; the input padded for the first convolution.
    REQUIRE(p->inputs.size() == 1);
    const kernels::SeqInput& in = p->inputs[0];
    CHECK(p->layers[1].res_base == in.base);
    CHECK((p->layers[1].res_cs == in.cs && p->layers[1].res_off == in.pt * in.rs + in.pl));
    CHECK(p->layers[4].res_base == p->layers[3].out_base);
    CHECK(p->layers[0].res_base == -1);
    // Both strided layers read layer 1's output; the shortcut is local (its only reader adds it per channel).
    CHECK(p->layers[2].in_base == p->layers[1].out_base);
    CHECK(p->layers[3].in_base == p->layers[1].out_base);
    CHECK(p->layers[3].local == 1);
    CHECK(p->layers[1].local == 0);
    check_regions(*p, {{-1}, {0}, {1}, {1}, {2}, {4}, {5}}, {{}, {-1}, {}, {}, {3}, {}, {}});
  }
  // SqueezeNet's fire module: a squeeze 1x1, two expand layers (1x1 and 3x3) whose outputs are the blocks of a
  // Concat written in place (slot 4, the 3x3's block 16 channels in), a 1x1 over the Concat.
  const std::vector<NetOp> fire = {conv2d(0, 1, 32, 13, 8, 1, 1, 0), conv2d(1, 2, 8, 13, 16, 1, 1, 0),
                                   conv2d(1, 3, 8, 13, 16, 3, 1, 1), conv2d(4, 5, 32, 13, 10, 1, 1, 0)};
  const kernels::SeqAliases aliases = {{2, {4, 0}}, {3, {4, 16 * 13 * 13 * 4}}};
  for (int ranks : {1, 8}) {
    CAPTURE(ranks);
    const std::optional<kernels::SeqProgram> p = kernels::build_seqnet(fire, ranks, kOptin, &why, &aliases);
    REQUIRE_MESSAGE(p.has_value(), why);
    REQUIRE(p->layers.size() == 4);
    const kernels::SeqLayer& e1 = p->layers[1];
    const kernels::SeqLayer& e3 = p->layers[2];
    CHECK(e3.out_base == e1.out_base + 16 * e1.out_cs);
    CHECK(p->layers[3].in_base == e1.out_base);
    CHECK(p->layers[3].C == 32);
    CHECK((e1.local == 0 && e3.local == 0));
    check_regions(*p, {{-1}, {0}, {0}, {1, 2}});
  }
  // Without the aliases the last layer reads a tensor no layer wrote: one from before the cut, staged too.
  const std::optional<kernels::SeqProgram> apart = kernels::build_seqnet(fire, 8, kOptin, &why);
  REQUIRE_MESSAGE(apart.has_value(), why);
  REQUIRE(apart->inputs.size() == 2);
  CHECK((apart->inputs[0].slot == 0 && apart->inputs[1].slot == 4));
  CHECK(apart->layers[3].in_base == apart->inputs[1].base);
  check_regions(*apart, {{-1}, {0}, {0}, {-2}});
  // The Concat copied instead (its blocks' Copy ops, as the planner describes a Concat not in place): the 1x1 after
  // it reads the whole of it, both blocks.
  std::vector<NetOp> copied(fire.begin(), fire.end() - 1);
  for (int b = 0; b < 2; ++b) {
    NetOp c;
    c.kind = NetOpKind::Copy;
    c.in0 = 2 + b, c.out = 4;
    c.in0_stride = c.count = 16 * 13 * 13;
    c.out_stride = 32 * 13 * 13;
    c.out_offset = b * 16 * 13 * 13;
    copied.push_back(c);
  }
  copied.push_back(fire.back());
  const std::optional<kernels::SeqProgram> by_copies = kernels::build_seqnet(copied, 8, kOptin, &why);
  REQUIRE_MESSAGE(by_copies.has_value(), why);
  REQUIRE(by_copies->layers.size() == 6);
  CHECK(by_copies->layers[5].C == 32);
  CHECK(by_copies->layers[5].in_base == by_copies->layers[3].out_base);
  CHECK(by_copies->layers[4].out_base == by_copies->layers[3].out_base + 16 * by_copies->layers[3].out_cs);
  // A Concat block of channels it does not start at is refused.
  const kernels::SeqAliases misaligned = {{2, {4, 0}}, {3, {4, 16 * 13 * 13 * 4 + 4}}};
  CHECK_FALSE(kernels::build_seqnet(fire, 8, kOptin, &why, &misaligned).has_value());
  // A squeeze-excitation block: depthwise 3x3, global pool, 1x1 down + ReLU, 1x1 up + Sigmoid, the depthwise output
  // times the gate (one value a channel), a projection.
  std::vector<NetOp> se = {conv2d(0, 1, 48, 8, 48, 3, 1, 1, 48), global_pool(1, 2, 48, 64),    dense(2, 3, 48, 12),
                           dense(3, 4, 12, 48), binary(1, 4, 5, kernels::NetBinary::Mul, 48, 8, true),
                           conv2d(5, 6, 48, 8, 16, 1, 1, 0)};
  se[3].act = kernels::ParamAct::Sigmoid;
  for (int ranks : {1, 4, 16}) {
    CAPTURE(ranks);
    const std::optional<kernels::SeqProgram> p = kernels::build_seqnet(se, ranks, kOptin, &why);
    REQUIRE_MESSAGE(p.has_value(), why);
    REQUIRE(p->layers.size() == 6);
    const kernels::SeqLayer& gate = p->layers[4];
    CHECK(gate.kind == NetOpKind::Binary);
    CHECK(gate.in_base == p->layers[0].out_base);
    CHECK(gate.res_base == p->layers[3].out_base);
    CHECK((gate.res_rs == 0 && gate.res_xs == 0));
    // The depthwise output is read per channel only (the pool and the product): local; the gate's up layer is read
    // per channel too.
    CHECK(p->layers[0].local == 1);
    CHECK(p->layers[3].local == 1);
    CHECK(p->layers[1].local == 0);
    check_regions(*p, {{-1}, {0}, {1}, {2}, {0}, {4}}, {{}, {}, {}, {}, {3}, {}});
  }
  // The gate as a's operand commutes (b * a): swapped.
  se[4] = binary(4, 1, 5, kernels::NetBinary::Mul, 48, 8, false);
  std::swap(se[4].sa, se[4].sb);
  se[4].sa[0] = 1, se[4].sa[1] = 0, se[4].sa[2] = 0;
  const std::optional<kernels::SeqProgram> swapped = kernels::build_seqnet(se, 8, kOptin, &why);
  REQUIRE_MESSAGE(swapped.has_value(), why);
  CHECK(swapped->layers[4].in_base == swapped->layers[0].out_base);
  // Subtraction does not commute.
  se[4].binary = kernels::NetBinary::Sub;
  CHECK_FALSE(kernels::build_seqnet(se, 8, kOptin, &why).has_value());
  CHECK(why.find("broadcasts") != std::string::npos);
}

TEST_CASE("sequence kernel program: a cut inside an in-place Concat, its first block staged (DenseNet after a transition)") {
  // Slot 0, written before the cut, is the first block of Concat 9 (8 of its 12 channels of 6x6). The layer after
  // the cut: a normalization (an affine map, which sees [8][36][1]), a 1x1, a 3x3 into the Concat's second block;
  // then the whole Concat through a normalization, a global pool and a dense layer.
  const std::vector<NetOp> ops = {affine(0, 1, 8, 36),        conv2d(1, 2, 8, 6, 16, 1, 1, 0),
                                  conv2d(2, 3, 16, 6, 4, 3, 1, 1), affine(9, 4, 12, 36),
                                  global_pool(4, 5, 12, 36),  dense(5, 6, 12, 10)};
  const kernels::SeqAliases aliases = {{0, {9, 0}}, {3, {9, 8 * 36 * 4}}};
  std::string why;
  for (int ranks : {1, 4}) {
    CAPTURE(ranks);
    const std::optional<kernels::SeqProgram> p = kernels::build_seqnet(ops, ranks, kOptin, &why, &aliases);
    REQUIRE_MESSAGE(p.has_value(), why);
    REQUIRE(p->layers.size() == 6);
    // The staged block takes the extents the 3x3 writes the Concat with, and so does the affine map reading it.
    REQUIRE(p->inputs.size() == 1);
    CHECK(p->inputs[0].slot == 0);
    CHECK((p->layers[0].H == 6 && p->layers[0].W == 6));
    // The 3x3 writes channels 8.. of the Concat the staged block begins; the second normalization reads all 12.
    CHECK(p->layers[3].C == 12);
    CHECK(p->layers[3].in_base == p->inputs[0].base);
    CHECK(p->layers[2].out_base == p->inputs[0].base + 8 * p->layers[2].out_cs);
  }
}

// A shared layer that some ranks have no channels of (12 filters on 16 ranks) is no point every rank has passed:
// ranks 12-15 send it nothing, so the others may pass its wait while those still run the local depthwise layer before
// it, reading the first convolution's output. A tensor shared after it must not lie in that output's floats.
TEST_CASE("sequence kernel program: a layer some ranks have no channels of does not end earlier tensors' spans") {
  std::string why;
  std::vector<NetOp> ops = {conv2d(0, 1, 32, 7, 32, 3, 1, 1), conv2d(1, 2, 32, 7, 32, 3, 1, 1, 32),
                            conv2d(1, 3, 32, 7, 12, 1, 1, 0), conv2d(3, 4, 12, 7, 32, 1, 1, 0),
                            global_pool(4, 5, 32, 49),        dense(5, 6, 32, 10)};
  ops[3].in1 = 2;  // (the depthwise output as the residual: read per channel, so the depthwise layer is local)
  const std::optional<kernels::SeqProgram> p = kernels::build_seqnet(ops, 16, kOptin, &why);
  REQUIRE_MESSAGE(p.has_value(), why);
  REQUIRE(p->layers.size() == 6);
  CHECK(p->layers[1].local == 1);
  CHECK(p->layers[2].local == 0);
  CHECK(p->layers[2].cb == 1);  // (ranks 12-15: none)
  CHECK(p->layers[4].local == 0);
  const kernels::SeqLayer& first = p->layers[0];
  const kernels::SeqLayer& pooled = p->layers[4];
  const int first_end = first.out_base + first.OC * first.out_cs, pooled_end = pooled.out_base + pooled.OC * pooled.out_cs;
  CHECK((pooled_end <= first.out_base || first_end <= pooled.out_base));
}

TEST_CASE("sequence kernel program: a channel shuffle reads its channels through a map") {
  std::string why;
  // Grouped 1x1 (3 groups of 8) -> shuffle [3][8] -> [8][3] -> depthwise 3x3.
  NetOp shuffle;
  shuffle.kind = NetOpKind::Permute;
  shuffle.in0 = 1, shuffle.out = 2;
  shuffle.rank = 4;
  const int dims[4] = {8, 3, 7, 7}, sa[4] = {49, 8 * 49, 7, 1};
  for (int d = 0; d < 4; ++d) shuffle.dims[d] = dims[d], shuffle.sa[d] = sa[d];
  shuffle.out_stride = shuffle.count = 24 * 49;
  std::vector<NetOp> ops = {conv2d(0, 1, 24, 7, 24, 1, 1, 0, 3), shuffle, conv2d(2, 3, 24, 7, 24, 3, 1, 1, 24),
                            conv2d(3, 4, 24, 7, 12, 1, 1, 0)};
  const std::optional<kernels::SeqProgram> p = kernels::build_seqnet(ops, 4, kOptin, &why);
  REQUIRE_MESSAGE(p.has_value(), why);
  REQUIRE(p->layers.size() == 4);
  const kernels::SeqLayer& s = p->layers[1];
  CHECK(s.kind == NetOpKind::Permute);
  CHECK((s.C == 24 && s.H == 7 && s.W == 7));
  // Out channel i * 3 + j reads in channel j * 8 + i.
  REQUIRE(p->channel_maps.size() == 24);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 3; ++j) CHECK(p->channel_maps[static_cast<size_t>(s.t_at + i * 3 + j)] == j * 8 + i);
  }
  CHECK(p->layers[0].local == 0);  // (the shuffle reads every rank's channels)
  CHECK(p->tap_ints == 24 + 8 + 9 + 24);  // (the map, then each direct layer's taps)
  check_regions(*p, chain_of(4));
  // A transpose that moves the rows is refused.
  ops[1].sa[2] = 1, ops[1].sa[3] = 7;
  CHECK_FALSE(kernels::build_seqnet(ops, 4, kOptin, &why).has_value());
  CHECK(why.find("rows or columns") != std::string::npos);
}

TEST_CASE("sequence kernel program: what it refuses") {
  std::string why;
  // A residual of other extents than the convolution's output.
  std::vector<NetOp> ops = series();
  ops[2].in1 = 0;
  CHECK_FALSE(kernels::build_seqnet(ops, 8, kOptin, &why).has_value());
  CHECK(why.find("other extents") != std::string::npos);
  // Ops that read tensors written before the cut (not its input): staged, up to four in all.
  ops = series();
  ops[4].in0 = 99;
  ops[4].in0_stride = 64 * 32;
  const std::optional<kernels::SeqProgram> two = kernels::build_seqnet(ops, 8, kOptin, &why);
  REQUIRE_MESSAGE(two.has_value(), why);
  REQUIRE(two->inputs.size() == 2);
  CHECK((two->inputs[1].slot == 99 && two->inputs[1].image_floats == 64 * 32 && two->inputs[1].c == 64));
  ops = {conv1d(0, 1, 8, 64, 8, 3, 1, 1, 1)};
  for (int k = 1; k <= 4; ++k) {
    ops.push_back(conv1d(k, k + 1, 8, 64, 8, 3, 1, 1, 1));
    ops.back().in1 = 100 + k;
  }
  CHECK_FALSE(kernels::build_seqnet(ops, 8, kOptin, &why).has_value());
  CHECK(why.find("more tensors from before the cut") != std::string::npos);
  ops.pop_back();
  CHECK(kernels::build_seqnet(ops, 8, kOptin, &why).has_value());
  // A tensor one convolution reads padded and a later layer flattened.
  ops = series();
  ops[4].in0 = 2;
  CHECK_FALSE(kernels::build_seqnet(ops, 8, kOptin, &why).has_value());
  CHECK(why.find("flattened") != std::string::npos);
  // A kind it does not run.
  ops = series();
  ops[5].kind = NetOpKind::Binary;
  CHECK_FALSE(kernels::build_seqnet(ops, 8, kOptin, &why).has_value());
  // Activations beyond shared memory: 64 channels of 2000 samples, twice.
  ops = {conv1d(0, 1, 64, 2000, 64, 3, 1, 1, 1), global_pool(1, 2, 64, 2000)};
  CHECK_FALSE(kernels::build_seqnet(ops, 8, kOptin, &why).has_value());
  CHECK(why.find("shared memory") != std::string::npos);
  // One block an image holds every weight itself: ts_cnn1d's fit.
  CHECK(kernels::build_seqnet(series(), 1, kOptin, &why).has_value());
  // A dense layer whose weights do not fit beside the rest is read from global memory.
  ops = series();
  ops.back() = dense(6, 7, 128, 6);
  ops.insert(ops.end() - 1, dense(6, 8, 128, 12000));
  ops.back().in0 = 8;
  ops.back().g.C = 12000;
  const std::optional<kernels::SeqProgram> big = kernels::build_seqnet(ops, 8, kOptin, &why);
  REQUIRE_MESSAGE(big.has_value(), why);
  CHECK(big->layers[4].w_at == -1);
  CHECK(big->layers[5].w_at == -1);
}

// The kernel compiled for a program (seqnet_jit_source): every layer's fields are constants of the source, so
// nothing may index the layers or the parameters at run time (ptxas would put them in local memory, and every
// constant with them: it says so in the log), and the three-input graph's program (residuals, in-place Concat
// blocks, a gate) compiles as the chain does. Whether the compiled kernels compute the right thing is the GPU
// tests' part (tests/gpu/test_seqnet.cpp forces them against the CPU backend).
TEST_CASE("sequence kernel JIT: ts_cnn1d's programs compile for sm_90 and sm_75, without local memory or spills") {
  std::string why;
  for (const auto& [ranks, arch] : {std::pair{16, 90}, std::pair{4, 90}, std::pair{1, 90}, std::pair{1, 75}}) {
    CAPTURE(ranks);
    CAPTURE(arch);
    const std::optional<kernels::SeqProgram> p = kernels::build_seqnet(series(), ranks, kOptin, &why);
    REQUIRE_MESSAGE(p.has_value(), why);
    const std::string source = kernels::seqnet_jit_source(*p);
    CHECK(source.find(kernels::kSeqJitEntry) != std::string::npos);
    // One block of constants a layer.
    size_t blocks = 0;
    for (size_t at = source.find("kLayer[]"); at != std::string::npos; at = source.find("kLayer[]", at + 1)) ++blocks;
    CHECK(blocks == p->layers.size());
    std::string log;
    const std::string cubin = kernels::compile_jit_source(source, arch, "the sequence kernel", &log);
    CHECK(cubin.compare(0, 4, "\x7f" "ELF") == 0);
    CHECK_MESSAGE(log.find("ocal memory") == std::string::npos, log);  // "Local memory used for function ..."
    CHECK_MESSAGE(log.find("spill") == std::string::npos, log);
    // The built kernel's table is not part of the compiled one's shared memory.
    CHECK(p->jit_smem_bytes() == p->smem_bytes() - p->layers.size() * sizeof(kernels::SeqLayer));
  }
}

TEST_CASE("sequence kernel JIT: a source that does not compile names NVRTC's error and the kernel") {
  try {
    kernels::compile_jit_source("#include \"kernels/seqnet_device.cuh\"\nthis is not C++;\n", 90, "the sequence kernel");
    FAIL("compiled");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find("NVRTC could not compile the sequence kernel") != std::string::npos);
    CHECK(what.find("error") != std::string::npos);
  }
}
#endif  // CNNRT_WITH_CUDA
