/* fuzz_launch.c — libFuzzer target: the launch, stream, event, copy, memory and graph API driven by programs.
 *
 * Each input is a program of up to 64 steps over a fresh debug-mode context with the test image loaded
 * ($TESSERA_FUZZ_IMAGE): allocate and free, create and destroy streams, events and graphs, record and wait,
 * copy, capture and replay, synchronize, and launch real kernels (tests/c/kernels_cpu.c, linked in through
 * cpu_code_double.c) with fuzzed shapes and arguments — tensors pointing into, past, and after the end of
 * allocations, freed memory, NULL. The context is destroyed with whatever the program left behind.
 *
 * What debug mode promises is what this checks: every bad launch is refused or caught as a status; none
 * corrupts memory (AddressSanitizer) or leaks (LeakSanitizer). The harness itself keeps to the rules the API
 * leaves to the host — host-side copy ranges are valid, kernels touch only runtime-checked memory, grids are
 * small enough to finish — so that every report is the runtime's. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "tessera/tessera.h"

enum { STEPS = 64, SLOTS = 4, BUFFERS = 8, HOST_BYTES = 1 << 16 };

static void* image;
static size_t image_size;
static _Alignas(64) unsigned char host[HOST_BYTES];

/* The kernels of the test image this harness runs (see cpu_code_double.c). */
static const char* const kernel_names[] = {"saxpy", "fill_fixed", "scale_add", "set_flag", "overrun", "add_one"};
enum { KERNELS = sizeof kernel_names / sizeof kernel_names[0] };

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc, (void)argv;
  const char* path = getenv("TESSERA_FUZZ_IMAGE");
  FILE* f = path ? fopen(path, "rb") : NULL;
  if (!f) {
    fprintf(stderr, "fuzz_launch: set TESSERA_FUZZ_IMAGE to the test image (tests/c/make_image.py)\n");
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  image_size = (size_t)ftell(f);
  rewind(f);
  image = malloc(image_size);
  if (!image || fread(image, 1, image_size, f) != image_size) exit(2);
  fclose(f);
  return 0;
}

typedef struct buffer {
  void* ptr;
  size_t bytes;
  bool pinned;  /* pinned host memory has no guard pages: kernels are not given it (copies are) */
} buffer_t;

typedef struct state {
  tsr_context_t ctx;
  tsr_kernel_t kernels[KERNELS];
  tsr_stream_t streams[SLOTS];
  tsr_event_t events[SLOTS];
  tsr_graph_t graphs[SLOTS];
  tsr_graph_exec_t execs[SLOTS];
  buffer_t buffers[BUFFERS];  /* ptr stays set after a free: launching on freed memory is a case */
} state_t;

static tsr_stream_t pick_stream(state_t* s, input_t* in) {
  uint8_t i = u8(in) % (SLOTS + 1);
  return i == SLOTS ? NULL : s->streams[i];  /* NULL also for an empty slot: the default stream */
}

/* A tensor: inside, at the edge of, or past a buffer (runtime-checked in debug mode), or NULL. */
static void* pick_tensor(state_t* s, input_t* in, bool for_kernel) {
  uint8_t choice = u8(in);
  buffer_t* b = &s->buffers[choice % BUFFERS];
  if (choice >= 240 || !b->ptr || (for_kernel && b->pinned)) return NULL;
  size_t offset = (size_t)u8(in) * 4;
  return (char*)b->ptr + (offset <= b->bytes ? offset : b->bytes);
}

static int64_t pick_extent(input_t* in) {
  uint8_t c = u8(in);
  if (c < 200) return c * 4;
  if (c < 230) return (int64_t)u16(in);
  if (c < 250) return -(int64_t)u8(in) - 1;  /* refused */
  return (int64_t)(u64(in) >> 1);           /* refused: past any allocation */
}

static uint32_t pick_dim(input_t* in) {
  static const uint32_t dims[] = {1, 1, 2, 3, 4, 32, 64, 128, 256, 1024, 2048, 0};
  return dims[u8(in) % (sizeof dims / sizeof dims[0])];
}

static void launch(state_t* s, input_t* in) {
  tsr_kernel_t k = s->kernels[u8(in) % KERNELS];
  size_t nargs = 0;
  tsrKernelGetArgCount(k, &nargs);
  uint64_t values[8];
  void* args[8];
  for (size_t i = 0; i < nargs && i < 8; i++) {
    tsr_arg_info_t info;
    tsrKernelGetArgInfo(k, i, &info);
    if (info.kind == TSR_ARG_TENSOR) values[i] = (uint64_t)(uintptr_t)pick_tensor(s, in, true);
    else if (info.kind == TSR_ARG_DIMENSION) values[i] = (uint64_t)pick_extent(in);
    else if (info.dtype == 8) values[i] = u8(in) % 64;  /* overrun's `extra`: past the extent, into guards */
    else values[i] = u64(in);
    args[i] = &values[i];
  }
  size_t given = nargs;
  uint8_t shape = u8(in);
  if (shape == 255) given = nargs + 1;     /* wrong counts are refused */
  else if (shape == 254 && nargs) given = nargs - 1;
  tsr_launch_desc_t d;
  tsrLaunchDescInitialize(&d);
  /* Huge grids only all three at once: 2^96 blocks are refused; 2^32 would be valid and never finish. */
  bool huge = shape == 253;
  for (int i = 0; i < 3; i++) d.grid[i] = huge ? 0xffffffffu : i == 0 ? 1 + u8(in) % 8 : 1 + (u8(in) >= 250);
  if (u8(in) & 1) d.warps = u8(in) % 40;
  else for (int i = 0; i < 3; i++) d.block[i] = i == 0 ? pick_dim(in) : 1 + (u8(in) >= 250);
  d.smem_bytes = u8(in) >= 250 ? u16(in) * 2u : 0;
  d.stream = pick_stream(s, in);
  d.priority = (int8_t)u8(in);
  d.affinity = u8(in) >= 200 ? u64(in) : 0;
  d.args = u8(in) == 255 ? NULL : args;
  d.nargs = given;
  tsrLaunchTile(k, &d);
}

