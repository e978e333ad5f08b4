/* stream.h — streams and the operations they queue (or record into a graph while capturing).
 *
 * On a backend without device queues (the CPU), each stream has an executor thread that runs its queue in
 * order; the submitting thread returns at once. An operation in a queue holds what it needs: a launch its
 * argument values and its kernel (so the module waits for it), an event operation a reference to its event,
 * a graph replay a reference to the executable graph and its kernels.
 *
 * On a backend with device queues (CUDA, backend.h), a stream is one of the device's queues: the submitting
 * thread hands each operation to the device under the stream's lock (so that operations from several
 * threads keep one order) and returns; the device keeps the argument values, and unloading a module waits
 * for the device (code_unload). There is no executor thread. */
#ifndef TESSERA_SRC_STREAM_H_
#define TESSERA_SRC_STREAM_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "handles.h"
#include "launch.h"
#include "wait.h"

typedef enum tsr_op_kind {
  TSR_OP_LAUNCH,  /* u.launch */
  TSR_OP_COPY,    /* u.copy */
  TSR_OP_RECORD,  /* u.event: complete record `seq` */
  TSR_OP_WAIT,    /* u.event: wait until record `seq` completed */
  TSR_OP_GRAPH,   /* u.graph: replay an executable graph */
  TSR_OP_COMM     /* u.comm: a communicator's operation, only ever a graph node (comm.c records it) */
} tsr_op_kind_t;

/* A communicator operation as a graph node (<tessera/comm.h>, "Stream order"): checked when it was recorded,
 * it holds a reference to its communicator. `kind` and the fields' meaning are comm.c's. */
typedef struct tsr_comm_node {
  struct tsr_comm* comm;
  const char* function;  /* the API function that recorded it ("tsrCommAllReduce"), for messages */
  int kind;
  const void* send;
  void* recv;
  size_t count;          /* as the API function took it */
  int dtype, op, peer;   /* tsr_dtype_t, tsr_reduce_op_t, the root or peer */
  uint64_t send_serial, recv_serial;  /* the allocations the buffers were in when recorded (0: none known) */
} tsr_comm_node_t;

/* comm.c's side of a node. run: the operation now; `queue` NULL runs it in the calling thread (host
 * transports: blocking, within the communicator's timeout), else `queue` is a device graph recorder
 * (backend.h graph_begin) the transport issues it on, so that the device graph contains it. check: its buffers
 * against the allocations as they are now (before each replay: one may have been freed since). hold / drop:
 * the node's reference to its communicator. */
tsr_status_t tsr_comm_node_run(const tsr_comm_node_t* node, void* queue);
tsr_status_t tsr_comm_node_check(const tsr_comm_node_t* node);
/* After a device graph holding the node was launched on `queue` (not NULL): the transport watches the launch's
 * work against the communicator's timeout, aborting the communicator past it (a dead peer would otherwise hold
 * the device forever). fault: the communicator's failure (a watch's, the transport's asynchronous one), else
 * TSR_SUCCESS: what a replay that was waited for reports. */
tsr_status_t tsr_comm_node_watch(const tsr_comm_node_t* node, void* queue);
tsr_status_t tsr_comm_node_fault(const tsr_comm_node_t* node);
void tsr_comm_node_hold(const tsr_comm_node_t* node);
void tsr_comm_node_drop(const tsr_comm_node_t* node);

typedef struct tsr_op {
  struct tsr_op* next;
  tsr_op_kind_t kind;
  union {
    tsr_launch_record_t launch;  /* owned values */
    struct {
      struct tsr_context* context;
      void* dst;
      const void* src;
      size_t bytes;
      tsr_memcpy_kind_t kind;
    } copy;
    struct {
      struct tsr_event* event;
      uint64_t seq;  /* in a graph node: unused (numbered when the graph is launched) */
    } event;
    struct {
      struct tsr_graph_exec* exec;
      uint64_t* seqs;   /* per node: the record's or wait's sequence number, numbered when queued */
      uint64_t stream;  /* the replaying stream's id, for telemetry */
    } graph;
    tsr_comm_node_t comm;
  } u;
} tsr_op_t;

