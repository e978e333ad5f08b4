/* handles.c — the live-handle registry: a sorted array of addresses searched by bisection. Live handles number
 * in the hundreds or thousands (contexts, modules and their kernels, streams, events, graphs), so insertion by
 * memmove is cheap and the code stays obviously correct. */
#include "handles.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t* live;
static size_t live_count, live_capacity;

void tsr_handles_lock(void) { pthread_mutex_lock(&registry_lock); }
void tsr_handles_unlock(void) { pthread_mutex_unlock(&registry_lock); }

/* Index of the first entry >= key. */
static size_t lower_bound(uintptr_t key) {
  size_t lo = 0, hi = live_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (live[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

bool tsr_handle_is_live_locked(const void* handle, uint32_t magic) {
  if (!handle) return false;
  uintptr_t key = (uintptr_t)handle;
  size_t i = lower_bound(key);
  if (i == live_count || live[i] != key) return false;
  uint32_t actual;
  memcpy(&actual, handle, sizeof actual);
  return actual == magic;
}

tsr_status_t tsr_handle_add_locked(const void* handle) {
  if (live_count == live_capacity) {
    size_t capacity = live_capacity ? live_capacity * 2 : 64;
    uintptr_t* grown = realloc(live, capacity * sizeof *grown);
    if (!grown) return tsr_fail(TSR_ERROR_OUT_OF_MEMORY, "out of memory registering a handle");
    live = grown;
    live_capacity = capacity;
  }
  uintptr_t key = (uintptr_t)handle;
  size_t i = lower_bound(key);
  memmove(live + i + 1, live + i, (live_count - i) * sizeof *live);
  live[i] = key;
  live_count++;
  return TSR_SUCCESS;
}

void tsr_handle_remove_locked(const void* handle) {
  uintptr_t key = (uintptr_t)handle;
  size_t i = lower_bound(key);
  if (i == live_count || live[i] != key) return;
  memmove(live + i, live + i + 1, (live_count - i - 1) * sizeof *live);
  live_count--;
  if (live_count == 0) {  /* leave nothing behind for leak checkers once every handle is gone */
    free(live);
    live = NULL;
    live_capacity = 0;
  }
}

bool tsr_handle_is_live(const void* handle, uint32_t magic) {
  tsr_handles_lock();
  bool ok = tsr_handle_is_live_locked(handle, magic);
  tsr_handles_unlock();
  return ok;
}
