// Binary broadcast ops: one kernel over a simplified N-D space (nd_index.cuh), instantiated for the two index
// widths and, on the 32-bit path, for packs of 1 or 4 innermost elements. The op is a uniform kernel
// argument (see elementwise.cu for why a switch rather than a template).
#include "kernels/broadcast.cuh"
#include "kernels/movement.cuh"
#include "kernels/nd_index.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {
namespace {

constexpr int kThreads = 256;
enum Operand { kOut = 0, kA = 1, kB = 2 };  // operand order in the StridedSpace and NdIndexer

__device__ float apply_binary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Pow: return powf(a, b);
    case BinaryOp::Max: return a < b ? b : a;
    case BinaryOp::Min: return b < a ? b : a;
    case BinaryOp::PRelu: return a < 0.0f ? a * b : a;
  }
  return a;
}

// No __restrict__: out may alias a or b (each pack is read before it is written, by the same thread).
template <class Index, int kWidth>
__global__ void binary_kernel(BinaryOp op, const float* a, const float* b, float* out, NdIndexer<Index, 3> indexer,
                              Index packs) {
  wait_for_prior_grid();  // launched overlapped (PDL): nothing global is touched before this
  using Offset = typename NdIndexer<Index, 3>::Offset;
  const bool a_repeated = indexer.innermost_stride(kA) == 0;
  const bool b_repeated = indexer.innermost_stride(kB) == 0;
  for (Index i = global_thread_index<Index>(); i < packs; i += global_thread_count<Index>()) {
    Offset offsets[3];
    indexer.offsets_of(i, offsets);
    const Pack<kWidth> x = load_pack<kWidth>(a, offsets[kA], a_repeated);
    const Pack<kWidth> y = load_pack<kWidth>(b, offsets[kB], b_repeated);
    Pack<kWidth> result;
#pragma unroll
    for (int e = 0; e < kWidth; ++e) result.v[e] = apply_binary(op, x.v[e], y.v[e]);
    store_pack<kWidth>(out, offsets[kOut], result);
  }
}

template <class Index, int kWidth>
void launch_binary_space(BinaryOp op, const float* a, const float* b, float* out, const StridedSpace<3>& space,
                         cudaStream_t stream) {
  const int64_t packs = space.count();
  launch_overlapped(binary_kernel<Index, kWidth>, dim3(blocks_for(packs, kThreads)), dim3(kThreads), 0, stream, 1,
      op, a, b, out, space.template indexer<Index>(), static_cast<Index>(packs));
}

}  // namespace

BroadcastDesc make_broadcast_desc(int out_rank, const int64_t* out_dims, int a_rank, const int64_t* a_dims, int b_rank,
                                  const int64_t* b_dims) {
  BroadcastDesc desc;
  desc.rank = out_rank;
  for (int axis = 0; axis < out_rank; ++axis) desc.out_dims[axis] = out_dims[axis];
  broadcast_strides(out_rank, a_rank, a_dims, desc.a_strides);
  broadcast_strides(out_rank, b_rank, b_dims, desc.b_strides);
  return desc;
}

void launch_binary(BinaryOp op, const float* a, const float* b, float* out, const BroadcastDesc& desc,
                   cudaStream_t stream) {
  StridedSpace<3> space;
  space.rank = desc.rank;
  for (int axis = 0; axis < desc.rank; ++axis) {
    space.extents[axis] = desc.out_dims[axis];
    space.strides[kA][axis] = desc.a_strides[axis];
    space.strides[kB][axis] = desc.b_strides[axis];
  }
  contiguous_strides(desc.rank, desc.out_dims, space.strides[kOut]);
  if (space.count() == 0) return;
  space.simplify();
  if (!space.fits_index32()) {
    launch_binary_space<uint64_t, 1>(op, a, b, out, space, stream);
  } else if (space.allows_packs_of_4({out, a, b})) {
    launch_binary_space<uint32_t, 4>(op, a, b, out, space.packs_of_4(), stream);
  } else {
    launch_binary_space<uint32_t, 1>(op, a, b, out, space, stream);
  }
}

void launch_expand(const float* in, float* out, const BroadcastDesc& desc, cudaStream_t stream) {
  StridedCopyDesc copy;
  copy.rank = desc.rank;
  for (int axis = 0; axis < desc.rank; ++axis) {
    copy.dims[axis] = desc.out_dims[axis];
    copy.in_strides[axis] = desc.a_strides[axis];
  }
  contiguous_strides(desc.rank, desc.out_dims, copy.out_strides);
  launch_strided_copy(in, out, copy, stream);
}

}  // namespace cnnrt::kernels
