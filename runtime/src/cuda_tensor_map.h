/* cuda_tensor_map.h — TMA tensor maps for kernels that read their operands with bulk tensor copies.
 *
 * A kernel whose metadata has the property `ptx.tensor_maps` (backends/ptx/gemm_sm90.py) takes, before its
 * launch arguments, one 128-byte CUtensorMap per entry of that property, by value (`__grid_constant__`).
 * The property reads `NAME:ARG:INNERxOUTER[xOUTER2[xOUTER3]]:SWIZZLE;…`: the map describes launch argument
 * ARG, a row-major tensor (its leading axes folded so that it has the box's rank), copied in boxes of INNER
 * (contiguous) by OUTER [by OUTER2 [by OUTER3]] elements into SWIZZLE-byte-swizzled shared memory; out-of-range elements
 * read as zeros.
 * The host encodes the maps at each launch (cuTensorMapEncodeTiled), so callers pass plain tensors. */
#ifndef TESSERA_SRC_CUDA_TENSOR_MAP_H_
#define TESSERA_SRC_CUDA_TENSOR_MAP_H_

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cuda_driver.h"

enum { TSR_CUDA_MAX_TENSOR_MAPS = 8 };   /* the attention backward's dK and dV kernel has 6 */

typedef struct tsr_cuda_tensor_map {
  alignas(64) uint8_t bytes[128];  /* CUtensorMap */
} tsr_cuda_tensor_map_t;

/* The parameters of one launch: the maps, then the caller's argument pointers. */
typedef struct tsr_cuda_params {
  tsr_cuda_tensor_map_t maps[TSR_CUDA_MAX_TENSOR_MAPS];
  void** params;  /* maps first, then l->args; NULL when the kernel has no maps (use l->args) */
} tsr_cuda_params_t;

/* Encodes the maps `spec` names for launch `l` and fills `out` (release with tsr_cuda_params_free). Fails with
 * TSR_ERROR_INVALID_VALUE and a message naming the kernel's operand when a tensor cannot be described (a row
 * whose byte length is not a multiple of 16, a misaligned base) or the property is malformed, and with
 * TSR_ERROR_UNSUPPORTED when the driver has no cuTensorMapEncodeTiled. */
tsr_status_t tsr_cuda_params_prepare(const tsr_cuda_driver_t* cu, const char* spec, const tsr_backend_launch_t* l,
                                     tsr_cuda_params_t* out);
void tsr_cuda_params_free(tsr_cuda_params_t* p);

#endif  /* TESSERA_SRC_CUDA_TENSOR_MAP_H_ */
