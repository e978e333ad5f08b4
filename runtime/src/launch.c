/* launch.c — tsrLaunch and tsrLaunchTile: refuse a bad launch before anything runs or is queued, then run
 * it in place (NULL stream) or hand it to a stream (stream.h), which queues it or records it into a graph. */
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "errors.h"
#include "metrics.h"
#include "objects.h"
#include "stream.h"
#include "trace.h"

enum { KERNEL_FLAG_SIMT = 1u << 0 };

size_t tsr_dtype_size(uint32_t dtype) {
  /*                                 -  f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 i1 e4m3 e5m2 tf32 index */
  static const unsigned char size[] = {0, 4, 8, 2, 2, 1, 2, 4, 8, 1, 2, 4, 8, 1, 1, 1, 4, 8};
  return dtype < sizeof size ? size[dtype] : 0;
}

size_t tsr_arg_value_size(const tsr_arg_info_t* a) {
  if (a->kind == TSR_ARG_SCALAR) return tsr_dtype_size(a->dtype);
  return a->kind == TSR_ARG_TENSOR ? sizeof(void*) : sizeof(int64_t);
}

uint64_t tsr_tensor_bytes(const struct tsr_kernel* k, size_t index, void* const* args) {
  const tsr_arg_info_t* a = &k->args[index];
  uint64_t bytes = tsr_dtype_size(a->dtype);
  for (uint32_t r = 0; r < a->rank; r++) {
    int64_t extent = a->dims[r];
    if (extent < 0) memcpy(&extent, args[-(extent + 1)], sizeof extent);  /* validated: >= 0 */
    if (__builtin_mul_overflow(bytes, (uint64_t)extent, &bytes)) return UINT64_MAX;
  }
  return bytes;
}

/* ---- validation ------------------------------------------------------------------------------------- */

static tsr_status_t check_args(const struct tsr_kernel* k, void** args, size_t nargs) {
  if (nargs != k->arg_count)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s' expects %zu arguments, got %zu", k->name, k->arg_count,
                    nargs);
  if (nargs && !args) return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': args is NULL", k->name);
  for (size_t i = 0; i < nargs; i++) {
    const tsr_arg_info_t* a = &k->args[i];
    if (!args[i])
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': args[%zu] ('%s') is NULL", k->name, i, a->name);
    /* The ABI's natural alignment (spec Part III §3.3): the entry reads each value, and each tensor element,
     * with an aligned load. */
    size_t value = tsr_arg_value_size(a);
    if ((uintptr_t)args[i] % value)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': args[%zu] ('%s') at %p is not aligned to its %zu-byte "
                      "value", k->name, i, a->name, args[i], value);
    if (a->kind == TSR_ARG_TENSOR) {
      void* buffer;
      memcpy(&buffer, args[i], sizeof buffer);
      size_t element = tsr_dtype_size(a->dtype);
      if (!buffer)
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': tensor argument %zu ('%s') is a NULL buffer", k->name, i,
                        a->name);
      if ((uintptr_t)buffer % element)
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': tensor argument %zu ('%s') at %p is not aligned to its "
                        "%zu-byte elements", k->name, i, a->name, buffer, element);
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

