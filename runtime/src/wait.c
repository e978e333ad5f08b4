/* wait.c — waits with a limit (wait.h). */
#include "wait.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "errors.h"
#include "metrics.h"
#include "objects.h"

tsr_wait_limit_t tsr_wait_within(uint32_t ms) {
  return (tsr_wait_limit_t){.limited = true, .ms = ms, .deadline = tsr_seconds() + ms * 1e-3};
}

tsr_wait_limit_t tsr_wait_watchdog(const struct tsr_context* ctx) {
  if (!ctx->wait_timeout_ms) return (tsr_wait_limit_t){.limited = false};
  tsr_wait_limit_t limit = tsr_wait_within(ctx->wait_timeout_ms);
  limit.watchdog = true;
  return limit;
}

tsr_status_t tsr_watchdog_from_env(uint32_t option_ms, uint32_t* out_ms) {
  *out_ms = option_ms;
  const char* v = getenv("TESSERA_WAIT_TIMEOUT_MS");
  if (option_ms || !v || !*v) return TSR_SUCCESS;
  char* end;
  errno = 0;
  unsigned long long ms = strtoull(v, &end, 10);
  if (*end || errno || ms > UINT32_MAX || v[0] == '-')
    return tsr_fail(TSR_ERROR_INVALID_VALUE, "tsrCreateContext: TESSERA_WAIT_TIMEOUT_MS=%s is not a number of "
                    "milliseconds (0 to %u; 0: no limit)", v, (unsigned)UINT32_MAX);
  *out_ms = (uint32_t)ms;
  return TSR_SUCCESS;
}

void tsr_cond_init_monotonic(pthread_cond_t* cond) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cond, &attr);
  pthread_condattr_destroy(&attr);
}

bool tsr_cond_wait_within(pthread_cond_t* cond, pthread_mutex_t* lock, const tsr_wait_limit_t* limit) {
  if (!limit->limited) {
    pthread_cond_wait(cond, lock);
    return true;
  }
  struct timespec at;
  double whole = (double)(time_t)limit->deadline;
  at.tv_sec = (time_t)whole;
  at.tv_nsec = (long)((limit->deadline - whole) * 1e9);
  if (at.tv_nsec >= 1000000000L) at.tv_sec++, at.tv_nsec -= 1000000000L;
  return pthread_cond_timedwait(cond, lock, &at) != ETIMEDOUT && tsr_seconds() < limit->deadline;
}

tsr_status_t tsr_poll_within(tsr_status_t (*query)(void* arg), void* arg, const tsr_wait_limit_t* limit) {
  long pause_ns = 10000;
  for (;;) {
    tsr_status_t st = query(arg);
    if (st != TSR_ERROR_NOT_READY) return st;
    double left = limit->deadline - tsr_seconds();
    if (left <= 0) return TSR_ERROR_NOT_READY;
    long ns = left * 1e9 < (double)pause_ns ? (long)(left * 1e9) + 1 : pause_ns;
    nanosleep(&(struct timespec){0, ns}, NULL);
    if (pause_ns < 1000000L) pause_ns *= 2;
  }
}

tsr_status_t tsr_fail_timeout(const char* function, const char* what, const tsr_wait_limit_t* limit) {
  return tsr_fail(TSR_ERROR_TIMEOUT, "%s: %s did not finish within %u ms%s; it is still queued or running (a "
                  "kernel that never ends keeps its stream busy): the stream and the context stay usable, and a "
                  "later wait waits for it again", function, what, (unsigned)limit->ms,
                  limit->watchdog ? " (the context's watchdog: tsr_context_options_t.wait_timeout_ms or "
                                    "$TESSERA_WAIT_TIMEOUT_MS)" : "");
}
