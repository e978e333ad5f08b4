/* metrics.h — the process-wide metrics log of <tessera/telemetry.h>: one record per kernel launch, copy or
 * host step, with GFLOP/s and GB/s from caller-given counts and the p95 latency of the name over a window. */
#ifndef TESSERA_SRC_METRICS_H_
#define TESSERA_SRC_METRICS_H_

#include <stdbool.h>
#include <stdint.h>

#include "tessera/tessera.h"

typedef struct tsr_metrics_entry {
  const char* kind;      /* "kernel", "copy" (NULL: derived from name) or "host" */
  const char* name;      /* kernel name, "memcpy HtoD", or the host's name */
  uint64_t stream;       /* 0: the NULL stream or host work */
  const uint32_t* grid;  /* 3 entries for kernels, else NULL */
  const uint32_t* block;
  double seconds;
  double flops, bytes;   /* 0 = unknown */
  tsr_status_t status;
} tsr_metrics_entry_t;

/* Whether a log is open: cheap, for callers deciding whether to time their work. */
bool tsr_metrics_on(void);

/* Writes one record (nothing when no log is open). */
void tsr_metrics_write(const tsr_metrics_entry_t* entry);

/* Opens $TESSERA_METRICS once per process, at the first context creation that finds it set. */
tsr_status_t tsr_metrics_open_from_env(void);

/* Monotonic seconds, never 0. */
double tsr_seconds(void);

#endif  /* TESSERA_SRC_METRICS_H_ */
