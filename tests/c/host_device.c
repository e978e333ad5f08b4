/* host_device.c — backends, device properties and limits (<tessera/device.h>), versions, the launch
 * descriptor (tsrLaunchTile) with its tile, warps and hints, kernel properties, and the ABI draft's names
 * (<tessera/abi_draft.h>).
 *
 *   host_device IMAGE      IMAGE: the test image of make_image.py */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "check.h"

static const char* image_path;
static tsr_context_t ctx;
static tsr_module_t mod;

static void check_backends(void) {
  size_t count = 0;
  const char* name = NULL;
  expect("tsrGetBackendCount", tsrGetBackendCount(&count), TSR_SUCCESS);
  char available[256] = "available: ";
  bool has_cpu = false;
  for (size_t i = 0; i < count; i++) {
    expect("tsrGetBackendName", tsrGetBackendName(i, &name), TSR_SUCCESS);
    has_cpu |= strcmp(name, "cpu") == 0;
    snprintf(available + strlen(available), sizeof available - strlen(available), "%s%s", i ? ", " : "", name);
  }
  check("the cpu backend is available", has_cpu);
  expect("tsrGetBackendName past the end", tsrGetBackendName(count, &name), TSR_ERROR_INVALID_VALUE);
  expect("tsrGetBackendCount into NULL", tsrGetBackendCount(NULL), TSR_ERROR_INVALID_VALUE);

  tsr_context_options_t o;
  MUST(tsrContextOptionsInitialize(&o));
  tsr_context_t c;
  o.backend = "cpu";
  expect("a context on the cpu backend by name", tsrCreateContextWithOptions(&o, &c), TSR_SUCCESS);
  const char* backend = NULL;
  int debug = -1;
  expect("tsrContextGetBackend", tsrContextGetBackend(c, &backend), TSR_SUCCESS);
  expect("tsrContextIsDebug", tsrContextIsDebug(c, &debug), TSR_SUCCESS);
  check("  'cpu', not in debug mode", backend && strcmp(backend, "cpu") == 0 && debug == 0);
  expect("tsrContextGetBackend into NULL", tsrContextGetBackend(c, NULL), TSR_ERROR_INVALID_VALUE);
  tsrDestroyContext(c);
  expect("tsrContextGetBackend of a destroyed context", tsrContextGetBackend(c, &backend), TSR_ERROR_INVALID_HANDLE);
  /* The GPU backends the spec names: each either runs here or says why not and what is available. */
  const char* gpus[] = {"ptx", "cuda", "rocm", "level_zero"};
  for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
    o.backend = gpus[i];
    tsr_status_t st = tsrCreateContextWithOptions(&o, &c);
    char what[128];
    snprintf(what, sizeof what, "backend '%s': available here, or refused naming what is", gpus[i]);
    if (st == TSR_SUCCESS) {
      check(what, true);
      tsrDestroyContext(c);
    } else {
      expect_msg(what, st, TSR_ERROR_UNSUPPORTED, available);
    }
  }
  o.backend = "tpu";
  expect_msg("an unknown backend", tsrCreateContextWithOptions(&o, &c), TSR_ERROR_UNSUPPORTED,
             "unknown backend 'tpu'");
  setenv("TESSERA_BACKEND", "tpu", 1);
  expect_msg("TESSERA_BACKEND when no backend is named", tsrCreateContext(&c), TSR_ERROR_UNSUPPORTED,
             "TESSERA_BACKEND");
  setenv("TESSERA_BACKEND", "cpu", 1);
  expect("TESSERA_BACKEND=cpu", tsrCreateContext(&c), TSR_SUCCESS);
  tsrDestroyContext(c);
  unsetenv("TESSERA_BACKEND");
  expect("options initialize NULL", tsrContextOptionsInitialize(NULL), TSR_ERROR_INVALID_VALUE);
  expect("create with options into NULL", tsrCreateContextWithOptions(&o, NULL), TSR_ERROR_INVALID_VALUE);
}

