/* host_timeouts.c — waits with a limit (TSR_ERROR_TIMEOUT, docs/c-api.md "Timeouts"): a kernel that spins
 * until the host sets a flag keeps its stream busy; synchronizing the stream, an event recorded after the
 * kernel, or the context within a limit returns TSR_ERROR_TIMEOUT in about that time, the host and the
 * context live on (another stream runs meanwhile), and once the flag is set the same waits succeed. A
 * second context with a watchdog (wait_timeout_ms) limits the waits that name none.
 *
 *   host_timeouts IMAGE BACKEND     BACKEND: cpu, or cuda with tests/c/fake_cuda.c as the driver
 *
 * When $FAKE_CUDA_LOG is set, each phase writes a "## phase" line to it, so the test can read which driver
 * calls a phase made (polling queries, not blocking synchronizes, while the kernel spins). */
#define _POSIX_C_SOURCE 200809L
#include "phases.h"

/* spin_until(flag, seen, 1) on `s`: runs until *flag != 0. Device memory is host memory on both backends this
 * host runs on (the fake driver's included), so the host sets the flag through the pointer. */
static tsr_status_t spin_until(tsr_module_t mod, tsr_stream_t s, int32_t* flag, int32_t* seen) {
  int64_t one = 1;
  void* args[] = {&flag, &seen, &one};
  return tsrLaunch(kernel(mod, "spin_until"), s, (tsr_launch_t){1, 1, 1, 1, 1, 1, 0}, args, 3);
}

/* Checks that a wait took about `ms` milliseconds: not less, and not seconds more. */
static void took(const char* what, double start, unsigned ms) {
  double elapsed = (seconds() - start) * 1e3;
  char line[160];
  snprintf(line, sizeof line, "%s returned after %.0f ms (limit %u ms)", what, elapsed, ms);
  check(line, elapsed >= ms - 1 && elapsed < ms + 2000);
}

static int32_t* alloc_i32(tsr_context_t ctx) {
  int32_t* p;
  MUST(tsrAlloc(ctx, sizeof *p, 0, (void**)&p));
  *p = 0;
  return p;
}

/* A context (with a watchdog of `watchdog_ms`, 0: none) running spin_until on stream `s`, and event `after`
 * recorded after it. */
typedef struct spinning {
  tsr_context_t ctx;
  tsr_module_t mod;
  tsr_stream_t s;
  tsr_event_t after;
  int32_t *flag, *seen;
} spinning_t;

static spinning_t start_spinning(const char* image, const char* backend, uint32_t watchdog_ms) {
  spinning_t w;
  tsr_context_options_t o;
  MUST(tsrContextOptionsInitialize(&o));
  o.backend = backend;
  o.wait_timeout_ms = watchdog_ms;
  MUST(tsrCreateContextWithOptions(&o, &w.ctx));
  w.mod = load_test_image(w.ctx, image);
  MUST(tsrCreateStream(w.ctx, NULL, &w.s));
  MUST(tsrCreateEvent(w.ctx, &w.after));
  w.flag = alloc_i32(w.ctx);
  w.seen = alloc_i32(w.ctx);
  expect("launch spin_until on a stream", spin_until(w.mod, w.s, w.flag, w.seen), TSR_SUCCESS);
  expect("record an event after it", tsrEventRecord(w.after, w.s), TSR_SUCCESS);
  return w;
}

static void stop_spinning(spinning_t* w) {
  MUST(tsrDestroyEvent(w->after));
  MUST(tsrDestroyStream(w->s));
  MUST(tsrDestroyContext(w->ctx));
}