static void copy(state_t* s, input_t* in) {
  /* Device sides are checked by the runtime; host sides and TSR_MEMCPY_DEFAULT are the host's to get right,
   * so the harness keeps them inside `host`. */
  tsr_memcpy_kind_t kind = (tsr_memcpy_kind_t)(u8(in) % 6);  /* 5: an unknown kind */
  size_t bytes = u16(in) % 4096;
  void* device = pick_tensor(s, in, false);
  void* near = host + u16(in) % (HOST_BYTES - 4096);
  void *dst = near, *src = host + HOST_BYTES - 4096;
  if (kind == TSR_MEMCPY_HOST_TO_DEVICE || kind == TSR_MEMCPY_DEVICE_TO_DEVICE) dst = device;
  if (kind == TSR_MEMCPY_DEVICE_TO_HOST || kind == TSR_MEMCPY_DEVICE_TO_DEVICE) src = device;
  if (u8(in) & 1) tsrMemcpy(s->ctx, dst, src, bytes, kind);
  else tsrMemcpyAsync(s->ctx, dst, src, bytes, kind, pick_stream(s, in));
}

static void step(state_t* s, input_t* in) {
  uint8_t slot = u8(in) % SLOTS;
  switch (u8(in) % 18) {
    case 0: {
      buffer_t* b = &s->buffers[u8(in) % BUFFERS];
      size_t bytes = u16(in) % 8192;
      bool pinned = u8(in) % 3 == 2;
      void* p;
      if (tsrAlloc(s->ctx, bytes, pinned ? TSR_ALLOC_HOST_PINNED : 0, &p) == TSR_SUCCESS) *b = (buffer_t){p, bytes, pinned};
      break;
    }
    case 1: tsrFree(s->ctx, s->buffers[u8(in) % BUFFERS].ptr); break;
    case 2: {
      tsr_stream_options_t o;
      tsrStreamOptionsInitialize(&o);
      o.priority = (int8_t)u8(in);
      o.affinity = u8(in) >= 128 ? u64(in) : 0;
      if (!s->streams[slot]) tsrCreateStream(s->ctx, &o, &s->streams[slot]);
      break;
    }
    case 3:
      tsrDestroyStream(s->streams[slot]);
      s->streams[slot] = NULL;
      break;
    case 4:
      if (!s->events[slot]) tsrCreateEvent(s->ctx, &s->events[slot]);
      break;
    case 5:
      if (u8(in) & 1) tsrRetainEvent(s->events[slot]);  /* a leaked reference: the context releases it */
      tsrDestroyEvent(s->events[slot]);
      s->events[slot] = NULL;
      break;
    case 6: tsrEventRecord(s->events[slot], pick_stream(s, in)); break;
    case 7: tsrStreamWaitEvent(pick_stream(s, in), s->events[slot]); break;
    case 8:
    case 9:
    case 10: launch(s, in); break;
    case 11: copy(s, in); break;
    case 12: tsrStreamBeginCapture(s->streams[slot]); break;
    case 13:
      if (!s->graphs[slot]) tsrStreamEndCapture(s->streams[u8(in) % SLOTS], &s->graphs[slot]);
      break;
    case 14:
      if (!s->execs[slot]) tsrGraphInstantiate(s->graphs[u8(in) % SLOTS], &s->execs[slot]);
      break;
    case 15: tsrGraphLaunch(s->execs[slot], pick_stream(s, in)); break;
    case 16:
      if (u8(in) & 1) {
        tsrDestroyGraph(s->graphs[slot]);
        s->graphs[slot] = NULL;
      } else {
        tsrDestroyGraphExec(s->execs[slot]);
        s->execs[slot] = NULL;
      }
      break;
    case 17: {
      float ms;
      switch (u8(in) % 6) {
        case 0: tsrStreamSynchronize(s->streams[slot]); break;
        case 1: tsrStreamQuery(s->streams[slot]); break;
        case 2: tsrSynchronize(s->ctx); break;
        case 3: tsrEventQuery(s->events[slot]); break;
        case 4: tsrEventSynchronize(s->events[slot]); break;
        case 5: tsrEventElapsedTime(s->events[slot], s->events[u8(in) % SLOTS], &ms); break;
      }
      break;
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  input_t in = {data, size};
  state_t s;
  memset(&s, 0, sizeof s);
  tsr_context_options_t o;
  tsrContextOptionsInitialize(&o);
  o.flags = TSR_CONTEXT_DEBUG;
  o.worker_threads = 1 + u8(&in) % 3;
  tsr_module_t m;
  if (tsrCreateContextWithOptions(&o, &s.ctx) || tsrLoadModule(s.ctx, image, image_size, &m)) __builtin_trap();
  for (int i = 0; i < KERNELS; i++)
    if (tsrGetKernel(m, kernel_names[i], &s.kernels[i])) __builtin_trap();
  for (int i = 0; i < STEPS && in.n; i++) step(&s, &in);
  if (tsrDestroyContext(s.ctx)) __builtin_trap();
  return 0;
}
