/* context.c — context lifetime: creation, destruction of everything a context owns, synchronization, and
 * the lazily started worker pool. */
#include <stdlib.h>

#include "errors.h"
#include "handles.h"
#include "objects.h"

tsr_status_t tsrCreateContext(tsr_context_t* out_context) {
  if (!out_context) return tsr_fail_null_output(__func__);
  struct tsr_context* ctx = calloc(1, sizeof *ctx);
  if (!ctx) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory creating a context");
  ctx->magic = TSR_MAGIC_CONTEXT;
  pthread_mutex_init(&ctx->lock, NULL);
  tsr_handles_lock();
  tsr_status_t st = tsr_handle_add_locked(ctx);
  tsr_handles_unlock();
  if (st) {
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    return st;
  }
  *out_context = ctx;
  return TSR_SUCCESS;
}

tsr_status_t tsrDestroyContext(tsr_context_t ctx) {
  /* Retire the context and its modules under the registry lock, so no new use can start; free after. */
  tsr_handles_lock();
  if (!tsr_handle_is_live_locked(ctx, TSR_MAGIC_CONTEXT)) {
    tsr_handles_unlock();
    return tsr_fail_handle(__func__, "context");
  }
  tsr_handle_remove_locked(ctx);
  ctx->magic = 0;
  pthread_mutex_lock(&ctx->lock);
  struct tsr_module* modules = ctx->modules;
  ctx->modules = NULL;
  pthread_mutex_unlock(&ctx->lock);
  for (struct tsr_module* m = modules; m; m = m->next) tsr_module_retire_locked(m);
  tsr_handles_unlock();

  while (modules) {
    struct tsr_module* next = modules->next;
    tsr_module_free(modules);  /* waits for its running launches */
    modules = next;
  }
  tsr_cpu_pool_destroy(ctx->pool);
  tsr_context_free_allocations(ctx);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
  return TSR_SUCCESS;
}

tsr_status_t tsrSynchronize(tsr_context_t ctx) {
  /* CPU launches return when finished, so there is never outstanding work to wait for. */
  if (!tsr_handle_is_live(ctx, TSR_MAGIC_CONTEXT))
    return tsr_fail_handle(__func__, "context");
  return TSR_SUCCESS;
}

tsr_status_t tsr_context_pool(struct tsr_context* ctx, tsr_cpu_pool_t** out) {
  tsr_status_t st = TSR_SUCCESS;
  pthread_mutex_lock(&ctx->lock);
  if (!ctx->pool) st = tsr_cpu_pool_create(&ctx->pool);
  *out = ctx->pool;
  pthread_mutex_unlock(&ctx->lock);
  return st;
}
