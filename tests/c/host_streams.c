/* host_streams.c — streams, events and asynchronous copies (<tessera/execution.h>): in-stream order,
 * independence of streams, events ordering streams and timing work, priorities, copies, lifetimes, misuse.
 *
 *   host_streams IMAGE      IMAGE: the test image of make_image.py */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "check.h"

static const char* image_path;
static tsr_context_t ctx;
static tsr_module_t mod;

static tsr_launch_t one_block(uint32_t threads) { return (tsr_launch_t){1, 1, 1, threads, 1, 1, 0}; }

/* Launches scale_add(out, k, n) on `s`: out = 2 * out + k. */
static tsr_status_t scale_add(tsr_stream_t s, float* out, float k, int64_t n) {
  void* args[] = {&out, &k, &n};
  return tsrLaunch(kernel(mod, "scale_add"), s, (tsr_launch_t){(uint32_t)((n + 63) / 64), 1, 1, 64, 1, 1, 0}, args,
                   3);
}

static tsr_status_t sleep_ms(tsr_stream_t s, int32_t ms) {
  void* args[] = {&ms};
  return tsrLaunch(kernel(mod, "sleep_ms"), s, one_block(1), args, 1);
}

static tsr_status_t spin_until(tsr_stream_t s, int32_t* flag, int32_t* seen) {
  int64_t one = 1;
  void* args[] = {&flag, &seen, &one};
  return tsrLaunch(kernel(mod, "spin_until"), s, one_block(1), args, 3);
}

static tsr_status_t set_flag(tsr_stream_t s, int32_t* flag) {
  int64_t one = 1;
  void* args[] = {&flag, &one};
  return tsrLaunch(kernel(mod, "set_flag"), s, one_block(1), args, 2);
}

static void check_order(void) {
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  enum { N = 1000, STEPS = 12 };
  float* out = calloc(N, sizeof *out);
  float k = 0;
  bool queued = true;
  /* The same variable for every launch: values are copied when queued. */
  for (int step = 1; step <= STEPS; step++) {
    k = (float)step;
    queued &= scale_add(s, out, k, N) == TSR_SUCCESS;
  }
  k = 1000;
  check("12 launches queued on one stream", queued);
  expect("tsrStreamSynchronize", tsrStreamSynchronize(s), TSR_SUCCESS);
  float want = 0;
  for (int step = 1; step <= STEPS; step++) want = 2 * want + (float)step;
  bool exact = true;
  for (int i = 0; i < N; i++) exact &= out[i] == want;
  check("in-stream order: out = 2 * out + k for k = 1..12, in that order", exact);
  expect("query after synchronize", tsrStreamQuery(s), TSR_SUCCESS);

  expect("sleep 300 ms queued", sleep_ms(s, 300), TSR_SUCCESS);
  expect("tsrLaunch returned at once: the stream is busy", tsrStreamQuery(s), TSR_ERROR_NOT_READY);
  expect("synchronize waits for it", tsrStreamSynchronize(s), TSR_SUCCESS);
  expect("then the stream is idle", tsrStreamQuery(s), TSR_SUCCESS);
  expect("destroy", tsrDestroyStream(s), TSR_SUCCESS);
  free(out);
}