static tsr_status_t check_shape(const struct tsr_kernel* k, const tsr_launch_record_t* r) {
  const struct tsr_context* ctx = k->module->obj.context;
  const uint32_t *g = r->grid, *b = r->block;
  if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2])
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': grid (%u, %u, %u) and block (%u, %u, %u) dimensions must be "
                    ">= 1", k->name, g[0], g[1], g[2], b[0], b[1], b[2]);
  uint64_t threads = (uint64_t)b[0] * b[1] * b[2];
  if (threads > ctx->max_block_threads)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': a block of %llu threads exceeds the limit of %u", k->name,
                    (unsigned long long)threads, ctx->max_block_threads);
  if ((k->block[0] || k->block[1] || k->block[2]) &&
      (k->block[0] != b[0] || k->block[1] != b[1] || k->block[2] != b[2]))
    return tsr_fail(TSR_ERROR_INVALID_VALUE,
                    "kernel '%s' was compiled for block (%u, %u, %u), launched with (%u, %u, %u)", k->name,
                    k->block[0], k->block[1], k->block[2], b[0], b[1], b[2]);
  uint64_t smem = (uint64_t)k->smem_bytes + r->smem_bytes;
  if (smem > ctx->max_smem_bytes)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': %u bytes of static plus %u of dynamic shared memory exceed "
                    "the limit of %u", k->name, k->smem_bytes, r->smem_bytes, ctx->max_smem_bytes);
  /* A grid may name up to 2^96 blocks; the block counter is 64-bit (and such a grid would never finish). */
  uint64_t blocks;
  if (__builtin_mul_overflow((uint64_t)g[0] * g[1], (uint64_t)g[2], &blocks))
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': a grid of 2^64 blocks or more", k->name);
  if (!(k->flags & KERNEL_FLAG_SIMT))
    return tsr_fail(TSR_ERROR_UNSUPPORTED, "kernel '%s' is not a SIMT kernel (flags bit 0 clear); ABI 1.0 defines "
                    "a CPU entry only for SIMT kernels", k->name);
  return TSR_SUCCESS;
}

static const char* property(const struct tsr_kernel* k, const char* key) {
  for (size_t i = 0; i < k->prop_count; i++)
    if (strcmp(k->props[i].key, key) == 0) return k->props[i].value;
  return NULL;
}

/* The descriptor's tile shape against the kernel's compiled tile.M/N/K properties. */
static tsr_status_t check_tile(const struct tsr_kernel* k, const uint32_t tile[3]) {
  static const char* const keys[] = {"tile.M", "tile.N", "tile.K"};
  for (int i = 0; i < 3; i++) {
    if (!tile[i]) continue;
    const char* compiled = property(k, keys[i]);
    if (!compiled)
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': the launch asks for %s = %u, but the kernel's metadata "
                      "has no %s", k->name, keys[i], tile[i], keys[i]);
    char* end;
    unsigned long value = strtoul(compiled, &end, 10);
    if (*end || value != tile[i])
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s' was compiled for %s = %s, launched with %u", k->name,
                      keys[i], compiled, tile[i]);
  }
  return TSR_SUCCESS;
}

/* The block shape from the descriptor's block, warps and the kernel's compiled block. */
static tsr_status_t resolve_block(const struct tsr_kernel* k, const tsr_launch_desc_t* d, uint32_t block[3]) {
  memcpy(block, d->block, sizeof d->block);
  uint32_t warp = k->warp_size ? k->warp_size : 32;
  if (!block[0] && !block[1] && !block[2]) {
    if (d->warps) {
      if (d->warps > UINT32_MAX / warp)
        return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': %u warps per block", k->name, d->warps);
      block[0] = d->warps * warp, block[1] = block[2] = 1;
    } else if (k->block[0]) {
      memcpy(block, k->block, sizeof k->block);
    } else {
      return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': the launch gives neither a block nor warps, and the "
                      "kernel has no compiled block", k->name);
    }
    return TSR_SUCCESS;
  }
  uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
  if (d->warps && (threads + warp - 1) / warp != d->warps)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': block (%u, %u, %u) has %llu warps of %u, the launch says %u",
                    k->name, block[0], block[1], block[2], (unsigned long long)((threads + warp - 1) / warp), warp,
                    d->warps);
  return TSR_SUCCESS;
}

