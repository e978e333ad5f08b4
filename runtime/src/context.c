/* context.c — context lifetime: creation with options (backend, debug mode, worker threads), destruction of
 * everything a context owns, synchronization, and the device queries that go to its backend. */
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "errors.h"
#include "handles.h"
#include "metrics.h"
#include "objects.h"
#include "stream.h"
#include "wait.h"

tsr_status_t tsr_check_context(tsr_context_t ctx, const char* function) {
  return tsr_handle_is_live(ctx, TSR_MAGIC_CONTEXT) ? TSR_SUCCESS : tsr_fail_handle(function, "context");
}

tsr_status_t tsrContextOptionsInitialize(tsr_context_options_t* options) {
  if (!options) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrContextOptionsInitialize: the options are NULL");
  *options = (tsr_context_options_t){0};
  return TSR_SUCCESS;
}

/* TESSERA_DEBUG: "1" (or any value but "0" and "") turns debug mode on. */
static bool debug_from_env(void) {
  const char* v = getenv("TESSERA_DEBUG");
  return v && *v && strcmp(v, "0") != 0;
}

tsr_status_t tsrCreateContextWithOptions(const tsr_context_options_t* options, tsr_context_t* out_context) {
  if (!out_context) return tsr_fail_null_output(__func__);
  tsr_context_options_t o;
  tsrContextOptionsInitialize(&o);
  if (options) o = *options;
  if (o.flags & ~TSR_CONTEXT_DEBUG)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrCreateContext: unknown flags 0x%x", o.flags);
  if (debug_from_env()) o.flags |= TSR_CONTEXT_DEBUG;
  const tsr_backend_t* backend;
  uint32_t watchdog_ms;
  tsr_status_t st = tsr_watchdog_from_env(o.wait_timeout_ms, &watchdog_ms);
  if (st || (st = tsr_backend_find(o.backend, &backend)) || (st = tsr_metrics_open_from_env())) return st;
  int64_t max_threads, max_smem;

  struct tsr_context* ctx = calloc(1, sizeof *ctx);
  if (!ctx) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
  ctx->obj = (tsr_object_t){.magic = TSR_MAGIC_CONTEXT, .type = TSR_MAGIC_CONTEXT, .refs = 1, .context = ctx};
  ctx->objects.next = ctx->objects.prev = &ctx->objects;
  ctx->backend = backend;
  ctx->debug = o.flags & TSR_CONTEXT_DEBUG;
  ctx->wait_timeout_ms = watchdog_ms;
  o.wait_timeout_ms = watchdog_ms;  /* backends that wait for NULL-stream work themselves (CUDA) honour it too */
  ctx->crash_dir = tsr_crash_dir_from_env();
  pthread_mutex_init(&ctx->lock, NULL);
  tsr_memory_init(ctx);
  tsr_deferred_init(ctx);
  if (!(st = backend->create(&o, &ctx->backend_state)) &&
      !(st = backend->limit(ctx->backend_state, TSR_LIMIT_MAX_THREADS_PER_BLOCK, &max_threads)) &&
      !(st = backend->limit(ctx->backend_state, TSR_LIMIT_MAX_SHARED_BYTES_PER_BLOCK, &max_smem))) {
    ctx->max_block_threads = (uint32_t)max_threads;
    ctx->max_smem_bytes = (uint32_t)max_smem;
    tsr_handles_lock();
    st = tsr_handle_add_locked(ctx);
    tsr_handles_unlock();
  }
  if (st) {
    if (ctx->backend_state) backend->destroy(ctx->backend_state);
    tsr_deferred_teardown(ctx);
    tsr_memory_teardown(ctx);
    free(ctx->crash_dir);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    return st;
  }
  *out_context = ctx;
  return TSR_SUCCESS;
}

tsr_status_t tsrCreateContext(tsr_context_t* out_context) { return tsrCreateContextWithOptions(NULL, out_context); }

/* Destroys the owned objects of one type, unlinking each first. */
static void destroy_all(struct tsr_context* ctx, uint32_t type) {
  tsr_object_t* o = ctx->objects.next;
  while (o != &ctx->objects) {
    tsr_object_t* next = o->next;
    if (o->type == type) {
      o->prev->next = o->next;
      o->next->prev = o->prev;
      o->prev = o->next = NULL;
      tsr_object_destroy(o);
    }
    o = next;
  }
}

