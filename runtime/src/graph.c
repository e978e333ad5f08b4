/* graph.c — captured graphs, instantiation and replay (graph.h, <tessera/execution.h>).
 *
 * Replay is cheap because everything per-launch was done once: arguments were validated and copied at
 * capture, kernels are checked once per replay (not per node), and a replay on a stream is one queue entry
 * that runs all nodes back to back on the stream's thread. On a backend with device queues (CUDA) the nodes
 * are built into a device graph when the graph is instantiated, and a replay is one call to the device. */
#include "graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "event.h"
#include "memory.h"
#include "objects.h"

/* ---- nodes ------------------------------------------------------------------------------------------ */

/* Drops what a node holds (not the kernel: nodes never hold kernels). */
static void clear_node(tsr_op_t* node) {
  if (node->kind == TSR_OP_LAUNCH) tsr_launch_free(&node->u.launch);
  else if (node->kind == TSR_OP_RECORD || node->kind == TSR_OP_WAIT) tsr_object_unref(&node->u.event.event->obj);
  else if (node->kind == TSR_OP_COMM) tsr_comm_node_drop(&node->u.comm);
}

static tsr_status_t clone_node(const tsr_op_t* from, tsr_op_t* to) {
  *to = *from;
  to->next = NULL;
  if (from->kind == TSR_OP_LAUNCH) return tsr_launch_clone(&from->u.launch, &to->u.launch);
  if (from->kind == TSR_OP_RECORD || from->kind == TSR_OP_WAIT) tsr_object_ref(&from->u.event.event->obj);
  if (from->kind == TSR_OP_COMM) tsr_comm_node_hold(&from->u.comm);
  return TSR_SUCCESS;
}

struct tsr_graph* tsr_graph_new(void) { return calloc(1, sizeof(struct tsr_graph)); }

tsr_status_t tsr_graph_append(struct tsr_graph* g, tsr_op_t* node) {
  if (g->count == g->capacity) {
    size_t capacity = g->capacity ? g->capacity * 2 : 16;
    tsr_op_t* grown = realloc(g->nodes, capacity * sizeof *grown);
    if (!grown) {
      clear_node(node);
      return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory recording into a graph");
    }
    g->nodes = grown;
    g->capacity = capacity;
  }
  g->nodes[g->count] = *node;
  g->nodes[g->count++].next = NULL;
  return TSR_SUCCESS;
}

/* ---- memory the graph owns --------------------------------------------------------------------------- */

tsr_status_t tsr_graph_keep(struct tsr_graph* g, struct tsr_context* ctx, void* const* ptrs, size_t count) {
  tsr_graph_memory_t* m = g->memory;
  if (!m) {
    if (!(m = calloc(1, sizeof *m))) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory recording into a graph");
    atomic_init(&m->refs, 1);
    m->context = ctx;
    g->memory = m;
  }
  if (m->count + count > m->capacity) {
    size_t capacity = 2 * (m->count + count);
    void** grown = realloc(m->ptrs, capacity * sizeof *grown);
    if (!grown) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory recording into a graph");
    m->ptrs = grown;
    m->capacity = capacity;
  }
  memcpy(m->ptrs + m->count, ptrs, count * sizeof *ptrs);
  m->count += count;
  return TSR_SUCCESS;
}

static void memory_unref(tsr_graph_memory_t* m) {
  if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
  /* the context is live: it destroys its graphs and executable graphs before its memory */
  for (size_t i = 0; i < m->count; i++) tsr_memory_free(m->context, m->ptrs[i], "tsrDestroyGraph");
  free(m->ptrs);
  free(m);
}

void tsr_graph_free(struct tsr_graph* g) {
  memory_unref(g->memory);
  for (size_t i = 0; i < g->count; i++) clear_node(&g->nodes[i]);
  free(g->nodes);
  free(g);
}

void tsr_graph_exec_free(struct tsr_graph_exec* e) {
  if (e->device) e->context->backend->graph_destroy(e->context->backend_state, e->device);
  memory_unref(e->memory);
  for (size_t i = 0; i < e->count; i++) clear_node(&e->nodes[i]);
  free(e->nodes);
  free(e->kernels);
  free(e->serials);
  free(e);
}