tsr_status_t tsr_launch_prepare(struct tsr_kernel* k, const tsr_launch_desc_t* d, bool explicit_block,
                                tsr_launch_record_t* r) {
  const struct tsr_stream* s = d->stream;  /* the caller checked it */
  *r = (tsr_launch_record_t){
      .kernel = k, .module_serial = k->module->serial, .grid = {d->grid[0], d->grid[1], d->grid[2]}, .block = {d->block[0], d->block[1], d->block[2]},
      .smem_bytes = d->smem_bytes, .priority = d->priority ? d->priority : s ? s->priority : 0,
      .affinity = d->affinity ? d->affinity : s ? s->affinity : 0, .phase = d->phase, .flops = d->flops,
      .bytes = d->bytes, .stream = s ? s->id : 0, .args = d->args, .nargs = d->nargs};
  if (d->phase > TSR_TRACE_HOST)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': unknown trace phase %u", k->name, d->phase);
  if (!(d->flops >= 0) || !(d->bytes >= 0))
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "kernel '%s': flop and byte counts must be >= 0", k->name);
  tsr_status_t st;
  if ((st = check_args(k, d->args, d->nargs)) || (st = check_tile(k, d->tile)) ||
      (!explicit_block && (st = resolve_block(k, d, r->block))) || (st = check_shape(k, r)))
    return st;
  return TSR_SUCCESS;
}

tsr_status_t tsr_launch_check_memory(const tsr_launch_record_t* r) {
  const struct tsr_kernel* k = r->kernel;
  enum { BATCH = 16 };  /* tensors checked under one lock */
  tsr_tensor_span_t spans[BATCH];
  size_t n = 0;
  for (size_t i = 0; i < k->arg_count; i++) {
    if (k->args[i].kind == TSR_ARG_TENSOR) {
      void* buffer;
      memcpy(&buffer, r->args[i], sizeof buffer);
      spans[n++] = (tsr_tensor_span_t){buffer, tsr_tensor_bytes(k, i, r->args), i, k->args[i].name};
    }
    if (n == BATCH || (n && i + 1 == k->arg_count)) {
      tsr_status_t st = tsr_memory_check_tensors(k->module->obj.context, spans, n, k->name);
      if (st) return st;
      n = 0;
    }
  }
  return TSR_SUCCESS;
}

/* ---- owned argument values -------------------------------------------------------------------------- */

tsr_status_t tsr_launch_own_values(tsr_launch_record_t* r) {
  const struct tsr_kernel* k = r->kernel;
  size_t total = r->nargs * sizeof(void*);
  for (size_t i = 0; i < r->nargs; i++) total += (tsr_arg_value_size(&k->args[i]) + 7) & ~(size_t)7;
  unsigned char* values = malloc(total ? total : 1);
  if (!values) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "kernel '%s': out of memory copying launch arguments",
                               k->name);
  void** args = (void**)values;
  unsigned char* next = values + r->nargs * sizeof(void*);
  for (size_t i = 0; i < r->nargs; i++) {
    size_t n = tsr_arg_value_size(&k->args[i]);
    memcpy(next, r->args[i], n);
    args[i] = next;
    next += (n + 7) & ~(size_t)7;
  }
  r->values = values;
  r->values_size = total;
  r->args = args;
  return TSR_SUCCESS;
}

tsr_status_t tsr_launch_clone(const tsr_launch_record_t* from, tsr_launch_record_t* to) {
  /* Relocates the copy without reading the kernel, whose module may be gone by now. */
  *to = *from;
  to->values = malloc(from->values_size ? from->values_size : 1);
  if (!to->values) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory copying launch arguments");
  memcpy(to->values, from->values, from->values_size);
  to->args = (void**)to->values;
  for (size_t i = 0; i < from->nargs; i++)
    to->args[i] = to->values + ((unsigned char*)from->args[i] - from->values);
  return TSR_SUCCESS;
}

void tsr_launch_free(tsr_launch_record_t* r) {
  free(r->values);
  r->values = NULL;
}

/* ---- running ---------------------------------------------------------------------------------------- */

/* After a guarded launch: any tensor whose canaries were overwritten. */
static tsr_status_t check_canaries(const tsr_launch_record_t* r) {
  const struct tsr_kernel* k = r->kernel;
  for (size_t i = 0; i < k->arg_count; i++) {
    if (k->args[i].kind != TSR_ARG_TENSOR) continue;
    void* buffer;
    memcpy(&buffer, r->args[i], sizeof buffer);
    char what[256];
    snprintf(what, sizeof what, "kernel '%s' (tensor argument %zu, '%s')", k->name, i, k->args[i].name);
    tsr_status_t st = tsr_memory_check_canaries(k->module->obj.context, buffer, what);
    if (st) return st;
  }
  return TSR_SUCCESS;
}

