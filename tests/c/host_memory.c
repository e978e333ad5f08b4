/* host_memory.c — memory (<tessera/tessera.h>, "Memory"): alignment, the device pool and its statistics,
 * pinned host buffers, host pointer import, pointer queries, the ABI draft's memory handles, and reference
 * counts of contexts and modules.
 *
 *   host_memory IMAGE      IMAGE: the test image of make_image.py */
#include "check.h"

static tsr_context_t ctx;

static void check_alignment_and_pool(void) {
  const size_t sizes[] = {0, 1, 63, 64, 65, 1000, 4096, 100000, 1 << 20, (1 << 20) + 3};
  enum { COUNT = sizeof sizes / sizeof sizes[0] };
  void* p[COUNT];
  bool aligned = true, distinct = true;
  for (size_t i = 0; i < COUNT; i++) {
    MUST(tsrAlloc(ctx, sizes[i], TSR_ALLOC_DEFAULT, &p[i]));
    aligned &= (uintptr_t)p[i] % TSR_ALLOC_ALIGNMENT == 0;
    for (size_t j = 0; j < i; j++) distinct &= p[i] != p[j];
    memset(p[i], 0xab, sizes[i]);  /* every byte asked for is usable */
  }
  check("every allocation is 64-byte aligned (0 B to 1 MiB + 3)", aligned);
  check("and distinct, the 0-byte one too", distinct);
  int64_t alignment;
  expect("tsrGetLimit(ALLOC_ALIGNMENT)", tsrGetLimit(ctx, TSR_LIMIT_ALLOC_ALIGNMENT, &alignment), TSR_SUCCESS);
  check("  is 64", alignment == 64);

  tsr_memory_stats_t st;
  expect("stats", tsrGetMemoryStats(ctx, &st), TSR_SUCCESS);
  size_t total = 0;
  for (size_t i = 0; i < COUNT; i++) total += sizes[i];
  check("stats count the live allocations and their bytes", st.allocations == COUNT && st.bytes_in_use == total);
  check("reserved >= in use", st.bytes_reserved >= st.bytes_in_use);
  for (size_t i = 0; i < COUNT; i++) MUST(tsrFree(ctx, p[i]));
  expect("stats after freeing", tsrGetMemoryStats(ctx, &st), TSR_SUCCESS);
  check("nothing in use, the blocks are cached by the pool", st.allocations == 0 && st.bytes_in_use == 0 &&
                                                              st.bytes_cached > 0 && st.peak_bytes_in_use >= total);

  void* again;
  MUST(tsrAlloc(ctx, 1000, TSR_ALLOC_DEFAULT, &again));
  check("an allocation of a freed size reuses the pooled block", again == p[5]);
  MUST(tsrFree(ctx, again));
  expect("trim", tsrTrimMemory(ctx), TSR_SUCCESS);
  expect("stats after trimming", tsrGetMemoryStats(ctx, &st), TSR_SUCCESS);
  check("the pool holds nothing", st.bytes_cached == 0 && st.bytes_reserved == 0);
  expect("stats into NULL", tsrGetMemoryStats(ctx, NULL), TSR_ERROR_INVALID_VALUE);
  expect("trim a NULL context", tsrTrimMemory(NULL), TSR_ERROR_INVALID_HANDLE);
}

static void check_pinned(tsr_module_t m) {
  float* pinned;
  tsr_status_t st = tsrAlloc(ctx, 4096, TSR_ALLOC_HOST_PINNED, (void**)&pinned);
  if (st == TSR_ERROR_OUT_OF_MEMORY && strstr(tsrGetLastErrorMessage(), "RLIMIT_MEMLOCK")) {
    printf("skip pinned memory: %s\n", tsrGetLastErrorMessage());  /* a lock limit of 0 is a policy, not a bug */
    return;
  }
  expect("pinned host allocation", st, TSR_SUCCESS);
  check("  64-byte aligned", (uintptr_t)pinned % 64 == 0);
  tsr_pointer_info_t info;
  expect("pointer info of pinned memory", tsrPointerGetInfo(ctx, pinned + 10, &info), TSR_SUCCESS);
  check("  kind HOST_PINNED, base and size", info.kind == TSR_MEMORY_HOST_PINNED && info.base == pinned &&
                                             info.bytes == 4096);
  void* dev;
  expect("its device pointer", tsrHostGetDevicePointer(ctx, pinned, &dev), TSR_SUCCESS);
  check("  is itself on the CPU backend", dev == pinned);
  for (int i = 0; i < 1024; i++) pinned[i] = 1;
  float a = 3, *x = pinned;
  int64_t n = 1024;
  void* args[] = {&a, &x, &dev, &n};
  expect("a kernel reads and writes pinned memory",
         tsrLaunch(kernel(m, "saxpy"), NULL, (tsr_launch_t){8, 1, 1, 128, 1, 1, 0}, args, 4), TSR_SUCCESS);
  check("  (y = 3x + y = 4)", pinned[0] == 4 && pinned[1023] == 4);
  expect_msg("a pinned buffer is not a device range", tsrMemcpy(ctx, pinned, pinned + 512, 16,
                                                                TSR_MEMCPY_DEVICE_TO_DEVICE), TSR_ERROR_INVALID_VALUE,
             "device allocation");
  expect("free pinned memory", tsrFree(ctx, pinned), TSR_SUCCESS);
  expect("pointer info after the free", tsrPointerGetInfo(ctx, pinned, &info), TSR_SUCCESS);
  check("  unknown", info.kind == TSR_MEMORY_UNKNOWN && info.base == NULL);
}