/* ---- the API ---------------------------------------------------------------------------------------- */

tsr_status_t tsrGraphGetNodeCount(tsr_graph_t g, size_t* out_count) {
  tsr_status_t st = tsr_object_retain(g, TSR_MAGIC_GRAPH, __func__, "graph");
  if (st) return st;
  if (!out_count) st = tsr_fail_null_output(__func__);
  else *out_count = g->count;
  tsr_object_unref(&g->obj);
  return st;
}

/* Collects the distinct kernels of the exec's launch nodes, checking each is still loaded. */
static tsr_status_t collect_kernels(struct tsr_graph_exec* e) {
  e->kernels = calloc(e->count + 1, sizeof *e->kernels);
  e->serials = calloc(e->count + 1, sizeof *e->serials);
  if (!e->kernels || !e->serials) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrGraphInstantiate: out of memory");
  for (size_t i = 0; i < e->count; i++) {
    if (e->nodes[i].kind != TSR_OP_LAUNCH) continue;
    const tsr_launch_record_t* r = &e->nodes[i].u.launch;
    size_t k = 0;
    while (k < e->kernel_count && e->kernels[k] != r->kernel) k++;
    if (k == e->kernel_count) {
      e->kernels[e->kernel_count] = r->kernel;
      e->serials[e->kernel_count++] = r->module_serial;
    }
  }
  return tsr_graph_acquire_kernels(e);  /* held by the caller while it builds */
}

/* Builds the device graph of an exec whose kernels are held: the nodes, in order, given to a recorder. */
static tsr_status_t build_device_graph(struct tsr_graph_exec* e) {
  struct tsr_context* ctx = e->context;
  void* recorder;
  tsr_status_t st = ctx->backend->graph_begin(ctx->backend_state, &recorder);
  if (st) return st;
  for (size_t i = 0; i < e->count && !st; i++) st = tsr_op_enqueue(ctx, &e->nodes[i], recorder);
  if (st) {
    char message[1024];
    snprintf(message, sizeof message, "%s", tsrGetLastErrorMessage());
    ctx->backend->graph_end(ctx->backend_state, recorder, NULL);
    return tsr_fail(st, "tsrGraphInstantiate: building the device graph: %s", message);
  }
  return ctx->backend->graph_end(ctx->backend_state, recorder, &e->device);
}

tsr_status_t tsrGraphInstantiate(tsr_graph_t g, tsr_graph_exec_t* out_exec) {
  tsr_status_t st = tsr_object_retain(g, TSR_MAGIC_GRAPH, __func__, "graph");
  if (st) return st;
  struct tsr_graph_exec* e = NULL;
  if (!out_exec) {
    st = tsr_fail_null_output(__func__);
  } else if (!(e = calloc(1, sizeof *e)) || !(e->nodes = calloc(g->count + 1, sizeof *e->nodes))) {
    st = tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrGraphInstantiate: out of memory");
  } else {
    e->context = g->obj.context;
    if ((e->memory = g->memory)) atomic_fetch_add(&e->memory->refs, 1);
    while (e->count < g->count && !(st = clone_node(&g->nodes[e->count], &e->nodes[e->count]))) e->count++;
    if (!st && !(st = collect_kernels(e))) {
      if (e->context->backend->graph_begin) st = build_device_graph(e);
      tsr_graph_release_kernels(e);
    }
    if (!st) st = tsr_object_publish(g->obj.context, &e->obj, TSR_MAGIC_GRAPH_EXEC, __func__);
  }
  if (st && e) tsr_graph_exec_free(e);
  else if (!st) *out_exec = e;
  tsr_object_unref(&g->obj);
  return st;
}

tsr_status_t tsr_graph_acquire_kernels(struct tsr_graph_exec* e) {
  tsr_handles_lock();
  size_t held = 0;
  while (held < e->kernel_count && tsr_kernel_acquire_locked(e->kernels[held], e->serials[held])) held++;
  tsr_handles_unlock();
  if (held == e->kernel_count) return TSR_SUCCESS;
  while (held) tsr_kernel_release(e->kernels[--held]);
  return tsr_fail(TSR_ERROR_INVALID_HANDLE, "the module of a kernel the graph launches was unloaded");
}

