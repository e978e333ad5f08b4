/* event.c — tsrCreateEvent and friends (event.h, <tessera/execution.h>). */
#include "event.h"

#include <stdlib.h>

#include "errors.h"
#include "metrics.h"
#include "objects.h"
#include "stream.h"
#include "wait.h"

tsr_status_t tsrCreateEvent(tsr_context_t ctx, tsr_event_t* out_event) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out_event) return tsr_fail_null_output(__func__);
  struct tsr_event* e = calloc(1, sizeof *e);
  if (!e) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrCreateEvent: out of memory");
  pthread_mutex_init(&e->lock, NULL);
  tsr_cond_init_monotonic(&e->completed_cond);  /* timed waits: tsrEventSynchronizeTimeout */
  e->obj.context = ctx;  /* for tsr_event_free, should publishing fail */
  if ((ctx->backend->event_create && (st = ctx->backend->event_create(ctx->backend_state, &e->device))) ||
      (st = tsr_object_publish(ctx, &e->obj, TSR_MAGIC_EVENT, __func__))) {
    tsr_event_free(e);
    return st;
  }
  *out_event = e;
  return TSR_SUCCESS;
}

void tsr_event_free(struct tsr_event* e) {
  struct tsr_context* ctx = e->obj.context;
  if (e->device) ctx->backend->event_destroy(ctx->backend_state, e->device);
  pthread_cond_destroy(&e->completed_cond);
  pthread_mutex_destroy(&e->lock);
  free(e);
}

tsr_status_t tsrDestroyEvent(tsr_event_t e) { return tsr_object_release(e, TSR_MAGIC_EVENT, __func__, "event"); }
tsr_status_t tsrRetainEvent(tsr_event_t e) { return tsr_object_retain(e, TSR_MAGIC_EVENT, __func__, "event"); }
tsr_status_t tsrReleaseEvent(tsr_event_t e) { return tsr_object_release(e, TSR_MAGIC_EVENT, __func__, "event"); }

tsr_status_t tsr_event_acquire(struct tsr_event* e, struct tsr_context* ctx, const char* function) {
  tsr_status_t st = tsr_object_retain(e, TSR_MAGIC_EVENT, function, "event");
  if (st || !ctx || e->obj.context == ctx) return st;
  tsr_object_unref(&e->obj);
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: the event belongs to another context", function);
}

uint64_t tsr_event_issue(struct tsr_event* e) {
  pthread_mutex_lock(&e->lock);
  uint64_t seq = ++e->issued;
  pthread_mutex_unlock(&e->lock);
  return seq;
}

uint64_t tsr_event_latest(struct tsr_event* e) {
  pthread_mutex_lock(&e->lock);
  uint64_t seq = e->issued;
  pthread_mutex_unlock(&e->lock);
  return seq;
}

void tsr_event_complete(struct tsr_event* e, uint64_t seq) {
  double now = tsr_seconds();
  pthread_mutex_lock(&e->lock);
  if (seq > e->completed) {
    e->completed = seq;
    e->time = now;
  }
  pthread_cond_broadcast(&e->completed_cond);
  pthread_mutex_unlock(&e->lock);
}

bool tsr_event_wait_within(struct tsr_event* e, uint64_t seq, const tsr_wait_limit_t* limit) {
  pthread_mutex_lock(&e->lock);
  bool in_time = true;
  while (e->completed < seq && in_time) in_time = tsr_cond_wait_within(&e->completed_cond, &e->lock, limit);
  bool done = e->completed >= seq;
  pthread_mutex_unlock(&e->lock);
  return done;
}

void tsr_event_wait(struct tsr_event* e, uint64_t seq) {
  tsr_event_wait_within(e, seq, &(tsr_wait_limit_t){.limited = false});
}

/* The event's backend and its state (events of a backend with device queues). */
static const tsr_backend_t* backend_of(const struct tsr_event* e, void** state) {
  *state = e->obj.context->backend_state;
  return e->obj.context->backend;
}

tsr_status_t tsrEventRecord(tsr_event_t e, tsr_stream_t stream) {
  tsr_status_t st = tsr_object_retain(e, TSR_MAGIC_EVENT, __func__, "event");
  if (st) return st;
  void* state;
  const tsr_backend_t* b = backend_of(e, &state);
  if (!stream && e->device) {
    if (!(st = b->event_record(state, e->device, NULL))) tsr_event_issue(e);
  } else if (!stream) {
    tsr_event_complete(e, tsr_event_issue(e));  /* the NULL stream has no pending work */
  } else if (!(st = tsr_stream_acquire(stream, e->obj.context, __func__))) {
    st = tsr_stream_submit_event(stream, TSR_OP_RECORD, e);
    tsr_object_unref(&stream->obj);
  }
  tsr_object_unref(&e->obj);
  return st;
}

static tsr_status_t query_device_event(void* event) {
  struct tsr_event* e = event;
  void* state;
  return backend_of(e, &state)->event_query(state, e->device);
}

