/*
 * dlpack.h — the DLPack tensor interchange structs (https://github.com/dmlc/dlpack), written here from the
 * DLPack specification, version 1.0 (DLTensor is unchanged since v0.8), so that libtessera's headers need no
 * other package. libtessera's function calls (tsrFunctionCall, tessera.h) take DLTensor.
 *
 * DLPack is Copyright (c) 2017 by Contributors and licensed under the Apache License, Version 2.0
 * (http://www.apache.org/licenses/LICENSE-2.0): "Unless required by applicable law or agreed to in writing,
 * software distributed under the License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS
 * OF ANY KIND, either express or implied." The definitions below follow its dlpack.h; a host that already
 * includes DLPack's own dlpack.h (which defines DLPACK_VERSION) gets that one's definitions, which are the
 * same types, and this file defines nothing.
 */
#ifndef DLPACK_VERSION
#ifndef TESSERA_DLPACK_H_
#define TESSERA_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0
#define DLPACK_VERSION 100
#define DLPACK_ABI_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U
} DLDataTypeCode;

/* code: a DLDataTypeCode; bits: of one lane; lanes: 1 for a scalar element type. */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;            /* the allocation's address; the tensor starts byte_offset bytes further */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;        /* [ndim] */
  int64_t* strides;      /* [ndim], in elements; NULL: compact row-major */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TESSERA_DLPACK_H_ */
#endif  /* DLPACK_VERSION */
