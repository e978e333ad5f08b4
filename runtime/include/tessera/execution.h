/*
 * execution.h — streams, events, asynchronous copies, and graph capture and replay.
 * Included by tessera.h; do not include it alone.
 *
 * A stream is a queue: work given to it runs in the order it was given, one operation after another, and
 * the call that gives it returns at once. Different streams are independent: their work may run at the same
 * time, in any interleaving, unless events order them. The NULL stream is the synchronous default: work given
 * to it has finished when the call returns; it does not wait for other streams (no implicit barrier).
 *
 * Errors: a call that queues work validates it first and refuses bad work with a status, as tsrLaunch does.
 * A failure while queued work runs (a debug-mode memory fault) is kept by the stream, which then skips its
 * later kernels and copies (event records still complete), until tsrStreamSynchronize, tsrStreamQuery or
 * tsrSynchronize reports the error — once — with its message. On the CUDA backend a kernel's fault ends the
 * CUDA context: the next wait reports it, and every later call too.
 *
 * Thread-safety: every function may be called from any thread, also on the same stream or event at once;
 * work given to one stream from several threads is queued in the order the calls took effect. Only
 * destruction must not race with other uses of the same object.
 */
#ifndef TESSERA_EXECUTION_H_
#define TESSERA_EXECUTION_H_