/* The calling thread waits for the event's newest record within `limit` (NULL: the context's watchdog). A
 * device event is polled (cuEventQuery …) when there is a limit, then finished as without one: `synchronize`
 * (tsrEventSynchronize, which reads the bounds checks' records) or the NULL stream's event_wait. */
static tsr_status_t host_wait(struct tsr_event* e, const tsr_wait_limit_t* limit, bool synchronize,
                              const char* function) {
  tsr_wait_limit_t within = limit ? *limit : tsr_wait_watchdog(e->obj.context);
  void* state;
  const tsr_backend_t* b = backend_of(e, &state);
  tsr_status_t st = TSR_SUCCESS;
  if (e->device) {
    if (within.limited) st = tsr_poll_within(query_device_event, e, &within);
    if (st == TSR_ERROR_NOT_READY) return tsr_fail_timeout(function, "the work before the event", &within);
    if (st) return st;
    return synchronize ? b->event_synchronize(state, e->device) : b->event_wait(state, NULL, e->device);
  }
  if (!tsr_event_wait_within(e, tsr_event_latest(e), &within))
    return tsr_fail_timeout(function, "the work before the event", &within);
  return TSR_SUCCESS;
}

tsr_status_t tsrStreamWaitEvent(tsr_stream_t stream, tsr_event_t e) {
  tsr_status_t st = tsr_object_retain(e, TSR_MAGIC_EVENT, __func__, "event");
  if (st) return st;
  if (!stream) {
    if (!e->device || tsr_event_latest(e)) st = host_wait(e, NULL, false, __func__);
  } else if (!(st = tsr_stream_acquire(stream, e->obj.context, __func__))) {
    st = tsr_stream_submit_event(stream, TSR_OP_WAIT, e);
    tsr_object_unref(&stream->obj);
  }
  tsr_object_unref(&e->obj);
  return st;
}

tsr_status_t tsrEventQuery(tsr_event_t e) {
  tsr_status_t st = tsr_object_retain(e, TSR_MAGIC_EVENT, __func__, "event");
  if (st) return st;
  if (e->device) {
    st = query_device_event(e);
    tsr_object_unref(&e->obj);
    return st;
  }
  pthread_mutex_lock(&e->lock);
  bool done = e->completed >= e->issued;
  pthread_mutex_unlock(&e->lock);
  tsr_object_unref(&e->obj);
  return done ? TSR_SUCCESS : TSR_ERROR_NOT_READY;
}

tsr_status_t tsrEventSynchronize(tsr_event_t e) {
  tsr_status_t st = tsr_object_retain(e, TSR_MAGIC_EVENT, __func__, "event");
  if (st) return st;
  st = host_wait(e, NULL, true, __func__);
  tsr_object_unref(&e->obj);
  return st;
}

tsr_status_t tsrEventSynchronizeTimeout(tsr_event_t e, uint32_t timeout_ms) {
  tsr_wait_limit_t limit = tsr_wait_within(timeout_ms);
  tsr_status_t st = tsr_object_retain(e, TSR_MAGIC_EVENT, __func__, "event");
  if (st) return st;
  st = host_wait(e, &limit, true, __func__);
  tsr_object_unref(&e->obj);
  return st;
}

/* INVALID_VALUE when the event was never recorded. */
static tsr_status_t recorded(struct tsr_event* e, const char* which) {
  if (tsr_event_latest(e)) return TSR_SUCCESS;
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrEventElapsedTime: the %s event was never recorded", which);
}

/* Reads an event's newest completion: TSR_ERROR_NOT_READY while pending; INVALID_VALUE if never recorded. */
static tsr_status_t completion(struct tsr_event* e, const char* which, double* time) {
  pthread_mutex_lock(&e->lock);
  uint64_t issued = e->issued, completed = e->completed;
  *time = e->time;
  pthread_mutex_unlock(&e->lock);
  if (!issued) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrEventElapsedTime: the %s event was never recorded", which);
  return completed >= issued ? TSR_SUCCESS : TSR_ERROR_NOT_READY;
}

tsr_status_t tsrEventElapsedTime(tsr_event_t start, tsr_event_t end, float* out_ms) {
  tsr_status_t st = tsr_object_retain(start, TSR_MAGIC_EVENT, __func__, "event");
  if (st) return st;
  if (!(st = tsr_event_acquire(end, start->obj.context, __func__))) {
    double t0, t1;
    void* state;
    if (!out_ms) st = tsr_fail_null_output(__func__);
    else if (start->device && !(st = recorded(start, "start")) && !(st = recorded(end, "end")))
      st = backend_of(start, &state)->event_elapsed(state, start->device, end->device, out_ms);
    else if (!start->device && !(st = completion(start, "start", &t0)) && !(st = completion(end, "end", &t1)))
      *out_ms = (float)((t1 - t0) * 1e3);
    tsr_object_unref(&end->obj);
  }
  tsr_object_unref(&start->obj);
  return st;
}
