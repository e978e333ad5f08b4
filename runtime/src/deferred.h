/* deferred.h — stream-ordered release of a context's memory: allocations whose last use is work queued on a
 * stream (a tsrFunctionCall's intermediates) go back to the pool once that work has finished, with no wait.
 *
 * Each released group carries a completion marker of its stream, taken right after the group's last queued
 * operation: on a stream with an executor thread (no device queue) the count of operations queued so far,
 * finished when the thread's count of completed ones reaches it (it runs its queue in order); on a device
 * queue a backend event recorded there, finished when the device says so. Finished groups are freed when
 * polled: by a call, by tsrAlloc before it asks the backend for a new block, by tsrStreamSynchronize,
 * tsrSynchronize and tsrTrimMemory; a stream's groups when it is destroyed (its work is done then), so that a
 * context destroys none with groups pending.
 *
 * A later call on the same stream may take a pending block of exactly the size it needs before it finished:
 * its own work is queued after the work that used the block, and every stream runs its work in order (an
 * executor thread its queue; a device queue, CUDA stream, HIP stream, in-order Level Zero command list or
 * OpenCL queue, in submission order). Nothing else takes a pending block. */
#ifndef TESSERA_SRC_DEFERRED_H_
#define TESSERA_SRC_DEFERRED_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

struct tsr_context;
struct tsr_stream;
struct tsr_deferred;

typedef struct tsr_deferred_state {
  pthread_mutex_t lock;  /* guards the lists; taken before a stream's lock, never inside one or the memory lock */
  struct tsr_deferred *pending, *pending_tail;  /* released groups whose work may still run, oldest first */
  struct tsr_deferred* spare;                   /* finished groups kept for reuse, with their arrays and events */
  atomic_size_t count;                          /* pending groups: polls with none pending take no lock */
} tsr_deferred_state_t;

void tsr_deferred_init(struct tsr_context* context);
/* After the context's streams are gone (none is pending then): frees the spare groups and their events. */
void tsr_deferred_teardown(struct tsr_context* context);

/* Releases allocations `ptrs` (of `bytes` each, as allocated) of `context` after the work queued on `stream`
 * so far. On a stream capturing a graph the graph takes them instead (tsr_graph_keep): its launches use them
 * whenever it is replayed. TSR_SUCCESS, or: TSR_ERROR_OUT_OF_MEMORY when the capturing graph cannot take
 * them (left allocated: a replay may use them); where no marker can be had (out of memory, the device
 * refusing an event), the stream is waited for and they are freed now, returning the wait's status. */
tsr_status_t tsr_deferred_release(struct tsr_context* context, struct tsr_stream* stream, void* const* ptrs,
                                  const size_t* bytes, size_t count);
/* A pending allocation of exactly `bytes` released after work on `stream` (not capturing), handed to a caller
 * whose work on that stream comes after it; false when there is none. */
bool tsr_deferred_take(struct tsr_context* context, struct tsr_stream* stream, size_t bytes, void** out);
/* Frees the groups whose work finished. */
void tsr_deferred_poll(struct tsr_context* context);
/* Frees the groups of `stream`, whose work has all finished (it is being destroyed). */
void tsr_deferred_stream_done(struct tsr_context* context, struct tsr_stream* stream);

#endif  /* TESSERA_SRC_DEFERRED_H_ */
