// The sequence kernel's program (kernels/seqnet.cuh, build_seqnet): what it runs, how it lays out each layer's
// input in shared memory (a convolution's padding as a zero halo, dense where a flatten follows), how it splits
// and blocks the work, and what it refuses. Host only: no GPU.
#ifdef CNNRT_WITH_CUDA
#include <doctest/doctest.h>

#include <string>
#include <vector>

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
  CHECK(p->in_image_floats == 9 * 128);
  CHECK(p->out_image_floats == 6);
  CHECK(p->smem_bytes() < static_cast<size_t>(kOptin));
}

// A shared layer's output buffer (other ranks store into it) is one that no layer since the last shared layer reads;
// every layer writes a buffer it does not read; a layer reads what the one before wrote.
void check_buffers(const kernels::SeqProgram& p) {
  int last_shared = -1;
  for (size_t k = 0; k + 1 < p.layers.size(); ++k) {
    const kernels::SeqLayer& l = p.layers[k];
    CAPTURE(k);
    CHECK(l.out_buf != l.in_buf);
    CHECK(p.layers[k + 1].in_buf == l.out_buf);
    if (!l.local) {
      for (size_t i = static_cast<size_t>(last_shared + 1); i <= k; ++i) CHECK(p.layers[i].in_buf != l.out_buf);
      last_shared = static_cast<int>(k);
    }
  }
  CHECK(p.layers.front().in_buf == 0);
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
  CHECK(p->layers[3].out_buf == 2);
  CHECK(p->aux_floats >= 128);
  check_buffers(*p);
  // A depthwise convolution (and its pool) after a convolution of as many channels: that convolution is local.
  std::vector<NetOp> ops = {conv1d(0, 1, 8, 64, 32, 3, 1, 1, 1), conv1d(1, 2, 32, 64, 32, 3, 1, 1, 1, 32),
                            max_pool1d(2, 3, 32, 64, 2), conv1d(3, 4, 32, 32, 16, 1, 1, 0, 0)};
  const std::optional<kernels::SeqProgram> q = kernels::build_seqnet(ops, 8, kOptin, &why);
  REQUIRE_MESSAGE(q.has_value(), why);
  REQUIRE(q->layers.size() == 3);  // (the depthwise convolution and its pool are one layer)
  CHECK(q->layers[0].local == 1);
  check_buffers(*q);
  // A shared layer into the third buffer, then two local layers: the shared layer after them would find all three
  // buffers read since the last shared one, so no layer is local (two buffers, alternating).
  const std::vector<NetOp> chain = {conv1d(0, 1, 8, 64, 32, 3, 1, 1, 1),          conv1d(1, 2, 32, 64, 32, 3, 1, 1, 1, 32),
                                    conv1d(2, 3, 32, 64, 32, 1, 1, 0, 0),         conv1d(3, 4, 32, 64, 32, 3, 1, 1, 1, 32),
                                    conv1d(4, 5, 32, 64, 32, 3, 1, 1, 1, 32),      conv1d(5, 6, 32, 64, 16, 1, 1, 0, 0)};
  const std::optional<kernels::SeqProgram> r = kernels::build_seqnet(chain, 8, kOptin, &why);
  REQUIRE_MESSAGE(r.has_value(), why);
  REQUIRE(r->layers.size() == 6);
  for (const kernels::SeqLayer& l : r->layers) CHECK(l.local == 0);
  CHECK(r->aux_floats == 0);
  check_buffers(*r);
  // Every ranks' count: locals are the same decision for any split of equal channels.
  for (int ranks : {1, 4, 8}) {
    const std::optional<kernels::SeqProgram> s = kernels::build_seqnet(series(), ranks, kOptin, &why);
    REQUIRE_MESSAGE(s.has_value(), why);
    check_buffers(*s);
  }
}

TEST_CASE("sequence kernel program: what it refuses") {
  std::string why;
  // A residual (two inputs).
  std::vector<NetOp> ops = series();
  ops[2].in1 = 0;
  CHECK_FALSE(kernels::build_seqnet(ops, 8, kOptin, &why).has_value());
  CHECK(why.find("two inputs") != std::string::npos);
  // An op that reads another than the one before.
  ops = series();
  ops[4].in0 = 2;
  CHECK_FALSE(kernels::build_seqnet(ops, 8, kOptin, &why).has_value());
  CHECK(why.find("does not read the one before") != std::string::npos);
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
#endif  // CNNRT_WITH_CUDA