static void limits_given_to_each_wait(const char* image, const char* backend) {
  phase("spinning");
  spinning_t w = start_spinning(image, backend, 0);
  tsr_context_t ctx = w.ctx;
  tsr_stream_t s = w.s, other;
  tsr_event_t after = w.after;
  MUST(tsrCreateStream(ctx, NULL, &other));
  double t0 = seconds();
  expect_msg("tsrStreamSynchronizeTimeout(s, 200)", tsrStreamSynchronizeTimeout(s, 200), TSR_ERROR_TIMEOUT,
             "tsrStreamSynchronizeTimeout: the stream's work did not finish within 200 ms");
  took("the stream's timed wait", t0, 200);
  expect("tsrStreamQuery after the timeout: still running", tsrStreamQuery(s), TSR_ERROR_NOT_READY);
  t0 = seconds();
  expect_msg("tsrEventSynchronizeTimeout(after, 100)", tsrEventSynchronizeTimeout(after, 100), TSR_ERROR_TIMEOUT,
             "the work before the event did not finish within 100 ms");
  took("the event's timed wait", t0, 100);
  expect("tsrEventQuery: still pending", tsrEventQuery(after), TSR_ERROR_NOT_READY);
  t0 = seconds();
  expect_msg("tsrSynchronizeTimeout(ctx, 50)", tsrSynchronizeTimeout(ctx, 50), TSR_ERROR_TIMEOUT, "50 ms");
  took("the context's timed wait", t0, 50);
  expect("a limit of 0 only looks", tsrStreamSynchronizeTimeout(s, 0), TSR_ERROR_TIMEOUT);
  expect("tsrStreamSynchronizeTimeout(NULL stream, 0)", tsrStreamSynchronizeTimeout(NULL, 0), TSR_SUCCESS);
  expect("a NULL event", tsrEventSynchronizeTimeout(NULL, 10), TSR_ERROR_INVALID_HANDLE);
  expect("a NULL context", tsrSynchronizeTimeout(NULL, 10), TSR_ERROR_INVALID_HANDLE);

  phase("the context lives on");
  int32_t *flag2 = alloc_i32(ctx), *seen2 = alloc_i32(ctx);
  *flag2 = 1;
  expect("another stream runs meanwhile", spin_until(w.mod, other, flag2, seen2), TSR_SUCCESS);
  expect("and finishes within its limit", tsrStreamSynchronizeTimeout(other, 10000), TSR_SUCCESS);
  check("its kernel ran", *seen2 == 1);

  phase("released");
  __atomic_store_n(w.flag, 1, __ATOMIC_RELEASE);
  expect("tsrEventSynchronizeTimeout once the flag is set", tsrEventSynchronizeTimeout(after, 10000), TSR_SUCCESS);
  expect("tsrStreamSynchronizeTimeout once the flag is set", tsrStreamSynchronizeTimeout(s, 10000), TSR_SUCCESS);
  check("the spinning kernel ended on the flag", *w.seen == 1);
  expect("tsrSynchronizeTimeout", tsrSynchronizeTimeout(ctx, 10000), TSR_SUCCESS);
  expect("a limit of 0 on finished work", tsrStreamSynchronizeTimeout(s, 0), TSR_SUCCESS);
  MUST(tsrDestroyStream(other));
  stop_spinning(&w);
}

static void the_watchdog_limits_waits_that_name_none(const char* image, const char* backend) {
  phase("watchdog");
  spinning_t w = start_spinning(image, backend, 150);
  tsr_stream_t s = w.s;
  tsr_event_t after = w.after;
  double t0 = seconds();
  expect_msg("tsrStreamSynchronize under a 150 ms watchdog", tsrStreamSynchronize(s), TSR_ERROR_TIMEOUT,
             "within 150 ms (the context's watchdog");
  took("tsrStreamSynchronize", t0, 150);
  t0 = seconds();
  expect_msg("tsrEventSynchronize", tsrEventSynchronize(after), TSR_ERROR_TIMEOUT, "watchdog");
  took("tsrEventSynchronize", t0, 150);
  expect_msg("tsrStreamWaitEvent(NULL stream) waits in this thread", tsrStreamWaitEvent(NULL, after),
             TSR_ERROR_TIMEOUT, "tsrStreamWaitEvent");
  expect_msg("tsrSynchronize", tsrSynchronize(w.ctx), TSR_ERROR_TIMEOUT, "tsrSynchronize");
  t0 = seconds();
  expect("an explicit limit overrides the watchdog", tsrStreamSynchronizeTimeout(s, 400), TSR_ERROR_TIMEOUT);
  took("tsrStreamSynchronizeTimeout(s, 400)", t0, 400);
  if (strcmp(backend, "cuda") == 0) {  /* the CPU runs a NULL-stream kernel in this thread: nothing can stop it */
    int32_t *flag2 = alloc_i32(w.ctx), *seen2 = alloc_i32(w.ctx), *copied = alloc_i32(w.ctx);
    t0 = seconds();
    expect_msg("a spinning kernel on the NULL stream", spin_until(w.mod, NULL, flag2, seen2), TSR_ERROR_TIMEOUT,
               "tsrLaunch: the kernel on the NULL stream did not finish within 150 ms");
    took("tsrLaunch on the NULL stream", t0, 150);
    __atomic_store_n(flag2, 1, __ATOMIC_RELEASE);
    expect("the NULL stream's next work waits for it, then runs", tsrMemcpy(w.ctx, copied, flag2, 4,
           TSR_MEMCPY_DEVICE_TO_DEVICE), TSR_SUCCESS);
    check("the kernel ended on its flag", *seen2 == 1);
  }

  phase("watchdog released");
  __atomic_store_n(w.flag, 1, __ATOMIC_RELEASE);
  expect("tsrStreamSynchronize once the flag is set", tsrStreamSynchronize(s), TSR_SUCCESS);
  expect("tsrEventSynchronize", tsrEventSynchronize(after), TSR_SUCCESS);
  expect("tsrSynchronize", tsrSynchronize(w.ctx), TSR_SUCCESS);
  check("the kernel ended on the flag", *w.seen == 1);
  stop_spinning(&w);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s IMAGE BACKEND\n", argv[0]);
    return 2;
  }
  limits_given_to_each_wait(argv[1], argv[2]);
  the_watchdog_limits_waits_that_name_none(argv[1], argv[2]);
  printf("%d failed\n", failures);
  return failures;
}