struct tsr_stream {
  tsr_object_t obj;
  uint64_t id;  /* >= 1, for telemetry */
  int32_t priority;
  uint64_t affinity;

  pthread_mutex_t lock;  /* guards everything below */
  pthread_cond_t work;   /* executor: an operation arrived, or stop */
  pthread_cond_t idle;   /* waiters: `completed` advanced */
  tsr_op_t *head, *tail;
  uint64_t queued, completed;  /* operations ever queued / finished */
  tsr_status_t error;          /* the first failure not yet reported, and its message */
  char message[1024];
  bool stopping;
  struct tsr_graph* capture;   /* the graph being recorded, or NULL */
  pthread_t thread;            /* without a device queue */
  void* queue;                 /* the backend's queue, or NULL */
  struct tsr_timing *timings, *timings_tail;  /* device queue, metrics log open: work being timed */
};

/* A live stream of `context` (a reference taken), or an error naming `function`. */
tsr_status_t tsr_stream_acquire(struct tsr_stream* stream, struct tsr_context* context, const char* function);

/* Queues a validated launch, or records it when capturing; copies its argument values either way. */
tsr_status_t tsr_stream_submit_launch(struct tsr_stream* stream, tsr_launch_record_t* record);
/* Queues or records a checked copy. */
tsr_status_t tsr_stream_submit_copy(struct tsr_stream* stream, struct tsr_context* context, void* dst,
                                    const void* src, size_t bytes, tsr_memcpy_kind_t kind);
/* Queues or records an event record or wait (kind TSR_OP_RECORD or TSR_OP_WAIT). */
tsr_status_t tsr_stream_submit_event(struct tsr_stream* stream, tsr_op_kind_t kind, struct tsr_event* event);
/* Records a checked communicator operation into the stream's capture graph, the node taking a reference to
 * its communicator; TSR_ERROR_INVALID_VALUE naming `node->function` when the stream no longer captures. */
tsr_status_t tsr_stream_record_comm(struct tsr_stream* stream, const tsr_comm_node_t* node);
/* Queues a graph replay op made by graph.c (refused while capturing). Takes the op on success. */
tsr_status_t tsr_stream_submit_graph(struct tsr_stream* stream, tsr_op_t* op);

/* Hands one operation to a device queue (backend.h): a stream's, or a graph recorder's. The operation's
 * launch values may be the caller's: the device takes them now. */
tsr_status_t tsr_op_enqueue(struct tsr_context* context, const tsr_op_t* op, void* queue);

/* Replays a device graph on a stream with a device queue (refused while it captures); event records of the
 * graph are numbered as tsr_graph_number does. */
tsr_status_t tsr_stream_launch_device_graph(struct tsr_stream* stream, struct tsr_graph_exec* exec);

/* Runs one operation in the calling thread. With `poisoned`, a launch or copy is skipped (an earlier failure
 * of its stream is pending); records and waits always run, so that nobody waits forever. */
tsr_status_t tsr_op_run(tsr_op_t* op, bool poisoned);
/* Drops what a queued operation holds and frees it. */
void tsr_op_dispose(tsr_op_t* op);

/* Waits for the work queued so far; returns the pending error (and forgets it), setting its message. */
tsr_status_t tsr_stream_wait(struct tsr_stream* stream);
/* The same within `limit`: TSR_ERROR_TIMEOUT (a message naming `function`) when the work is still pending at
 * its deadline; the work and a pending error stay queued for a later wait. */
tsr_status_t tsr_stream_wait_within(struct tsr_stream* stream, const tsr_wait_limit_t* limit, const char* function);

void tsr_stream_free(struct tsr_stream* stream);  /* finishes the queue, stops the thread */

#endif  /* TESSERA_SRC_STREAM_H_ */
