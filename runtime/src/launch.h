/* launch.h — a kernel launch from validation to execution: the same record serves the NULL stream (which
 * runs it in place, on the caller's argument values), a stream's queue and a graph (which keep copies of the
 * values). */
#ifndef TESSERA_SRC_LAUNCH_H_
#define TESSERA_SRC_LAUNCH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

struct tsr_kernel;

typedef struct tsr_launch_record {
  struct tsr_kernel* kernel;
  uint64_t module_serial; /* the kernel's module's serial, to recognize the kernel later (graphs) */
  uint32_t grid[3], block[3], smem_bytes;
  int32_t priority;
  uint64_t affinity;
  uint32_t phase;         /* tsr_trace_phase_t */
  double flops, bytes;    /* telemetry counts; 0 = unknown */
  uint64_t stream;        /* the stream's id, for telemetry and crash capture; 0: the NULL stream */
  void** args;            /* `nargs` pointers: the caller's, or into `values` once owned */
  size_t nargs;
  unsigned char* values;  /* owned: the pointer array, then the argument values; NULL if not owned */
  size_t values_size;
} tsr_launch_record_t;

/* Bytes of one argument's value in the args array (scalar: its dtype's size; tensor: a pointer; dimension:
 * an int64_t), and of one element of a dtype (0 for unknown codes). */
size_t tsr_arg_value_size(const tsr_arg_info_t* arg);
size_t tsr_dtype_size(uint32_t dtype);

/* Bytes a tensor argument spans: the product of its extents (static, or read from the dimension arguments
 * in `args`) times its element size; UINT64_MAX on overflow. */
uint64_t tsr_tensor_bytes(const struct tsr_kernel* kernel, size_t index, void* const* args);

/* Validates a launch of a live kernel and fills `out` (args pointing at the caller's values), also when it
 * fails, for crash capture. The hints default to those of desc->stream, which the caller checked. With
 * `explicit_block` the block is used as given; otherwise an all-0 block comes from the warps or the kernel. */
tsr_status_t tsr_launch_prepare(struct tsr_kernel* kernel, const tsr_launch_desc_t* desc, bool explicit_block,
                                tsr_launch_record_t* out);

/* The memory checks of the tensor arguments, in every mode: each tensor's extents against the known allocation
 * it starts in (TSR_ERROR_MEMORY_FAULT naming the kernel and the tensor); in debug mode also freed memory. */
tsr_status_t tsr_launch_check_memory(const tsr_launch_record_t* record);

/* Makes `record` own copies of its argument values, so that the caller's may change. */
tsr_status_t tsr_launch_own_values(tsr_launch_record_t* record);

/* An owned deep copy of an owned record (the kernel is not read: it may have been unloaded). */
tsr_status_t tsr_launch_clone(const tsr_launch_record_t* from, tsr_launch_record_t* to);

/* Runs a validated launch: trace range, backend, debug-mode fault report and canary checks, metrics record,
 * crash capture on failure. The kernel's module must be held (tsr_kernel_acquire). */
tsr_status_t tsr_launch_run(const tsr_launch_record_t* record);

/* Hands a validated launch to a device queue (backend.h) and returns: trace range around the hand-over,
 * crash capture when the device refuses it. The kernel's module must be held for the call. */
tsr_status_t tsr_launch_enqueue(const tsr_launch_record_t* record, void* queue);

void tsr_launch_free(tsr_launch_record_t* record);

#endif  /* TESSERA_SRC_LAUNCH_H_ */
