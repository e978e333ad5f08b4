/* trace.h — NVTX ranges for the runtime's own work (<tessera/telemetry.h>, "Trace ranges"). */
#ifndef TESSERA_SRC_TRACE_H_
#define TESSERA_SRC_TRACE_H_

#include <stdbool.h>

#include "tessera/tessera.h"

/* Opens a range when an NVTX library is loaded; returns whether it did (then close it with tsr_trace_pop). */
bool tsr_trace_push(tsr_trace_phase_t phase, const char* detail);
void tsr_trace_pop(void);

#endif  /* TESSERA_SRC_TRACE_H_ */