void tsr_context_free(struct tsr_context* ctx) {
  /* Retire everything in one step, so that no handle of the context stays usable; free after, in an order
   * where nothing is freed while something still to be freed refers to it: streams first (their queues
   * finish, dropping their holds), graphs (which hold events and communicators: a CUDA graph's NCCL kernels
   * use their communicator), then communicators (their queued transfers have run; the memory they moved is
   * still there), events, memory handles, modules. */
  tsr_handles_lock();
  for (tsr_object_t* o = ctx->objects.next; o != &ctx->objects; o = o->next) {
    if (o->type == TSR_MAGIC_MODULE) tsr_module_retire_kernels_locked((struct tsr_module*)o);
    tsr_handle_remove_locked(o);
    o->magic = 0;
  }
  tsr_handles_unlock();
  ctx->dying = true;
  static const uint32_t order[] = {TSR_MAGIC_STREAM, TSR_MAGIC_GRAPH_EXEC, TSR_MAGIC_GRAPH, TSR_MAGIC_COMM,
                                   TSR_MAGIC_EVENT, TSR_MAGIC_MEMORY, TSR_MAGIC_MODULE};
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) destroy_all(ctx, order[i]);
  tsr_deferred_teardown(ctx);  /* the streams freed their pending groups; their device events go here */
  tsr_memory_teardown(ctx);  /* gives device memory back through the backend: before the backend goes */
  ctx->backend->destroy(ctx->backend_state);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx->crash_dir);
  free(ctx);
}

tsr_status_t tsrDestroyContext(tsr_context_t ctx) {
  tsr_handles_lock();
  bool live = tsr_handle_is_live_locked(ctx, TSR_MAGIC_CONTEXT);
  if (live) tsr_object_retire_locked(&ctx->obj);
  tsr_handles_unlock();
  if (!live) return tsr_fail_handle(__func__, "context");
  tsr_context_free(ctx);
  return TSR_SUCCESS;
}

tsr_status_t tsrRetainContext(tsr_context_t ctx) {
  return tsr_object_retain(ctx, TSR_MAGIC_CONTEXT, __func__, "context");
}

tsr_status_t tsrReleaseContext(tsr_context_t ctx) {
  return tsr_object_release(ctx, TSR_MAGIC_CONTEXT, __func__, "context");
}

/* tsrSynchronize within `limit` (NULL: the context's watchdog), one deadline for all its streams. */
static tsr_status_t wait_for_streams(tsr_context_t ctx, const tsr_wait_limit_t* limit, const char* function) {
  /* Take a reference to every stream under the locks, then wait for each without them. */
  tsr_handles_lock();
  if (!tsr_handle_is_live_locked(ctx, TSR_MAGIC_CONTEXT)) {
    tsr_handles_unlock();
    return tsr_fail_handle(function, "context");
  }
  tsr_wait_limit_t within = limit ? *limit : tsr_wait_watchdog(ctx);
  size_t count = 0;
  pthread_mutex_lock(&ctx->lock);
  for (tsr_object_t* o = ctx->objects.next; o != &ctx->objects; o = o->next) count += o->type == TSR_MAGIC_STREAM;
  struct tsr_stream** streams = calloc(count + 1, sizeof *streams);
  size_t n = 0;
  for (tsr_object_t* o = ctx->objects.next; streams && o != &ctx->objects; o = o->next)
    if (o->type == TSR_MAGIC_STREAM) {
      o->refs++;
      streams[n++] = (struct tsr_stream*)o;
    }
  pthread_mutex_unlock(&ctx->lock);
  tsr_handles_unlock();
  if (!streams) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of memory", function);

  tsr_status_t first = TSR_SUCCESS;
  char message[1024] = "";
  for (size_t i = 0; i < n; i++) {
    tsr_status_t st = tsr_stream_wait_within(streams[i], &within, function);
    if (st && !first) {
      first = st;
      strncpy(message, tsrGetLastErrorMessage(), sizeof message - 1);
    }
    tsr_object_unref(&streams[i]->obj);
  }
  free(streams);
  if (!first) tsr_deferred_poll(ctx);  /* the memory released after the work just waited for */
  return first ? tsr_fail(first, "%s", message) : TSR_SUCCESS;
}

tsr_status_t tsrSynchronize(tsr_context_t ctx) {
  return wait_for_streams(ctx, NULL, __func__);
}

tsr_status_t tsrSynchronizeTimeout(tsr_context_t ctx, uint32_t timeout_ms) {
  tsr_wait_limit_t limit = tsr_wait_within(timeout_ms);
  return wait_for_streams(ctx, &limit, __func__);
}

tsr_status_t tsrContextIsDebug(tsr_context_t ctx, int* out_debug) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out_debug) return tsr_fail_null_output(__func__);
  *out_debug = ctx->debug;
  return TSR_SUCCESS;
}

tsr_status_t tsrContextGetBackend(tsr_context_t ctx, const char** out_name) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out_name) return tsr_fail_null_output(__func__);
  *out_name = ctx->backend->name;
  return TSR_SUCCESS;
}

tsr_status_t tsrGetDeviceProperties(tsr_context_t ctx, tsr_device_properties_t* out) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out) return tsr_fail_null_output(__func__);
  return ctx->backend->properties(ctx->backend_state, out);
}

tsr_status_t tsrGetLimit(tsr_context_t ctx, tsr_limit_t limit, int64_t* out_value) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out_value) return tsr_fail_null_output(__func__);
  return ctx->backend->limit(ctx->backend_state, limit, out_value);
}
