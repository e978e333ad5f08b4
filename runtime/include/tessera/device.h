/*
 * device.h — backends and what the device of a context can do: properties and queryable limits.
 * Included by tessera.h; do not include it alone.
 *
 * A backend is the part of the runtime that runs kernels of one image target ("cpu" runs `target: cpu`
 * kernels of the host's arch). This build has the CPU backend; GPU backends plug into the same table
 * (docs/runtime.md, "Backends"). Every function here is thread-safe.
 */
#ifndef TESSERA_DEVICE_H_
#define TESSERA_DEVICE_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Number of backends this build has and this machine can run (at least 1: "cpu"). */
TSR_API tsr_status_t tsrGetBackendCount(size_t* out_count);

/* Name of available backend `index`, e.g. "cpu". Static storage. */
TSR_API tsr_status_t tsrGetBackendName(size_t index, const char** out_name);

/* The name of the backend a context runs on, as resolved when it was created (an alias such as "ptx" gives
 * the backend's own name, "cuda"). Static storage. */
TSR_API tsr_status_t tsrContextGetBackend(tsr_context_t context, const char** out_name);

/* Fixed facts about the device a context runs on. Strings are NUL-terminated and truncated to fit. */
typedef struct tsr_device_properties {
  char backend[16];   /* "cpu" */
  char name[128];     /* e.g. "AMD EPYC 7B13" (the CPU model), or the GPU's name */
  char arch[32];      /* the kernel `arch` it runs: "x86_64", "aarch64", "sm_90a" */
  char simd_isa[16];  /* CPU backend: widest vector ISA detected: "avx512", "avx2", "avx", "sse2", "sve", "neon" */
  uint32_t warp_size;                   /* lanes per warp kernels may assume (32 on the CPU backend) */
  uint32_t max_threads_per_block;
  uint32_t max_shared_bytes_per_block;  /* tile-local memory per tile: static + dynamic shared memory */
  uint32_t compute_units;               /* blocks that run at once: the CPU backend's worker threads */
  uint64_t total_memory_bytes;
} tsr_device_properties_t;

/* Fills `out` for the context's device. On the CPU backend, compute_units needs a valid TESSERA_NUM_THREADS
 * (TSR_ERROR_INVALID_VALUE otherwise). */
TSR_API tsr_status_t tsrGetDeviceProperties(tsr_context_t context, tsr_device_properties_t* out);

/* Numeric limits, one at a time (new limits are appended; numbers never change). */
typedef enum tsr_limit {
  TSR_LIMIT_MAX_THREADS_PER_BLOCK = 0,
  TSR_LIMIT_MAX_SHARED_BYTES_PER_BLOCK = 1,  /* tile-local memory per tile (static + dynamic shared memory) */
  TSR_LIMIT_WARP_SIZE = 2,
  TSR_LIMIT_MAX_BLOCK_DIM_X = 3,             /* per-axis block limits; their product is further limited */
  TSR_LIMIT_MAX_BLOCK_DIM_Y = 4,             /*   by TSR_LIMIT_MAX_THREADS_PER_BLOCK */
  TSR_LIMIT_MAX_BLOCK_DIM_Z = 5,
  TSR_LIMIT_MAX_GRID_DIM_X = 6,
  TSR_LIMIT_MAX_GRID_DIM_Y = 7,
  TSR_LIMIT_MAX_GRID_DIM_Z = 8,
  TSR_LIMIT_COMPUTE_UNITS = 9,               /* as tsr_device_properties_t.compute_units */
  TSR_LIMIT_SIMD_WIDTH_BYTES = 10,           /* CPU backend: vector register width of simd_isa */
  TSR_LIMIT_ALLOC_ALIGNMENT = 11,            /* TSR_ALLOC_ALIGNMENT */
  TSR_LIMIT_TOTAL_MEMORY_BYTES = 12
} tsr_limit_t;

/* Reads one limit of the context's device. Unknown limits return TSR_ERROR_INVALID_VALUE. */
TSR_API tsr_status_t tsrGetLimit(tsr_context_t context, tsr_limit_t limit, int64_t* out_value);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TESSERA_DEVICE_H_ */
