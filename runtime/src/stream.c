/* stream.c — streams (stream.h, <tessera/execution.h>): creation, the executor thread or the device queue,
 * submission (to the queue, the device, or the capture graph), synchronization and error reporting, timing of
 * device work for the metrics log, capture begin/end. */
#include "stream.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_pool.h"
#include "errors.h"
#include "event.h"
#include "graph.h"
#include "metrics.h"
#include "objects.h"
#include "wait.h"

/* ---- running operations ----------------------------------------------------------------------------- */

tsr_status_t tsr_op_run(tsr_op_t* op, bool poisoned) {
  switch (op->kind) {
    case TSR_OP_LAUNCH: return poisoned ? TSR_SUCCESS : tsr_launch_run(&op->u.launch);
    case TSR_OP_COPY:
      if (poisoned) return TSR_SUCCESS;
      return tsr_memory_copy(op->u.copy.context, op->u.copy.dst, op->u.copy.src, op->u.copy.bytes, op->u.copy.kind,
                             "tsrMemcpyAsync");
    case TSR_OP_RECORD: tsr_event_complete(op->u.event.event, op->u.event.seq); return TSR_SUCCESS;
    case TSR_OP_WAIT: tsr_event_wait(op->u.event.event, op->u.event.seq); return TSR_SUCCESS;
    case TSR_OP_GRAPH: return tsr_graph_run(op->u.graph.exec, op->u.graph.seqs, poisoned, op->u.graph.stream);
    case TSR_OP_COMM: return poisoned ? TSR_SUCCESS : tsr_comm_node_run(&op->u.comm, NULL);
  }
  return TSR_SUCCESS;
}

void tsr_op_dispose(tsr_op_t* op) {
  switch (op->kind) {
    case TSR_OP_LAUNCH:
      tsr_kernel_release(op->u.launch.kernel);
      tsr_launch_free(&op->u.launch);
      break;
    case TSR_OP_COPY: break;
    case TSR_OP_RECORD:
    case TSR_OP_WAIT: tsr_object_unref(&op->u.event.event->obj); break;
    case TSR_OP_COMM: tsr_comm_node_drop(&op->u.comm); break;
    case TSR_OP_GRAPH:
      tsr_graph_release_kernels(op->u.graph.exec);
      free(op->u.graph.seqs);
      tsr_object_unref(&op->u.graph.exec->obj);
      break;
  }
  free(op);
}

/* ---- device queues ---------------------------------------------------------------------------------- */

tsr_status_t tsr_op_enqueue(struct tsr_context* ctx, const tsr_op_t* op, void* queue) {
  const tsr_backend_t* b = ctx->backend;
  switch (op->kind) {
    case TSR_OP_LAUNCH: return tsr_launch_enqueue(&op->u.launch, queue);
    case TSR_OP_COPY:
      return tsr_memory_enqueue_copy(ctx, queue, op->u.copy.dst, op->u.copy.src, op->u.copy.bytes, op->u.copy.kind);
    case TSR_OP_RECORD: return b->event_record(ctx->backend_state, op->u.event.event->device, queue);
    case TSR_OP_WAIT: return b->event_wait(ctx->backend_state, queue, op->u.event.event->device);
    case TSR_OP_COMM: return tsr_comm_node_run(&op->u.comm, queue);
    case TSR_OP_GRAPH: break;
  }
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "a graph launch cannot be part of a graph");
}

/* A launch or copy on a device queue timed for the metrics log: device events before and after it, read
 * when the stream is next waited for (the work runs later than its submission). */
typedef struct tsr_timing {
  struct tsr_timing* next;
  void *start, *end;
  bool kernel;
  char name[128];
  uint32_t grid[3], block[3];
  double flops, bytes;
} tsr_timing_t;

static void timing_free(struct tsr_context* ctx, tsr_timing_t* t) {
  if (t->start) ctx->backend->event_destroy(ctx->backend_state, t->start);
  if (t->end) ctx->backend->event_destroy(ctx->backend_state, t->end);
  free(t);
}

