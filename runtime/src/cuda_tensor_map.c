/* cuda_tensor_map.c — encoding the TMA tensor maps a kernel's metadata asks for (cuda_tensor_map.h). */
#include "cuda_tensor_map.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "launch.h"

/* CUtensorMapDataType of a Tessera dtype code (docs/image-format.md), -1 if TMA has none. */
static int map_dtype(uint32_t dtype) {
  switch (dtype) {
    case 1: return 7;          /* f32  -> FLOAT32 */
    case 3: return 6;          /* f16  -> FLOAT16 */
    case 4: return 9;          /* bf16 -> BFLOAT16 */
    case 5: case 9: case 14: case 15: return 0;  /* i8, u8, fp8 -> UINT8 (bits are copied, not converted) */
    default: return -1;
  }
}

static int swizzle_mode(unsigned bytes) {
  switch (bytes) {
    case 0: return 0;
    case 32: return 1;
    case 64: return 2;
    case 128: return 3;
    default: return -1;
  }
}

static int64_t extent(const tsr_backend_launch_t* l, const tsr_arg_info_t* a, unsigned axis) {
  int64_t e = a->dims[axis];
  if (e < 0) memcpy(&e, l->args[-(e + 1)], sizeof e);  /* validated by the generic layer: >= 0 */
  return e;
}

/* The map of launch argument `arg`, a row-major tensor read in boxes of box[0] (contiguous) × box[1] [× box[2]
 * [× box[3]]] elements: its leading axes fold into the outermost axis of the box's rank. */
static tsr_status_t encode(const tsr_cuda_driver_t* cu, const tsr_backend_launch_t* l, const char* name,
                           unsigned arg, unsigned rank, const unsigned box[4], unsigned swizzle,
                           tsr_cuda_tensor_map_t* m) {
  if (arg >= l->nargs || l->arg_info[arg].kind != TSR_ARG_TENSOR || l->arg_info[arg].rank < rank)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "ptx.tensor_maps: operand %s names argument %u, which is not a "
                    "tensor of rank %u or more", name, arg, rank);
  const tsr_arg_info_t* a = &l->arg_info[arg];
  int dtype = map_dtype(a->dtype), mode = swizzle_mode(swizzle);
  size_t esize = tsr_dtype_size(a->dtype);
  bool box_ok = dtype >= 0 && mode >= 0 && (uint64_t)box[0] * esize % 16 == 0;
  for (unsigned i = 0; i < rank; i++) box_ok = box_ok && box[i] && box[i] <= 256;
  if (!box_ok)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "ptx.tensor_maps: operand %s ('%s'): no TMA map of dtype code %u, "
                    "box %ux%ux%ux%u, %u-byte swizzle", name, a->name, a->dtype, box[0], box[1], box[2], box[3], swizzle);
  /* extents innermost first, the leading axes folded into the last */
  uint64_t dims[4] = {1, 1, 1, 1}, strides[3];
  unsigned r = a->rank;
  for (unsigned i = 0; i < r; i++) {
    uint64_t e = (uint64_t)extent(l, a, r - 1 - i);
    dims[i < rank ? i : rank - 1] *= e;
  }
  void* base;
  memcpy(&base, l->args[arg], sizeof base);
  strides[0] = dims[0] * esize;
  for (unsigned i = 1; i < 3; i++) strides[i] = strides[i - 1] * dims[i];
  /* TMA addresses 16-byte units: the base and every row start must be 16-byte aligned. */
  if (strides[0] % 16 || (uintptr_t)base % 16)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tensor '%s' (rows of %llu %zu-byte elements at %p) cannot be read by "
                    "TMA: its rows must be a multiple of 16 bytes long and start 16-byte aligned", a->name,
                    (unsigned long long)dims[0], esize, base);
  if (!dims[0] || !dims[1] || !dims[2] || !dims[3]) return TSR_SUCCESS;  /* empty: the kernel never reads the map */
  if (!cu->cuTensorMapEncodeTiled)
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "this CUDA driver has no cuTensorMapEncodeTiled (CUDA 12 and later): "
                    "kernel operand %s needs a TMA tensor map", name);
  uint32_t boxes[4] = {box[0], box[1], box[2], box[3]}, element_strides[4] = {1, 1, 1, 1};
  CUresult res = cu->cuTensorMapEncodeTiled(m->bytes, dtype, rank, base, dims, strides, boxes, element_strides,
                                            0 /* no interleave */, mode, 3 /* L2 promotion 256B */,
                                            0 /* out of bounds: zeros */);
  if (res) {
    char why[256];
    tsr_cuda_describe(res, why, sizeof why);
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "cuTensorMapEncodeTiled for tensor '%s': %s", a->name, why);
  }
  return TSR_SUCCESS;
}

tsr_status_t tsr_cuda_params_prepare(const tsr_cuda_driver_t* cu, const char* spec, const tsr_backend_launch_t* l,
                                     tsr_cuda_params_t* out) {
  memset(out, 0, sizeof *out);
  if (!spec || !*spec) return TSR_SUCCESS;
  unsigned n = 0;
  for (const char* p = spec; p && *p; n++) {
    char name[32];
    unsigned arg, box[4] = {1, 1, 1, 1}, swizzle, rank = 2;
    int used = 0, got = sscanf(p, "%31[^:]:%u:%ux%u%n", name, &arg, &box[0], &box[1], &used);
    while (got == 4 && p[used] == 'x') {
      int more = 0;
      if (rank < 4 && sscanf(p + used, "x%u%n", &box[rank], &more) == 1) used += more, rank++;
      else got = 0;
    }
    int tail = 0;
    if (n == TSR_CUDA_MAX_TENSOR_MAPS || got != 4 || sscanf(p + used, ":%u%n", &swizzle, &tail) != 1 ||
        (p[used + tail] && p[used + tail] != ';'))
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "malformed ptx.tensor_maps property '%s' (expected at most %d "
                      "entries NAME:ARG:INNERxOUTER[xOUTER2[xOUTER3]]:SWIZZLE separated by ';')", spec,
                      TSR_CUDA_MAX_TENSOR_MAPS);
    used += tail;
    tsr_status_t st = encode(cu, l, name, arg, rank, box, swizzle, &out->maps[n]);
    if (st) return st;
    p = p[used] ? p + used + 1 : NULL;
  }
  out->params = malloc((n + l->nargs) * sizeof(void*));
  if (!out->params) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory for launch parameters");
  for (unsigned i = 0; i < n; i++) out->params[i] = out->maps[i].bytes;
  memcpy(out->params + n, l->args, l->nargs * sizeof(void*));
  return TSR_SUCCESS;
}

void tsr_cuda_params_free(tsr_cuda_params_t* p) {
  free(p->params);
  p->params = NULL;
}
