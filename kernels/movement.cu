// Data movement kernels over simplified N-D spaces (nd_index.cuh), each instantiated for both index widths.
#include "kernels/movement.cuh"
#include "kernels/nd_index.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {
namespace {

constexpr int kThreads = 256;
enum CopyOperand { kOut = 0, kIn = 1 };

// ---- strided copy ------------------------------------------------------------------------------------

template <class Index, int kWidth>
__global__ void strided_copy_kernel(const float* __restrict__ in, float* __restrict__ out, NdIndexer<Index, 2> indexer,
                                    Index packs) {
  wait_for_prior_grid();  // launched overlapped (PDL): nothing global is touched before this
  using Offset = typename NdIndexer<Index, 2>::Offset;
  const bool in_repeated = indexer.innermost_stride(kIn) == 0;
  for (Index i = global_thread_index<Index>(); i < packs; i += global_thread_count<Index>()) {
    Offset offsets[2];
    indexer.offsets_of(i, offsets);
    store_pack<kWidth>(out, offsets[kOut], load_pack<kWidth>(in, offsets[kIn], in_repeated));
  }
}

template <class Index, int kWidth>
void launch_copy_space(const float* in, float* out, const StridedSpace<2>& space, cudaStream_t stream) {
  const int64_t packs = space.count();
  launch_overlapped(strided_copy_kernel<Index, kWidth>, dim3(blocks_for(packs, kThreads)), dim3(kThreads), 0, stream, 1,
      in, out, space.template indexer<Index>(), static_cast<Index>(packs));
}

// ---- concat ------------------------------------------------------------------------------------------

struct ConcatSources {
  const float* in[kMaxConcatInputs];
};

// One thread a pack of kWidth output elements (a pack never straddles two inputs: the boundaries are multiples
// of kWidth). `desc` is in packs. The parameters are indexed by a run-time input number: __grid_constant__
// reads them from the constant bank where a plain parameter would be copied to each thread's local memory.
template <class Index, int kWidth>
__global__ void concat_kernel(const __grid_constant__ ConcatSources sources, float* __restrict__ out,
                              const __grid_constant__ ConcatDesc desc, FixedDivisor<Index> row, Index packs) {
  wait_for_prior_grid();  // launched overlapped (PDL): nothing global is touched before this
  for (Index i = global_thread_index<Index>(); i < packs; i += global_thread_count<Index>()) {
    const Index r = row.quotient(i);
    const Index column = i - r * row.divisor;
    int k = 0;
    while (k + 1 < desc.inputs && static_cast<int64_t>(column) >= desc.starts[k + 1]) ++k;
    const Index width = static_cast<Index>(desc.starts[k + 1] - desc.starts[k]);
    const Index source = r * width + column - static_cast<Index>(desc.starts[k]);
    store_pack<kWidth>(out, static_cast<int64_t>(i) * kWidth,
                       load_pack<kWidth>(sources.in[k], static_cast<int64_t>(source) * kWidth, false));
  }
}

template <class Index, int kWidth>
void launch_concat_with(const ConcatSources& sources, float* out, ConcatDesc desc, cudaStream_t stream) {
  for (int k = 0; k <= desc.inputs; ++k) desc.starts[k] /= kWidth;
  desc.row /= kWidth;
  const int64_t packs = desc.outer * desc.row;
  launch_overlapped(concat_kernel<Index, kWidth>, dim3(blocks_for(packs, kThreads)), dim3(kThreads), 0, stream, 1,
      sources, out, desc, FixedDivisor<Index>::make(static_cast<Index>(desc.row)), static_cast<Index>(packs));
}

// ---- pad ---------------------------------------------------------------------------------------------

template <class Index>
struct PadParams {
  using Offset = typename NdIndexer<Index, 1>::Offset;
  NdIndexer<Index, 1> out_space;  // output extents; strides[0]: the input's contiguous strides
  int64_t in_dims[kMaxRank];
  int64_t pads_begin[kMaxRank];
  PadMode mode;
  float value;
};

// Input index read at padded-axis position `p` (output index minus pads_begin), or -1 for the fill value.
// 64-bit so that the reflection period 2 * (extent - 1) cannot overflow on the 32-bit index path.
__device__ int64_t pad_source(int64_t p, int64_t extent, PadMode mode) {
  if (p >= 0 && p < extent) return p;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Edge: return p < 0 ? 0 : extent - 1;
    case PadMode::Reflect: {
      if (extent == 1) return 0;
      const int64_t period = 2 * (extent - 1);  // reflect(p) repeats with this period
      const int64_t phase = ((p % period) + period) % period;
      return phase < extent ? phase : period - phase;
    }
  }
  return -1;
}

