/* host_device_register.c — tsrDeviceRegister / tsrDeviceUnregister (<tessera/tessera.h>, "Memory"): device memory
 * another library allocated becomes known to a context, so that copies of every kind (tsrMemcpy, tsrMemcpyAsync)
 * take it as a device side and bounds-check it as tsrAlloc memory, launches' extent checks apply to it and
 * tsrFree refuses it; each documented failure; registration from two threads at once; a context destroyed with
 * a range still registered.
 *
 *   host_device_register BACKEND [IMAGE]
 *
 * BACKEND cpu: the foreign memory is host memory from malloc (the CPU's device memory is host memory), and
 * with IMAGE (the test image of make_image.py) launches of its saxpy kernel are checked against the range.
 * BACKEND cuda: the foreign memory comes from the driver's own cuMemAlloc, as another library's would (under
 * tests/c/fake_cuda.c, host memory). */
#include <dlfcn.h>
#include <pthread.h>

#include "check.h"

enum { N = 256 };
#define BYTES (N * sizeof(float))

static tsr_context_t ctx;

/* ---- another library's device memory ------------------------------------------------------------------- */

typedef int (*mem_alloc_fn)(uintptr_t* p, size_t bytes);
typedef int (*mem_free_fn)(uintptr_t p);
static mem_alloc_fn cu_alloc;
static mem_free_fn cu_free;

static void* foreign_alloc(const char* backend) {
  if (strcmp(backend, "cuda") != 0) return malloc(BYTES);
  if (!cu_alloc) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
      printf("FAIL cannot open libcuda.so.1: %s\n", dlerror());
      exit(2);
    }
    cu_alloc = (mem_alloc_fn)(uintptr_t)dlsym(lib, "cuMemAlloc_v2");
    cu_free = (mem_free_fn)(uintptr_t)dlsym(lib, "cuMemFree_v2");
  }
  uintptr_t p = 0;
  if (!cu_alloc || !cu_free || cu_alloc(&p, BYTES) != 0) {
    printf("FAIL cuMemAlloc_v2 of %zu bytes\n", BYTES);
    exit(2);
  }
  return (void*)p;
}

static void foreign_free(const char* backend, void* p) {
  if (strcmp(backend, "cuda") != 0) free(p);
  else cu_free((uintptr_t)p);
}

/* ---- the checks ----------------------------------------------------------------------------------------- */

static void check_copies(float* foreign) {
  float in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = (float)i - 7.5f;
  expect_msg("before registration a device side of foreign memory is refused",
             tsrMemcpy(ctx, foreign, in, BYTES, TSR_MEMCPY_HOST_TO_DEVICE), TSR_ERROR_INVALID_VALUE,
             "tsrMemcpy: the destination range of 1024 bytes is not inside one device allocation of this context "
             "(tsrAlloc; another library's device memory needs tsrDeviceRegister)");
  tsr_memory_stats_t before, stats;
  MUST(tsrGetMemoryStats(ctx, &before));
  expect("tsrDeviceRegister", tsrDeviceRegister(ctx, foreign, BYTES, TSR_DEVICE_REGISTER_DEFAULT), TSR_SUCCESS);
  tsr_pointer_info_t info;
  expect("pointer info of an interior pointer", tsrPointerGetInfo(ctx, foreign + 100, &info), TSR_SUCCESS);
  check("  kind DEVICE_REGISTERED, its range", info.kind == TSR_MEMORY_DEVICE_REGISTERED && info.base == foreign &&
                                               info.bytes == BYTES);
  MUST(tsrGetMemoryStats(ctx, &stats));
  check("stats count it in registered_bytes, not as an allocation",
        stats.registered_bytes == before.registered_bytes + BYTES && stats.allocations == before.allocations &&
            stats.bytes_in_use == before.bytes_in_use);

  expect("copy host to registered device memory", tsrMemcpy(ctx, foreign, in, BYTES, TSR_MEMCPY_HOST_TO_DEVICE),
         TSR_SUCCESS);
  memset(out, 0, sizeof out);
  expect("and back", tsrMemcpy(ctx, out, foreign, BYTES, TSR_MEMCPY_DEVICE_TO_HOST), TSR_SUCCESS);
  check("  the same bytes", memcmp(in, out, BYTES) == 0);
  void* own;
  MUST(tsrAlloc(ctx, BYTES / 2, TSR_ALLOC_DEFAULT, &own));
  expect("device to device: registered into tsrAlloc memory",
         tsrMemcpy(ctx, own, foreign, BYTES / 2, TSR_MEMCPY_DEVICE_TO_DEVICE), TSR_SUCCESS);
  expect("device to device: tsrAlloc into registered memory (its second half)",
         tsrMemcpy(ctx, foreign + N / 2, own, BYTES / 2, TSR_MEMCPY_DEVICE_TO_DEVICE), TSR_SUCCESS);
  tsr_stream_t s;
  MUST(tsrCreateStream(ctx, NULL, &s));
  memset(out, 0, sizeof out);
  expect("tsrMemcpyAsync out of it on a stream", tsrMemcpyAsync(ctx, out, foreign, BYTES, TSR_MEMCPY_DEVICE_TO_HOST, s),
         TSR_SUCCESS);
  MUST(tsrStreamSynchronize(s));
  check("  its first half twice", memcmp(out, in, BYTES / 2) == 0 && memcmp(out + N / 2, in, BYTES / 2) == 0);
  /* bounds as for tsrAlloc memory: a device side running past its allocation is not inside one */
  expect_msg("a copy running past its end", tsrMemcpyAsync(ctx, foreign + 1, in, BYTES, TSR_MEMCPY_HOST_TO_DEVICE, s),
             TSR_ERROR_INVALID_VALUE, "tsrMemcpyAsync: the destination range of 1024 bytes is not inside one device "
             "allocation of this context");
  expect("  as one past the end of tsrAlloc memory is",
         tsrMemcpyAsync(ctx, (char*)own + 4, in, BYTES / 2, TSR_MEMCPY_HOST_TO_DEVICE, s), TSR_ERROR_INVALID_VALUE);
  expect_msg("a copy starting before it (unknown memory as a device side)",
             tsrMemcpy(ctx, out, foreign - 1, 8, TSR_MEMCPY_DEVICE_TO_HOST), TSR_ERROR_INVALID_VALUE,
             "not inside one device allocation");
  MUST(tsrDestroyStream(s));
  MUST(tsrFree(ctx, own));
}