static void check_properties(void) {
  tsr_device_properties_t p;
  expect("tsrGetDeviceProperties", tsrGetDeviceProperties(ctx, &p), TSR_SUCCESS);
  printf("     device: backend %s, '%s', arch %s, simd %s, warp %u, %u threads/block, %u B shared/block, %u units, "
         "%llu B memory\n", p.backend, p.name, p.arch, p.simd_isa, p.warp_size, p.max_threads_per_block,
         p.max_shared_bytes_per_block, p.compute_units, (unsigned long long)p.total_memory_bytes);
  check("backend cpu, warp 32, the CPU limits", strcmp(p.backend, "cpu") == 0 && p.warp_size == 32 &&
                                                p.max_threads_per_block == TSR_CPU_MAX_BLOCK_THREADS &&
                                                p.max_shared_bytes_per_block == TSR_CPU_MAX_SMEM_BYTES);
  check("3 worker threads as the options asked", p.compute_units == 3);
  check("a SIMD ISA and a device name", p.simd_isa[0] && strcmp(p.simd_isa, "none") != 0 && p.name[0]);
  check("arch x86_64 or aarch64", strcmp(p.arch, "x86_64") == 0 || strcmp(p.arch, "aarch64") == 0);

  const struct { tsr_limit_t limit; int64_t want; const char* what; } limits[] = {
      {TSR_LIMIT_MAX_THREADS_PER_BLOCK, TSR_CPU_MAX_BLOCK_THREADS, "max threads per block"},
      {TSR_LIMIT_MAX_SHARED_BYTES_PER_BLOCK, TSR_CPU_MAX_SMEM_BYTES, "tile-local memory per tile"},
      {TSR_LIMIT_WARP_SIZE, 32, "warp size"},
      {TSR_LIMIT_MAX_BLOCK_DIM_Z, TSR_CPU_MAX_BLOCK_THREADS, "max block z"},
      {TSR_LIMIT_MAX_GRID_DIM_X, UINT32_MAX, "max grid x"},
      {TSR_LIMIT_COMPUTE_UNITS, 3, "compute units"},
      {TSR_LIMIT_ALLOC_ALIGNMENT, 64, "alloc alignment"},
  };
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
    int64_t v = -1;
    char what[128];
    snprintf(what, sizeof what, "limit: %s", limits[i].what);
    expect(what, tsrGetLimit(ctx, limits[i].limit, &v), TSR_SUCCESS);
    check("  has the documented value", v == limits[i].want);
  }
  int64_t width = 0, memory = 0;
  expect("limit: SIMD width", tsrGetLimit(ctx, TSR_LIMIT_SIMD_WIDTH_BYTES, &width), TSR_SUCCESS);
  check("  16, 32 or 64 bytes (or an SVE length)", width >= 16 && width % 16 == 0);
  expect("limit: total memory", tsrGetLimit(ctx, TSR_LIMIT_TOTAL_MEMORY_BYTES, &memory), TSR_SUCCESS);
  check("  as the properties say", (uint64_t)memory == p.total_memory_bytes);
  int64_t v;
  expect("unknown limit", tsrGetLimit(ctx, (tsr_limit_t)999, &v), TSR_ERROR_INVALID_VALUE);
  expect("limit into NULL", tsrGetLimit(ctx, TSR_LIMIT_WARP_SIZE, NULL), TSR_ERROR_INVALID_VALUE);
  expect("properties of a NULL context", tsrGetDeviceProperties(NULL, &p), TSR_ERROR_INVALID_HANDLE);

  int major, minor, patch;
  uint32_t abi_major, abi_minor;
  expect("tsrGetVersion", tsrGetVersion(&major, &minor, &patch), TSR_SUCCESS);
  expect("tsrGetAbiVersion", tsrGetAbiVersion(&abi_major, &abi_minor), TSR_SUCCESS);
  check("versions are the header's", major == TSR_VERSION_MAJOR && minor == TSR_VERSION_MINOR &&
                                     patch == TSR_VERSION_PATCH && abi_major == TSR_ABI_MAJOR &&
                                     abi_minor == TSR_ABI_MINOR);
  check("status names of the appended codes", strcmp(tsrGetStatusName(TSR_ERROR_NOT_READY), "TSR_ERROR_NOT_READY")
                                               == 0 && strcmp(tsrGetStatusName(TSR_ERROR_MEMORY_FAULT),
                                                              "TSR_ERROR_MEMORY_FAULT") == 0);
  check("codes keep their numbers", TSR_ERROR_LAUNCH_FAILED == 10 && TSR_ERROR_NOT_READY == 11 &&
                                    TSR_ERROR_MEMORY_FAULT == 12 && TESSERA_ERROR_UNSUPPORTED_FEATURE == 4);
}

