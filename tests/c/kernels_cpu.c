/* kernels_cpu.c — hand-written CPU kernels implementing the entry ABI, packed into the test image by
 * make_image.py: an independent producer of images for the runtime's tests. Build: cc -shared -fPIC
 * -nostartfiles -I runtime/include (a CPU code section has no initializers or finalizers: cpu_elf.c). */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdint.h>
#include <time.h>

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

/* scale_add(out: tensor[f32, "N"], k: f32, N): out[i] = 2 * out[i] + k. Not commutative across launches, so a
 * sequence of them on one stream shows the order they ran in. */
void scale_add_entry(void** args, const tsr_cpu_block_ctx_t* ctx) {
  float* out = *(float* const*)args[0];
  float k = *(const float*)args[1];
  int64_t n = *(const int64_t*)args[2];
  int64_t first = (int64_t)ctx->block_id[0] * ctx->block[0];
  for (uint32_t t = 0; t < ctx->block[0]; t++)
    if (first + t < n) out[first + t] = 2 * out[first + t] + k;
}

/* spin_until(flag: tensor[i32, "F"], seen: tensor[i32, "F"], F): waits (up to 10 s) until flag[0] != 0, then
 * sets seen[0] to 1, or to -1 on timeout. With set_flag on another stream, it finishes only if the two
 * streams run at the same time. */
void spin_until_entry(void** args, const tsr_cpu_block_ctx_t* ctx) {
  (void)ctx;
  int32_t* flag = *(int32_t* const*)args[0];
  int32_t* seen = *(int32_t* const*)args[1];
  struct timespec pause = {0, 100000};
  for (int i = 0; i < 100000; i++) {
    if (__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {
      seen[0] = 1;
      return;
    }
    nanosleep(&pause, NULL);
  }
  seen[0] = -1;
}

/* set_flag(flag: tensor[i32, "F"], F): flag[0] = 1. */
void set_flag_entry(void** args, const tsr_cpu_block_ctx_t* ctx) {
  (void)ctx;
  __atomic_store_n(*(int32_t* const*)args[0], 1, __ATOMIC_RELEASE);
}

/* overrun(out: tensor[f32, "N"], extra: i64, N): writes out[0 .. N + extra) — `extra` elements past the
 * extent it declares, a planted bug for debug mode to catch. One block. */
void overrun_entry(void** args, const tsr_cpu_block_ctx_t* ctx) {
  (void)ctx;
  float* out = *(float* const*)args[0];
  int64_t extra = *(const int64_t*)args[1];
  int64_t n = *(const int64_t*)args[2];
  for (int64_t i = 0; i < n + extra; i++) out[i] = 1.0f;
}

/* sleep_ms(ms: i32): each block sleeps `ms` milliseconds. */
void sleep_ms_entry(void** args, const tsr_cpu_block_ctx_t* ctx) {
  (void)ctx;
  int32_t ms = *(const int32_t*)args[0];
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* add_one(x: tensor[i64, "N"], N): x[i] += 1. */
void add_one_entry(void** args, const tsr_cpu_block_ctx_t* ctx) {
  int64_t* x = *(int64_t* const*)args[0];
  int64_t n = *(const int64_t*)args[1];
  int64_t first = (int64_t)ctx->block_id[0] * ctx->block[0];
  for (uint32_t t = 0; t < ctx->block[0]; t++)
    if (first + t < n) x[first + t] += 1;
}