/* Stream locked. NULL when no log is open, or the events cannot be had (the record is then missing). */
static tsr_timing_t* timing_start(struct tsr_stream* s, struct tsr_context* ctx, const tsr_op_t* op) {
  if (!tsr_metrics_on() || (op->kind != TSR_OP_LAUNCH && op->kind != TSR_OP_COPY)) return NULL;
  const tsr_backend_t* b = ctx->backend;
  tsr_timing_t* t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (b->event_create(ctx->backend_state, &t->start) || b->event_create(ctx->backend_state, &t->end) ||
      b->event_record(ctx->backend_state, t->start, s->queue)) {
    timing_free(ctx, t);
    return NULL;
  }
  if (op->kind == TSR_OP_LAUNCH) {
    const tsr_launch_record_t* r = &op->u.launch;
    t->kernel = true;
    snprintf(t->name, sizeof t->name, "%s", r->kernel->name);  /* the module may be gone when it is written */
    memcpy(t->grid, r->grid, sizeof t->grid);
    memcpy(t->block, r->block, sizeof t->block);
    t->flops = r->flops;
    t->bytes = r->bytes;
  } else {
    snprintf(t->name, sizeof t->name, "%s", tsr_memcpy_name(op->u.copy.kind));
    t->bytes = (double)op->u.copy.bytes;
  }
  return t;
}

/* Stream locked: the work was handed over (st 0) and is timed from here, or it was refused. */
static void timing_end(struct tsr_stream* s, struct tsr_context* ctx, tsr_timing_t* t, tsr_status_t st) {
  if (!t) return;
  if (st || ctx->backend->event_record(ctx->backend_state, t->end, s->queue)) {
    timing_free(ctx, t);
    return;
  }
  if (s->timings_tail) s->timings_tail->next = t;
  else s->timings = t;
  s->timings_tail = t;
}

/* After the stream's device work finished (with status `st`): writes the records of the work timed so far
 * (waiting for work another thread queued meanwhile). Keeps the calling thread's error message, which belongs
 * to `st`. */
static void write_timings(struct tsr_stream* s, tsr_status_t st) {
  struct tsr_context* ctx = s->obj.context;
  pthread_mutex_lock(&s->lock);
  tsr_timing_t* t = s->timings;
  s->timings = s->timings_tail = NULL;
  pthread_mutex_unlock(&s->lock);
  if (!t) return;
  char message[1024];
  snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
  while (t) {
    tsr_timing_t* next = t->next;
    float ms = 0;
    tsr_status_t timed = st ? st : ctx->backend->event_elapsed(ctx->backend_state, t->start, t->end, &ms);
    if (timed == TSR_ERROR_NOT_READY) {  /* queued by another thread after this wait began */
      timed = ctx->backend->event_synchronize(ctx->backend_state, t->end);
      if (!timed) timed = ctx->backend->event_elapsed(ctx->backend_state, t->start, t->end, &ms);
    }
    tsr_metrics_write(&(tsr_metrics_entry_t){.name = t->name, .stream = s->id, .grid = t->kernel ? t->grid : NULL,
                                             .block = t->kernel ? t->block : NULL, .seconds = ms * 1e-3,
                                             .flops = t->flops, .bytes = t->bytes, .status = timed});
    timing_free(ctx, t);
    t = next;
  }
  if (st) tsr_fail(st, "%s", message);
}

/* Hands `op` to the stream's device queue (stream locked, not capturing). */
static tsr_status_t to_device(struct tsr_stream* s, const tsr_op_t* op) {
  struct tsr_context* ctx = s->obj.context;
  tsr_timing_t* t = timing_start(s, ctx, op);
  tsr_status_t st = tsr_op_enqueue(ctx, op, s->queue);
  timing_end(s, ctx, t, st);
  if (!st && op->kind == TSR_OP_RECORD) tsr_event_issue(op->u.event.event);  /* it exists now: elapsed time */
  return st;
}

tsr_status_t tsr_stream_launch_device_graph(struct tsr_stream* s, struct tsr_graph_exec* e) {
  struct tsr_context* ctx = s->obj.context;
  pthread_mutex_lock(&s->lock);
  bool capturing = s->capture != NULL;
  tsr_status_t st = TSR_SUCCESS;
  if (!capturing) {
    st = ctx->backend->graph_launch(ctx->backend_state, e->device, s->queue);
    if (!st) tsr_graph_number(e, NULL);
  }
  pthread_mutex_unlock(&s->lock);
  if (capturing) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGraphLaunch: the stream is capturing; graph launches "
                                 "cannot be captured");
  return st;
}