static void check_registered(void) {
  static float buffer[1024];
  tsr_pointer_info_t info;
  expect("register host memory", tsrHostRegister(ctx, buffer, sizeof buffer, TSR_HOST_REGISTER_DEFAULT), TSR_SUCCESS);
  expect("pointer info", tsrPointerGetInfo(ctx, &buffer[100], &info), TSR_SUCCESS);
  check("  kind HOST_REGISTERED, its range", info.kind == TSR_MEMORY_HOST_REGISTERED && info.base == buffer &&
                                             info.bytes == sizeof buffer);
  void* dev;
  expect("device pointer of registered memory", tsrHostGetDevicePointer(ctx, buffer, &dev), TSR_SUCCESS);
  check("  the same address", dev == buffer);
  expect_msg("register an overlapping range", tsrHostRegister(ctx, &buffer[512], 16, 0), TSR_ERROR_INVALID_VALUE,
             "overlaps");
  expect_msg("tsrFree of registered memory", tsrFree(ctx, buffer), TSR_ERROR_INVALID_VALUE, "tsrHostUnregister");
  expect("unregister an interior pointer", tsrHostUnregister(ctx, &buffer[1]), TSR_ERROR_INVALID_VALUE);
  expect("unregister", tsrHostUnregister(ctx, buffer), TSR_SUCCESS);
  expect("unregister twice", tsrHostUnregister(ctx, buffer), TSR_ERROR_INVALID_VALUE);
  expect("device pointer of plain host memory", tsrHostGetDevicePointer(ctx, buffer, &dev), TSR_ERROR_INVALID_VALUE);
  expect("register NULL", tsrHostRegister(ctx, NULL, 16, 0), TSR_ERROR_INVALID_VALUE);
  expect("register 0 bytes", tsrHostRegister(ctx, buffer, 0, 0), TSR_ERROR_INVALID_VALUE);
  expect("register a range that wraps", tsrHostRegister(ctx, (void*)(UINTPTR_MAX - 8), 64, 0),
         TSR_ERROR_INVALID_VALUE);
  expect("register with unknown flags", tsrHostRegister(ctx, buffer, 16, 0x80), TSR_ERROR_INVALID_VALUE);
  tsr_status_t st = tsrHostRegister(ctx, buffer, sizeof buffer, TSR_HOST_REGISTER_PINNED);
  if (st == TSR_ERROR_OUT_OF_MEMORY) {
    printf("skip pinned registration: %s\n", tsrGetLastErrorMessage());
  } else {
    expect("register and pin", st, TSR_SUCCESS);
    tsr_memory_stats_t stats;
    MUST(tsrGetMemoryStats(ctx, &stats));
    check("stats count registered bytes apart", stats.registered_bytes == sizeof buffer);
    /* Left registered: destroying the context unregisters it (never frees it). */
  }
  void* dev_mem;
  MUST(tsrAlloc(ctx, 100, 0, &dev_mem));
  expect("pointer info of an interior device pointer", tsrPointerGetInfo(ctx, (char*)dev_mem + 99, &info),
         TSR_SUCCESS);
  check("  kind DEVICE, base", info.kind == TSR_MEMORY_DEVICE && info.base == dev_mem && info.bytes == 100);
  expect("pointer info one past the end", tsrPointerGetInfo(ctx, (char*)dev_mem + 100, &info), TSR_SUCCESS);
  check("  unknown", info.kind == TSR_MEMORY_UNKNOWN);
  expect("pointer info into NULL", tsrPointerGetInfo(ctx, dev_mem, NULL), TSR_ERROR_INVALID_VALUE);
  expect("register over a device allocation", tsrHostRegister(ctx, dev_mem, 16, 0), TSR_ERROR_INVALID_VALUE);
}

