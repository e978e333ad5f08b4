/* errors.h — how runtime functions report failures: a status plus a thread-local message. */
#ifndef TESSERA_SRC_ERRORS_H_
#define TESSERA_SRC_ERRORS_H_

#include <stdio.h>

#include "tessera/tessera.h"

/* Records a printf-style message as this thread's last error (and in the process's log of recent failures)
 * and returns `status`, so that failures read `return tsr_fail(TSR_ERROR_INVALID_VALUE, "...", ...);`. */
tsr_status_t tsr_fail(tsr_status_t status, const char* format, ...) __attribute__((format(printf, 2, 3)));

/* The two commonest refusals, worded alike everywhere. `function` is the API function (__func__). */
tsr_status_t tsr_fail_handle(const char* function, const char* expected);  /* "tsrFoo: not a live context" */
tsr_status_t tsr_fail_null_output(const char* function);

/* Writes the log of recent failures, oldest first, one "seconds.micros STATUS: message" line each. */
void tsr_log_write(FILE* out);

#endif  /* TESSERA_SRC_ERRORS_H_ */