#ifdef __cplusplus
extern "C" {
#endif

/* An event marks a point in a stream's work; it completes, with a timestamp, when the work before it has run. */
typedef struct tsr_event* tsr_event_t;

/* ---------------------------------------------------------------------------------------------------------
 * Streams
 * ------------------------------------------------------------------------------------------------------- */

typedef struct tsr_stream_options {
  int32_t priority;   /* hint: when streams compete for the workers, higher priority goes first (default 0) */
  uint64_t affinity;  /* hint: bit i allows CPU worker i to run this stream's blocks; 0 = any (default) */
} tsr_stream_options_t;

TSR_API tsr_status_t tsrStreamOptionsInitialize(tsr_stream_options_t* options);

/* Creates a stream (options NULL: the defaults). On the CPU backend each stream has a thread that runs its
 * queue; its kernels' blocks run on the context's workers. On the CUDA backend it is a CUDA stream: work is
 * handed to the driver by the calling thread, events are CUDA events, and graphs replay as CUDA graphs. */
TSR_API tsr_status_t tsrCreateStream(tsr_context_t context, const tsr_stream_options_t* options,
                                     tsr_stream_t* out_stream);

/* Drops the creator's reference (tsrReleaseStream). When the last reference goes, the stream finishes the
 * work queued on it, then its thread stops. */
TSR_API tsr_status_t tsrDestroyStream(tsr_stream_t stream);
TSR_API tsr_status_t tsrRetainStream(tsr_stream_t stream);
TSR_API tsr_status_t tsrReleaseStream(tsr_stream_t stream);

/* Waits until everything queued on the stream has run; returns the stream's kept error, if any (and forgets
 * it). NULL stream: TSR_SUCCESS at once. A capturing stream returns TSR_ERROR_INVALID_VALUE. Limited by the
 * context's watchdog when it has one (tsr_context_options_t.wait_timeout_ms, $TESSERA_WAIT_TIMEOUT_MS):
 * then TSR_ERROR_TIMEOUT as tsrStreamSynchronizeTimeout returns it. */
TSR_API tsr_status_t tsrStreamSynchronize(tsr_stream_t stream);

/* tsrStreamSynchronize for at most `timeout_ms` milliseconds (0: only looks): TSR_ERROR_TIMEOUT, with a message,
 * when the work is still pending then. On a device backend the calling thread polls the device's query
 * (cuStreamQuery, hipStreamQuery) against the deadline instead of blocking in its synchronize, so a kernel
 * that never ends (a spin, a deadlock between streams or ranks) is reported instead of hanging the host. After
 * a timeout nothing is cancelled: the work stays queued or running (a spinning kernel keeps its stream, and on
 * a GPU its SMs, busy), a kept error stays kept, the stream and the context stay usable for other work, and a
 * later wait or query reports the work when it ends. Destroying the stream, unloading the module of a running
 * kernel or destroying the context waits for that work without a limit (a thread or a GPU kernel cannot be
 * stopped safely). Thread safety: as tsrStreamSynchronize. */
TSR_API tsr_status_t tsrStreamSynchronizeTimeout(tsr_stream_t stream, uint32_t timeout_ms);

/* TSR_SUCCESS when everything queued has run (or the kept error, reported once), TSR_ERROR_NOT_READY while
 * work is pending. Does not wait. */
TSR_API tsr_status_t tsrStreamQuery(tsr_stream_t stream);

/* Makes later work on `stream` wait until the event's most recent record (as of this call) has completed.
 * Waiting for an event never recorded is a no-op. NULL stream: waits here, in the calling thread, limited by
 * the context's watchdog as tsrEventSynchronize is. The event may belong to another stream of the same
 * context. */
TSR_API tsr_status_t tsrStreamWaitEvent(tsr_stream_t stream, tsr_event_t event);

/* Copies as tsrMemcpy does (same checks), queued on `stream`; NULL stream: synchronous. The memory must stay
 * valid until the copy has run. */
TSR_API tsr_status_t tsrMemcpyAsync(tsr_context_t context, void* dst, const void* src, size_t bytes,
                                    tsr_memcpy_kind_t kind, tsr_stream_t stream);

/* ---------------------------------------------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------------------------------------------- */

TSR_API tsr_status_t tsrCreateEvent(tsr_context_t context, tsr_event_t* out_event);

/* Drops the creator's reference (tsrReleaseEvent); a record still queued keeps the event alive until it ran. */
TSR_API tsr_status_t tsrDestroyEvent(tsr_event_t event);
TSR_API tsr_status_t tsrRetainEvent(tsr_event_t event);
TSR_API tsr_status_t tsrReleaseEvent(tsr_event_t event);

/* Records the event at the current end of `stream`'s queue (NULL stream: completes now). Recording again
 * moves the event: queries and waits then concern the newest record. The stream must belong to the event's
 * context. */
TSR_API tsr_status_t tsrEventRecord(tsr_event_t event, tsr_stream_t stream);

/* TSR_SUCCESS when the most recent record has completed (or the event was never recorded),
 * TSR_ERROR_NOT_READY otherwise. */
TSR_API tsr_status_t tsrEventQuery(tsr_event_t event);

/* Waits until the most recent record (as of this call) has completed. Limited by the context's watchdog when it
 * has one (see tsrStreamSynchronize). */
TSR_API tsr_status_t tsrEventSynchronize(tsr_event_t event);

/* tsrEventSynchronize for at most `timeout_ms` milliseconds (0: only looks): TSR_ERROR_TIMEOUT, with a message,
 * when the record has not completed then; device events are polled (cuEventQuery, hipEventQuery). The work
 * before the record is left as tsrStreamSynchronizeTimeout leaves it. Thread safety: any thread. */
TSR_API tsr_status_t tsrEventSynchronizeTimeout(tsr_event_t event, uint32_t timeout_ms);

/* Milliseconds between the completions of two events' most recent records (monotonic clock; negative when
 * `end` completed first). TSR_ERROR_NOT_READY while either is pending, TSR_ERROR_INVALID_VALUE when either
 * was never recorded or they belong to different contexts. */
TSR_API tsr_status_t tsrEventElapsedTime(tsr_event_t start, tsr_event_t end, float* out_ms);

/* ---------------------------------------------------------------------------------------------------------
 * Graph capture and replay
 * ------------------------------------------------------------------------------------------------------- */

/* A graph is a recorded sequence of stream operations: kernel launches with their argument values, copies,
 * event records and waits. An executable graph is an instantiated, validated copy that replays them with
 * little host overhead: no argument checks or per-launch queue entries, one queue entry for the whole graph. */
typedef struct tsr_graph* tsr_graph_t;
typedef struct tsr_graph_exec* tsr_graph_exec_t;

/* Starts recording `stream` (not NULL; not already capturing): until tsrStreamEndCapture, launches, copies,
 * event records and waits given to it are validated and recorded instead of run. Synchronizing or querying a
 * capturing stream, or recording a graph launch into it, returns TSR_ERROR_INVALID_VALUE. */
TSR_API tsr_status_t tsrStreamBeginCapture(tsr_stream_t stream);

/* Stops recording and returns what was recorded as a new graph (possibly empty). TSR_ERROR_INVALID_VALUE
 * when the stream is not capturing. */
TSR_API tsr_status_t tsrStreamEndCapture(tsr_stream_t stream, tsr_graph_t* out_graph);

/* *out_capturing = 1 while the stream is capturing, else 0 (also for the NULL stream). */
TSR_API tsr_status_t tsrStreamIsCapturing(tsr_stream_t stream, int* out_capturing);

/* Number of operations recorded in the graph. */
TSR_API tsr_status_t tsrGraphGetNodeCount(tsr_graph_t graph, size_t* out_count);

/* Instantiates a graph: an independent copy, checked again (its kernels' modules must still be loaded), that
 * tsrGraphLaunch replays. The graph may be destroyed afterwards. */
TSR_API tsr_status_t tsrGraphInstantiate(tsr_graph_t graph, tsr_graph_exec_t* out_exec);

/* Replays the executable graph on `stream` (NULL: runs it now, in the calling thread). The operations run in
 * recorded order with the recorded argument values; events recorded by the graph are moved as by
 * tsrEventRecord at the time of this call. A failure stops the replay's kernels and copies and is reported as
 * for any work on that stream. TSR_ERROR_INVALID_HANDLE when a kernel's module has been unloaded;
 * TSR_ERROR_MEMORY_FAULT, before anything runs, when a launch's tensor no longer fits the known allocation it
 * starts in (memory freed and allocated or registered again, smaller, since the capture; as tsrLaunch checks). */
TSR_API tsr_status_t tsrGraphLaunch(tsr_graph_exec_t exec, tsr_stream_t stream);

TSR_API tsr_status_t tsrDestroyGraph(tsr_graph_t graph);   /* = tsrReleaseGraph */
TSR_API tsr_status_t tsrRetainGraph(tsr_graph_t graph);
TSR_API tsr_status_t tsrReleaseGraph(tsr_graph_t graph);
TSR_API tsr_status_t tsrDestroyGraphExec(tsr_graph_exec_t exec);  /* = tsrReleaseGraphExec; a queued replay
                                                                     keeps it alive until it ran */
TSR_API tsr_status_t tsrRetainGraphExec(tsr_graph_exec_t exec);
TSR_API tsr_status_t tsrReleaseGraphExec(tsr_graph_exec_t exec);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TESSERA_EXECUTION_H_ */