static void check_independence(void) {
  tsr_stream_t s1, s2;
  MUST(tsrCreateStream(ctx, NULL, &s1));
  MUST(tsrCreateStream(ctx, NULL, &s2));
  int32_t flag = 0, seen = 0;
  /* spin_until returns only once set_flag ran: if the streams were serialized it would time out. */
  expect("s1: spin until the flag is set", spin_until(s1, &flag, &seen), TSR_SUCCESS);
  expect("s2: set the flag", set_flag(s2, &flag), TSR_SUCCESS);
  expect("synchronize s1", tsrStreamSynchronize(s1), TSR_SUCCESS);
  expect("synchronize s2", tsrStreamSynchronize(s2), TSR_SUCCESS);
  check("two streams ran at the same time (the spinning kernel saw the flag)", seen == 1);

  flag = seen = 0;
  expect("s1: spin again", spin_until(s1, &flag, &seen), TSR_SUCCESS);
  expect("NULL stream: set the flag while s1 spins", set_flag(NULL, &flag), TSR_SUCCESS);
  expect("synchronize s1", tsrStreamSynchronize(s1), TSR_SUCCESS);
  check("the NULL stream does not wait for other streams", seen == 1);

  float* a = calloc(64, sizeof *a);
  expect("s1: work", scale_add(s1, a, 1, 32), TSR_SUCCESS);
  expect("s2: work", scale_add(s2, a + 32, 1, 32), TSR_SUCCESS);
  expect("tsrSynchronize waits for every stream", tsrSynchronize(ctx), TSR_SUCCESS);
  check("both streams' work is done", a[0] == 1 && a[63] == 1);
  free(a);
  tsrDestroyStream(s1);
  tsrDestroyStream(s2);
}

static void check_events(void) {
  tsr_stream_t s1, s2;
  tsr_event_t e, a, b, never;
  MUST(tsrCreateStream(ctx, NULL, &s1));
  MUST(tsrCreateStream(ctx, NULL, &s2));
  MUST(tsrCreateEvent(ctx, &e));
  MUST(tsrCreateEvent(ctx, &a));
  MUST(tsrCreateEvent(ctx, &b));
  MUST(tsrCreateEvent(ctx, &never));

  expect("query an event never recorded", tsrEventQuery(never), TSR_SUCCESS);
  expect("wait for an event never recorded (no-op)", tsrStreamWaitEvent(s1, never), TSR_SUCCESS);
  float ms = -1;
  expect_msg("elapsed time of an event never recorded", tsrEventElapsedTime(never, e, &ms), TSR_ERROR_INVALID_VALUE,
             "never recorded");

  int32_t flag = 0;
  expect("s1: sleep 300 ms", sleep_ms(s1, 300), TSR_SUCCESS);
  expect("s1: record e", tsrEventRecord(e, s1), TSR_SUCCESS);
  expect("s2: wait for e", tsrStreamWaitEvent(s2, e), TSR_SUCCESS);
  expect("s2: set the flag", set_flag(s2, &flag), TSR_SUCCESS);
  expect("e is pending", tsrEventQuery(e), TSR_ERROR_NOT_READY);
  check("s2 waits for s1's record before it sets the flag", __atomic_load_n(&flag, __ATOMIC_ACQUIRE) == 0);
  expect("synchronize s2", tsrStreamSynchronize(s2), TSR_SUCCESS);
  check("after s2 synchronized the flag is set", flag == 1);
  expect("and e has completed", tsrEventQuery(e), TSR_SUCCESS);

  expect("s1: record a", tsrEventRecord(a, s1), TSR_SUCCESS);
  expect("s1: sleep 100 ms", sleep_ms(s1, 100), TSR_SUCCESS);
  expect("s1: record b", tsrEventRecord(b, s1), TSR_SUCCESS);
  expect("elapsed time while b is pending", tsrEventElapsedTime(a, b, &ms), TSR_ERROR_NOT_READY);
  expect("tsrEventSynchronize(b)", tsrEventSynchronize(b), TSR_SUCCESS);
  expect("tsrEventElapsedTime(a, b)", tsrEventElapsedTime(a, b, &ms), TSR_SUCCESS);
  char line[128];
  snprintf(line, sizeof line, "a to b spans the 100 ms sleep: %.1f ms", ms);
  check(line, ms >= 95 && ms < 10000);
  expect("tsrEventElapsedTime(b, a) is negative", tsrEventElapsedTime(b, a, &ms), TSR_SUCCESS);
  check("  (it is)", ms < 0);

  expect("record on the NULL stream completes at once", tsrEventRecord(e, NULL), TSR_SUCCESS);
  expect("  query", tsrEventQuery(e), TSR_SUCCESS);
  expect("s1: sleep 200 ms", sleep_ms(s1, 200), TSR_SUCCESS);
  expect("s1: record e again (it moves)", tsrEventRecord(e, s1), TSR_SUCCESS);
  expect("  query concerns the newest record", tsrEventQuery(e), TSR_ERROR_NOT_READY);
  expect("NULL stream waits for e in the calling thread", tsrStreamWaitEvent(NULL, e), TSR_SUCCESS);
  expect("  so e has completed", tsrEventQuery(e), TSR_SUCCESS);

  tsr_context_t other;
  tsr_event_t foreign;
  MUST(tsrCreateContext(&other));
  MUST(tsrCreateEvent(other, &foreign));
  expect_msg("record an event on another context's stream", tsrEventRecord(foreign, s1), TSR_ERROR_INVALID_VALUE,
             "another context");
  expect("wait on an event of another context", tsrStreamWaitEvent(s1, foreign), TSR_ERROR_INVALID_VALUE);
  expect("elapsed time across contexts", tsrEventElapsedTime(a, foreign, &ms), TSR_ERROR_INVALID_VALUE);
  MUST(tsrDestroyContext(other));
  expect("event of a destroyed context", tsrEventQuery(foreign), TSR_ERROR_INVALID_HANDLE);

  expect("record a NULL event", tsrEventRecord(NULL, s1), TSR_ERROR_INVALID_HANDLE);
  expect("record on a stream passed as event", tsrEventRecord((tsr_event_t)(void*)s1, s1), TSR_ERROR_INVALID_HANDLE);
  expect("elapsed time into NULL", tsrEventElapsedTime(a, b, NULL), TSR_ERROR_INVALID_VALUE);

  /* A record still queued keeps its event alive after the creator's release. */
  expect("s1: sleep 100 ms", sleep_ms(s1, 100), TSR_SUCCESS);
  expect("s1: record e", tsrEventRecord(e, s1), TSR_SUCCESS);
  expect("destroy e while its record is queued", tsrDestroyEvent(e), TSR_SUCCESS);
  expect("synchronize s1 (runs the record of the released event)", tsrStreamSynchronize(s1), TSR_SUCCESS);
  expect("e is gone after its record ran", tsrEventQuery(e), TSR_ERROR_INVALID_HANDLE);

  expect("retain a", tsrRetainEvent(a), TSR_SUCCESS);
  expect("destroy a (one reference left)", tsrDestroyEvent(a), TSR_SUCCESS);
  expect("a still works", tsrEventQuery(a), TSR_SUCCESS);
  expect("release a (the last reference)", tsrReleaseEvent(a), TSR_SUCCESS);
  expect("a is gone", tsrEventQuery(a), TSR_ERROR_INVALID_HANDLE);
  tsrDestroyEvent(b);
  tsrDestroyEvent(never);
  tsrDestroyStream(s1);
  tsrDestroyStream(s2);
}

