/* fadsl_device.cuh - the device-side tile library that every kernel emitted
 * by fadsl includes.  NVRTC receives it (and the headers it includes) as
 * embedded headers, so a machine with only the CUDA driver and libnvrtc can
 * compile fadsl kernels: nothing here includes a CUDA toolkit header.
 *
 *   fa_scalar.cuh  f16/bf16 storage types, conversions, math (accuracy notes)
 *   fa_tile.cuh    layouts, register moves, reductions, conversions through
 *                  shared memory, block-pointer loads and stores, atomics
 *   fa_mma.cuh     mma.sync m16n8k16, ldmatrix, cp.async, the FMA dot,
 *                  wgmma descriptors and fences, the tile formats
 *   fa_hopper.cuh  sm_90: mbarriers, bulk tensor copies (TMA), named
 *                  barriers, setmaxnreg, register fences
 */
#ifndef FADSL_DEVICE_CUH
#define FADSL_DEVICE_CUH

#include "fa_scalar.cuh"
#include "fa_tile.cuh"
#include "fa_mma.cuh"
#include "fa_hopper.cuh"

#endif