/* The executor: runs the queue in order until the stream stops and its queue is empty. */
static void* execute(void* arg) {
  struct tsr_stream* s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (!s->head && !s->stopping) pthread_cond_wait(&s->work, &s->lock);
    tsr_op_t* op = s->head;
    if (!op) break;
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    bool poisoned = s->error != TSR_SUCCESS;
    pthread_mutex_unlock(&s->lock);

    tsr_status_t st = tsr_op_run(op, poisoned);
    char message[sizeof s->message];
    if (st) snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
    tsr_op_dispose(op);

    pthread_mutex_lock(&s->lock);
    if (st && !s->error) {
      s->error = st;
      memcpy(s->message, message, sizeof message);
    }
    s->completed++;
    pthread_cond_broadcast(&s->idle);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* ---- life ------------------------------------------------------------------------------------------- */

tsr_status_t tsrStreamOptionsInitialize(tsr_stream_options_t* options) {
  if (!options) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrStreamOptionsInitialize: the options are NULL");
  *options = (tsr_stream_options_t){0};
  return TSR_SUCCESS;
}

tsr_status_t tsrCreateStream(tsr_context_t ctx, const tsr_stream_options_t* options, tsr_stream_t* out_stream) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st) return st;
  if (!out_stream) return tsr_fail_null_output(__func__);
  tsr_stream_options_t defaults;
  tsrStreamOptionsInitialize(&defaults);
  if (!options) options = &defaults;
  struct tsr_stream* s = calloc(1, sizeof *s);
  if (!s) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrCreateStream: out of memory");
  s->id = atomic_fetch_add(&ctx->next_stream_id, 1) + 1;
  s->priority = options->priority;
  s->affinity = options->affinity;
  s->obj.context = ctx;  /* for tsr_stream_free, should publishing fail */
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work, NULL);
  tsr_cond_init_monotonic(&s->idle);  /* timed waits: tsr_stream_wait_within */
  if (ctx->backend->queue_create) {
    st = ctx->backend->queue_create(ctx->backend_state, s->priority, &s->queue);
  } else {
    /* The executor runs blocks of its launches itself (cpu_pool.h), so it gets a worker's stack. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, TSR_CPU_STACK_BYTES);
    int err = pthread_create(&s->thread, &attr, execute, s);
    pthread_attr_destroy(&attr);
    if (err) st = tsr_fail(TSR_ERROR_INIT_FAIL, "tsrCreateStream: cannot start the stream's thread (error %d)", err);
  }
  if (st) {
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return st;
  }
  if ((st = tsr_object_publish(ctx, &s->obj, TSR_MAGIC_STREAM, __func__))) {
    tsr_stream_free(s);
    return st;
  }
  *out_stream = s;
  return TSR_SUCCESS;
}

void tsr_stream_free(struct tsr_stream* s) {
  if (s->queue) {
    struct tsr_context* ctx = s->obj.context;
    /* Waited for, as a stream's thread is joined: arrays its work uses may be freed once this returns. Its
     * error has nobody left to report it to. */
    tsr_status_t st = ctx->backend->queue_wait(ctx->backend_state, s->queue);
    write_timings(s, st);
    ctx->backend->queue_destroy(ctx->backend_state, s->queue);
  } else {
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
  }
  tsr_deferred_stream_done(s->obj.context, s);  /* its work is done: what was released after it is free */
  if (s->capture) tsr_graph_free(s->capture);
  pthread_cond_destroy(&s->idle);
  pthread_cond_destroy(&s->work);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

tsr_status_t tsrDestroyStream(tsr_stream_t s) { return tsr_object_release(s, TSR_MAGIC_STREAM, __func__, "stream"); }
tsr_status_t tsrRetainStream(tsr_stream_t s) { return tsr_object_retain(s, TSR_MAGIC_STREAM, __func__, "stream"); }
tsr_status_t tsrReleaseStream(tsr_stream_t s) { return tsr_object_release(s, TSR_MAGIC_STREAM, __func__, "stream"); }

tsr_status_t tsr_stream_acquire(struct tsr_stream* s, struct tsr_context* ctx, const char* function) {
  tsr_status_t st = tsr_object_retain(s, TSR_MAGIC_STREAM, function, "stream");
  if (st || !ctx || s->obj.context == ctx) return st;
  tsr_object_unref(&s->obj);
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: the stream belongs to another context", function);
}