static void check_launch_desc(void) {
  float out[128] = {0}, *pout = out, value = 5;
  int64_t n = 128;
  void* fill_args[] = {&pout, &value, &n};
  tsr_kernel_t fill = kernel(mod, "fill_fixed"), saxpy = kernel(mod, "saxpy");
  tsr_launch_desc_t d;
  expect("tsrLaunchDescInitialize", tsrLaunchDescInitialize(&d), TSR_SUCCESS);
  check("  grid (1, 1, 1), phase mma, the rest 0", d.grid[0] == 1 && d.grid[2] == 1 && d.phase == TSR_TRACE_MMA &&
                                                   !d.block[0] && !d.warps && !d.stream && !d.args);
  d.grid[0] = 2;
  d.args = fill_args;
  d.nargs = 3;
  expect("no block given: the kernel's compiled block (64)", tsrLaunchTile(fill, &d), TSR_SUCCESS);
  check("  (ran over 128 elements)", out[0] == 5 && out[127] == 5);
  d.warps = 2;
  expect("2 warps of 32 = the compiled block", tsrLaunchTile(fill, &d), TSR_SUCCESS);
  d.warps = 3;
  expect_msg("3 warps is another block", tsrLaunchTile(fill, &d), TSR_ERROR_INVALID_VALUE, "compiled for block");
  d.warps = 0;
  d.tile[0] = 64, d.tile[2] = 8;
  expect("the compiled tile shape (tile.M 64, tile.K 8)", tsrLaunchTile(fill, &d), TSR_SUCCESS);
  d.tile[0] = 128;
  expect_msg("another tile shape", tsrLaunchTile(fill, &d), TSR_ERROR_INVALID_VALUE, "compiled for tile.M = 64");
  d.tile[0] = 0, d.tile[2] = 0;
  d.block[0] = 64, d.block[1] = d.block[2] = 1;
  d.warps = 3;
  expect_msg("block and warps that disagree", tsrLaunchTile(fill, &d), TSR_ERROR_INVALID_VALUE, "2 warps of 32");
  d.warps = 2;
  expect("block and warps that agree", tsrLaunchTile(fill, &d), TSR_SUCCESS);
  d.phase = 17;
  expect("unknown trace phase", tsrLaunchTile(fill, &d), TSR_ERROR_INVALID_VALUE);
  d.phase = TSR_TRACE_REDUCE;
  d.flops = -1;
  expect("negative flop count", tsrLaunchTile(fill, &d), TSR_ERROR_INVALID_VALUE);
  d.flops = 256;
  d.bytes = 512;
  d.priority = 5;
  d.affinity = 1;
  expect("counts, a phase and hints", tsrLaunchTile(fill, &d), TSR_SUCCESS);
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  d.stream = s;
  value = 9;
  expect("on a stream", tsrLaunchTile(fill, &d), TSR_SUCCESS);
  expect("  synchronize", tsrStreamSynchronize(s), TSR_SUCCESS);
  check("  (ran)", out[0] == 9);
  tsrDestroyStream(s);

  float a = 2, x[32] = {0}, y[32] = {0}, *px = x, *py = y;
  int64_t m = 32;
  void* saxpy_args[] = {&a, &px, &py, &m};
  tsr_launch_desc_t e;
  MUST(tsrLaunchDescInitialize(&e));
  e.args = saxpy_args;
  e.nargs = 4;
  expect_msg("no block, no warps, no compiled block", tsrLaunchTile(saxpy, &e), TSR_ERROR_INVALID_VALUE,
             "neither a block nor warps");
  e.warps = 1;
  expect("one warp: a block of 32", tsrLaunchTile(saxpy, &e), TSR_SUCCESS);
  e.tile[1] = 16;
  expect_msg("a tile shape for a kernel compiled without one", tsrLaunchTile(saxpy, &e), TSR_ERROR_INVALID_VALUE,
             "has no tile.N");
  expect("NULL descriptor", tsrLaunchTile(saxpy, NULL), TSR_ERROR_INVALID_VALUE);
  expect("descriptor initialize NULL", tsrLaunchDescInitialize(NULL), TSR_ERROR_INVALID_VALUE);

  const char* value_of = NULL;
  expect("kernel property 'tile.M'", tsrKernelGetProperty(fill, "tile.M", &value_of), TSR_SUCCESS);
  check("  is \"64\"", value_of && strcmp(value_of, "64") == 0);
  expect("kernel property 'compiler' of saxpy", tsrKernelGetProperty(saxpy, "compiler", &value_of), TSR_SUCCESS);
  check("  is make_image.py", strcmp(value_of, "make_image.py") == 0);
  expect_msg("a missing property", tsrKernelGetProperty(saxpy, "tile.M", &value_of), TSR_ERROR_NOT_FOUND, "tile.M");
  expect("NULL key", tsrKernelGetProperty(saxpy, NULL, &value_of), TSR_ERROR_INVALID_VALUE);
}

