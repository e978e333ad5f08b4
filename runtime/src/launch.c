/* launch.c — tsrLaunch: refuse a bad launch before anything runs, then run one entry call per block on the
 * context's worker pool and return when the grid has finished (CPU launches are synchronous). */
#include <string.h>

#include "errors.h"
#include "objects.h"

enum { KERNEL_FLAG_SIMT = 1u << 0 };

static tsr_status_t check_shape(const struct tsr_kernel* k, const tsr_launch_t* l) {
  if (!l->grid_x || !l->grid_y || !l->grid_z || !l->block_x || !l->block_y || !l->block_z)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': grid (%u, %u, %u) and block (%u, %u, %u) dimensions must be "
                    ">= 1", k->name, l->grid_x, l->grid_y, l->grid_z, l->block_x, l->block_y, l->block_z);
  uint64_t threads = (uint64_t)l->block_x * l->block_y * l->block_z;
  if (threads > TSR_CPU_MAX_BLOCK_THREADS)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': a block of %llu threads exceeds the limit of %u", k->name,
                    (unsigned long long)threads, TSR_CPU_MAX_BLOCK_THREADS);
  if ((k->block[0] || k->block[1] || k->block[2]) &&
      (k->block[0] != l->block_x || k->block[1] != l->block_y || k->block[2] != l->block_z))
    return tsr_fail(TSR_ERROR_INVALID_VALUE,
                    "kernel '%s' was compiled for block (%u, %u, %u), launched with (%u, %u, %u)", k->name,
                    k->block[0], k->block[1], k->block[2], l->block_x, l->block_y, l->block_z);
  uint64_t smem = (uint64_t)k->smem_bytes + l->smem_bytes;
  if (smem > TSR_CPU_MAX_SMEM_BYTES)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': %u bytes of static plus %u of dynamic shared memory exceed "
                    "the CPU limit of %u", k->name, k->smem_bytes, l->smem_bytes, TSR_CPU_MAX_SMEM_BYTES);
  return TSR_SUCCESS;
}

static tsr_status_t check_args(const struct tsr_kernel* k, void** args, size_t nargs) {
  if (nargs != k->arg_count)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s' expects %zu arguments, got %zu", k->name, k->arg_count,
                    nargs);
  if (nargs && !args) return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': args is NULL", k->name);
  for (size_t i = 0; i < nargs; i++) {
    const tsr_arg_info_t* a = &k->args[i];
    if (!args[i])
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': args[%zu] ('%s') is NULL", k->name, i, a->name);
    if (a->kind == TSR_ARG_TENSOR) {
      void* buffer;
      memcpy(&buffer, args[i], sizeof buffer);
      if (!buffer)
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': tensor argument %zu ('%s') is a NULL buffer", k->name, i,
                        a->name);
    } else if (a->kind == TSR_ARG_DIMENSION) {
      int64_t extent;
      memcpy(&extent, args[i], sizeof extent);
      if (extent < 0)
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': dimension argument %zu ('%s') is %lld, must be >= 0",
                        k->name, i, a->name, (long long)extent);
    }
  }
  return TSR_SUCCESS;
}

typedef struct grid_job {
  tsr_cpu_entry_t entry;
  void** args;
  uint32_t grid[3], block[3];
} grid_job_t;

/* Block i of the grid, x fastest. */
static void run_block(void* arg, uint64_t i) {
  const grid_job_t* job = arg;
  tsr_cpu_block_ctx_t ctx = {
      .grid = {job->grid[0], job->grid[1], job->grid[2]},
      .block = {job->block[0], job->block[1], job->block[2]},
      .block_id = {(uint32_t)(i % job->grid[0]), (uint32_t)(i / job->grid[0] % job->grid[1]),
                   (uint32_t)(i / job->grid[0] / job->grid[1])},
      .reserved = 0};
  job->entry(job->args, &ctx);
}

static tsr_status_t launch(struct tsr_kernel* k, tsr_stream_t stream, const tsr_launch_t* l, void** args,
                           size_t nargs) {
  if (stream) return tsr_fail(TSR_ERROR_INVALID_HANDLE, "kernel '%s': only the default (NULL) stream exists", k->name);
  tsr_status_t st;
  if ((st = check_args(k, args, nargs)) || (st = check_shape(k, l))) return st;
  if (!(k->flags & KERNEL_FLAG_SIMT))
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "kernel '%s' is not a SIMT kernel (flags bit 0 clear); ABI 1.0 defines "
                    "a CPU entry only for SIMT kernels", k->name);
  /* A grid may name up to 2^96 blocks; the block counter is 64-bit (and such a grid would never finish). */
  uint64_t blocks;
  if (__builtin_mul_overflow((uint64_t)l->grid_x * l->grid_y, (uint64_t)l->grid_z, &blocks))
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': a grid of 2^64 blocks or more", k->name);
  tsr_cpu_pool_t* pool;
  if ((st = tsr_context_pool(k->module->context, &pool))) return st;
  grid_job_t job = {k->entry, args, {l->grid_x, l->grid_y, l->grid_z}, {l->block_x, l->block_y, l->block_z}};
  tsr_cpu_pool_run(pool, blocks, run_block, &job);
  return TSR_SUCCESS;
}

tsr_status_t tsrLaunch(tsr_kernel_t kernel, tsr_stream_t stream, tsr_launch_t l, void** args, size_t nargs) {
  tsr_status_t st = tsr_kernel_acquire(kernel);
  if (st) return st;
  st = launch(kernel, stream, &l, args, nargs);
  tsr_kernel_release(kernel);
  return st;
}