/* ---- submission ------------------------------------------------------------------------------------- */

/* Stream locked and not capturing. */
static void push(struct tsr_stream* s, tsr_op_t* op) {
  op->next = NULL;
  if (s->tail) s->tail->next = op;
  else s->head = op;
  s->tail = op;
  s->queued++;
  pthread_cond_signal(&s->work);
}

/* Records `op` into the capture graph (stream locked): the graph takes its contents, the shell is freed. */
static tsr_status_t record(struct tsr_stream* s, tsr_op_t* op) {
  tsr_status_t st = tsr_graph_append(s->capture, op);
  free(op);
  return st;
}

/* An operation holding its own copy of a launch's argument values. */
static tsr_status_t new_launch_op(const tsr_launch_record_t* r, tsr_op_t** out) {
  tsr_op_t* op = malloc(sizeof *op);
  if (!op) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "kernel '%s': out of memory queueing the launch", r->kernel->name);
  op->kind = TSR_OP_LAUNCH;
  op->u.launch = *r;
  tsr_status_t st = tsr_launch_own_values(&op->u.launch);
  if (st) free(op);
  else *out = op;
  return st;
}

tsr_status_t tsr_stream_submit_launch(struct tsr_stream* s, tsr_launch_record_t* r) {
  tsr_op_t* op;
  tsr_status_t st;
  if (s->queue) {  /* the device copies the values itself; only a recorded launch needs its own */
    pthread_mutex_lock(&s->lock);
    if (!s->capture) st = to_device(s, &(tsr_op_t){.kind = TSR_OP_LAUNCH, .u.launch = *r});
    else if (!(st = new_launch_op(r, &op))) st = record(s, op);
    pthread_mutex_unlock(&s->lock);
    return st;
  }
  if ((st = new_launch_op(r, &op))) return st;
  pthread_mutex_lock(&s->lock);
  if (s->capture) {
    st = record(s, op);
  } else {
    tsr_kernel_hold(r->kernel);  /* the caller holds it too, so its module is loaded */
    push(s, op);
  }
  pthread_mutex_unlock(&s->lock);
  return st;
}

tsr_status_t tsr_stream_submit_copy(struct tsr_stream* s, struct tsr_context* ctx, void* dst, const void* src,
                                    size_t bytes, tsr_memcpy_kind_t kind) {
  tsr_op_t* op = malloc(sizeof *op);
  if (!op) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrMemcpyAsync: out of memory queueing the copy");
  op->kind = TSR_OP_COPY;
  op->u.copy.context = ctx;
  op->u.copy.dst = dst;
  op->u.copy.src = src;
  op->u.copy.bytes = bytes;
  op->u.copy.kind = kind;
  tsr_status_t st = TSR_SUCCESS;
  pthread_mutex_lock(&s->lock);
  if (s->capture) {
    st = record(s, op);
  } else if (s->queue) {
    st = to_device(s, op);
    free(op);
  } else {
    push(s, op);
  }
  pthread_mutex_unlock(&s->lock);
  return st;
}

tsr_status_t tsr_stream_submit_event(struct tsr_stream* s, tsr_op_kind_t kind, struct tsr_event* e) {
  tsr_op_t* op = malloc(sizeof *op);
  if (!op) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory queueing an event operation");
  op->kind = kind;
  op->u.event.event = e;
  op->u.event.seq = 0;
  tsr_status_t st = TSR_SUCCESS;
  pthread_mutex_lock(&s->lock);
  tsr_object_ref(&e->obj);
  if (s->capture) {
    st = record(s, op);
  } else if (s->queue) {
    /* A wait for an event never recorded is a no-op, as in CUDA. */
    if (kind == TSR_OP_RECORD || tsr_event_latest(e)) st = to_device(s, op);
    pthread_mutex_unlock(&s->lock);
    tsr_op_dispose(op);
    return st;
  } else {
    op->u.event.seq = kind == TSR_OP_RECORD ? tsr_event_issue(e) : tsr_event_latest(e);
    if (kind == TSR_OP_WAIT && op->u.event.seq == 0) {  /* never recorded: nothing to wait for */
      pthread_mutex_unlock(&s->lock);
      tsr_op_dispose(op);
      return TSR_SUCCESS;
    }
    push(s, op);
  }
  pthread_mutex_unlock(&s->lock);
  return st;
}