static void check_copies(void) {
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  enum { N = 4096 };
  float *host_in = malloc(N * sizeof(float)), *host_out = calloc(N, sizeof(float));
  for (int i = 0; i < N; i++) host_in[i] = (float)i;
  void* dev;
  MUST(tsrAlloc(ctx, N * sizeof(float), TSR_ALLOC_DEFAULT, &dev));
  expect("copy host to device on a stream", tsrMemcpyAsync(ctx, dev, host_in, N * sizeof(float),
                                                          TSR_MEMCPY_HOST_TO_DEVICE, s), TSR_SUCCESS);
  expect("kernel after it on the same stream", scale_add(s, dev, 1, N), TSR_SUCCESS);
  expect("copy back", tsrMemcpyAsync(ctx, host_out, dev, N * sizeof(float), TSR_MEMCPY_DEVICE_TO_HOST, s),
         TSR_SUCCESS);
  expect("synchronize", tsrStreamSynchronize(s), TSR_SUCCESS);
  bool exact = true;
  for (int i = 0; i < N; i++) exact &= host_out[i] == 2 * (float)i + 1;
  check("copy, kernel, copy ran in order", exact);
  expect_msg("an async copy past the allocation is refused at once", tsrMemcpyAsync(ctx, dev, host_in,
             N * sizeof(float) + 1, TSR_MEMCPY_HOST_TO_DEVICE, s), TSR_ERROR_INVALID_VALUE, "tsrMemcpyAsync");
  expect("async copy on the NULL stream is synchronous", tsrMemcpyAsync(ctx, host_out, host_in, 16,
                                                                      TSR_MEMCPY_HOST_TO_HOST, NULL), TSR_SUCCESS);
  check("  (done)", host_out[3] == 3);
  expect("zero bytes", tsrMemcpyAsync(ctx, NULL, NULL, 0, TSR_MEMCPY_DEFAULT, s), TSR_SUCCESS);
  tsr_context_t other;
  tsr_stream_t foreign;
  MUST(tsrCreateContext(&other));
  MUST(tsrCreateStream(other, NULL, &foreign));
  expect_msg("copy on another context's stream", tsrMemcpyAsync(ctx, host_out, host_in, 16, TSR_MEMCPY_HOST_TO_HOST,
                                                               foreign), TSR_ERROR_INVALID_VALUE, "another context");
  expect_msg("launch on another context's stream", scale_add(foreign, host_out, 1, 16), TSR_ERROR_INVALID_VALUE,
             "another context");
  MUST(tsrDestroyContext(other));
  tsrFree(ctx, dev);
  free(host_in);
  free(host_out);
  tsrDestroyStream(s);
}

