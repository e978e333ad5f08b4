/* host_saxpy.c — the minimal host flow of the architecture spec (§11.1) on a real image: load an image file,
 * get a saxpy kernel, allocate device buffers, launch, copy back and check the numbers.
 *
 *   host_saxpy IMAGE [KERNEL]     (KERNEL defaults to "saxpy")
 *
 * Two saxpy signatures are accepted, read from the kernel's argument metadata (docs/image-format.md):
 *   (a: f32, x: tensor[f32], y: tensor[f32], dims...)              y   = a * x + y
 *   (a: f32, x: tensor[f32], y: tensor[f32], out: tensor[f32], dims...)  out = a * x + y   (examples/saxpy.py)
 * Every dimension argument is the common length n. Exits 0 when every element matches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    tsr_status_t st_ = (call);                                                                      \
    if (st_ != TSR_SUCCESS) {                                                                       \
      fprintf(stderr, "%s failed: %s: %s\n", #call, tsrGetStatusName(st_), tsrGetLastErrorMessage()); \
      exit(1);                                                                                      \
    }                                                                                               \
  } while (0)

static void* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  char* data = NULL;
  size_t used = 0, capacity = 0, n;
  do {
    if (used == capacity) {
      capacity = capacity ? 2 * capacity : 1 << 16;
      char* grown = realloc(data, capacity);
      if (!grown) break;
      data = grown;
    }
    n = fread(data + used, 1, capacity - used, f);
    used += n;
  } while (n > 0);
  fclose(f);
  *size = used;
  return data;
}

/* Number of f32 tensors (2 or 3) after a leading f32 scalar, with only dimension arguments after them;
 * 0 when the kernel does not have a saxpy signature. */
static int saxpy_tensors(tsr_kernel_t k, size_t* nargs) {
  CHECK(tsrKernelGetArgCount(k, nargs));
  int tensors = 0;
  for (size_t i = 0; i < *nargs; i++) {
    tsr_arg_info_t a;
    CHECK(tsrKernelGetArgInfo(k, i, &a));
    int fits = i == 0 ? a.kind == TSR_ARG_SCALAR && a.dtype == 1
                 : a.kind == TSR_ARG_TENSOR ? a.dtype == 1 && a.rank == 1 && (size_t)tensors + 1 == i
                 : a.kind == TSR_ARG_DIMENSION;
    if (!fits) return 0;
    tensors += a.kind == TSR_ARG_TENSOR;
  }
  return tensors == 2 || tensors == 3 ? tensors : 0;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s IMAGE [KERNEL]\n", argv[0]);
    return 2;
  }
  const char* kernel_name = argc == 3 ? argv[2] : "saxpy";
  size_t image_size;
  void* image = read_file(argv[1], &image_size);
  if (!image) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }

  int major, minor, patch;
  uint32_t abi_major, abi_minor;
  CHECK(tsrGetVersion(&major, &minor, &patch));
  CHECK(tsrGetAbiVersion(&abi_major, &abi_minor));
  printf("libtessera %d.%d.%d, image ABI %u.%u\n", major, minor, patch, abi_major, abi_minor);

  tsr_context_t ctx;
  CHECK(tsrCreateContext(&ctx));
  tsr_module_t mod = NULL;
  CHECK(tsrLoadModule(ctx, image, image_size, &mod));
  free(image);  /* the module keeps its own copy of what it needs */

  size_t count;
  CHECK(tsrModuleGetKernelCount(mod, &count));
  printf("kernels:");
  for (size_t i = 0; i < count; i++) {
    const char* name;
    CHECK(tsrModuleGetKernelName(mod, i, &name));
    printf(" %s", name);
  }
  printf("\n");

  tsr_kernel_t k;
  CHECK(tsrGetKernel(mod, kernel_name, &k));
  size_t nargs;
  int tensors = saxpy_tensors(k, &nargs);
  if (!tensors) {
    fprintf(stderr, "kernel '%s' does not have a saxpy signature (f32, x, y[, out], dims...)\n", kernel_name);
    return 1;
  }
  int64_t compiled_block;
  CHECK(tsrKernelGetAttribute(k, TSR_KERNEL_ATTR_BLOCK_X, &compiled_block));

  const int64_t n = 1000; /* not a multiple of the block: the tail block must mask */
  const float a = 2.5f;
  const size_t bytes = n * sizeof(float);
  float* hx = malloc(bytes);
  float* hy = malloc(bytes);
  float* out = malloc(bytes);
  for (int64_t i = 0; i < n; i++) {
    hx[i] = (float)i * 0.5f;
    hy[i] = 1000.0f - (float)i;
  }
  void *dx, *dy, *dout;
  CHECK(tsrAlloc(ctx, bytes, TSR_ALLOC_DEFAULT, &dx));
  CHECK(tsrAlloc(ctx, bytes, TSR_ALLOC_DEFAULT, &dy));
  CHECK(tsrAlloc(ctx, bytes, TSR_ALLOC_DEFAULT, &dout));
  CHECK(tsrMemcpy(ctx, dx, hx, bytes, TSR_MEMCPY_HOST_TO_DEVICE));
  CHECK(tsrMemcpy(ctx, dy, hy, bytes, TSR_MEMCPY_HOST_TO_DEVICE));
  void* result = tensors == 3 ? dout : dy;

  /* args[i] points to argument i's value: the scalar, each buffer's address, then the extents. */
  void* args[16];
  if (nargs > sizeof args / sizeof args[0]) {
    fprintf(stderr, "kernel '%s' has %zu arguments, more than this host handles\n", kernel_name, nargs);
    return 1;
  }
  void* buffers[3] = {dx, dy, dout};
  args[0] = (void*)&a;
  for (int t = 0; t < tensors; t++) args[1 + t] = &buffers[t];
  for (size_t i = 1 + (size_t)tensors; i < nargs; i++) args[i] = (void*)&n;

  const uint32_t block = compiled_block ? (uint32_t)compiled_block : 128;
  tsr_launch_t launch = {.grid_x = (uint32_t)((n + block - 1) / block), .grid_y = 1, .grid_z = 1,
                         .block_x = block, .block_y = 1, .block_z = 1, .smem_bytes = 0};
  tsr_stream_t stream = NULL; /* default */
  CHECK(tsrLaunch(k, stream, launch, args, nargs));
  CHECK(tsrSynchronize(ctx));

  CHECK(tsrMemcpy(ctx, out, result, bytes, TSR_MEMCPY_DEVICE_TO_HOST));
  double max_err = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double want = (double)a * hx[i] + hy[i];
    double err = fabs(out[i] - want);
    if (err > 1e-5 * fabs(want) + 1e-6) bad++;
    if (err > max_err) max_err = err;
  }
  printf("%s: %zu args, n=%lld grid=%u block=%u out[0]=%g out[%lld]=%g max_abs_err=%g %s\n", kernel_name, nargs,
         (long long)n, launch.grid_x, block, out[0], (long long)(n - 1), out[n - 1], max_err, bad ? "MISMATCH" : "ok");

  CHECK(tsrFree(ctx, dx));
  CHECK(tsrFree(ctx, dy));
  CHECK(tsrFree(ctx, dout));
  CHECK(tsrUnloadModule(mod));
  CHECK(tsrDestroyContext(ctx));
  free(hx);
  free(hy);
  free(out);
  return bad ? 1 : 0;
}
