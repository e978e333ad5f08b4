/* deferred.c — stream-ordered release of intermediates (deferred.h). */
#include "deferred.h"

#include <stdlib.h>

#include "errors.h"
#include "graph.h"
#include "memory.h"
#include "objects.h"
#include "stream.h"

typedef struct tsr_deferred {
  struct tsr_deferred* next;
  struct tsr_stream* stream;  /* not referenced: a stream frees its groups before it goes */
  uint64_t target;            /* executor thread: finished once its completed count reaches this */
  void* marker;               /* device queue: the backend event recorded after the group's work */
  size_t count, capacity;
  void** ptrs;
  size_t* bytes;
} tsr_deferred_t;

void tsr_deferred_init(struct tsr_context* ctx) {
  ctx->deferred = (tsr_deferred_state_t){0};
  pthread_mutex_init(&ctx->deferred.lock, NULL);
}

static void discard_group(struct tsr_context* ctx, tsr_deferred_t* d) {
  if (d->marker) ctx->backend->event_destroy(ctx->backend_state, d->marker);
  free(d->ptrs);
  free(d->bytes);
  free(d);
}

void tsr_deferred_teardown(struct tsr_context* ctx) {
  tsr_deferred_state_t* s = &ctx->deferred;
  for (tsr_deferred_t *d = s->spare, *next; d; d = next) {
    next = d->next;
    discard_group(ctx, d);
  }
  pthread_mutex_destroy(&s->lock);
  *s = (tsr_deferred_state_t){0};
}

/* Frees a detached list of groups' allocations and keeps the groups as spares. */
static void free_groups(struct tsr_context* ctx, tsr_deferred_t* list) {
  if (!list) return;
  tsr_deferred_t* last = list;
  for (tsr_deferred_t* d = list; d; d = d->next) {
    for (size_t i = 0; i < d->count; i++) tsr_memory_free(ctx, d->ptrs[i], "tsrFunctionCall");
    d->count = 0;
    d->stream = NULL;
    last = d;
  }
  pthread_mutex_lock(&ctx->deferred.lock);
  last->next = ctx->deferred.spare;
  ctx->deferred.spare = list;
  pthread_mutex_unlock(&ctx->deferred.lock);
}

/* Whether a group's work finished (deferred lock held; it is taken before a stream's). A device that reports
 * a failure runs nothing more of the queue: its memory is no longer in use either. */
static bool finished(struct tsr_context* ctx, tsr_deferred_t* d) {
  if (d->marker) return ctx->backend->event_query(ctx->backend_state, d->marker) != TSR_ERROR_NOT_READY;
  pthread_mutex_lock(&d->stream->lock);
  bool done = d->stream->completed >= d->target;
  pthread_mutex_unlock(&d->stream->lock);
  return done;
}

/* Detaches the pending groups of stream `only`, or with `only` NULL the finished ones (deferred lock held),
 * keeping the others' order. */
static tsr_deferred_t* detach(struct tsr_context* ctx, struct tsr_stream* only) {
  tsr_deferred_state_t* s = &ctx->deferred;
  tsr_deferred_t *out = NULL, **out_tail = &out, **link = &s->pending, *kept_last = NULL;
  while (*link) {
    tsr_deferred_t* d = *link;
    bool take = only ? d->stream == only : finished(ctx, d);
    if (take) {
      *link = d->next;
      d->next = NULL;
      *out_tail = d;
      out_tail = &d->next;
      atomic_fetch_sub(&s->count, 1);
    } else {
      kept_last = d;
      link = &d->next;
    }
  }
  s->pending_tail = kept_last;
  return out;
}

void tsr_deferred_poll(struct tsr_context* ctx) {
  if (!atomic_load_explicit(&ctx->deferred.count, memory_order_relaxed)) return;
  pthread_mutex_lock(&ctx->deferred.lock);
  tsr_deferred_t* done = detach(ctx, NULL);
  pthread_mutex_unlock(&ctx->deferred.lock);
  free_groups(ctx, done);
}

