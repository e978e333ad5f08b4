/*
 * cpu_kernel.h — the entry ABI of CPU kernels (docs/image-format.md, "The CPU code section"), for code that
 * goes into a `.tessera.code.cpu` shared object: what tessera-cc generates, or a kernel written by hand.
 * Hosts do not need this header; they launch through tessera.h.
 */
#ifndef TESSERA_CPU_KERNEL_H_
#define TESSERA_CPU_KERNEL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the runtime passes to each call of an entry: one call per block. 48 bytes. */
typedef struct tsr_cpu_block_ctx {
  uint32_t grid[3];      /* blocks in the grid */
  uint32_t block[3];     /* threads in a block */
  uint32_t block_id[3];  /* this block */
  uint32_t reserved;     /* 0 */
  /* Where the block reports a failed bounds check: *fault is NULL on entry; a block that finds an access
   * outside its tensor skips it, stores a NUL-terminated text in its own image naming the tensor and the
   * source line, and returns. The launch then fails with TSR_ERROR_MEMORY_FAULT quoting that text. */
  const char** fault;
} tsr_cpu_block_ctx_t;

/* An entry: `args` is the launch's argument array (one pointer per argument, docs/image-format.md "Launch
 * arguments"). Called from any worker thread, blocks in any order, blocks of other launches possibly at the
 * same time; it must touch no global state. */
typedef void (*tsr_cpu_entry_t)(void** args, const tsr_cpu_block_ctx_t* ctx);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TESSERA_CPU_KERNEL_H_ */
