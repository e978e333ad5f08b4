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

enum { SPIRV_MAGIC = 0x07230203, SPIRV_HEADER_WORDS = 5, OP_STRING = 7 };

static uint32_t word_at(const uint8_t* spv, size_t i) {
  uint32_t w;
  memcpy(&w, spv + 4 * i, 4);
  return w;
}

bool tsr_gpu_fault_spirv_sites(const uint8_t* spv, size_t size, char** table, size_t* bytes) {
  *table = NULL;
  *bytes = 0;
  size_t n = size / 4, i = SPIRV_HEADER_WORDS;
  if (n < SPIRV_HEADER_WORDS || word_at(spv, 0) != SPIRV_MAGIC) return false;
  bool checked = false;
  while (i < n) {
    uint32_t w = word_at(spv, i), count = w >> 16;
    if (count == 0 || count > n - i) break;
    if ((w & 0xFFFF) != OP_STRING || count < 3) {
      if (checked) break;  /* the table's strings are consecutive */
      i += count;
      continue;
    }
    const char* text = (const char*)(spv + 4 * (i + 2));
    size_t len = strnlen(text, 4 * (size_t)(count - 2));
    if (!checked) {
      checked = len == sizeof TSR_GPU_FAULT_SITES - 1 && !memcmp(text, TSR_GPU_FAULT_SITES, len);
    } else {
      char* grown = realloc(*table, *bytes + len + 1);
      if (!grown) {
        free(*table);
        *table = NULL;
        *bytes = 1;
        return false;
      }
      memcpy(grown + *bytes, text, len);
      grown[*bytes + len] = 0;
      *table = grown;
      *bytes += len + 1;
    }
    i += count;
  }
  return checked;
}

tsr_status_t tsr_gpu_fault_spirv_load(const uint8_t* spv, size_t size, const char* section, bool debug,
                                      bool* checked, char** sites, size_t* sites_bytes) {
  *checked = tsr_gpu_fault_spirv_sites(spv, size, sites, sites_bytes);
  if (!*checked && *sites_bytes) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading section %s", section);
  if (*checked || !debug) return TSR_SUCCESS;
  return tsr_fail(TSR_ERROR_UNSUPPORTED, "debug mode (TESSERA_DEBUG) checks every tensor access, and the SPIR-V of "
                  "section %s was compiled without bounds checks: recompile it with gpu_bounds_checks=True "
                  "(tessera-cc --gpu-bounds-checks; the default under TESSERA_DEBUG), or run it without "
                  "TESSERA_DEBUG", section);
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

tsr_status_t tsr_gpu_fault_of_record(const uint32_t record[4], const char* sites, size_t sites_bytes,
                                     tsr_fault_t* fault) {
  if (!record[0]) return TSR_SUCCESS;
  char kernel[128], report[400];
  tsr_gpu_fault_site(sites, sites_bytes, record[0] - 1, kernel, sizeof kernel, report, sizeof report);
  return tsr_gpu_fault_of_launch(true, kernel, report, &record[1], fault);
}
