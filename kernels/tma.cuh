// Hopper's tensor memory accelerator (TMA) for a 2-D tile of a row-major FP32 matrix, and the shared-memory
// barrier (mbarrier) its copies complete on: one thread asks for a whole tile, the copy engine writes it
// (128-byte swizzled, as wgmma's K-major operands want it), and the block waits on the barrier's phase.
// Used by wgh (conv2d_wgh.cu) for its filter tiles: ~40 instructions a warp a stage of 16-byte cp.async and
// their addresses become one instruction for one thread. sm_90a only.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (the function comes through the runtime: no libcuda link)

#include <cstdint>

namespace cnnrt::kernels::tma {

#ifdef __CUDACC__
// Barrier `bar` (8 bytes of shared memory) expecting `count` arrivals a phase.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes initialised barriers visible to the copy engine (and, behind a __syncthreads, to the block).
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;\n" ::: "memory");
}
// This thread's arrival, announcing `bytes` the copies of this phase will deliver.
__device__ __forceinline__ void mbar_arrive_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits until the barrier's phase `parity` (0, 1, 0, ... for its successive phases) has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// The box at (column c0, row c1) of the matrix `map` describes into shared memory `dst` (1024-byte aligned
// for the 128-byte swizzle), completing on `bar`.
__device__ __forceinline__ void load_2d(uint32_t dst, const CUtensorMap& map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
#endif  // __CUDACC__

// The map of a row-major FP32 matrix of `rows` x `cols` (row pitch cols * 4 bytes, a multiple of 16) read in
// boxes of box_rows x box_cols, box_cols * 4 <= 128 bytes, written 128-byte swizzled. False when the
// driver has no TMA (then the caller does not offer the kernel).
bool encode_2d_swizzled(CUtensorMap* map, const float* base, uint64_t rows, uint64_t cols, uint32_t box_rows,
                        uint32_t box_cols);
// Whether encode_2d_swizzled can work here (the driver's entry point was found).
bool available();

}  // namespace cnnrt::kernels::tma