static void check_priorities(void) {
  /* One worker, and every stream's affinity names it, so that all launches wait for it in the pool (without
   * an affinity hint a stream's own thread would run its blocks at once). While it sleeps, a low- and then a
   * high-priority launch queue up; the high one must run first. Their effects on one float do not commute:
   * high first gives (2*0+2)*2+1 = 5, low first 4. */
  tsr_context_options_t o;
  MUST(tsrContextOptionsInitialize(&o));
  o.worker_threads = 1;
  tsr_context_t c;
  MUST(tsrCreateContextWithOptions(&o, &c));
  tsr_module_t m = mod;
  tsr_context_t saved = ctx;
  ctx = c;
  mod = load_test_image(c, image_path);
  tsr_stream_options_t busy_options, low_options, high_options;
  MUST(tsrStreamOptionsInitialize(&busy_options));
  busy_options.affinity = 1;
  low_options = high_options = busy_options;
  high_options.priority = 10;
  tsr_stream_t busy, low, high;
  MUST(tsrCreateStream(c, &busy_options, &busy));
  MUST(tsrCreateStream(c, &low_options, &low));
  MUST(tsrCreateStream(c, &high_options, &high));
  float x = 0;
  expect("occupy the only worker for 600 ms", sleep_ms(busy, 600), TSR_SUCCESS);
  struct timespec settle = {0, 50000000};
  nanosleep(&settle, NULL);
  expect("low priority: x = 2x + 1", scale_add(low, &x, 1, 1), TSR_SUCCESS);
  nanosleep(&settle, NULL);
  expect("high priority: x = 2x + 2", scale_add(high, &x, 2, 1), TSR_SUCCESS);
  expect("synchronize", tsrSynchronize(c), TSR_SUCCESS);
  check("the high-priority stream's launch ran first (x == 5)", x == 5);

  tsr_stream_options_t pinned;
  MUST(tsrStreamOptionsInitialize(&pinned));
  pinned.affinity = 1ull << 63;  /* names no worker of this pool: ignored */
  tsr_stream_t odd;
  MUST(tsrCreateStream(c, &pinned, &odd));
  x = 0;
  expect("a stream whose affinity names no worker still runs", scale_add(odd, &x, 3, 1), TSR_SUCCESS);
  expect("  synchronize", tsrStreamSynchronize(odd), TSR_SUCCESS);
  check("  (it ran)", x == 3);
  expect("destroy the context with its streams", tsrDestroyContext(c), TSR_SUCCESS);
  expect("its streams are gone", tsrStreamQuery(odd), TSR_ERROR_INVALID_HANDLE);
  ctx = saved;
  mod = m;
}