tsr_status_t tsr_stream_record_comm(struct tsr_stream* s, const tsr_comm_node_t* node) {
  tsr_op_t* op = malloc(sizeof *op);
  if (!op) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "%s: out of memory recording into a graph", node->function);
  *op = (tsr_op_t){.kind = TSR_OP_COMM, .u.comm = *node};
  tsr_status_t st;
  pthread_mutex_lock(&s->lock);
  if (s->capture) {
    tsr_comm_node_hold(node);
    st = record(s, op);  /* the graph takes the reference (dropped on failure) */
  } else {
    free(op);
    st = tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: the stream's capture ended during the call", node->function);
  }
  pthread_mutex_unlock(&s->lock);
  return st;
}

tsr_status_t tsr_stream_submit_graph(struct tsr_stream* s, tsr_op_t* op) {
  pthread_mutex_lock(&s->lock);
  bool capturing = s->capture != NULL;
  if (!capturing) {
    tsr_graph_number(op->u.graph.exec, op->u.graph.seqs);
    op->u.graph.stream = s->id;
    push(s, op);
  }
  pthread_mutex_unlock(&s->lock);
  if (capturing) return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGraphLaunch: the stream is capturing; graph launches "
                                 "cannot be captured");
  return TSR_SUCCESS;
}

tsr_status_t tsrMemcpyAsync(tsr_context_t ctx, void* dst, const void* src, size_t bytes, tsr_memcpy_kind_t kind,
                            tsr_stream_t stream) {
  tsr_status_t st = tsr_check_context(ctx, __func__);
  if (st || (st = tsr_memory_check_copy(ctx, dst, src, bytes, kind, __func__))) return st;
  if (!stream) return tsr_memory_copy(ctx, dst, src, bytes, kind, __func__);
  if ((st = tsr_stream_acquire(stream, ctx, __func__))) return st;
  if (bytes) st = tsr_stream_submit_copy(stream, ctx, dst, src, bytes, kind);
  tsr_object_unref(&stream->obj);
  return st;
}

/* ---- waiting and errors ----------------------------------------------------------------------------- */

/* Takes the pending error (stream locked); the message goes to the caller's thread. */
static tsr_status_t take_error(struct tsr_stream* s) {
  tsr_status_t st = s->error;
  if (st) {
    tsr_fail(st, "%s", s->message);
    s->error = TSR_SUCCESS;
  }
  return st;
}

static tsr_status_t query_queue(void* stream) {
  struct tsr_stream* s = stream;
  struct tsr_context* ctx = s->obj.context;
  return ctx->backend->queue_query(ctx->backend_state, s->queue);
}

tsr_status_t tsr_stream_wait_within(struct tsr_stream* s, const tsr_wait_limit_t* limit, const char* function) {
  if (s->queue) {
    /* With a limit, the device is polled (cuStreamQuery …) rather than blocked on: its blocking synchronize
     * would not return while a kernel spins. */
    struct tsr_context* ctx = s->obj.context;
    tsr_status_t st = limit->limited ? tsr_poll_within(query_queue, s, limit)
                                     : ctx->backend->queue_wait(ctx->backend_state, s->queue);
    if (st == TSR_ERROR_NOT_READY) return tsr_fail_timeout(function, "the stream's work", limit);
    write_timings(s, st);
    return st;
  }
  pthread_mutex_lock(&s->lock);
  uint64_t target = s->queued;
  bool in_time = true;
  while (s->completed < target && in_time) in_time = tsr_cond_wait_within(&s->idle, &s->lock, limit);
  bool done = s->completed >= target;
  tsr_status_t st = done ? take_error(s) : TSR_SUCCESS;  /* a late error stays kept for the next wait */
  pthread_mutex_unlock(&s->lock);
  return done ? st : tsr_fail_timeout(function, "the stream's work", limit);
}

tsr_status_t tsr_stream_wait(struct tsr_stream* s) {
  return tsr_stream_wait_within(s, &(tsr_wait_limit_t){.limited = false}, "tsrStreamSynchronize");
}

static tsr_status_t refuse_capturing(const char* function) {
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: the stream is capturing (end the capture first)", function);
}

