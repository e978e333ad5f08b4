/* graph.h — captured graphs and their executable instances (<tessera/execution.h>, "Graph capture"). */
#ifndef TESSERA_SRC_GRAPH_H_
#define TESSERA_SRC_GRAPH_H_

#include <stdatomic.h>
#include <stddef.h>

#include "handles.h"
#include "stream.h"

/* Device memory that a graph's nodes use and only the graph owns: the intermediates of the function calls
 * captured into it (tsrFunctionCall allocates them, then hands them over). Shared by the graph and every
 * executable graph instantiated from it; the last of them to go frees it with the context's tsrFree. */
typedef struct tsr_graph_memory {
  atomic_uint refs;
  struct tsr_context* context;
  void** ptrs;
  size_t count, capacity;
} tsr_graph_memory_t;

/* Nodes are operations as streams queue them; a launch node owns its argument values, an event node holds
 * a reference to its event; kernels are not held (they are checked when instantiated and launched). */
struct tsr_graph {
  tsr_object_t obj;
  tsr_op_t* nodes;
  size_t count, capacity;
  tsr_graph_memory_t* memory;   /* or NULL */
};

struct tsr_graph_exec {
  tsr_object_t obj;
  struct tsr_context* context;  /* also before it is published */
  void* device;                 /* the backend's executable graph (backends with device queues), or NULL */
  tsr_op_t* nodes;              /* an independent copy */
  size_t count;
  struct tsr_kernel** kernels;  /* the distinct kernels of its launches, acquired for each replay */
  uint64_t* serials;            /* their modules' serials: a reloaded module at the same address is not theirs */
  size_t kernel_count;
  tsr_graph_memory_t* memory;   /* the graph's, or NULL */
};

/* A new, unpublished graph for a capture (published by tsrStreamEndCapture). */
struct tsr_graph* tsr_graph_new(void);
/* Appends a node; the graph takes what the node holds (on failure too). */
tsr_status_t tsr_graph_append(struct tsr_graph* graph, tsr_op_t* node);

/* Numbers the event nodes of a replay, in node order: a record gets a new sequence number of its event, a
 * wait the newest one issued so far. `seqs` has one entry per node (NULL: the records are only counted). */
void tsr_graph_number(struct tsr_graph_exec* exec, uint64_t* seqs);

/* Runs the nodes of an executable graph in order, stopping its kernels and copies at the first failure (or
 * from the start when `poisoned`). `stream`: the replaying stream's id, for telemetry. */
tsr_status_t tsr_graph_run(struct tsr_graph_exec* exec, const uint64_t* seqs, bool poisoned, uint64_t stream);
/* Acquires / releases the kernels of a replay: TSR_ERROR_INVALID_HANDLE when a module was unloaded. */
tsr_status_t tsr_graph_acquire_kernels(struct tsr_graph_exec* exec);
void tsr_graph_release_kernels(struct tsr_graph_exec* exec);

/* Hands `count` allocations of `context` (tsrAlloc) to the graph, which frees them when it and the executable
 * graphs made from it are all gone. TSR_ERROR_OUT_OF_MEMORY leaves them the caller's. */
tsr_status_t tsr_graph_keep(struct tsr_graph* graph, struct tsr_context* context, void* const* ptrs, size_t count);

void tsr_graph_free(struct tsr_graph* graph);
void tsr_graph_exec_free(struct tsr_graph_exec* exec);

#endif  /* TESSERA_SRC_GRAPH_H_ */
