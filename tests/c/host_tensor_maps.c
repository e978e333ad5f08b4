/* host_tensor_maps.c — kernels whose metadata asks for TMA tensor maps (`ptx.tensor_maps`), on the CUDA
 * backend: the runtime encodes a map per entry from the launch's tensors (2-D, 3-D with leading axes
 * folded, 4-D) and passes them before the arguments; tensors TMA cannot describe and malformed properties are
 * refused with a status. Run against tests/c/fake_cuda.c (test_cuda_fake.py), whose log shows the calls. */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "tessera/tessera.h"

static tsr_status_t launch(tsr_kernel_t k, void* a, void* q, int64_t m, int64_t kk, int64_t b, int64_t s) {
  void* args[] = {&a, &q, &m, &kk, &b, &s};
  tsr_launch_t l = {.grid_x = 1, .grid_y = 1, .grid_z = 1, .block_x = 384, .block_y = 1, .block_z = 1};
  return tsrLaunch(k, NULL, l, args, 6);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  tsr_context_options_t o;
  tsrContextOptionsInitialize(&o);
  o.backend = "cuda";
  tsr_context_t ctx;
  MUST(tsrCreateContextWithOptions(&o, &ctx));
  tsr_module_t mod = load_test_image(ctx, argv[1]);
  tsr_kernel_t k = kernel(mod, "tma_kernel"), bad = kernel(mod, "tma_malformed"), heads = kernel(mod, "tma_heads");
  void *a, *q;
  MUST(tsrAlloc(ctx, 300 * 136 * 2, 0, &a));
  MUST(tsrAlloc(ctx, 6 * 77 * 64 * 2, 0, &q));
  printf("## maps\n");
  expect("A 300x136, Q 2x3x77x64 as [6, 77, 64]", launch(k, a, q, 300, 136, 6, 77), TSR_SUCCESS);
  expect("Q [6, 77, 2, 32] as a 4-D map", launch(heads, a, q, 300, 136, 6, 77), TSR_SUCCESS);
  printf("## refusals\n");
  expect_msg("A with 100-element rows (200 bytes)", launch(k, a, q, 300, 100, 6, 77), TSR_ERROR_INVALID_VALUE,
             "multiple of 16 bytes");
  expect_msg("A starting 2 bytes into its allocation", launch(k, (char*)a + 2, q, 8, 136, 6, 77),
             TSR_ERROR_INVALID_VALUE, "16-byte aligned");
  expect_msg("a malformed ptx.tensor_maps property", launch(bad, a, q, 300, 136, 6, 77), TSR_ERROR_INVALID_VALUE,
             "malformed ptx.tensor_maps");
  tsrFree(ctx, a);
  tsrFree(ctx, q);
  tsrUnloadModule(mod);
  tsrDestroyContext(ctx);
  return finish();
}