template <class Index>
__global__ void pad_kernel(const float* __restrict__ in, float* __restrict__ out, PadParams<Index> params,
                           Index count) {
  using Offset = typename PadParams<Index>::Offset;
  for (Index i = global_thread_index<Index>(); i < count; i += global_thread_count<Index>()) {
    Offset source = 0;
    bool inside = true;
    params.out_space.for_each_coordinate(i, [&](int axis, Index coordinate) {
      const int64_t index =
          pad_source(static_cast<int64_t>(coordinate) - params.pads_begin[axis], params.in_dims[axis], params.mode);
      inside = inside && index >= 0;
      source += static_cast<Offset>(index) * params.out_space.strides[0][axis];
    });
    out[i] = inside ? in[source] : params.value;
  }
}

template <class Index>
void launch_pad_with(const float* in, float* out, const PadDesc& desc, int64_t count, cudaStream_t stream) {
  StridedSpace<1> space;  // not simplified: each axis pads on its own
  space.rank = desc.rank;
  for (int axis = 0; axis < desc.rank; ++axis) space.extents[axis] = desc.out_dims[axis];
  contiguous_strides(desc.rank, desc.in_dims, space.strides[0]);
  PadParams<Index> params{};
  params.out_space = space.template indexer<Index>();
  for (int axis = 0; axis < desc.rank; ++axis) {
    params.in_dims[axis] = desc.in_dims[axis];
    params.pads_begin[axis] = desc.pads_begin[axis];
  }
  params.mode = desc.mode;
  params.value = desc.value;
  pad_kernel<Index><<<blocks_for(count, kThreads), kThreads, 0, stream>>>(in, out, params, static_cast<Index>(count));
}

// ---- gather ------------------------------------------------------------------------------------------

// One thread per output element of [outer, index_count, inner].
template <class Index>
__global__ void gather_kernel(const float* __restrict__ data, const int64_t* __restrict__ indices,
                              float* __restrict__ out, FixedDivisor<Index> inner_extent,
                              FixedDivisor<Index> index_count, int64_t axis_extent, Index count) {
  for (Index i = global_thread_index<Index>(); i < count; i += global_thread_count<Index>()) {
    const Index row = inner_extent.quotient(i);  // o * index_count + j
    const Index inner = i - row * inner_extent.divisor;
    const Index outer = index_count.quotient(row);
    const Index slot = row - outer * index_count.divisor;
    int64_t index = indices[slot];
    if (index < 0) index += axis_extent;
    const int64_t row_start =
        (static_cast<int64_t>(outer) * axis_extent + index) * static_cast<int64_t>(inner_extent.divisor);
    out[i] = data[row_start + static_cast<int64_t>(inner)];
  }
}

template <class Index>
void launch_gather_with(const float* data, const int64_t* indices, float* out, const GatherDesc& desc, int64_t count,
                        cudaStream_t stream) {
  gather_kernel<Index><<<blocks_for(count, kThreads), kThreads, 0, stream>>>(
      data, indices, out, FixedDivisor<Index>::make(static_cast<Index>(desc.inner)),
      FixedDivisor<Index>::make(static_cast<Index>(desc.index_count)), desc.axis_extent, static_cast<Index>(count));
}

constexpr int64_t kIndex32Limit = int64_t{1} << 31;

}  // namespace

StridedCopyDesc transpose_desc(int rank, const int64_t* in_dims, const int64_t* perm) {
  int64_t in_strides[kMaxRank];
  contiguous_strides(rank, in_dims, in_strides);
  StridedCopyDesc desc;
  desc.rank = rank;
  for (int axis = 0; axis < rank; ++axis) {
    desc.dims[axis] = in_dims[perm[axis]];
    desc.in_strides[axis] = in_strides[perm[axis]];
  }
  contiguous_strides(rank, desc.dims, desc.out_strides);
  return desc;
}

StridedCopyDesc slice_desc(int rank, const int64_t* in_dims, const int64_t* out_dims, const int64_t* starts,
                           const int64_t* steps) {
  int64_t in_strides[kMaxRank];
  contiguous_strides(rank, in_dims, in_strides);
  StridedCopyDesc desc;
  desc.rank = rank;
  for (int axis = 0; axis < rank; ++axis) {
    desc.dims[axis] = out_dims[axis];
    desc.in_offset += starts[axis] * in_strides[axis];
    desc.in_strides[axis] = steps[axis] * in_strides[axis];
  }
  contiguous_strides(rank, out_dims, desc.out_strides);
  return desc;
}

