/* object.c — reference counts and ownership of handles (object.h).
 *
 * Counts are guarded by the registry lock, like liveness: checking that a handle is live and counting a
 * reference to it must be one step, or a concurrent last release could free it in between. Destruction runs
 * after the lock is released, because it may wait (a stream finishes its queue, a module its launches). */
#include "object.h"

#include "comm_backend.h"
#include "errors.h"
#include "event.h"
#include "graph.h"
#include "objects.h"
#include "stream.h"

tsr_status_t tsr_object_publish(struct tsr_context* ctx, tsr_object_t* obj, uint32_t magic, const char* function) {
  obj->magic = obj->type = magic;
  obj->refs = 1;
  obj->context = ctx;
  tsr_handles_lock();
  tsr_status_t st = tsr_handle_is_live_locked(ctx, TSR_MAGIC_CONTEXT)
                        ? tsr_handle_add_locked(obj)
                        : tsr_fail(TSR_ERROR_INVALID_HANDLE, "%s: the context was destroyed meanwhile", function);
  if (!st) {
    pthread_mutex_lock(&ctx->lock);
    obj->next = ctx->objects.next;
    obj->prev = &ctx->objects;
    ctx->objects.next->prev = obj;
    ctx->objects.next = obj;
    pthread_mutex_unlock(&ctx->lock);
  }
  tsr_handles_unlock();
  if (st) obj->magic = 0;
  return st;
}

void tsr_object_retire_locked(tsr_object_t* obj) {
  tsr_handle_remove_locked(obj);
  obj->magic = 0;
  if (obj->prev) {  /* a context is in no list; an object of a context being destroyed was unlinked by it */
    struct tsr_context* ctx = obj->context;
    pthread_mutex_lock(&ctx->lock);
    obj->prev->next = obj->next;
    obj->next->prev = obj->prev;
    obj->prev = obj->next = NULL;
    pthread_mutex_unlock(&ctx->lock);
  }
}

void tsr_object_destroy(tsr_object_t* obj) {
  switch (obj->type) {
    case TSR_MAGIC_CONTEXT: tsr_context_free((struct tsr_context*)obj); break;
    case TSR_MAGIC_MODULE: tsr_module_free((struct tsr_module*)obj); break;
    case TSR_MAGIC_STREAM: tsr_stream_free((struct tsr_stream*)obj); break;
    case TSR_MAGIC_EVENT: tsr_event_free((struct tsr_event*)obj); break;
    case TSR_MAGIC_GRAPH: tsr_graph_free((struct tsr_graph*)obj); break;
    case TSR_MAGIC_GRAPH_EXEC: tsr_graph_exec_free((struct tsr_graph_exec*)obj); break;
    case TSR_MAGIC_MEMORY: tsr_memory_handle_free((struct tsr_memory*)obj); break;
    case TSR_MAGIC_COMM: tsr_comm_free((struct tsr_comm*)obj); break;
  }
}

tsr_status_t tsr_object_retain(void* handle, uint32_t magic, const char* function, const char* what) {
  tsr_handles_lock();
  bool live = tsr_handle_is_live_locked(handle, magic);
  if (live) ((tsr_object_t*)handle)->refs++;
  tsr_handles_unlock();
  return live ? TSR_SUCCESS : tsr_fail_handle(function, what);
}

/* Drops a reference (registry locked); true when it was the last: the object is then retired. */
static bool drop_locked(tsr_object_t* obj) {
  if (--obj->refs) return false;
  if (obj->magic == TSR_MAGIC_MODULE) tsr_module_retire_kernels_locked((struct tsr_module*)obj);
  tsr_object_retire_locked(obj);
  return true;
}

tsr_status_t tsr_object_release(void* handle, uint32_t magic, const char* function, const char* what) {
  tsr_handles_lock();
  bool live = tsr_handle_is_live_locked(handle, magic);
  bool last = live && drop_locked(handle);
  tsr_handles_unlock();
  if (!live) return tsr_fail_handle(function, what);
  if (last) tsr_object_destroy(handle);
  return TSR_SUCCESS;
}

void tsr_object_ref(tsr_object_t* obj) {
  tsr_handles_lock();
  obj->refs++;
  tsr_handles_unlock();
}

void tsr_object_unref(tsr_object_t* obj) {
  tsr_handles_lock();
  bool last = obj->magic != 0 && drop_locked(obj);  /* magic 0: retired by its context, which destroys it */
  tsr_handles_unlock();
  if (last) tsr_object_destroy(obj);
}
