/* kernels_cpu.c — hand-written CPU kernels implementing the entry ABI, packed into a test image by
 * make_image.py until tessera-cc emits real ones. Build: cc -shared -fPIC -I runtime/include. */
#include <stdint.h>

#include "tessera/cpu_kernel.h"

/* saxpy(a: f32, x: tensor[f32, "N"], y: tensor[f32, "N"], N): y = a * x + y, one element per thread. */
void saxpy_entry(void** args, const tsr_cpu_block_ctx_t* ctx) {
  float a = *(const float*)args[0];
  const float* x = *(float* const*)args[1];
  float* y = *(float* const*)args[2];
  int64_t n = *(const int64_t*)args[3];
  int64_t first = (int64_t)ctx->block_id[0] * ctx->block[0];
  for (uint32_t t = 0; t < ctx->block[0]; t++) {
    int64_t i = first + t;
    if (i < n) y[i] = a * x[i] + y[i];
  }
}

/* fill_fixed(out: tensor[f32, "N"], value: f32, N), compiled for block (64, 1, 1): out[i] = value. */
void fill_fixed_entry(void** args, const tsr_cpu_block_ctx_t* ctx) {
  float* out = *(float* const*)args[0];
  float value = *(const float*)args[1];
  int64_t n = *(const int64_t*)args[2];
  int64_t first = (int64_t)ctx->block_id[0] * 64;
  for (int64_t i = first; i < first + 64 && i < n; i++) out[i] = value;
}