/* tsrStreamSynchronize within `limit` (NULL: the context's watchdog). */
static tsr_status_t synchronize(tsr_stream_t s, const tsr_wait_limit_t* limit, const char* function) {
  if (!s) return TSR_SUCCESS;  /* the NULL stream never has pending work */
  tsr_status_t st = tsr_stream_acquire(s, NULL, function);
  if (st) return st;
  tsr_wait_limit_t within = limit ? *limit : tsr_wait_watchdog(s->obj.context);
  pthread_mutex_lock(&s->lock);
  bool capturing = s->capture != NULL;
  pthread_mutex_unlock(&s->lock);
  st = capturing ? refuse_capturing(function) : tsr_stream_wait_within(s, &within, function);
  if (!st && !capturing) tsr_deferred_poll(s->obj.context);  /* the memory released after the work just waited for */
  tsr_object_unref(&s->obj);
  return st;
}

tsr_status_t tsrStreamSynchronize(tsr_stream_t s) { return synchronize(s, NULL, __func__); }

tsr_status_t tsrStreamSynchronizeTimeout(tsr_stream_t s, uint32_t timeout_ms) {
  tsr_wait_limit_t limit = tsr_wait_within(timeout_ms);
  return synchronize(s, &limit, __func__);
}

tsr_status_t tsrStreamQuery(tsr_stream_t s) {
  if (!s) return TSR_SUCCESS;
  tsr_status_t st = tsr_stream_acquire(s, NULL, __func__);
  if (st) return st;
  pthread_mutex_lock(&s->lock);
  bool device = s->queue && !s->capture;
  if (s->capture) st = refuse_capturing(__func__);
  else if (device) st = TSR_SUCCESS;
  else if (s->completed < s->queued) st = TSR_ERROR_NOT_READY;
  else st = take_error(s);
  pthread_mutex_unlock(&s->lock);
  if (device) {
    struct tsr_context* ctx = s->obj.context;
    st = ctx->backend->queue_query(ctx->backend_state, s->queue);
    if (st != TSR_ERROR_NOT_READY) write_timings(s, st);
  }
  tsr_object_unref(&s->obj);
  return st;
}

/* ---- capture ---------------------------------------------------------------------------------------- */

tsr_status_t tsrStreamBeginCapture(tsr_stream_t s) {
  if (!s)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrStreamBeginCapture: the NULL stream runs work at once and cannot "
                    "capture; create a stream");
  tsr_status_t st = tsr_stream_acquire(s, NULL, __func__);
  if (st) return st;
  struct tsr_graph* g = tsr_graph_new();
  pthread_mutex_lock(&s->lock);
  if (s->capture) st = tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrStreamBeginCapture: the stream is already capturing");
  else if (!g) st = tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrStreamBeginCapture: out of memory");
  else s->capture = g, g = NULL;
  pthread_mutex_unlock(&s->lock);
  if (g) tsr_graph_free(g);
  tsr_object_unref(&s->obj);
  return st;
}

tsr_status_t tsrStreamEndCapture(tsr_stream_t s, tsr_graph_t* out_graph) {
  tsr_status_t st = tsr_stream_acquire(s, NULL, __func__);
  if (st) return st;
  struct tsr_graph* g = NULL;
  if (!out_graph) {
    st = tsr_fail_null_output(__func__);
  } else {
    pthread_mutex_lock(&s->lock);
    g = s->capture;
    s->capture = NULL;
    pthread_mutex_unlock(&s->lock);
    if (!g) st = tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrStreamEndCapture: the stream is not capturing");
    else if ((st = tsr_object_publish(s->obj.context, &g->obj, TSR_MAGIC_GRAPH, __func__))) tsr_graph_free(g);
    else *out_graph = g;
  }
  tsr_object_unref(&s->obj);
  return st;
}

tsr_status_t tsrStreamIsCapturing(tsr_stream_t s, int* out_capturing) {
  if (!out_capturing) return tsr_fail_null_output(__func__);
  if (!s) {
    *out_capturing = 0;
    return TSR_SUCCESS;
  }
  tsr_status_t st = tsr_stream_acquire(s, NULL, __func__);
  if (st) return st;
  pthread_mutex_lock(&s->lock);
  *out_capturing = s->capture != NULL;
  pthread_mutex_unlock(&s->lock);
  tsr_object_unref(&s->obj);
  return TSR_SUCCESS;
}