static void check_refusals(float* foreign) {
  static float host[16];
  void* own;
  MUST(tsrAlloc(ctx, 64, TSR_ALLOC_DEFAULT, &own));
  expect("tsrDeviceRegister on a NULL context", tsrDeviceRegister(NULL, foreign, BYTES, 0), TSR_ERROR_INVALID_HANDLE);
  expect_msg("register NULL", tsrDeviceRegister(ctx, NULL, 16, 0), TSR_ERROR_INVALID_VALUE, "is not a memory range");
  expect_msg("register 0 bytes", tsrDeviceRegister(ctx, host, 0, 0), TSR_ERROR_INVALID_VALUE, "is not a memory range");
  expect("register a range that wraps", tsrDeviceRegister(ctx, (void*)(UINTPTR_MAX - 8), 64, 0),
         TSR_ERROR_INVALID_VALUE);
  expect_msg("register with unknown flags", tsrDeviceRegister(ctx, host, sizeof host, 0x1), TSR_ERROR_INVALID_VALUE,
             "unknown flags 0x1");
  expect_msg("register an overlapping range", tsrDeviceRegister(ctx, foreign + 10, 16, 0), TSR_ERROR_INVALID_VALUE,
             "overlaps memory the context already knows");
  expect_msg("register a range running into it", tsrDeviceRegister(ctx, foreign - 4, 32, 0), TSR_ERROR_INVALID_VALUE,
             "overlaps");
  expect("register the same range twice", tsrDeviceRegister(ctx, foreign, BYTES, 0), TSR_ERROR_INVALID_VALUE);
  expect("register over a tsrAlloc allocation", tsrDeviceRegister(ctx, own, 64, 0), TSR_ERROR_INVALID_VALUE);
  expect("host-register over registered device memory", tsrHostRegister(ctx, foreign, 16, 0), TSR_ERROR_INVALID_VALUE);
  expect_msg("tsrFree of registered device memory", tsrFree(ctx, foreign), TSR_ERROR_INVALID_VALUE,
             "is registered device memory: use tsrDeviceUnregister");
  expect("tsrHostUnregister of it", tsrHostUnregister(ctx, foreign), TSR_ERROR_INVALID_VALUE);
  void* dev;
  expect("tsrHostGetDevicePointer of it (not host memory)", tsrHostGetDevicePointer(ctx, foreign, &dev),
         TSR_ERROR_INVALID_VALUE);
  expect_msg("unregister an interior pointer", tsrDeviceUnregister(ctx, foreign + 1), TSR_ERROR_INVALID_VALUE,
             "is not the start of memory registered with tsrDeviceRegister");
  expect("unregister NULL", tsrDeviceUnregister(ctx, NULL), TSR_ERROR_INVALID_VALUE);
  expect("unregister a tsrAlloc pointer", tsrDeviceUnregister(ctx, own), TSR_ERROR_INVALID_VALUE);
  MUST(tsrHostRegister(ctx, host, sizeof host, 0));
  expect("unregister host-registered memory", tsrDeviceUnregister(ctx, host), TSR_ERROR_INVALID_VALUE);
  MUST(tsrHostUnregister(ctx, host));
  expect("tsrDeviceUnregister on a NULL context", tsrDeviceUnregister(NULL, foreign), TSR_ERROR_INVALID_HANDLE);
  tsr_pointer_info_t info;
  MUST(tsrPointerGetInfo(ctx, foreign, &info));
  check("the refusals changed nothing", info.kind == TSR_MEMORY_DEVICE_REGISTERED && info.bytes == BYTES);
  MUST(tsrFree(ctx, own));
}