static void check_draft_memory(void) {
  tessera_memory_handle mem;
  expect("tessera_memory_alloc", (tsr_status_t)tessera_memory_alloc(ctx, 256, &mem), TSR_SUCCESS);
  void* p = NULL;
  size_t bytes = 0;
  expect("tessera_memory_pointer", (tsr_status_t)tessera_memory_pointer(mem, &p), TSR_SUCCESS);
  expect("tessera_memory_size", (tsr_status_t)tessera_memory_size(mem, &bytes), TSR_SUCCESS);
  tsr_pointer_info_t info;
  MUST(tsrPointerGetInfo(ctx, p, &info));
  check("  a 256-byte device allocation", bytes == 256 && info.kind == TSR_MEMORY_DEVICE && info.bytes == 256);
  expect("tessera_memory_retain", (tsr_status_t)tessera_memory_retain(mem), TSR_SUCCESS);
  expect("tessera_memory_free (one reference left)", (tsr_status_t)tessera_memory_free(mem), TSR_SUCCESS);
  MUST(tsrPointerGetInfo(ctx, p, &info));
  check("  the memory is still allocated", info.kind == TSR_MEMORY_DEVICE);
  expect("tessera_memory_free (the last)", (tsr_status_t)tessera_memory_free(mem), TSR_SUCCESS);
  MUST(tsrPointerGetInfo(ctx, p, &info));
  check("  now it is freed", info.kind == TSR_MEMORY_UNKNOWN);
  expect("tessera_memory_free again", (tsr_status_t)tessera_memory_free(mem), TESSERA_ERROR_INVALID_HANDLE);
  expect("tessera_memory_pointer of a freed handle", (tsr_status_t)tessera_memory_pointer(mem, &p),
         TESSERA_ERROR_INVALID_HANDLE);
  expect("tessera_memory_alloc into NULL", (tsr_status_t)tessera_memory_alloc(ctx, 8, NULL), TSR_ERROR_INVALID_VALUE);
  expect("tessera_memory_alloc of SIZE_MAX", (tsr_status_t)tessera_memory_alloc(ctx, SIZE_MAX, &mem),
         TESSERA_ERROR_OUT_OF_MEMORY);
  expect("tessera_memory_alloc kept for the context", (tsr_status_t)tessera_memory_alloc(ctx, 64, &mem), TSR_SUCCESS);
}

static void check_reference_counts(const char* image_path) {
  tsr_context_t c;
  MUST(tsrCreateContext(&c));
  expect("retain a context", tsrRetainContext(c), TSR_SUCCESS);
  expect("release it (one left)", tsrReleaseContext(c), TSR_SUCCESS);
  tsr_module_t m = load_test_image(c, image_path);
  expect("retain a module", tsrRetainModule(m), TSR_SUCCESS);
  expect("release it (one left)", tsrReleaseModule(m), TSR_SUCCESS);
  size_t n;
  expect("the module still works", tsrModuleGetKernelCount(m, &n), TSR_SUCCESS);
  tsr_kernel_t k = kernel(m, "saxpy");
  expect("release the last reference: unloaded", tsrReleaseModule(m), TSR_SUCCESS);
  expect("its kernel is gone", tsrKernelGetArgCount(k, &n), TSR_ERROR_INVALID_HANDLE);
  m = load_test_image(c, image_path);
  MUST(tsrRetainModule(m));
  expect("tsrUnloadModule ignores the count", tsrUnloadModule(m), TSR_SUCCESS);
  expect("release after unload", tsrReleaseModule(m), TSR_ERROR_INVALID_HANDLE);
  MUST(tsrRetainContext(c));
  expect("tsrDestroyContext ignores the count", tsrDestroyContext(c), TSR_SUCCESS);
  expect("release after destroy", tsrReleaseContext(c), TSR_ERROR_INVALID_HANDLE);
  MUST(tsrCreateContext(&c));
  expect("releasing a context's last reference destroys it", tsrReleaseContext(c), TSR_SUCCESS);
  expect("  (gone)", tsrSynchronize(c), TSR_ERROR_INVALID_HANDLE);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s TEST_IMAGE\n", argv[0]);
    return 2;
  }
  MUST(tsrCreateContext(&ctx));
  tsr_module_t m = load_test_image(ctx, argv[1]);
  check_alignment_and_pool();
  check_pinned(m);
  check_registered();
  check_draft_memory();
  check_reference_counts(argv[1]);
  expect("destroy the context (with registered memory and a draft handle left)", tsrDestroyContext(ctx),
         TSR_SUCCESS);
  return finish();
}
