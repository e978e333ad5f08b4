/* wait.h — waits with a limit (TSR_ERROR_TIMEOUT): deadlines on the monotonic clock, timed condition waits for
 * the CPU backend's streams and events, polling a device's query function (cuStreamQuery, hipStreamQuery, …)
 * instead of its blocking synchronize, and the context's watchdog, the limit of waits that name none
 * (tsr_context_options_t.wait_timeout_ms, $TESSERA_WAIT_TIMEOUT_MS). docs/c-api.md, "Timeouts". */
#ifndef TESSERA_SRC_WAIT_H_
#define TESSERA_SRC_WAIT_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tessera/tessera.h"

/* How long a wait may take: `ms` from when it began (`deadline`, monotonic seconds), or no limit. */
typedef struct tsr_wait_limit {
  bool limited;
  bool watchdog;    /* the limit is the context's watchdog, not the caller's: the message says where it is set */
  uint32_t ms;
  double deadline;  /* tsr_seconds() when the wait gives up */
} tsr_wait_limit_t;

/* A limit of `ms` milliseconds starting now. */
tsr_wait_limit_t tsr_wait_within(uint32_t ms);
/* The context's watchdog starting now, or no limit when it has none. */
tsr_wait_limit_t tsr_wait_watchdog(const struct tsr_context* context);

/* The watchdog of a new context: `option_ms` (tsr_context_options_t.wait_timeout_ms) when not 0, else
 * $TESSERA_WAIT_TIMEOUT_MS when set, else 0 (none). TSR_ERROR_INVALID_VALUE for a variable that is not a
 * number of milliseconds. */
tsr_status_t tsr_watchdog_from_env(uint32_t option_ms, uint32_t* out_ms);

/* A condition variable whose timed waits use the monotonic clock (so a change of the wall clock does not
 * stretch or cut a limit). */
void tsr_cond_init_monotonic(pthread_cond_t* cond);

/* pthread_cond_wait, or with a limit a timed wait up to its deadline. false once the deadline has passed. */
bool tsr_cond_wait_within(pthread_cond_t* cond, pthread_mutex_t* lock, const tsr_wait_limit_t* limit);

/* Calls query(arg) until it returns anything but TSR_ERROR_NOT_READY (returned), sleeping between calls (from
 * 10 us, doubling up to 1 ms, so short waits stay short and long ones cost little CPU); TSR_ERROR_NOT_READY
 * when the deadline passes first. Queries at least once, even with a limit of 0 ms. */
tsr_status_t tsr_poll_within(tsr_status_t (*query)(void* arg), void* arg, const tsr_wait_limit_t* limit);

/* TSR_ERROR_TIMEOUT: "`function`: `what` did not finish within N ms (…)", saying the work is still pending. */
tsr_status_t tsr_fail_timeout(const char* function, const char* what, const tsr_wait_limit_t* limit);

#endif  /* TESSERA_SRC_WAIT_H_ */