void tsr_deferred_stream_done(struct tsr_context* ctx, struct tsr_stream* stream) {
  if (!atomic_load_explicit(&ctx->deferred.count, memory_order_relaxed)) return;
  pthread_mutex_lock(&ctx->deferred.lock);
  tsr_deferred_t* done = detach(ctx, stream);
  pthread_mutex_unlock(&ctx->deferred.lock);
  free_groups(ctx, done);
}

bool tsr_deferred_take(struct tsr_context* ctx, struct tsr_stream* stream, size_t bytes, void** out) {
  if (!atomic_load_explicit(&ctx->deferred.count, memory_order_relaxed)) return false;
  bool found = false;
  pthread_mutex_lock(&ctx->deferred.lock);
  for (tsr_deferred_t* d = ctx->deferred.pending; d && !found; d = d->next) {
    if (d->stream != stream) continue;
    for (size_t i = 0; i < d->count && !found; i++)
      if (d->bytes[i] == bytes) {  /* an empty group stays pending until its marker passes: harmless */
        *out = d->ptrs[i];
        d->ptrs[i] = d->ptrs[--d->count];
        d->bytes[i] = d->bytes[d->count];
        found = true;
      }
  }
  pthread_mutex_unlock(&ctx->deferred.lock);
  return found;
}

/* A group with room for `count` allocations and, on a device queue, an event: a spare, else a new one. NULL
 * when memory or the device refuses. */
static tsr_deferred_t* group_for(struct tsr_context* ctx, bool device, size_t count) {
  pthread_mutex_lock(&ctx->deferred.lock);
  tsr_deferred_t* d = ctx->deferred.spare;
  if (d) ctx->deferred.spare = d->next;
  pthread_mutex_unlock(&ctx->deferred.lock);
  if (!d && !(d = calloc(1, sizeof *d))) return NULL;
  d->next = NULL;
  if (d->capacity < count) {
    void** ptrs = realloc(d->ptrs, count * sizeof *ptrs);
    if (ptrs) d->ptrs = ptrs;
    size_t* bytes = ptrs ? realloc(d->bytes, count * sizeof *bytes) : NULL;
    if (bytes) d->bytes = bytes, d->capacity = count;
  }
  if (d->capacity < count || (device && !d->marker && ctx->backend->event_create(ctx->backend_state, &d->marker))) {
    discard_group(ctx, d);
    return NULL;
  }
  return d;
}

tsr_status_t tsr_deferred_release(struct tsr_context* ctx, struct tsr_stream* s, void* const* ptrs,
                                  const size_t* bytes, size_t count) {
  if (!count) return TSR_SUCCESS;
  tsr_deferred_t* d = group_for(ctx, s->queue != NULL, count);
  tsr_status_t st = TSR_SUCCESS;
  bool marked = false, kept = false;
  /* under the stream's lock: no operation is queued between the call's last one and the marker, and the
   * capture state cannot change between reading it and acting on it */
  pthread_mutex_lock(&s->lock);
  if (s->capture) {
    kept = true;
    st = tsr_graph_keep(s->capture, ctx, ptrs, count);  /* on failure left allocated: a replay may use them */
  } else if (d && s->queue) {
    marked = ctx->backend->event_record(ctx->backend_state, d->marker, s->queue) == TSR_SUCCESS;
  } else if (d) {
    d->target = s->queued;
    marked = true;
  }
  pthread_mutex_unlock(&s->lock);
  if (marked) {
    d->stream = s;
    d->count = count;
    for (size_t i = 0; i < count; i++) d->ptrs[i] = ptrs[i], d->bytes[i] = bytes[i];
    pthread_mutex_lock(&ctx->deferred.lock);
    if (ctx->deferred.pending_tail) ctx->deferred.pending_tail->next = d;
    else ctx->deferred.pending = d;
    ctx->deferred.pending_tail = d;
    atomic_fetch_add(&ctx->deferred.count, 1);
    pthread_mutex_unlock(&ctx->deferred.lock);
    return TSR_SUCCESS;
  }
  if (d) free_groups(ctx, d);  /* back to the spares, empty */
  if (kept) return st;
  st = tsr_stream_wait(s);  /* no marker: the old way, waiting for the work before freeing its memory */
  for (size_t i = 0; i < count; i++) tsr_memory_free(ctx, ptrs[i], "tsrFunctionCall");
  return st;
}
