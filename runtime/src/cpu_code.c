/* cpu_code.c — loads the host shared object of a `.tessera.code.cpu` section without leaving a file behind:
 * the bytes go to a memfd that is dlopen()ed through /proc/self/fd/N; where memfds are unavailable or not
 * executable, to an unlinked mkstemp file instead. */
#define _GNU_SOURCE
#include "cpu_code.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_elf.h"
#include "errors.h"

struct tsr_cpu_code {
  void* handle;
  /* A memfd stays open while its object is loaded: glibc matches dlopen() paths by name, so the
   * /proc/self/fd/N name must not be reused by another module while this one is loaded. -1 otherwise. */
  int fd;
};

static bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* dlopen()s `path` unless an object of that name is already loaded (glibc would hand back the old one). */
static void* open_fresh(const char* path, char* why, size_t why_size) {
  void* stale = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (stale) {
    dlclose(stale);
    snprintf(why, why_size, "an object named %s is still loaded", path);
    return NULL;
  }
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) snprintf(why, why_size, "%s", dlerror());
  return handle;
}

static bool load_via_memfd(const uint8_t* bytes, size_t size, tsr_cpu_code_t* code, char* why, size_t why_size) {
#ifdef MFD_CLOEXEC
  int fd = memfd_create("tessera-cpu-code", MFD_CLOEXEC);
  if (fd < 0) {
    snprintf(why, why_size, "memfd_create: %s", strerror(errno));
    return false;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  if (!write_all(fd, bytes, size)) snprintf(why, why_size, "writing the memfd: %s", strerror(errno));
  else if ((code->handle = open_fresh(path, why, why_size))) {
    code->fd = fd;
    return true;
  }
  close(fd);
  return false;
#else
  (void)bytes, (void)size, (void)code;
  snprintf(why, why_size, "memfd_create is not available");
  return false;
#endif
}

static bool load_via_tmpfile(const uint8_t* bytes, size_t size, tsr_cpu_code_t* code, char* why, size_t why_size) {
  const char* dir = getenv("TMPDIR");
  char path[4096];
  if (snprintf(path, sizeof path, "%s/tessera-cpu-XXXXXX", dir && *dir ? dir : "/tmp") >= (int)sizeof path) {
    snprintf(why, why_size, "TMPDIR is too long");
    return false;
  }
  int fd = mkstemp(path);
  if (fd < 0) {
    snprintf(why, why_size, "mkstemp %.256s: %s", path, strerror(errno));
    return false;
  }
  bool written = write_all(fd, bytes, size);
  close(fd);
  if (written) code->handle = open_fresh(path, why, why_size);
  else snprintf(why, why_size, "writing %.256s: %s", path, strerror(errno));
  unlink(path);  /* the mapping keeps the code alive */
  return code->handle != NULL;
}

tsr_status_t tsr_cpu_code_load(const uint8_t* bytes, size_t size, const char* section, tsr_cpu_code_t** out) {
  tsr_status_t st = tsr_cpu_check_shared_object(bytes, size, section);
  if (st) return st;
  tsr_cpu_code_t* code = calloc(1, sizeof *code);
  if (!code) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory loading CPU code");
  code->fd = -1;
  char why[512] = "";
  if (load_via_memfd(bytes, size, code, why, sizeof why) || load_via_tmpfile(bytes, size, code, why, sizeof why)) {
    *out = code;
    return TSR_SUCCESS;
  }
  free(code);
  return tsr_fail(TSR_ERROR_BAD_IMAGE, "bad image: cannot load the shared object in section '%s': %s", section, why);
}

bool tsr_cpu_code_entry(tsr_cpu_code_t* code, const char* symbol, tsr_cpu_entry_t* out) {
  void* sym = dlsym(code->handle, symbol);
  if (!sym) return false;
  /* POSIX guarantees that dlsym's result converts to a function pointer. */
  memcpy(out, &sym, sizeof *out);
  return true;
}

void tsr_cpu_code_unload(tsr_cpu_code_t* code) {
  if (!code) return;
  dlclose(code->handle);
  if (code->fd >= 0) close(code->fd);
  free(code);
}