static void check_lifetimes(void) {
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  int32_t flag = 0;
  expect("sleep 200 ms, then set a flag", sleep_ms(s, 200), TSR_SUCCESS);
  expect("  (queued)", set_flag(s, &flag), TSR_SUCCESS);
  expect("destroy the stream with work queued", tsrDestroyStream(s), TSR_SUCCESS);
  check("destroying waited for the queued work", flag == 1);
  expect("the stream is gone", tsrStreamSynchronize(s), TSR_ERROR_INVALID_HANDLE);
  expect("launch on a destroyed stream", set_flag(s, &flag), TSR_ERROR_INVALID_HANDLE);

  MUST(tsrCreateStream(ctx, NULL, &s));
  expect("retain", tsrRetainStream(s), TSR_SUCCESS);
  expect("release (one left)", tsrReleaseStream(s), TSR_SUCCESS);
  expect("still usable", tsrStreamQuery(s), TSR_SUCCESS);
  expect("release the last", tsrReleaseStream(s), TSR_SUCCESS);
  expect("release again", tsrReleaseStream(s), TSR_ERROR_INVALID_HANDLE);

  expect("NULL stream: synchronize", tsrStreamSynchronize(NULL), TSR_SUCCESS);
  expect("NULL stream: query", tsrStreamQuery(NULL), TSR_SUCCESS);
  expect("create with NULL output", tsrCreateStream(ctx, NULL, NULL), TSR_ERROR_INVALID_VALUE);
  expect("create on a NULL context", tsrCreateStream(NULL, NULL, &s), TSR_ERROR_INVALID_HANDLE);
  expect("options initialize NULL", tsrStreamOptionsInitialize(NULL), TSR_ERROR_INVALID_VALUE);
  expect("a context passed as a stream", tsrStreamQuery((tsr_stream_t)(void*)ctx), TSR_ERROR_INVALID_HANDLE);

  /* Destroying a context with streams that have work queued, and events recorded on them. */
  tsr_context_t c;
  MUST(tsrCreateContext(&c));
  tsr_module_t m = load_test_image(c, image_path);
  tsr_stream_t s1, s2;
  tsr_event_t e;
  MUST(tsrCreateStream(c, NULL, &s1));
  MUST(tsrCreateStream(c, NULL, &s2));
  MUST(tsrCreateEvent(c, &e));
  int32_t ms = 100, flag2 = 0;
  void* sleep_args[] = {&ms};
  int64_t one = 1;
  int32_t* pflag = &flag2;
  void* flag_args[] = {&pflag, &one};
  expect("s1: sleep", tsrLaunch(kernel(m, "sleep_ms"), s1, one_block(1), sleep_args, 1), TSR_SUCCESS);
  expect("s1: record", tsrEventRecord(e, s1), TSR_SUCCESS);
  expect("s2: wait", tsrStreamWaitEvent(s2, e), TSR_SUCCESS);
  expect("s2: set flag", tsrLaunch(kernel(m, "set_flag"), s2, one_block(1), flag_args, 2), TSR_SUCCESS);
  expect("destroy that context at once", tsrDestroyContext(c), TSR_SUCCESS);
  check("its queued work ran first", flag2 == 1);
  expect("its event is gone", tsrEventQuery(e), TSR_ERROR_INVALID_HANDLE);
  expect("its module is gone", tsrModuleGetKernelCount(m, &(size_t){0}), TSR_ERROR_INVALID_HANDLE);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEST_IMAGE\n", argv[0]);
    return 2;
  }
  image_path = argv[1];
  tsr_context_options_t o;
  MUST(tsrContextOptionsInitialize(&o));
  o.worker_threads = 2;  /* the independence checks need two workers, whatever the machine */
  MUST(tsrCreateContextWithOptions(&o, &ctx));
  mod = load_test_image(ctx, image_path);
  check_order();
  check_independence();
  check_events();
  check_copies();
  check_priorities();
  check_lifetimes();
  expect("destroy the context", tsrDestroyContext(ctx), TSR_SUCCESS);
  return finish();
}