static tsr_status_t report_fault(const tsr_launch_record_t* r, const tsr_fault_t* f) {
  if (f->report)  /* bounded: the text is the kernel's own */
    return tsr_fail(TSR_ERROR_MEMORY_FAULT, "kernel '%s' block (%u, %u, %u): %.400s", r->kernel->name, f->block[0],
                    f->block[1], f->block[2], f->report);
  char where[256];
  tsr_memory_describe(r->kernel->module->obj.context, f->address, where, sizeof where);
  return tsr_fail(TSR_ERROR_MEMORY_FAULT, "kernel '%s' block (%u, %u, %u) faulted (%s) at address %p: %s",
                  r->kernel->name, f->block[0], f->block[1], f->block[2], f->signal == 7 ? "SIGBUS" : "SIGSEGV",
                  (void*)f->address, where);
}

static tsr_backend_launch_t backend_launch(const tsr_launch_record_t* r, bool guarded) {
  const struct tsr_kernel* k = r->kernel;
  return (tsr_backend_launch_t){.entry = k->entry, .grid = {r->grid[0], r->grid[1], r->grid[2]},
                                .block = {r->block[0], r->block[1], r->block[2]}, .smem_bytes = r->smem_bytes,
                                .priority = r->priority, .affinity = r->affinity, .args = r->args,
                                .nargs = r->nargs, .arg_info = k->args,
                                .tensor_maps = property(k, "ptx.tensor_maps"), .guarded = guarded};
}

/* A coarsened SIMT kernel (passes/simt_coarsen.py; its `simt.coarsen` property C) does C consecutive elements
 * per thread: it runs over ceil(grid.x / C) blocks and takes, after its arguments, the threads along x of the
 * launch asked for (grid.x × block.x, an int64), so that it does exactly the elements those threads would. */
typedef struct coarsened {
  int64_t threads;
  void* small[16];
  void** args;  /* the arguments and `threads`, when the kernel is coarsened */
} coarsened_t;

static tsr_status_t coarsen(const tsr_launch_record_t* r, tsr_backend_launch_t* bl, coarsened_t* c) {
  const char* factor = property(r->kernel, "simt.coarsen");
  c->args = NULL;
  uint64_t f = factor ? strtoull(factor, NULL, 10) : 0;
  if (f < 2) return TSR_SUCCESS;
  c->threads = (int64_t)r->grid[0] * r->block[0];
  c->args = r->nargs < sizeof c->small / sizeof *c->small ? c->small : malloc((r->nargs + 1) * sizeof(void*));
  if (!c->args)
    return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "kernel '%s': no memory for its arguments", r->kernel->name);
  if (r->nargs) memcpy(c->args, r->args, r->nargs * sizeof(void*));
  c->args[r->nargs] = &c->threads;
  bl->args = c->args;  /* nargs and arg_info stay the caller's: the hidden value needs no marshalling */
  bl->grid[0] = (uint32_t)((r->grid[0] + f - 1) / f);
  return TSR_SUCCESS;
}

static void coarsened_free(coarsened_t* c) {
  if (c->args != c->small) free(c->args);
}

tsr_status_t tsr_launch_enqueue(const tsr_launch_record_t* r, void* queue) {
  struct tsr_kernel* k = r->kernel;
  struct tsr_context* ctx = k->module->obj.context;
  bool traced = tsr_trace_push((tsr_trace_phase_t)r->phase, k->name);
  tsr_backend_launch_t bl = backend_launch(r, false);  /* a device's faults are its errors, not caught signals */
  coarsened_t c;
  tsr_status_t st = coarsen(r, &bl, &c);
  if (!st) st = ctx->backend->queue_launch(ctx->backend_state, queue, &bl);  /* it takes the values now */
  coarsened_free(&c);
  if (traced) tsr_trace_pop();
  if (st && ctx->crash_dir) tsr_crash_write(r, NULL, st, tsrGetLastErrorMessage());
  return st;
}

