/* cpu_code_double.c — a test double of runtime/src/cpu_code.h for the fuzzers, linked in place of
 * cpu_code.c. It runs the real header checks of cpu_elf.h but never hands bytes to the system's dynamic
 * loader (which trusts its input, and is not ours to fuzz), and resolves entry symbols from a table instead:
 *
 *  - built with TSR_FUZZ_INERT (the image fuzzer): every symbol resolves to an entry that does nothing, since
 *    a fuzzed image may describe any arguments for any symbol;
 *  - otherwise (the launch fuzzer): the symbols of tests/c/kernels_cpu.c resolve to those kernels, linked in,
 *    so launches really run and really touch the memory the runtime checked for them. */
#include <stdlib.h>
#include <string.h>

#include "cpu_code.h"
#include "cpu_elf.h"

struct tsr_cpu_code {
  size_t size;
};

static void inert_entry(void** args, const tsr_cpu_block_ctx_t* ctx) {
  (void)args;
  (void)ctx;
}

#ifndef TSR_FUZZ_INERT
void saxpy_entry(void**, const tsr_cpu_block_ctx_t*);
void fill_fixed_entry(void**, const tsr_cpu_block_ctx_t*);
void scale_add_entry(void**, const tsr_cpu_block_ctx_t*);
void set_flag_entry(void**, const tsr_cpu_block_ctx_t*);
void overrun_entry(void**, const tsr_cpu_block_ctx_t*);
void add_one_entry(void**, const tsr_cpu_block_ctx_t*);

/* The test image's kernels; spin_until and sleep_ms, which wait by design, are inert (the launch fuzzer never
 * launches them, but the image must load). */
static const struct {
  const char* symbol;
  tsr_cpu_entry_t entry;
} table[] = {{"saxpy_entry", saxpy_entry},         {"fill_fixed_entry", fill_fixed_entry},
             {"scale_add_entry", scale_add_entry}, {"set_flag_entry", set_flag_entry},
             {"overrun_entry", overrun_entry},     {"add_one_entry", add_one_entry},
             {"spin_until_entry", inert_entry},    {"sleep_ms_entry", inert_entry}};
#endif

tsr_status_t tsr_cpu_code_load(const uint8_t* bytes, size_t size, const char* section, tsr_cpu_code_t** out) {
  tsr_status_t st = tsr_cpu_check_shared_object(bytes, size, section);
  if (st) return st;
  tsr_cpu_code_t* code = malloc(sizeof *code);
  if (!code) return TSR_ERROR_OUT_OF_MEMORY;
  code->size = size;
  *out = code;
  return TSR_SUCCESS;
}

bool tsr_cpu_code_entry(tsr_cpu_code_t* code, const char* symbol, tsr_cpu_entry_t* out) {
  (void)code;
#ifdef TSR_FUZZ_INERT
  if (strncmp(symbol, "missing", 7) == 0) return false;  /* so that fuzzing reaches the missing-entry path */
  *out = inert_entry;
  return true;
#else
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].symbol, symbol) == 0) {
      *out = table[i].entry;
      return true;
    }
  return false;
#endif
}

void tsr_cpu_code_unload(tsr_cpu_code_t* code) { free(code); }
