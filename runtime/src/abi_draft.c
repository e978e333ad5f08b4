/* abi_draft.c — the ABI draft's entry points over the tsr* implementation (tessera/abi_draft.h), and its
 * memory handle: a reference-counted owner of one device allocation, owned by its context. */
#include <stdlib.h>

#include "errors.h"
#include "objects.h"

int tessera_context_create(tessera_context_handle* out) { return tsrCreateContext(out); }
int tessera_context_destroy(tessera_context_handle ctx) { return tsrDestroyContext(ctx); }
int tessera_context_retain(tessera_context_handle ctx) { return tsrRetainContext(ctx); }
int tessera_context_release(tessera_context_handle ctx) { return tsrReleaseContext(ctx); }

int tessera_launch_tile(tessera_operator_handle op, const tessera_launch_desc* desc) { return tsrLaunchTile(op, desc); }
int tessera_event_record(tessera_event_handle event, tessera_stream_handle stream) {
  return tsrEventRecord(event, stream);
}
int tessera_stream_wait_event(tessera_stream_handle stream, tessera_event_handle event) {
  return tsrStreamWaitEvent(stream, event);
}

int tessera_memory_alloc(tessera_context_handle ctx, size_t bytes, tessera_memory_handle* out) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out) return tsr_fail_null_output(__func__);
  struct tsr_memory* mem = calloc(1, sizeof *mem);
  if (!mem) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tessera_memory_alloc: out of memory");
  if ((st = tsrAlloc(ctx, bytes, TSR_ALLOC_DEFAULT, &mem->ptr))) {
    free(mem);
    return st;
  }
  mem->bytes = bytes;
  if ((st = tsr_object_publish(ctx, &mem->obj, TSR_MAGIC_MEMORY, __func__))) {
    tsrFree(ctx, mem->ptr);
    free(mem);
    return st;
  }
  *out = mem;
  return TSR_SUCCESS;
}

void tsr_memory_handle_free(struct tsr_memory* mem) {
  struct tsr_context* ctx = mem->obj.context;
  if (!ctx->dying) tsr_memory_free(ctx, mem->ptr, "tessera_memory_free");  /* else the context frees it */
  free(mem);
}

int tessera_memory_free(tessera_memory_handle mem) {
  return tsr_object_release(mem, TSR_MAGIC_MEMORY, __func__, "memory handle");
}

int tessera_memory_retain(tessera_memory_handle mem) {
  return tsr_object_retain(mem, TSR_MAGIC_MEMORY, __func__, "memory handle");
}

int tessera_memory_pointer(tessera_memory_handle mem, void** out_ptr) {
  if (!tsr_handle_is_live(mem, TSR_MAGIC_MEMORY)) return tsr_fail_handle(__func__, "memory handle");
  if (!out_ptr) return tsr_fail_null_output(__func__);
  *out_ptr = mem->ptr;
  return TSR_SUCCESS;
}

int tessera_memory_size(tessera_memory_handle mem, size_t* out_bytes) {
  if (!tsr_handle_is_live(mem, TSR_MAGIC_MEMORY)) return tsr_fail_handle(__func__, "memory handle");
  if (!out_bytes) return tsr_fail_null_output(__func__);
  *out_bytes = mem->bytes;
  return TSR_SUCCESS;
}