static void check_draft_names(void) {
  tessera_context_handle c;
  expect("tessera_context_create", (tsr_status_t)tessera_context_create(&c), TESSERA_SUCCESS);
  expect("tessera_context_retain", (tsr_status_t)tessera_context_retain(c), TESSERA_SUCCESS);
  expect("tessera_context_release", (tsr_status_t)tessera_context_release(c), TESSERA_SUCCESS);
  tsr_module_t m;
  size_t size;
  void* image = read_file(image_path, &size);
  expect("a draft context loads with tsrLoadModule", tsrLoadModule(c, image, size, &m), TSR_SUCCESS);
  free(image);
  tessera_operator_handle op = kernel(m, "add_one");
  tessera_stream_handle s;
  tessera_event_handle e;
  MUST(tsrCreateStream(c, NULL, &s));
  MUST(tsrCreateEvent(c, &e));
  int64_t x[100] = {0}, *px = x, n = 100;
  void* args[] = {&px, &n};
  tessera_launch_desc desc;
  MUST(tsrLaunchDescInitialize(&desc));
  desc.grid[0] = 4;
  desc.block[0] = 32, desc.block[1] = desc.block[2] = 1;
  desc.stream = s;
  desc.args = args;
  desc.nargs = 2;
  expect("tessera_launch_tile", (tsr_status_t)tessera_launch_tile(op, &desc), TESSERA_SUCCESS);
  expect("tessera_event_record", (tsr_status_t)tessera_event_record(e, s), TESSERA_SUCCESS);
  expect("tessera_stream_wait_event (NULL stream: waits here)", (tsr_status_t)tessera_stream_wait_event(NULL, e),
         TESSERA_SUCCESS);
  check("the launch before the event ran", x[0] == 1 && x[99] == 1);
  expect("tessera_launch_tile with a bad descriptor", (tsr_status_t)tessera_launch_tile(op, NULL),
         TESSERA_ERROR_INVALID_VALUE);
  expect("tessera_context_destroy", (tsr_status_t)tessera_context_destroy(c), TESSERA_SUCCESS);
  expect("tessera_context_destroy twice", (tsr_status_t)tessera_context_destroy(c), TESSERA_ERROR_INVALID_HANDLE);
  expect("tessera_event_record after", (tsr_status_t)tessera_event_record(e, NULL), TESSERA_ERROR_INVALID_HANDLE);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEST_IMAGE\n", argv[0]);
    return 2;
  }
  image_path = argv[1];
  tsr_context_options_t o;
  MUST(tsrContextOptionsInitialize(&o));
  o.worker_threads = 3;
  MUST(tsrCreateContextWithOptions(&o, &ctx));
  mod = load_test_image(ctx, argv[1]);
  check_backends();
  check_properties();
  check_launch_desc();
  check_draft_names();
  expect("destroy the context", tsrDestroyContext(ctx), TSR_SUCCESS);
  return finish();
}