void tsr_graph_release_kernels(struct tsr_graph_exec* e) {
  for (size_t i = 0; i < e->kernel_count; i++) tsr_kernel_release(e->kernels[i]);
}

void tsr_graph_number(struct tsr_graph_exec* e, uint64_t* seqs) {
  for (size_t i = 0; i < e->count; i++) {
    const tsr_op_t* n = &e->nodes[i];
    uint64_t seq = 0;
    if (n->kind == TSR_OP_RECORD) seq = tsr_event_issue(n->u.event.event);
    else if (n->kind == TSR_OP_WAIT) seq = tsr_event_latest(n->u.event.event);
    if (seqs) seqs[i] = seq;
  }
}

tsr_status_t tsr_graph_run(struct tsr_graph_exec* e, const uint64_t* seqs, bool poisoned, uint64_t stream) {
  tsr_status_t first = TSR_SUCCESS;
  for (size_t i = 0; i < e->count; i++) {
    tsr_op_t node = e->nodes[i];  /* a shallow copy: numbered and attributed for this replay */
    if (node.kind == TSR_OP_RECORD || node.kind == TSR_OP_WAIT) node.u.event.seq = seqs[i];
    if (node.kind == TSR_OP_LAUNCH) node.u.launch.stream = stream;
    tsr_status_t st = tsr_op_run(&node, poisoned || first != TSR_SUCCESS);
    if (st && !first) first = st;  /* its message stays this thread's last error: later nodes are skipped */
  }
  return first;
}

/* The memory checks of every launch node (launch.h) and communicator node, against the allocations as they
 * are now: the memory a graph was captured with may have been freed and reallocated smaller since. */
static tsr_status_t check_memory(struct tsr_graph_exec* e) {
  for (size_t i = 0; i < e->count; i++) {
    tsr_status_t st = TSR_SUCCESS;
    if (e->nodes[i].kind == TSR_OP_LAUNCH) st = tsr_launch_check_memory(&e->nodes[i].u.launch);
    else if (e->nodes[i].kind == TSR_OP_COMM) st = tsr_comm_node_check(&e->nodes[i].u.comm);
    if (st) return st;
  }
  return TSR_SUCCESS;
}

/* The communicator nodes of an exec, one per communicator (the first): watched after a launch, asked for
 * their faults after a waited one. `queue` NULL: faults. */
static tsr_status_t each_comm(struct tsr_graph_exec* e, void* queue) {
  for (size_t i = 0; i < e->count; i++) {
    if (e->nodes[i].kind != TSR_OP_COMM) continue;
    size_t first = 0;
    while (e->nodes[first].kind != TSR_OP_COMM || e->nodes[first].u.comm.comm != e->nodes[i].u.comm.comm) first++;
    if (first != i) continue;
    const tsr_comm_node_t* n = &e->nodes[i].u.comm;
    tsr_status_t st = queue ? tsr_comm_node_watch(n, queue) : tsr_comm_node_fault(n);
    if (st) return st;
  }
  return TSR_SUCCESS;
}

static bool has_comm(const struct tsr_graph_exec* e) {
  for (size_t i = 0; i < e->count; i++)
    if (e->nodes[i].kind == TSR_OP_COMM) return true;
  return false;
}

/* A launch on `stream` whose communicators watch it (their operations' kernels are in the device graph). */
static tsr_status_t launch_watched(struct tsr_graph_exec* e, struct tsr_stream* stream) {
  tsr_status_t st = tsr_stream_launch_device_graph(stream, e);
  return st ? st : each_comm(e, stream->queue);
}

/* A replay of a device graph: its kernels' modules are checked (unloading one waits for the device), then
 * the device gets the whole graph in one call. On the NULL stream a graph with communicator operations runs
 * on a stream of its own, waited for here: the backend's NULL-stream launch waits inside, where a dead peer
 * would hold it past any timeout; launched on a stream the communicators watch, it ends at their timeout
 * (they abort), and the replay reports their fault. */
