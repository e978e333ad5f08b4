/*
 * telemetry.h — the metrics log, trace ranges (NVTX) and crash capture.
 * Included by tessera.h; do not include it alone. docs/runtime.md, "Telemetry", is the user guide.
 *
 * Metrics log: one record per kernel launch and copy that ran (and per tsrMetricsRecord call): name, time,
 * GFLOP/s and GB/s when the launch gave its flop and byte counts (tsr_launch_desc_t), and the p95 latency of
 * that name over its last `window` records. JSON Lines or CSV, chosen by the file's extension. Opened by
 * $TESSERA_METRICS=path.jsonl|path.csv at the first context creation, or by tsrMetricsOpen.
 *
 * Trace ranges: when libnvToolsExt.so.1 (or $TESSERA_NVTX_LIBRARY) can be dlopen()ed, the runtime marks its
 * work with NVTX ranges of the standard phases — "copy" around copies, "mma" around kernel launches (or the
 * launch's phase), "host" around module loading and graph instantiation — and hosts can add their own. Without
 * the library every trace call is a no-op that succeeds.
 *
 * Crash capture: when $TESSERA_CRASH_DIR is set, a launch that fails (refused or faulting) writes a directory
 * there with the image's IR snapshot (.tessera.ops), the kernel's metadata, the launch's arguments and the
 * tensors they point to, and the runtime's recent log; `tessera-pack-repro` turns it into a replayable bundle.
 *
 * Every function here is thread-safe. The log is process-wide: one file for all contexts.
 */
#ifndef TESSERA_TELEMETRY_H_
#define TESSERA_TELEMETRY_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Opens (creating or truncating) the metrics log at `path`, replacing any open one. The format comes from the
 * extension: ".jsonl" (or ".json") for JSON Lines, ".csv" for CSV with a header line; anything else returns
 * TSR_ERROR_INVALID_VALUE. `window`: records per name the p95 is taken over (0: 100). */
TSR_API tsr_status_t tsrMetricsOpen(const char* path, uint32_t window);

/* Flushes and closes the log; TSR_SUCCESS also when none was open. */
TSR_API tsr_status_t tsrMetricsClose(void);

/* Writes a record for host-side work (a training step, a phase of the host program) to the open log: its
 * name, duration in seconds, and optionally its flop and byte counts (0 = unknown). TSR_ERROR_INVALID_VALUE
 * for a NULL name or a negative or non-finite duration; TSR_SUCCESS and nothing written when no log is open. */
TSR_API tsr_status_t tsrMetricsRecord(const char* name, double seconds, double flops, double bytes);

/* Trace phases: the standard NVTX range names of the architecture spec (§3.6). */
typedef enum tsr_trace_phase {
  TSR_TRACE_COPY = 0,    /* "copy": memory transfers */
  TSR_TRACE_MMA = 1,     /* "mma": compute kernels */
  TSR_TRACE_REDUCE = 2,  /* "reduce": reductions */
  TSR_TRACE_COMM = 3,    /* "comm": communication */
  TSR_TRACE_HOST = 4     /* "host": host-side work */
} tsr_trace_phase_t;

/* *out_active = 1 when an NVTX library was loaded and ranges are emitted, else 0. */
TSR_API tsr_status_t tsrTraceIsActive(int* out_active);

/* Opens a range on the calling thread, named "<phase>" or "<phase>:<detail>" (detail may be NULL), in the
 * phase's NVTX category and color. Unknown phases return TSR_ERROR_INVALID_VALUE. */
TSR_API tsr_status_t tsrTraceRangePush(tsr_trace_phase_t phase, const char* detail);

/* Closes the calling thread's innermost range. */
TSR_API tsr_status_t tsrTraceRangePop(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TESSERA_TELEMETRY_H_ */
