/* host_saxpy.c — the minimal host flow of the architecture spec (§11.1) on a real image: load an image file,
 * get a saxpy kernel, allocate device buffers, launch, copy back and check the numbers.
 *
 *   host_saxpy IMAGE [KERNEL]     (KERNEL defaults to "saxpy")
 *
 * The kernel must have the saxpy signature of docs/image-format.md's convention:
 * (a: f32, x: tensor[f32, "N"], y: tensor[f32, "N"], N) computing y = a * x + y. Exits 0 when every element
 * matches; prints what failed otherwise. */
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

/* Refuses a kernel whose arguments are not (f32 scalar, f32 tensor, f32 tensor, dimension). */
static int is_saxpy_like(tsr_kernel_t k) {
  static const uint32_t kinds[] = {TSR_ARG_SCALAR, TSR_ARG_TENSOR, TSR_ARG_TENSOR, TSR_ARG_DIMENSION};
  size_t nargs;
  CHECK(tsrKernelGetArgCount(k, &nargs));
  if (nargs != 4) return 0;
  for (size_t i = 0; i < 4; i++) {
    tsr_arg_info_t info;
    CHECK(tsrKernelGetArgInfo(k, i, &info));
    if (info.kind != kinds[i] || (info.kind != TSR_ARG_DIMENSION && info.dtype != 1 /* f32 */)) return 0;
  }
  return 1;
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
  if (!is_saxpy_like(k)) {
    fprintf(stderr, "kernel '%s' does not have the signature (f32, tensor f32, tensor f32, N)\n", kernel_name);
    return 1;
  }

  const int64_t n = 1000; /* not a multiple of the block: the tail block must mask */
  const float a = 2.5f;
  float* hx = malloc(n * sizeof *hx);
  float* hy = malloc(n * sizeof *hy);
  for (int64_t i = 0; i < n; i++) {
    hx[i] = (float)i * 0.5f;
    hy[i] = 1000.0f - (float)i;
  }
  void *dx, *dy;
  CHECK(tsrAlloc(ctx, n * sizeof(float), TSR_ALLOC_DEFAULT, &dx));
  CHECK(tsrAlloc(ctx, n * sizeof(float), TSR_ALLOC_DEFAULT, &dy));
  CHECK(tsrMemcpy(ctx, dx, hx, n * sizeof(float), TSR_MEMCPY_HOST_TO_DEVICE));
  CHECK(tsrMemcpy(ctx, dy, hy, n * sizeof(float), TSR_MEMCPY_HOST_TO_DEVICE));

  void* args[] = {(void*)&a, &dx, &dy, (void*)&n};
  const uint32_t block = 128;
  tsr_launch_t launch = {.grid_x = (uint32_t)((n + block - 1) / block), .grid_y = 1, .grid_z = 1,
                         .block_x = block, .block_y = 1, .block_z = 1, .smem_bytes = 0};
  tsr_stream_t stream = NULL; /* default */
  CHECK(tsrLaunch(k, stream, launch, args, 4));
  CHECK(tsrSynchronize(ctx));

  float* out = malloc(n * sizeof *out);
  CHECK(tsrMemcpy(ctx, out, dy, n * sizeof(float), TSR_MEMCPY_DEVICE_TO_HOST));
  double max_err = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double want = (double)a * hx[i] + hy[i];
    double err = fabs(out[i] - want);
    if (err > 1e-5 * fabs(want) + 1e-6) bad++;
    if (err > max_err) max_err = err;
  }
  printf("%s: n=%lld grid=%u block=%u y[0]=%g y[%lld]=%g max_abs_err=%g %s\n", kernel_name, (long long)n,
         launch.grid_x, block, out[0], (long long)(n - 1), out[n - 1], max_err, bad ? "MISMATCH" : "ok");

  CHECK(tsrFree(ctx, dx));
  CHECK(tsrFree(ctx, dy));
  CHECK(tsrUnloadModule(mod));
  CHECK(tsrDestroyContext(ctx));
  free(hx);
  free(hy);
  free(out);
  return bad ? 1 : 0;
}