static void check_unregister(float* foreign) {
  tsr_memory_stats_t before, stats;
  MUST(tsrGetMemoryStats(ctx, &before));
  expect("tsrDeviceUnregister", tsrDeviceUnregister(ctx, foreign), TSR_SUCCESS);
  expect("unregister twice", tsrDeviceUnregister(ctx, foreign), TSR_ERROR_INVALID_VALUE);
  tsr_pointer_info_t info;
  MUST(tsrPointerGetInfo(ctx, foreign, &info));
  MUST(tsrGetMemoryStats(ctx, &stats));
  check("  unknown again, registered_bytes back", info.kind == TSR_MEMORY_UNKNOWN &&
                                                  stats.registered_bytes == before.registered_bytes - BYTES);
  float in[4] = {0};
  expect("  copies refuse it again", tsrMemcpy(ctx, foreign, in, sizeof in, TSR_MEMCPY_HOST_TO_DEVICE),
         TSR_ERROR_INVALID_VALUE);
}

/* CPU: a launch's extents are checked against the registered range, as against a tsrAlloc allocation. */
static void check_launches(float* foreign, const char* image) {
  tsr_module_t mod = load_test_image(ctx, image);
  tsr_kernel_t saxpy = kernel(mod, "saxpy");
  MUST(tsrDeviceRegister(ctx, foreign, BYTES, 0));
  float a = 2;
  float* x = foreign;
  float* y = foreign + N / 2;
  int64_t n = N / 2;
  void* args[] = {&a, &x, &y, &n};
  tsr_launch_t shape = {(uint32_t)(N / 2 + 63) / 64, 1, 1, 64, 1, 1, 0};
  for (int i = 0; i < N; i++) foreign[i] = (float)i;
  expect("saxpy within the registered range", tsrLaunch(saxpy, NULL, shape, args, 4), TSR_SUCCESS);
  check("  y = 2x + y", foreign[N / 2] == N / 2 && foreign[N - 1] == 2 * (N / 2 - 1) + N - 1);
  n = N / 2 + 1;
  shape.grid_x = (uint32_t)(n + 63) / 64;
  expect_msg("saxpy past its end", tsrLaunch(saxpy, NULL, shape, args, 4), TSR_ERROR_MEMORY_FAULT,
             "tensor argument 2 ('y') of kernel 'saxpy' needs 516 bytes at offset 512 of the 1024-byte allocation");
  MUST(tsrDeviceUnregister(ctx, foreign));
  n = N / 2;
  shape.grid_x = (uint32_t)(n + 63) / 64;
  expect("saxpy on unregistered foreign memory (not checked, as before)", tsrLaunch(saxpy, NULL, shape, args, 4),
         TSR_SUCCESS);
  MUST(tsrUnloadModule(mod));
}

/* Two threads registering one range at once: exactly one succeeds, whichever it is. */
static float* contested;
static tsr_status_t results[2];

static void* register_contested(void* slot) {
  results[(intptr_t)slot] = tsrDeviceRegister(ctx, contested, BYTES, 0);
  return NULL;
}

static void check_threads(float* foreign) {
  contested = foreign;
  bool one_each_time = true;
  for (int round = 0; round < 50; round++) {
    pthread_t t[2];
    for (intptr_t i = 0; i < 2; i++) pthread_create(&t[i], NULL, register_contested, (void*)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    one_each_time &= (results[0] == TSR_SUCCESS) + (results[1] == TSR_SUCCESS) == 1 &&
                     (results[0] == TSR_ERROR_INVALID_VALUE || results[1] == TSR_ERROR_INVALID_VALUE);
    MUST(tsrDeviceUnregister(ctx, foreign));
  }
  check("two threads registering one range: one succeeds, one is refused (50 rounds)", one_each_time);
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: %s BACKEND [IMAGE]\n", argv[0]);
    return 2;
  }
  const char* backend = argv[1];
  tsr_context_options_t options;
  MUST(tsrContextOptionsInitialize(&options));
  options.backend = backend;
  MUST(tsrCreateContextWithOptions(&options, &ctx));
  float* foreign = foreign_alloc(backend);
  check_copies(foreign);
  check_refusals(foreign);
  check_unregister(foreign);
  if (argc == 3) check_launches(foreign, argv[2]);
  check_threads(foreign);
  MUST(tsrDeviceRegister(ctx, foreign, BYTES, 0));
  expect("destroy the context with the range still registered", tsrDestroyContext(ctx), TSR_SUCCESS);
  foreign_free(backend, foreign);  /* still the caller's: the context only forgot it */
  return finish();
}