static tsr_status_t launch_device_graph(struct tsr_graph_exec* e, struct tsr_stream* stream) {
  struct tsr_context* ctx = e->context;
  tsr_status_t st = tsr_graph_acquire_kernels(e);
  if (st) return st;
  st = check_memory(e);
  if (!st && stream) {
    st = launch_watched(e, stream);
  } else if (!st && has_comm(e)) {
    tsr_stream_t own;
    if (!(st = tsrCreateStream(ctx, NULL, &own))) {
      st = launch_watched(e, own);
      tsr_status_t waited = tsrStreamSynchronize(own);
      if (!st) st = waited;
      if (!st) st = each_comm(e, NULL);
      tsrDestroyStream(own);
    }
  } else if (!st) {
    st = ctx->backend->graph_launch(ctx->backend_state, e->device, NULL);
    tsr_graph_number(e, NULL);
  }
  tsr_graph_release_kernels(e);
  return st;
}

tsr_status_t tsrGraphLaunch(tsr_graph_exec_t e, tsr_stream_t stream) {
  tsr_status_t st = tsr_object_retain(e, TSR_MAGIC_GRAPH_EXEC, __func__, "executable graph");
  if (st) return st;
  struct tsr_context* ctx = e->obj.context;
  if (stream && (st = tsr_stream_acquire(stream, ctx, __func__))) {
    tsr_object_unref(&e->obj);
    return st;
  }
  if (e->device) {
    st = launch_device_graph(e, stream);
    if (stream) tsr_object_unref(&stream->obj);
    tsr_object_unref(&e->obj);
    return st;
  }
  uint64_t* seqs = calloc(e->count + 1, sizeof *seqs);
  if (!seqs) st = tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrGraphLaunch: out of memory");
  else if (!(st = tsr_graph_acquire_kernels(e)) && (st = check_memory(e))) tsr_graph_release_kernels(e);
  if (st) {
    free(seqs);
  } else if (!stream) {
    tsr_graph_number(e, seqs);
    st = tsr_graph_run(e, seqs, false, 0);
    tsr_graph_release_kernels(e);
    free(seqs);
  } else {
    tsr_op_t* op = malloc(sizeof *op);
    if (op) {
      *op = (tsr_op_t){.kind = TSR_OP_GRAPH, .u.graph = {.exec = e, .seqs = seqs}};
      tsr_object_ref(&e->obj);  /* the queued replay's reference */
      if ((st = tsr_stream_submit_graph(stream, op))) {
        free(op);
        tsr_object_unref(&e->obj);
      }
    } else {
      st = tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "tsrGraphLaunch: out of memory");
    }
    if (st) {
      tsr_graph_release_kernels(e);
      free(seqs);
    }
  }
  if (stream) tsr_object_unref(&stream->obj);
  tsr_object_unref(&e->obj);
  return st;
}

tsr_status_t tsrDestroyGraph(tsr_graph_t g) { return tsr_object_release(g, TSR_MAGIC_GRAPH, __func__, "graph"); }
tsr_status_t tsrRetainGraph(tsr_graph_t g) { return tsr_object_retain(g, TSR_MAGIC_GRAPH, __func__, "graph"); }
tsr_status_t tsrReleaseGraph(tsr_graph_t g) { return tsr_object_release(g, TSR_MAGIC_GRAPH, __func__, "graph"); }

tsr_status_t tsrDestroyGraphExec(tsr_graph_exec_t e) {
  return tsr_object_release(e, TSR_MAGIC_GRAPH_EXEC, __func__, "executable graph");
}
tsr_status_t tsrRetainGraphExec(tsr_graph_exec_t e) {
  return tsr_object_retain(e, TSR_MAGIC_GRAPH_EXEC, __func__, "executable graph");
}
tsr_status_t tsrReleaseGraphExec(tsr_graph_exec_t e) {
  return tsr_object_release(e, TSR_MAGIC_GRAPH_EXEC, __func__, "executable graph");
}
