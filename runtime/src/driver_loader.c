/* driver_loader.c — dlopen() and dlsym() for the drivers of the GPU backends (driver_loader.h). */
#define _GNU_SOURCE /* RTLD_LOCAL with dlfcn under strict C11 */
#include "driver_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tsr_driver_open(tsr_driver_library_t* lib, const char* env, const char* const* candidates, const char* what,
                     char* why, size_t why_size) {
  const char* chosen = getenv(env);
  if (chosen && *chosen) {
    lib->handle = dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
      const char* err = dlerror();
      snprintf(why, why_size, "%s could not be loaded from %s=%s (%s)", what, env, chosen, err ? err : "not found");
      return false;
    }
    snprintf(lib->name, sizeof lib->name, "%s", chosen);
    return true;
  }
  char first_error[384] = "";
  for (const char* const* c = candidates; *c; c++) {
    lib->handle = dlopen(*c, RTLD_NOW | RTLD_LOCAL);
    if (lib->handle) {
      snprintf(lib->name, sizeof lib->name, "%s", *c);
      return true;
    }
    const char* err = dlerror();
    if (!first_error[0]) snprintf(first_error, sizeof first_error, "%s", err ? err : *c);
  }
  snprintf(why, why_size, "%s is not installed: no %s could be loaded (%s; %s names another library)", what,
           candidates[0], first_error, env);
  return false;
}

bool tsr_driver_resolve(const tsr_driver_library_t* lib, const char* symbol, void* slot, const char* hint, char* why,
                        size_t why_size) {
  void* f = dlsym(lib->handle, symbol);
  if (!f) {
    snprintf(why, why_size, "%s has no %s %s", lib->name, symbol, hint);
    return false;
  }
  memcpy(slot, &f, sizeof f);  /* object pointer to function pointer, as POSIX dlsym allows */
  return true;
}