tsr_status_t tsr_launch_run(const tsr_launch_record_t* r) {
  struct tsr_kernel* k = r->kernel;
  struct tsr_context* ctx = k->module->obj.context;
  tsr_crash_snapshot_t* snapshot = ctx->crash_dir ? tsr_crash_snapshot(r) : NULL;
  bool traced = tsr_trace_push((tsr_trace_phase_t)r->phase, k->name);
  double t0 = tsr_metrics_on() ? tsr_seconds() : 0;
  tsr_backend_launch_t bl = backend_launch(r, ctx->debug);
  tsr_fault_t fault = {0};
  coarsened_t c;
  tsr_status_t st = coarsen(r, &bl, &c);
  if (!st) st = ctx->backend->launch(ctx->backend_state, &bl, &fault);
  coarsened_free(&c);
  if (st == TSR_ERROR_MEMORY_FAULT) st = report_fault(r, &fault);
  else if (!st && ctx->debug) st = check_canaries(r);
  if (t0)
    tsr_metrics_write(&(tsr_metrics_entry_t){.name = k->name, .stream = r->stream, .grid = r->grid, .block = r->block,
                                             .seconds = tsr_seconds() - t0, .flops = r->flops, .bytes = r->bytes,
                                             .status = st});
  if (traced) tsr_trace_pop();
  if (st && snapshot) tsr_crash_write(r, snapshot, st, tsrGetLastErrorMessage());
  tsr_crash_snapshot_free(snapshot);
  return st;
}

/* ---- the API ---------------------------------------------------------------------------------------- */

tsr_status_t tsrLaunchDescInitialize(tsr_launch_desc_t* desc) {
  if (!desc) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrLaunchDescInitialize: the descriptor is NULL");
  *desc = (tsr_launch_desc_t){.grid = {1, 1, 1}, .phase = TSR_TRACE_MMA};
  return TSR_SUCCESS;
}

/* Validates, then runs (NULL stream) or hands the launch to its stream. `explicit_block`: the block is used as
 * given (tsrLaunch), never derived from warps or the compiled block. */
static tsr_status_t submit(tsr_kernel_t kernel, const tsr_launch_desc_t* desc, bool explicit_block,
                           const char* function) {
  tsr_status_t st = tsr_kernel_acquire(kernel, function);
  if (st) return st;
  struct tsr_context* ctx = kernel->module->obj.context;
  struct tsr_stream* stream = NULL;
  if (!desc) {
    st = tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrLaunchTile: the descriptor is NULL");
  } else if (!desc->stream || !(st = tsr_stream_acquire(desc->stream, ctx, function))) {
    stream = desc->stream;
    tsr_launch_record_t record;
    st = tsr_launch_prepare(kernel, desc, explicit_block, &record);
    if (!st) st = tsr_launch_check_memory(&record);
    if (st) {
      if (ctx->crash_dir) tsr_crash_write(&record, NULL, st, tsrGetLastErrorMessage());
    } else {
      st = stream ? tsr_stream_submit_launch(stream, &record) : tsr_launch_run(&record);
    }
  }
  if (stream) tsr_object_unref(&stream->obj);
  tsr_kernel_release(kernel);
  return st;
}

tsr_status_t tsrLaunchTile(tsr_kernel_t kernel, const tsr_launch_desc_t* desc) {
  return submit(kernel, desc, false, __func__);
}

tsr_status_t tsrLaunch(tsr_kernel_t kernel, tsr_stream_t stream, tsr_launch_t l, void** args, size_t nargs) {
  tsr_launch_desc_t desc = {.grid = {l.grid_x, l.grid_y, l.grid_z}, .block = {l.block_x, l.block_y, l.block_z},
                            .smem_bytes = l.smem_bytes, .stream = stream, .phase = TSR_TRACE_MMA, .args = args,
                            .nargs = nargs};
  return submit(kernel, &desc, true, __func__);
}
