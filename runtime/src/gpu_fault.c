/* gpu_fault.c — the fault records' shared part (gpu_fault.h). */
#include "gpu_fault.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

bool tsr_gpu_fault_sizes_ok(size_t record_bytes, size_t sites_bytes) {
  return record_bytes == TSR_GPU_FAULT_RECORD_BYTES && sites_bytes && sites_bytes <= TSR_GPU_FAULT_MAX_SITES_BYTES;
}

/* String `index` of the table into `out`; false if the table has no such string. */
static bool string_at(const char* table, size_t bytes, size_t index, char* out, size_t n) {
  size_t at = 0;
  for (size_t i = 0; i < index && at < bytes; i++) {
    const char* end = memchr(table + at, 0, bytes - at);
    if (!end) return false;
    at = (size_t)(end - table) + 1;
  }
  const char* end = at < bytes ? memchr(table + at, 0, bytes - at) : NULL;
  if (!end) return false;
  snprintf(out, n, "%.*s", (int)(end - (table + at)), table + at);
  return true;
}

bool tsr_gpu_fault_site(const char* table, size_t bytes, uint32_t site, char* kernel, size_t kernel_size,
                        char* report, size_t report_size) {
  if (table && string_at(table, bytes, 2 * (size_t)site, kernel, kernel_size) &&
      string_at(table, bytes, 2 * (size_t)site + 1, report, report_size))
    return true;
  snprintf(kernel, kernel_size, "?");
  snprintf(report, report_size, "bounds check %u failed (the module's table does not name it)", site);
  return false;
}

tsr_status_t tsr_gpu_fault_spirv_unchecked(const char* section) {
  return tsr_fail(TSR_ERROR_UNSUPPORTED, "debug mode (TESSERA_DEBUG) checks every tensor access, and the SPIR-V of "
                  "section %s has no bounds checks (the spirv target cannot compile them yet: docs/robustness.md, "
                  "\"Out-of-bounds accesses in generated GPU code\"): run it without TESSERA_DEBUG", section);
}

/* The launch's own report, for launch.c to quote after the kernel's name (fault.report): one buffer per
 * thread, on the heap. Not a _Thread_local array: a library that is dlopen()ed takes its TLS from the
 * process's small surplus of static TLS, which libraries loaded later (PyTorch's libgomp) need. */
enum { LAUNCH_REPORT_SIZE = 600 };
static pthread_key_t report_key;
static pthread_once_t report_once = PTHREAD_ONCE_INIT;

static void make_report_key(void) { pthread_key_create(&report_key, free); }

static char* launch_report(void) {
  pthread_once(&report_once, make_report_key);
  char* buf = pthread_getspecific(report_key);
  if (!buf && (buf = malloc(LAUNCH_REPORT_SIZE)) && pthread_setspecific(report_key, buf)) {
    free(buf);
    buf = NULL;
  }
  return buf;
}

tsr_status_t tsr_gpu_fault_of_launch(bool own, const char* kernel, const char* report, const uint32_t block[3],
                                     tsr_fault_t* fault) {
  char* buf = launch_report();
  if (!buf) return tsr_fail(TSR_ERROR_MEMORY_FAULT, "kernel '%s': %s", kernel, report);
  *fault = (tsr_fault_t){.block = {block[0], block[1], block[2]}, .report = buf};
  if (own) snprintf(buf, LAUNCH_REPORT_SIZE, "%s", report);
  else  /* a kernel of another stream failed first, and its check is the one recorded */
    snprintf(buf, LAUNCH_REPORT_SIZE, "%s, in kernel '%s' running on another stream", report, kernel);
  return TSR_ERROR_MEMORY_FAULT;
}
