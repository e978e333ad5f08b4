/* status.c — status names and descriptions, the thread-local last-error message, version queries. */
#include <stdarg.h>
#include <stdio.h>

#include "errors.h"

/* Big enough for a message naming a kernel, its targets and a dlerror() string. */
static _Thread_local char last_error[1024];

tsr_status_t tsr_fail(tsr_status_t status, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  vsnprintf(last_error, sizeof last_error, format, ap);
  va_end(ap);
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