StridedCopyDesc concat_input_desc(int rank, const int64_t* in_dims, const int64_t* out_dims, int axis,
                                  int64_t axis_offset) {
  StridedCopyDesc desc;
  desc.rank = rank;
  for (int d = 0; d < rank; ++d) desc.dims[d] = in_dims[d];
  contiguous_strides(rank, in_dims, desc.in_strides);
  contiguous_strides(rank, out_dims, desc.out_strides);
  desc.out_offset = axis_offset * desc.out_strides[axis];
  return desc;
}

void launch_strided_copy(const float* in, float* out, const StridedCopyDesc& desc, cudaStream_t stream) {
  StridedSpace<2> space;
  space.rank = desc.rank;
  for (int axis = 0; axis < desc.rank; ++axis) {
    space.extents[axis] = desc.dims[axis];
    space.strides[kOut][axis] = desc.out_strides[axis];
    space.strides[kIn][axis] = desc.in_strides[axis];
  }
  if (space.count() == 0) return;
  space.simplify();
  const float* in_base = in + desc.in_offset;
  float* out_base = out + desc.out_offset;
  if (!space.fits_index32()) {
    launch_copy_space<uint64_t, 1>(in_base, out_base, space, stream);
  } else if (space.allows_packs_of_4({out_base, in_base})) {
    launch_copy_space<uint32_t, 4>(in_base, out_base, space.packs_of_4(), stream);
  } else {
    launch_copy_space<uint32_t, 1>(in_base, out_base, space, stream);
  }
}

ConcatDesc concat_desc(int inputs, int rank, const int64_t* const* in_dims, const int64_t* out_dims, int axis) {
  ConcatDesc desc;
  desc.inputs = inputs;
  int64_t inner = 1;
  for (int d = 0; d < axis; ++d) desc.outer *= out_dims[d];
  for (int d = axis + 1; d < rank; ++d) inner *= out_dims[d];
  for (int k = 0; k < inputs; ++k) desc.starts[k + 1] = desc.starts[k] + in_dims[k][axis] * inner;
  desc.row = desc.starts[inputs];
  return desc;
}

void launch_concat(const float* const* inputs, float* out, const ConcatDesc& desc, cudaStream_t stream) {
  const int64_t count = desc.outer * desc.row;
  if (count == 0) return;
  ConcatSources sources{};
  bool packs_of_4 = desc.row % 4 == 0 && aligned_16(out);
  for (int k = 0; k < desc.inputs; ++k) {
    sources.in[k] = inputs[k];
    packs_of_4 = packs_of_4 && desc.starts[k] % 4 == 0 && aligned_16(inputs[k]);
  }
  if (count >= kIndex32Limit) {
    launch_concat_with<uint64_t, 1>(sources, out, desc, stream);
  } else if (packs_of_4) {
    launch_concat_with<uint32_t, 4>(sources, out, desc, stream);
  } else {
    launch_concat_with<uint32_t, 1>(sources, out, desc, stream);
  }
}

void launch_pad(const float* in, float* out, const PadDesc& desc, cudaStream_t stream) {
  int64_t out_count = 1, in_count = 1;
  for (int axis = 0; axis < desc.rank; ++axis) {
    out_count *= desc.out_dims[axis];
    in_count *= desc.in_dims[axis];
  }
  if (out_count == 0) return;
  if (out_count < kIndex32Limit && in_count < kIndex32Limit) {
    launch_pad_with<uint32_t>(in, out, desc, out_count, stream);
  } else {
    launch_pad_with<uint64_t>(in, out, desc, out_count, stream);
  }
}

void launch_gather(const float* data, const int64_t* indices, float* out, const GatherDesc& desc, cudaStream_t stream) {
  const int64_t count = desc.outer * desc.index_count * desc.inner;
  if (count == 0) return;
  // 32-bit indexing covers the output; data offsets are computed in 64 bits either way.
  if (count < kIndex32Limit) {
    launch_gather_with<uint32_t>(data, indices, out, desc, count, stream);
  } else {
    launch_gather_with<uint64_t>(data, indices, out, desc, count, stream);
  }
}

}  // namespace cnnrt::kernels
