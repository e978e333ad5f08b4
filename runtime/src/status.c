/* status.c — status names and descriptions, the thread-local last-error message, the runtime's log of
 * recent failures (for crash captures), version queries. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "errors.h"

/* Big enough for a message naming a kernel, its targets and a dlerror() string. */
static _Thread_local char last_error[1024];

/* The last LOG_LINES failure messages of the process, oldest first from log_next. */
enum { LOG_LINES = 64 };
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_lines[LOG_LINES][sizeof last_error + 64];
static unsigned log_next, log_count;

static void log_failure(tsr_status_t status) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  pthread_mutex_lock(&log_lock);
  snprintf(log_lines[log_next], sizeof log_lines[0], "%lld.%06ld %s: %s", (long long)now.tv_sec,
           now.tv_nsec / 1000, tsrGetStatusName(status), last_error);
  log_next = (log_next + 1) % LOG_LINES;
  if (log_count < LOG_LINES) log_count++;
  pthread_mutex_unlock(&log_lock);
}

void tsr_log_write(FILE* out) {
  pthread_mutex_lock(&log_lock);
  for (unsigned i = 0; i < log_count; i++)
    fprintf(out, "%s\n", log_lines[(log_next + LOG_LINES - log_count + i) % LOG_LINES]);
  pthread_mutex_unlock(&log_lock);
}

tsr_status_t tsr_fail(tsr_status_t status, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  char message[sizeof last_error];  /* the format may read last_error itself */
  vsnprintf(message, sizeof message, format, ap);
  va_end(ap);
  memcpy(last_error, message, sizeof message);
  log_failure(status);
  return status;
}

tsr_status_t tsr_fail_handle(const char* function, const char* expected) {
  return tsr_fail(TSR_ERROR_INVALID_HANDLE, "%s: not a live %s (NULL, destroyed, or another kind of handle)", function,
                  expected);
}

tsr_status_t tsr_fail_null_output(const char* function) {
  return tsr_fail(TSR_ERROR_INVALID_VALUE, "%s: the output pointer is NULL", function);
}

const char* tsrGetLastErrorMessage(void) { return last_error; }

const char* tsrGetStatusName(tsr_status_t status) {
  switch (status) {
    case TSR_SUCCESS: return "TSR_SUCCESS";
    case TSR_ERROR_INIT_FAIL: return "TSR_ERROR_INIT_FAIL";
    case TSR_ERROR_INVALID_HANDLE: return "TSR_ERROR_INVALID_HANDLE";
    case TSR_ERROR_OUT_OF_MEMORY: return "TSR_ERROR_OUT_OF_MEMORY";
    case TSR_ERROR_UNSUPPORTED: return "TSR_ERROR_UNSUPPORTED";
    case TSR_ERROR_INVALID_VALUE: return "TSR_ERROR_INVALID_VALUE";
    case TSR_ERROR_TIMEOUT: return "TSR_ERROR_TIMEOUT";
    case TSR_ERROR_BAD_IMAGE: return "TSR_ERROR_BAD_IMAGE";
    case TSR_ERROR_ABI_MISMATCH: return "TSR_ERROR_ABI_MISMATCH";
    case TSR_ERROR_NOT_FOUND: return "TSR_ERROR_NOT_FOUND";
    case TSR_ERROR_LAUNCH_FAILED: return "TSR_ERROR_LAUNCH_FAILED";
    case TSR_ERROR_NOT_READY: return "TSR_ERROR_NOT_READY";
    case TSR_ERROR_MEMORY_FAULT: return "TSR_ERROR_MEMORY_FAULT";
  }
  return "TSR_STATUS_UNKNOWN";
}

const char* tsrGetErrorString(tsr_status_t status) {
  switch (status) {
    case TSR_SUCCESS: return "success";
    case TSR_ERROR_INIT_FAIL: return "the runtime or a backend failed to initialize";
    case TSR_ERROR_INVALID_HANDLE: return "invalid handle (NULL, wrong type, or already destroyed)";
    case TSR_ERROR_OUT_OF_MEMORY: return "out of memory";
    case TSR_ERROR_UNSUPPORTED: return "unsupported by this runtime or backend";
    case TSR_ERROR_INVALID_VALUE: return "invalid argument value";
    case TSR_ERROR_TIMEOUT: return "timed out";
    case TSR_ERROR_BAD_IMAGE: return "malformed or unloadable .tessera image";
    case TSR_ERROR_ABI_MISMATCH: return "image ABI version not supported by this runtime";
    case TSR_ERROR_NOT_FOUND: return "not found";
    case TSR_ERROR_LAUNCH_FAILED: return "kernel launch failed";
    case TSR_ERROR_NOT_READY: return "work still pending";
    case TSR_ERROR_MEMORY_FAULT: return "out-of-bounds memory access refused or caught";
  }
  return "unknown status code";
}

tsr_status_t tsrGetVersion(int* major, int* minor, int* patch) {
  if (!major || !minor || !patch)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGetVersion: output pointers must not be NULL");
  *major = TSR_VERSION_MAJOR;
  *minor = TSR_VERSION_MINOR;
  *patch = TSR_VERSION_PATCH;
  return TSR_SUCCESS;
}

tsr_status_t tsrGetAbiVersion(uint32_t* major, uint32_t* minor) {
  if (!major || !minor)
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrGetAbiVersion: output pointers must not be NULL");
  *major = TSR_ABI_MAJOR;
  *minor = TSR_ABI_MINOR;
  return TSR_SUCCESS;
}
